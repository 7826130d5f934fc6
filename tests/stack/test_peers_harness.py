"""The peers of `bench --peers` (docs/BENCHMARKS.md) on a tiny workload, so their harnesses
cannot rot: Flink SQL mysql-cdc -> Iceberg and the Iceberg Kafka Connect sink (+ its dedup view), each
installed from the registries into .local/peers on first use (about a minute, cached afterwards),
started against a private stack, fed a snapshot, changes at a fixed rate and a burst (inserts,
updates, deletes), then compared exactly with the source. The DDL sequence is left out: where a peer
loses it is what the benchmark reports, not a harness failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from cdcbench.endtoend import Stack  # noqa: E402
from cdcbench.peers import runner  # noqa: E402
from cdcbench.peers.flink import FlinkCdc  # noqa: E402
from cdcbench.peers.iceberg_sink import IcebergSink  # noqa: E402

STATE_COLUMNS = ["id", "customer_id", "status", "amount", "qty", "weight_g", "note", "version"]
TINY = runner.PeerPlan(snapshot_rows=300, rates=((100, 1),), rate_seconds=2, burst=500, ddl_changes=0, timeout=180)


@pytest.fixture(scope="module")
def peers_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("peers"))
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


@pytest.mark.parametrize("make", [FlinkCdc, IcebergSink], ids=["flink", "iceberg-sink"])
def test_peer_harness_reaches_the_source_state_exactly_on_a_tiny_workload(
    make, peers_stack: Stack, spark, warehouse: Path, tmp_path: Path
) -> None:
    system = make()
    system.install()
    ctx = runner.context_for(peers_stack, tmp_path, system.name, warehouse)

    res = runner.run_system(spark, system, ctx, peers_stack.connect, TINY)

    assert not res.error, res.error
    assert [m.workload for m in res.runs] == ["snapshot of 300 rows", "100/s on 1 table", "burst of 500 changes"]
    assert all(m.cpu > 0 and m.seconds > 0 for m in res.runs)
    assert res.runs[1].latencies and not res.runs[1].missing_probes
    assert res.files["data_files"] > 0 and res.files_after["data_files"] > 0
    assert system.proc is None  # stopped
    # every key the source holds, no other, each once, with the values the updates wrote (the columns
    # every peer stores in the source's representation: the sink keeps DATETIME as Debezium's epoch
    # microseconds, which the benchmark's full comparison reports)
    conn = peers_stack.connect()
    try:
        same = runner.compare_current(spark, system, conn, f"{system.name}_orders", STATE_COLUMNS)
    finally:
        conn.close()
    assert same.ok and same.source_rows > 300, same.report()
    if system.name == "sink":  # the peers' cost table prices MSK from this figure (pipeline_cost)
        assert 1_000 < runner.topic_bytes_per_change(peers_stack, f"{system.name}_orders") < 10_000
