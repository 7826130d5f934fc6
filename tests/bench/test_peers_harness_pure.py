"""The peers' harness pieces that need no stack: the Flink SQL script built from the source's columns,
the dedup view that turns the Iceberg sink's append-only table into the current state, the rule that
a system's missing row fails the run, and the reader that survives a schema commit under a read."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from cdcbench.peers import runner  # noqa: E402
from cdcbench.peers.base import Context, System, fresh, settled  # noqa: E402
from cdcbench.peers.flink import flink_type, script  # noqa: E402
from cdcbench.peers.iceberg_sink import dedup_view  # noqa: E402


def test_flink_script_declares_one_shared_cdc_source_and_an_upsert_v2_table_per_source_table(tmp_path):
    ctx = Context("k:1", 3306, "pa'ss", tmp_path / "wh", tmp_path)
    cols = [("id", "int(11)"), ("amount", "decimal(12,2)"), ("at", "datetime(6)"), ("note", "varchar(64)")]

    sql = script(ctx, {"flink_a": cols, "flink_b": cols}, "id", "flink")

    assert sql.count("'connector' = 'mysql-cdc'") == 1
    # grouped: mysql-cdc matches `database-name` + "." + `table-name`, and an ungrouped alternation
    # would bind the database to the first table only (the others were never read)
    assert "'table-name' = '(flink_a|flink_b)'" in sql and "'password' = 'pa''ss'" in sql
    assert sql.count("'write.upsert.enabled' = 'true'") == 2 and "'format-version' = '2'" in sql
    assert "`amount` DECIMAL(12, 2)" in sql and "`at` TIMESTAMP(6)" in sql and "`note` STRING" in sql
    assert "BEGIN STATEMENT SET;" in sql and sql.rstrip().endswith("END;")
    assert "SELECT `id`, `amount`, `at`, `note` FROM src WHERE `_table` = 'flink_b';" in sql


def test_flink_type_refuses_a_type_the_mapping_does_not_know():
    assert flink_type("bigint(20)") == "BIGINT"
    with pytest.raises(ValueError, match="no Flink SQL type"):
        flink_type("json")


def test_dedup_view_keeps_the_latest_change_per_key_and_drops_deleted_keys(spark):
    table = "glue_catalog.peers_pure.sink_rows"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS glue_catalog.peers_pure")
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id INT, v STRING, _cdc STRUCT<op: STRING, offset: BIGINT>) USING iceberg")
    # what DebeziumTransform appends: every change a row; a delete carries the before image and op D
    spark.sql(
        f"""INSERT INTO {table} VALUES
        (1, 'a0', named_struct('op', 'I', 'offset', 0L)), (2, 'b0', named_struct('op', 'I', 'offset', 1L)),
        (1, 'a1', named_struct('op', 'U', 'offset', 5L)), (2, 'b0', named_struct('op', 'D', 'offset', 6L)),
        (3, 'c0', named_struct('op', 'I', 'offset', 7L)), (1, 'a2', named_struct('op', 'U', 'offset', 3L)),
        (3, 'c0', named_struct('op', 'D', 'offset', 8L)), (3, 'c1', named_struct('op', 'I', 'offset', 9L))"""
    )

    rows = sorted(tuple(r) for r in dedup_view(spark, table, "id").collect())

    assert rows == [(1, "a1"), (3, "c1")]


class _Ran(System):
    """A system as the runner leaves it after its run: only its name, label and results matter here."""

    def __init__(self, name: str, label: str) -> None:
        super().__init__()
        self.name, self.label = name, label

    def start(self, ctx: Context, tables: list[str]) -> None:
        raise AssertionError("not started here")


def _result(name: str, workloads: list[str], error: str = "", failed: dict[str, str] | None = None):
    res = runner.SystemResult(_Ran(name, f"the {name}"), error=error)
    res.runs = [runner.Measured(w, 100, 1.0, 1.0, failed=(failed or {}).get(w, "")) for w in workloads]
    return res


def test_a_systems_missing_row_fails_the_run_naming_the_system_the_workload_and_why():
    plan = runner.make_plan(quick=True)
    every = runner.workloads(plan)
    assert every == ["snapshot of 2,000 rows", "200/s on 1 table", "burst of 5,000 changes", "DDL sequence"]
    reader = "IllegalArgumentException: Cannot project an optional field as non-null: id"
    results = [
        _result("job", every[:-1], error=reader),  # the benchmark's reader failed in the DDL sequence
        _result("flink", every),
        _result("sink", every, failed={"DDL sequence": "Iceberg sink exited with 1"}),  # a row that says so
    ]

    missing = runner.missing_rows(results, plan, ("job", "flink", "sink", "sample"))

    assert missing == [f"the job (job): no row for DDL sequence; {reader}", "sample: not run"]
    assert runner.missing_rows(results[1:], plan, ("flink", "sink")) == []
    # the failed workload is a row of the cost table, not a hole in it
    rows = runner.tables(results, plan)[0].rows
    assert [r[-1] for r in rows if r[0] == "the sink" and r[1] == "DDL sequence"] == [
        "failed: Iceberg sink exited with 1"
    ]


def test_a_read_analysed_before_a_schema_commit_is_read_again_after_it(spark):
    table = "glue_catalog.peers_pure.moved"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS glue_catalog.peers_pure")
    attempts: list[int] = []

    def read() -> int:
        df = fresh(spark, table).where("id = 2")  # analysed: id required
        if not attempts:  # a system under test commits before the scan is planned
            spark.sql(f"ALTER TABLE {table} ALTER COLUMN id DROP NOT NULL")
        attempts.append(1)
        return df.count()

    def new_table() -> None:
        attempts.clear()
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"CREATE TABLE {table} (id INT NOT NULL, v STRING) USING iceberg")
        spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")

    new_table()
    # Spark 4's check that the table is still the one the DataFrame analysed (Spark 3.5: Iceberg's
    # "Cannot project an optional field as non-null: id").
    with pytest.raises(Exception, match="INCOMPATIBLE_TABLE_CHANGE_AFTER_ANALYSIS"):
        read()  # what failed the peers' run
    new_table()
    assert settled(read) == 1 and len(attempts) == 2
