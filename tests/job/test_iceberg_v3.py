"""Iceberg format version 3 (`--iceberg_format_version 3`) on real Spark + Iceberg 1.11.0: the
job's merge-on-read updates and deletes land as deletion vectors (Puffin, one per data file, never
a position-delete file), an existing v2 table keeps its version until it is upgraded by hand and
keeps every row across the upgrade, the maintenance compacts deletion vectors away, and DuckDB (the
local stand-in for Athena's reads) reads a v3 table with live deletion vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc_workload import Workload
from cdclake.lake.deletes import marker_table
from cdclake.lake.formats.iceberg import Iceberg
from cdclake.lake.maintenance import Action, MaintenancePolicy, maintain_table

# Compaction and its delete-file rewrite due after a few micro-batches (as in test_maintenance.py).
SMALL = MaintenancePolicy(
    max_small_files=3,
    max_delete_files=1,
    max_snapshots=50,
    retain_last_snapshots=2,
    snapshot_retention_minutes=0,
    min_input_files=2,
    delete_file_threshold=1,
)


def delete_files(lake) -> list[dict[str, Any]]:
    """The live delete files of the lake's table: content (1: positions), format, referenced data file."""
    t = lake.table()
    lake.spark.catalog.refreshTable(t)
    rows = lake.spark.sql(f"SELECT content, file_format, referenced_data_file FROM {t}.delete_files").collect()
    return [r.asDict() for r in rows]


def format_version(lake, table: str | None = None) -> str:
    props = lake.spark.sql(f"SHOW TBLPROPERTIES {table or lake.table()}").collect()
    return {r["key"]: r["value"] for r in props}["format-version"]


def is_deletion_vector(d: dict[str, Any]) -> bool:
    return d["content"] == 1 and d["file_format"] == "PUFFIN" and d["referenced_data_file"] is not None


def fill(lake, w: Workload, batches: int) -> None:
    for _ in range(batches):
        lake.apply(w.batch(6))
        lake.apply(w.updates(4))


def duckdb_first_names(lake) -> dict[int, str]:
    """The table as DuckDB reads it (scripts/cdctools/lake_reader.py, Athena's role locally)."""
    from cdctools import lake_reader

    con = lake_reader.connect()
    try:
        location = lake_reader.table_location(Path(lake.settings.warehouse), lake.namespace, "inventory_customers")
        rows = lake_reader.rows(con, location)
    finally:
        con.close()
    assert len(rows) == len({r["id"] for r in rows}), "an id read more than once"
    return {r["id"]: r["first_name"] for r in rows}


def test_updates_and_deletes_on_a_v3_table_land_as_deletion_vectors_one_per_data_file(make_lake):
    lake = make_lake(iceberg_format_version="3")
    w = Workload(seed=11, keys=30)
    fill(lake, w, 3)
    lake.assert_rows(w.expected)
    assert format_version(lake) == "3"
    assert format_version(lake, marker_table(lake.table())) == "3"  # its delete markers too
    deletes = delete_files(lake)
    assert deletes and all(is_deletion_vector(d) for d in deletes), deletes
    referenced = [d["referenced_data_file"] for d in deletes]
    assert len(referenced) == len(set(referenced)), "a data file with more than one deletion vector"
    # DuckDB reads the deletion vectors: the same rows as Spark, deleted and replaced ones gone.
    assert duckdb_first_names(lake) == w.expected


def test_v2_tables_write_position_delete_files(make_lake):
    """The default: the same workload's deletes are Parquet position-delete files (what Athena reads)."""
    lake = make_lake()
    w = Workload(seed=11, keys=30)
    fill(lake, w, 2)
    lake.assert_rows(w.expected)
    assert format_version(lake) == "2"
    deletes = delete_files(lake)
    assert deletes and {(d["content"], d["file_format"]) for d in deletes} == {(1, "PARQUET")}


def test_a_v2_table_keeps_its_version_under_a_v3_job_and_keeps_every_row_when_upgraded(make_lake):
    v2 = make_lake()
    w = Workload(seed=5, keys=30)
    fill(v2, w, 2)
    legacy = delete_files(v2)
    assert legacy and all(d["file_format"] == "PARQUET" for d in legacy)
    # The job switched to 3: an existing table is not upgraded behind the operator's back.
    v3 = make_lake(namespace=v2.namespace, iceberg_format_version="3")
    fill(v3, w, 1)
    v3.assert_rows(w.expected)
    assert format_version(v3) == "2"
    # The one-way upgrade by hand (docs/TABLE_FORMATS.md): metadata only, the rows stay.
    v3.spark.sql(f"ALTER TABLE {v3.table()} SET TBLPROPERTIES ('format-version' = '3')")
    assert format_version(v3) == "3"
    v3.assert_rows(w.expected)
    fill(v3, w, 2)
    v3.assert_rows(w.expected)
    after = delete_files(v3)
    # New deletes are deletion vectors (a data file's older position deletes folded into its vector);
    # position-delete files of data files no later commit touched stay until maintenance.
    assert any(is_deletion_vector(d) for d in after)
    assert not [d for d in after if d["file_format"] == "PARQUET" and d not in legacy]
    report = maintain_table(v3.spark, v3.table(), SMALL, Iceberg())
    assert not report.failed, report.line()
    assert Action.COMPACT in report.plan.actions
    assert report.after is not None and report.after.delete_files == 0
    v3.assert_rows(w.expected)
    assert duckdb_first_names(v3) == w.expected


def test_maintenance_compacts_a_v3_tables_deletion_vectors_and_the_stream_goes_on(make_lake):
    lake = make_lake(iceberg_format_version="3")
    w = Workload(seed=3, keys=30)
    fill(lake, w, 3)
    before = delete_files(lake)
    assert len(before) > 1 and all(is_deletion_vector(d) for d in before)
    report = maintain_table(lake.spark, lake.table(), SMALL, Iceberg())
    assert not report.failed, report.line()
    assert report.plan.actions[:2] == (Action.COMPACT, Action.DELETES)
    assert report.before.delete_files == len(before)
    assert report.after is not None and report.after.delete_files == 0
    assert report.after.data_files < report.before.data_files
    lake.assert_rows(w.expected)
    # The next batches write deletion vectors against the compacted file.
    fill(lake, w, 1)
    lake.assert_rows(w.expected)
    assert delete_files(lake) and all(is_deletion_vector(d) for d in delete_files(lake))
    assert format_version(lake) == "3"
