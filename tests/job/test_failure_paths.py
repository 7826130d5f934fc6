"""Behaviours the failure table (docs/ARCHITECTURE.md) and docs/ claim, each on a real table:
a MERGE that fails for another reason than a conflict, the maintenance job going on past a broken
table, deletes without their `before` image, a batch holding only a truncate, and a table wide
enough to reach Spark's generated-code limits."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from cdc_events import Events, customer, decimal_b64, key_schema, value_schema_of, with_row_fields
from cdc_workload import Workload
from job_runs import run_status


def test_a_merge_failing_for_another_reason_than_a_conflict_raises_at_once_commits_nothing_and_the_batch_reruns(
    lake, caplog
):
    from cdclake.jobs.batch import BatchProcessor, Writes
    from cdclake.lake.executor import merge_changes
    from pyspark.sql import functions as F

    failing = False
    attempts = []

    def merge(table, changes, *args, **kwargs):
        if failing:
            # A real failure inside the MERGE's Spark job (as a lost executor or an S3 error would
            # be): the source rows raise when the MERGE computes them, after the MERGE has started.
            attempts.append(table)
            changes = changes.withColumn("_cdc_op", F.raise_error(F.lit("injected: S3 read failed")))
        merge_changes(table, changes, *args, **kwargs)

    lake.processor = BatchProcessor(lake.spark, lake.settings, writes=Writes(keyed=merge))
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))
    ev.record("c", {"id": 2}, customer(2, "Bob"))
    lake.apply(ev.take())
    snapshots = lake.snapshots()
    ident = lake.table()
    assert ident in lake.processor.tables._states  # the table's schema is cached between batches

    ev.record("u", {"id": 1}, customer(1, "Ann-2"))
    ev.record("d", {"id": 2}, before=customer(2, "Bob"))
    ev.record("c", {"id": 3}, customer(3, "Cy"))
    batch = ev.take()

    failing = True
    caplog.set_level(logging.WARNING, logger="cdclake")
    with pytest.raises(Exception, match="injected: S3 read failed"):
        lake.apply(batch, batch_id=7)
    assert attempts == [ident]  # not a conflict: no second attempt
    assert not [r for r in caplog.records if "commit conflict" in r.getMessage()]
    assert lake.processor.tables._states == {}  # cached table state dropped: the catalog is the truth again
    assert lake.snapshots() == snapshots  # nothing committed
    lake.assert_rows({1: "Ann", 2: "Bob"})

    failing = False
    lake.apply(batch, batch_id=7)  # what the restarted job does: the same batch again
    lake.assert_rows({1: "Ann-2", 3: "Cy"})
    assert lake.snapshots() == snapshots + 1


def test_one_table_failing_its_commit_among_many_fails_the_batch_and_the_rerun_leaves_every_table_as_the_source(
    make_lake,
):
    import threading

    from cdc_workload import assert_rows
    from cdclake.jobs.batch import BatchProcessor, Writes
    from cdclake.lake.executor import merge_changes

    lake = make_lake(table_concurrency="3")
    names = [f"t{i}" for i in range(6)]
    loads = {
        n: Workload(seed=i, keys=8, events=Events(topic=f"mdb.inventory.{n}", table=n)) for i, n in enumerate(names)
    }
    lake.apply([r for n in names for r in loads[n].batch(4)])
    before = {n: dict(loads[n].expected) for n in names}
    failing = lake.table("inventory_t2")
    threads: set[str] = set()
    fail = True

    def merge(table, changes, *args, **kwargs):
        threads.add(threading.current_thread().name)
        if fail and table == failing:
            raise RuntimeError(f"injected: the commit of {table} failed")
        merge_changes(table, changes, *args, **kwargs)

    lake.processor = BatchProcessor(lake.spark, lake.settings, writes=Writes(keyed=merge))
    batch = [r for n in names for r in loads[n].batch(6)]
    with pytest.raises(RuntimeError, match=r"injected: the commit of .*inventory_t2 failed"):
        lake.apply(batch, batch_id=9)
    assert len(threads) > 1  # the tables were written from the pool, side by side
    assert_rows(lake.spark, failing, before["t2"])  # nothing of the failed table's batch committed

    fail = False
    lake.apply(batch, batch_id=9)  # the restarted job: the same batch again
    for n in names:
        assert_rows(lake.spark, lake.table(f"inventory_{n}"), loads[n].expected)


def test_the_maintenance_job_maintains_the_other_tables_after_one_cannot_be_read_and_exits_1(
    make_lake, spark, caplog, capsys, tmp_path
):
    from cdclake.common.settings import parse_argv
    from cdclake.jobs.maintenance_job import build_job_settings, run_maintenance

    lake = make_lake()
    ws = {}
    for name in ("broken", "healthy"):
        w = Workload(seed=len(name), keys=10, events=Events(topic=f"mdb.inventory.{name}", table=name))
        for _ in range(3):
            lake.apply(w.batch(4))
        ws[name] = w
    # The first table's current metadata file is damaged (a bad copy, a lost object): unreadable.
    broken = lake.table("inventory_broken")
    location = Path(lake.settings.warehouse) / lake.namespace / "inventory_broken" / "metadata"
    current = location / f"v{(location / 'version-hint.text').read_text().strip()}.metadata.json"
    current.write_text(current.read_text()[:100])
    with pytest.raises(Exception, match="metadata"):  # the catalog caches no table (lake/catalog.py)
        spark.table(broken)
    healthy = lake.table("inventory_healthy")
    assert spark.sql(f"SELECT count(*) AS n FROM {healthy}.data_files").first()["n"] == 3

    caplog.set_level(logging.INFO, logger="cdclake")
    argv = ["--catalog_type", "hadoop", "--warehouse", lake.settings.warehouse, "--namespace", lake.namespace,
            "--tables", "inventory_broken,inventory_healthy", "--force", "true", "--maintenance_min_input_files", "2"]  # fmt: skip
    capsys.readouterr()
    assert run_maintenance(spark, build_job_settings(parse_argv(argv))) == 1
    out = capsys.readouterr().out

    messages = [r.getMessage() for r in caplog.records]
    assert f"maintenance of {broken} failed" in messages, messages
    run_line = next(m for m in messages if m.startswith("maintenance run:"))
    assert run_line.startswith("maintenance run: 2 table(s), 1 maintained, 1 failed"), run_line
    # The table after the unreadable one was maintained all the same: compacted, every row kept.
    spark.catalog.refreshTable(healthy)
    assert spark.sql(f"SELECT count(*) AS n FROM {healthy}.data_files").first()["n"] == 1
    lake.assert_rows(ws["healthy"].expected, name="inventory_healthy")
    # Its figures per table as EMF lines (the dashboard's maintenance widgets), and status's rows.
    emf = {x["Table"]: x for x in (json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"'))}
    assert (emf["inventory_broken"]["MaintenanceFailed"], "DataFiles" in emf["inventory_broken"]) == (1, False)
    healthy_fig = emf["inventory_healthy"]
    assert (healthy_fig["MaintenanceFailed"], healthy_fig["DataFiles"], healthy_fig["Job"]) == (0, 1, "cdc-maintenance")
    (tmp_path / "job.log").write_text(out)
    status = run_status(tmp_path / "job.log")
    head, *lines = status.stdout.splitlines()
    assert head.startswith("maintained table"), status.stdout
    rows = {r.split()[0]: r.split()[1:] for r in lines}
    assert rows["inventory_broken"][:3] == ["-", "-", "yes"] and rows["inventory_healthy"][:3] == ["1", "0", "no"], (
        status
    )


def test_a_delete_without_its_before_image_deletes_by_the_kafka_key(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    ev.record("c", {"id": 2}, customer(2))
    lake.apply(ev.take())
    delete = ev.record("d", {"id": 2})  # before: null, as a connector without the old row sends it
    assert json.loads(delete["value"])["payload"]["before"] is None
    assert json.loads(delete["key"])["payload"] == {"id": 2}
    report = lake.apply(ev.take())
    assert report.dead == 0 and report.tables[0].deletes == 1
    lake.assert_rows([{"id": 1, "_cdc_op": "c"}])


def test_a_batch_holding_only_a_truncate_empties_the_table_and_later_changes_apply(lake):
    ev = Events()
    for i in (1, 2, 3):
        ev.record("c", {"id": i}, customer(i), pos=100 * i)
    lake.apply(ev.take())
    snapshots = lake.snapshots()
    t = ev.record("c", {"id": 0}, customer(0), pos=1000)
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)
    report = lake.apply(ev.take())
    assert report.truncates == 1 and report.changes == 0 and report.dead == 0
    assert [(tr.table, tr.truncated) for tr in report.tables] == [(lake.table(), True)]
    lake.assert_rows([])
    assert lake.snapshots() == snapshots + 1
    ev.record("c", {"id": 4}, customer(4, "after"), pos=2000)
    lake.apply(ev.take())
    lake.assert_rows({4: "after"})


# Columns: past spark.sql.codegen.maxFields (100), where Spark gives up whole-stage code generation
# for per-expression projections, and with 30 decimal columns per projection stage far past what
# one generated method (64 KB) can hold. Wider costs time in Catalyst and codegen, not new paths.
WIDE = 150


def test_a_wide_table_of_mixed_types_is_created_and_updated_exactly(lake):
    """Decimal decoding and the MERGE's projections over 150 columns: Spark must split the generated
    code (64 KB per method) or fall back to interpretation, and the values stay exact."""
    kinds = ("int64", "string", "decimal", "timestamp", "double")
    fields = [{"type": "int32", "optional": False, "field": "id"}]
    for i in range(1, WIDE):
        kind = kinds[i % len(kinds)]
        name = f"c{i:03d}"
        if kind == "decimal":
            f = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                 "parameters": {"scale": "2", "connect.decimal.precision": "12"}, "field": name}  # fmt: skip
        elif kind == "timestamp":
            f = {
                "type": "string",
                "optional": True,
                "name": "io.debezium.time.ZonedTimestamp",
                "version": 1,
                "field": name,
            }
        else:
            f = {"type": kind, "optional": True, "field": name}
        fields.append(f)
    schema = with_row_fields(value_schema_of("mariadb/c_insert.json"), fields)
    wide_key = key_schema("wide", ("int32", "id"))

    def row(id_: int, version: int) -> tuple[dict, dict]:
        """(Connect payload, the values the lake must hold), every column depending on id and version."""
        sent, want = {"id": id_}, {"id": id_}
        for i in range(1, WIDE):
            kind, name, n = kinds[i % len(kinds)], f"c{i:03d}", id_ * 100_000 + i * 10 + version
            if (i + id_ + version) % 11 == 0:
                sent[name] = want[name] = None
            elif kind == "int64":
                sent[name] = want[name] = n * 1_000_003
            elif kind == "string":
                sent[name] = want[name] = f"v{n}-ü"
            elif kind == "decimal":
                d = Decimal(n) / 100 * (-1 if i % 2 else 1)
                sent[name], want[name] = decimal_b64(d, 2), d.quantize(Decimal("0.01"))
            elif kind == "timestamp":
                ts = datetime.fromtimestamp(1_700_000_000 + n, UTC)
                sent[name], want[name] = ts.strftime("%Y-%m-%dT%H:%M:%SZ"), ts.replace(tzinfo=None)
            else:
                sent[name] = want[name] = n / 8
        return sent, want

    ev = Events(topic="mdb.inventory.wide", table="wide")
    expected = {}
    for i in (1, 2, 3):
        sent, expected[i] = row(i, 0)
        ev.record("c", {"id": i}, sent, value_schema=schema, key_schema=wide_key)
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()[:1]
    sent, expected[2] = row(2, 1)
    ev.record("u", {"id": 2}, sent, value_schema=schema, key_schema=wide_key)
    ev.record("d", {"id": 3}, before=row(3, 0)[0], value_schema=schema, key_schema=wide_key)
    del expected[3]
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()[:1]

    columns = [f.name for f in lake.spark.table(lake.table("inventory_wide")).schema.fields]
    assert columns[:WIDE] == ["id"] + [f"c{i:03d}" for i in range(1, WIDE)]
    lake.assert_rows(list(expected.values()), name="inventory_wide")
