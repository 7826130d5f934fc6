"""Schema evolution before the MERGE on Iceberg tables: a real captured add-column event, changes
of two schemas in one batch, a table named as stopped, and what an Iceberg rewrite keeps (its
commits, snapshots, partitioning, sort order, identifier fields). What every format does with added,
dropped and retyped columns and each schema change policy: test_every_format_schema.py."""

from __future__ import annotations

import copy
import json
import logging
from decimal import Decimal

import pytest
from cdc_events import Events, customer, decimal_b64, load, row_fields, value_schema_of, with_row_fields
from pyspark.errors import AnalysisException
from pyspark.sql import types as T

BASE = value_schema_of("mariadb/c_insert.json")
WITH_TIER = value_schema_of("mariadb/c_insert_after_add_column.json")


def column_types(lake, name="inventory_customers") -> dict[str, T.DataType]:
    return {f.name: f.dataType for f in lake.spark.table(lake.table(name)).schema}


def test_add_column_mid_stream_adds_it_and_existing_rows_get_the_source_default(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    # The real event Debezium emitted after `ALTER TABLE ... ADD COLUMN loyalty_tier`:
    msg = load("mariadb/c_insert_after_add_column.json")
    ev.raw(json.dumps(msg["key"]), json.dumps(msg["value"]))
    report = lake.apply(ev.take())
    assert "+loyalty_tier string" in report.tables[0].schema
    rows = lake.by_id()
    # MySQL gives existing rows the column default ('bronze' in this capture) without a binlog
    # event for them; the lake does the same.
    assert rows[1]["loyalty_tier"] == "bronze"
    assert rows[5]["loyalty_tier"] == "gold"
    names = list(column_types(lake))
    assert names.index("loyalty_tier") < names.index("_cdc_op"), "data columns stay before metadata columns"


def test_add_column_inside_one_batch_applies_old_and_new_schema_events(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    ev.record("u", {"id": 3}, customer(3, loyalty_tier="silver"), value_schema=WITH_TIER)
    ev.record("c", {"id": 2}, customer(2))  # still old schema (e.g. another partition lagging)
    report = lake.apply(ev.take())
    assert report.dead == 0
    rows = lake.by_id()
    assert rows[3]["loyalty_tier"] == "silver"
    assert rows[1]["loyalty_tier"] == rows[2]["loyalty_tier"] == "bronze", "old-schema rows get the default"


def test_a_table_whose_changes_all_go_to_dead_letters_batch_after_batch_is_named_as_stopped(lake, caplog):
    caplog.set_level(logging.INFO, logger="cdclake")
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    bad_schema = copy.deepcopy(BASE)
    for fld in row_fields(bad_schema):
        if fld["field"] == "email":
            fld["type"] = "int32"  # no safe conversion from the lake's string: every change is rejected
    lines = []
    for i in range(3):
        ev.record("u", {"id": 1}, customer(1, f"N{i}") | {"email": i}, value_schema=bad_schema)
        lines.append(lake.apply(ev.take()).line())
    assert "STOPPED-FOLLOWING" not in lines[1]
    assert (
        "inventory_customers: 1 ev -> c/r 0 u 0 d 0 dead 1 STOPPED-FOLLOWING[every change dead-lettered in 3 "
        in lines[2]
    )
    [stopped] = [r.getMessage() for r in caplog.records if "stopped following the source" in r.getMessage()]
    assert stopped.startswith(f"table {lake.table()} stopped following the source: every change of it in the last 3")
    assert "incompatible schema change" in stopped and "Replaying dead letters" in stopped
    # A change the table takes again ends it: the next batch line no longer names the table as stopped.
    ev.record("u", {"id": 1}, customer(1, "Fine"))
    assert "STOPPED-FOLLOWING" not in lake.apply(ev.take()).line()
    lake.assert_rows({1: "Fine"})


def _with_extra(name: str, type_: str) -> dict:
    fields = [*row_fields(BASE), {"type": type_, "optional": True, "field": name}]
    return with_row_fields(BASE, fields)


# ------------------------------------------------- what an Iceberg rewrite keeps (type changes it cannot promote)
def _balance_schema(precision: int, scale: int) -> dict:
    """The customers envelope with `balance` DECIMAL(precision, scale), as Debezium sends it after
    `ALTER TABLE customers MODIFY balance DECIMAL(precision, scale)` (decimal.handling.mode precise)."""
    schema = copy.deepcopy(BASE)
    for fld in row_fields(schema):
        if fld["field"] == "balance":
            fld["parameters"] = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return schema


def _balances(rows: dict[int, str], scale: int) -> dict[int, dict]:
    return {i: customer(i, balance=b) | {"balance": decimal_b64(b, scale)} for i, b in rows.items()}


STORED = {1: "9999999999.99", 2: "-0.01", 3: "12345.67", 4: "0.00"}  # the extremes of DECIMAL(12,2)


def _lake_with_balances(lake) -> int:
    ev = Events()
    for i, row in _balances(STORED, 2).items():
        ev.record("c", {"id": i}, row, value_schema=_balance_schema(12, 2))
    lake.apply(ev.take())
    assert column_types(lake)["balance"] == T.DecimalType(12, 2)
    return lake.snapshots()


def test_iceberg_decimal_scale_up_is_one_rewrite_commit_starting_a_new_lineage_with_the_old_snapshots_readable(lake):
    before = _lake_with_balances(lake)
    props_before = dict(lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect())
    ev = Events(next_pos=50_000)
    ev.record("u", {"id": 3}, _balances({3: "123456789012.3456"}, 4)[3], value_schema=_balance_schema(16, 4))
    report = lake.apply(ev.take())

    assert report.dead == 0 and "balance decimal(12,2)->decimal(16,4) (rewritten)" in report.tables[0].schema
    assert column_types(lake)["balance"] == T.DecimalType(16, 4)
    expected = {i: Decimal(b) for i, b in STORED.items()} | {3: Decimal("123456789012.3456")}
    lake.assert_rows(expected, column="balance")
    # One commit for the rewrite, one for the MERGE; the snapshots before it are kept and still
    # readable by time travel, with the values they had.
    assert lake.snapshots() == before + 2
    first = lake.spark.sql(f"SELECT snapshot_id FROM {lake.table()}.snapshots ORDER BY committed_at").first()[0]
    old = lake.spark.read.option("versionAsOf", first).table(lake.table())
    assert {r["id"]: r["balance"] for r in old.collect()} == {i: Decimal(b) for i, b in STORED.items()}
    # ... but the rewrite starts a new lineage: its snapshot has no parent (docs/SCHEMA_CHANGES.md).
    snaps = lake.spark.sql(f"SELECT parent_id FROM {lake.table()}.snapshots ORDER BY committed_at").collect()
    assert snaps[-2]["parent_id"] is None and snaps[-1]["parent_id"] is not None
    # The key stays NOT NULL (the session keeps the query's nullability in REPLACE ... AS SELECT).
    assert not lake.spark.table(lake.table()).schema["id"].nullable
    props_after = dict(lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect())
    for key in ("cdc.primary-key", "write.merge.mode", "write.delete.granularity", "format-version"):
        assert props_after[key] == props_before[key], key


def test_iceberg_lossless_rewrite_keeps_the_key_required_the_partitioning_and_sort_order_and_an_earlier_reader_is_told(
    lake,
):
    _lake_with_balances(lake)
    t = lake.table()
    # What a user may give a lake table; the job sets neither.
    lake.spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)")
    lake.spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY balance DESC NULLS LAST, id")
    # A reader that analysed the table before the rewrite (id NOT NULL) and plans its scan after it.
    reader = lake.spark.table(t).where("id = 3")
    ev = Events(next_pos=50_000)
    ev.record("u", {"id": 3}, _balances({3: "1.2345"}, 4)[3], value_schema=_balance_schema(16, 4))
    assert lake.apply(ev.take()).dead == 0 and column_types(lake)["balance"] == T.DecimalType(16, 4)

    assert not lake.spark.table(t).schema["id"].nullable
    assert lake.identifier_fields() == {"id"}  # REPLACE TABLE dropped them; declared again after it
    # Spark 4 checks a DataFrame's table against the one it analysed: the rewrite changed a column's
    # type, so the earlier reader is refused with Spark's own error naming the fix (not a wrong result
    # or a nullability error), and a reader analysed again reads.
    with pytest.raises(AnalysisException, match="INCOMPATIBLE_TABLE_CHANGE_AFTER_ANALYSIS"):
        reader.count()
    assert lake.spark.table(t).where("id = 3").count() == 1
    described = lake.spark.sql(f"DESCRIBE TABLE EXTENDED {t}").collect()
    assert [r["data_type"] for r in described if r["col_name"].startswith("Part ")] == ["bucket(4, id)"]
    props = dict(lake.spark.sql(f"SHOW TBLPROPERTIES {t}").collect())
    assert props["sort-order"] == "balance DESC NULLS LAST, id ASC NULLS FIRST"
    lake.assert_rows({i: Decimal(b) for i, b in STORED.items()} | {3: Decimal("1.2345")}, column="balance")
