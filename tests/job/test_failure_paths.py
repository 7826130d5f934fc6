"""Behaviours the failure table (docs/ARCHITECTURE.md) and docs/ claim, each on a real Iceberg
table: the maintenance job going on past a table whose metadata is damaged, and a table wide enough
to reach Spark's generated-code limits. A failing MERGE, deletes without their `before` image and a
batch holding only a truncate, on every format: test_every_format_failures.py."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from cdc_events import Events, decimal_b64, key_schema, value_schema_of, with_row_fields
from cdc_workload import Workload
from job_runs import run_status


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
