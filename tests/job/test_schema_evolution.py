"""Schema evolution before the MERGE: new columns, safe widening, dropped columns, and
incompatible changes that go to dead letters without stopping anything else."""

from __future__ import annotations

import copy
import json
import logging
import math
from datetime import date, datetime
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


def test_column_dropped_at_source_stays_in_lake_and_is_null_afterwards(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, loyalty_tier="gold"), value_schema=WITH_TIER)
    lake.apply(ev.take())
    ev.record("u", {"id": 1}, customer(1, "after-drop"))  # the base schema has no loyalty_tier
    ev.record("c", {"id": 2}, customer(2))
    lake.apply(ev.take())
    assert "loyalty_tier" in column_types(lake)
    rows = lake.by_id()
    assert rows[1]["first_name"] == "after-drop" and rows[1]["loyalty_tier"] is None


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


def test_added_column_without_default_leaves_existing_rows_null(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    ev.record("c", {"id": 2}, customer(2, nickname="Bo"), value_schema=_with_extra("nickname", "string"))
    lake.apply(ev.take())
    lake.assert_rows({1: None, 2: "Bo"}, column="nickname")


def test_added_columns_give_existing_rows_their_exact_source_default_of_each_kind(lake):
    # PostgreSQL allows NaN and infinite float defaults, and a decimal default may hold more
    # digits than a double: each must reach the old rows exactly, not as a rounded or bare literal.
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    decimal_type = {
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "20"},
    }
    extra = [
        {"type": "float64", "optional": True, "field": "ratio", "default": "NaN"},
        {"type": "float64", "optional": True, "field": "ceiling", "default": "Infinity"},
        {"type": "float64", "optional": True, "field": "tenth", "default": 0.1},
        {"type": "int64", "optional": True, "field": "big", "default": 9007199254740993},
        {"type": "boolean", "optional": True, "field": "flag", "default": True},
        {"type": "string", "optional": True, "field": "note", "default": "it''s \\\\ here"},
        {
            "type": "bytes",
            "optional": True,
            "field": "price",
            "default": decimal_b64("123456789012345678.91", 2),
            **decimal_type,
        },
        # A date or time default is a constant the old rows got; the epoch is what the connectors
        # send for CURRENT_TIMESTAMP-like defaults, whose value is unknown: not given.
        {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "since", "default": 19723},
        {
            "type": "int64",
            "optional": True,
            "name": "io.debezium.time.MicroTimestamp",
            "field": "due",
            "default": 1704164645250000,
        },
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.time.ZonedTimestamp",
            "field": "stamp",
            "default": "1970-01-01T00:00:00.000000Z",
        },
    ]
    schema = with_row_fields(BASE, [*row_fields(BASE), *extra])
    values = {
        "ratio": 1.5,
        "ceiling": 2.5,
        "tenth": 0.5,
        "big": 7,
        "flag": False,
        "note": "n",
        "price": decimal_b64("1.00", 2),
        "since": 0,
        "due": 0,
        "stamp": "2024-01-01T00:00:00Z",
    }
    ev.record("c", {"id": 2}, customer(2, **values), value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 0, report
    old = lake.by_id()[1]
    assert math.isnan(old["ratio"])
    assert old["ceiling"] == math.inf
    assert old["tenth"] == 0.1
    assert old["big"] == 9007199254740993
    assert old["flag"] is True
    assert old["note"] == "it's \\ here"  # sent as the literal's text: it''s \\ here
    assert old["price"] == Decimal("123456789012345678.91")
    assert old["since"] == date(2024, 1, 1)
    assert old["due"] == datetime(2024, 1, 2, 3, 4, 5, 250000)
    assert old["stamp"] is None


def test_backfill_left_pending_by_a_crash_is_finished_on_the_next_batch(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    # State after a crash between ALTER TABLE ADD COLUMN and the backfill UPDATE:
    lake.spark.sql(f"ALTER TABLE {lake.table()} ADD COLUMN tier string")
    lake.spark.sql(f"ALTER TABLE {lake.table()} SET TBLPROPERTIES ('cdc.backfill.tier'='CAST(\\'bronze\\' AS string)')")
    restarted = type(lake.processor)(lake.spark, lake.settings)  # a new job run: nothing cached
    lake.processor = restarted
    ev.record("c", {"id": 2}, customer(2))
    lake.apply(ev.take())
    assert lake.by_id()[1]["tier"] == "bronze"
    props = {r["key"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert "cdc.backfill.tier" not in props


# --------------------------------------------------------------- type changes Iceberg cannot promote
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


def test_decimal_scale_up_rewrites_the_table_in_one_commit_keeping_every_value_exactly(lake):
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


def test_a_lossless_rewrite_keeps_the_key_required_the_partitioning_and_sort_order_and_an_earlier_reader_is_told(lake):
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


def _lossy_change(lake):
    """decimal(16,4) in the lake, then the source narrows it to decimal(12,2)."""
    ev = Events()
    ev.record("c", {"id": 1}, _balances({1: "1.2345"}, 4)[1], value_schema=_balance_schema(16, 4))
    lake.apply(ev.take())
    ev.record(
        "u", {"id": 1}, _balances({1: "1.23"}, 2)[1] | {"first_name": "narrowed"}, value_schema=_balance_schema(12, 2)
    )
    orders = Events(topic="mdb.inventory.orders", table="orders")
    orders.record("c", {"id": 10}, customer(10))
    return ev.take() + orders.take()


def test_lossy_decimal_narrowing_under_evolve_goes_to_dead_letters_naming_table_column_types_and_fix(lake, caplog):
    with caplog.at_level(logging.ERROR, logger="cdclake"):
        report = lake.apply(_lossy_change(lake))

    assert report.dead == 1 and lake.ids("inventory_orders") == [10]
    lake.assert_rows({1: Decimal("1.2345")}, column="balance")
    assert column_types(lake)["balance"] == T.DecimalType(16, 4)
    [dl] = lake.dead_letters()
    for part in (lake.table(), "'balance'", "decimal(16,4)", "decimal(12,2)", "Fix:", "replay"):
        assert part in dl["reason"], part
    errors = [r for r in caplog.records if r.levelno == logging.ERROR and lake.table() in r.getMessage()]
    assert len(errors) == 1 and "decimal(12,2)" in errors[0].getMessage()


def test_lossy_change_under_fail_fails_the_batch_before_anything_is_committed(make_lake):
    lake = make_lake(schema_change_policy="fail")
    records = _lossy_change(lake)
    snapshots = lake.snapshots()
    with pytest.raises(Exception, match=r"decimal\(16,4\) in the lake but decimal\(12,2\)"):
        lake.apply(records)

    assert lake.snapshots() == snapshots and not lake.dead_letters()
    assert not lake.spark.catalog.tableExists(lake.table("inventory_orders")), "no table was written"
    lake.assert_rows({1: Decimal("1.2345")}, column="balance")


def test_exact_change_under_fail_is_still_rewritten(make_lake):
    lake = make_lake(schema_change_policy="fail")
    _lake_with_balances(lake)
    ev = Events(next_pos=50_000)
    ev.record("u", {"id": 4}, _balances({4: "0.0001"}, 4)[4], value_schema=_balance_schema(16, 4))
    assert lake.apply(ev.take()).dead == 0
    lake.assert_rows({i: Decimal(b) for i, b in STORED.items()} | {4: Decimal("0.0001")}, column="balance")


def test_dead_letter_policy_rejects_even_an_exact_change(make_lake):
    lake = make_lake(schema_change_policy="dead_letter")
    _lake_with_balances(lake)
    ev = Events(next_pos=50_000)
    ev.record("u", {"id": 3}, _balances({3: "5.5"}, 4)[3], value_schema=_balance_schema(16, 4))
    report = lake.apply(ev.take())

    assert report.dead == 1 and column_types(lake)["balance"] == T.DecimalType(12, 2)
    lake.assert_rows({i: Decimal(b) for i, b in STORED.items()}, column="balance")
    [dl] = lake.dead_letters()
    assert "--schema_change_policy evolve" in dl["reason"]
