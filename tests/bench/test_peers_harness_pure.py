"""The peers' harness pieces that need no stack: the Flink SQL script built from the source's columns,
and the dedup view that turns the Iceberg sink's append-only table into the current state."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from cdcbench.peers.base import Context  # noqa: E402
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
