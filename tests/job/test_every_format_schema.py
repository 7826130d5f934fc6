"""Schema changes at the source, written once and run on every table format of the registry
(`format_lake`: tests/job/conftest.py and format_lakes.py): added columns and the defaults earlier
rows get, dropped columns, and the three `--schema_change_policy` answers to a type change."""

from __future__ import annotations

import pytest
from cdc_events import Events, customer, decimal_b64, row_fields, value_schema_of, with_row_fields
from test_every_format import with_columns

DECIMAL_20_2 = {
    "name": "org.apache.kafka.connect.data.Decimal",
    "version": 1,
    "parameters": {"scale": "2", "connect.decimal.precision": "20"},
}
# A column of each kind added with a default (PostgreSQL allows NaN and infinite float defaults, a
# decimal default may hold more digits than a double): earlier rows get each exactly, not rounded or as
# a bare literal. A date or time default is a constant the old rows got; the epoch is what the
# connectors send for CURRENT_TIMESTAMP-like defaults, whose value is unknown: not given.
ADDED = [
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
        **DECIMAL_20_2,
    },
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
    {"type": "string", "optional": True, "field": "nickname"},  # no default
]
# Each as Spark casts it to text; the string default is sent as its SQL literal's text (it''s \\ here).
DEFAULTS = {"ratio": "NaN", "ceiling": "Infinity", "tenth": "0.1", "big": "9007199254740993", "flag": "true",
            "note": "it's \\ here", "price": "123456789012345678.91", "since": "2024-01-01",
            "due": "2024-01-02 03:04:05.25", "stamp": None, "nickname": None}  # fmt: skip


def test_added_columns_give_earlier_rows_their_exact_source_default_or_null_and_a_column_dropped_later_stays_null(
    format_lake,
):
    base = value_schema_of("mariadb/c_insert.json")
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    format_lake.apply(ev.take())
    values = {"ratio": 1.5, "ceiling": 2.5, "tenth": 0.5, "big": 7, "flag": False, "note": "n",
              "price": decimal_b64("1.00", 2), "since": 0, "due": 0, "stamp": "2024-01-01T00:00:00Z", "nickname": "Bo"}  # fmt: skip
    ev.record("c", {"id": 2}, customer(2, **values), value_schema=with_row_fields(base, [*row_fields(base), *ADDED]))
    report = format_lake.apply(ev.take())
    assert report.dead == 0, format_lake.dead_letters()
    assert format_lake.texts(*DEFAULTS)[1] == DEFAULTS
    # The columns dropped at the source (its events have them no more): kept, null in later changes.
    ev.record("u", {"id": 2}, customer(2, "after-drop"), value_schema=base)
    ev.record("c", {"id": 3}, customer(3), value_schema=base)
    assert format_lake.apply(ev.take()).dead == 0
    assert [c for c in format_lake.schema() if c in DEFAULTS] == [f["field"] for f in ADDED]
    texts = format_lake.texts(*DEFAULTS)
    assert texts[2] == texts[3] == dict.fromkeys(DEFAULTS)
    assert (texts[1], format_lake.first_names()[2]) == (DEFAULTS, "after-drop")


def balances(ev: Events, op: str, rows: dict[int, str], precision: int, scale: int, **fields: str) -> None:
    """Changes of customers with `balance` DECIMAL(precision, scale), as Debezium sends them after
    `ALTER TABLE customers MODIFY balance DECIMAL(precision, scale)` (decimal.handling.mode precise)."""
    for i, b in rows.items():
        row = customer(i, **fields) | {"balance": decimal_b64(b, scale)}
        ev.record(op, {"id": i}, row, value_schema=with_columns(precision, scale))


STORED = {1: "9999999999.99", 2: "-0.01", 3: "12345.67", 4: "0.00"}  # the extremes of DECIMAL(12,2)


def narrowed(lake) -> list[dict]:
    """The lake's `balance` at decimal(16,4), then a batch in which the source narrows it to
    decimal(12,2), with a change of another table."""
    ev = Events()
    balances(ev, "c", {1: "1.2345"}, 16, 4)
    lake.apply(ev.take())
    balances(ev, "u", {1: "1.23"}, 12, 2, first="narrowed")
    orders = Events(topic="mdb.inventory.orders", table="orders")
    orders.record("c", {"id": 10}, customer(10))
    return ev.take() + orders.take()


def test_a_lossy_decimal_narrowing_goes_to_the_dead_letters_naming_table_column_types_and_fix(format_lake):
    report = format_lake.apply(narrowed(format_lake))

    assert report.dead == 1 and format_lake.ids("inventory_orders") == [10]
    assert format_lake.texts("balance", "first_name") == {1: {"balance": "1.2345", "first_name": "Sally"}}
    assert format_lake.schema()["balance"] == "decimal(16,4)"
    [dl] = format_lake.dead_letters()
    for part in (format_lake.table(), "'balance'", "decimal(16,4)", "decimal(12,2)", "Fix:", "replay"):
        assert part in dl["reason"], part
    errors = [m for m in format_lake.logs() if m.startswith("ERROR ") and format_lake.table() in m]
    assert len(errors) == 1 and "decimal(12,2)" in errors[0], format_lake.logs()


def test_schema_change_policy_fail_fails_a_lossy_change_before_any_commit_and_still_rewrites_an_exact_one(
    make_format_lake,
):
    lake = make_format_lake(schema_change_policy="fail")
    records = narrowed(lake)
    before = lake.rows()
    with pytest.raises(Exception, match=r"decimal\(16,4\) in the lake but decimal\(12,2\)"):
        lake.apply(records)
    assert lake.rows() == before and not lake.dead_letters()
    assert not lake.exists("inventory_orders"), "no table was written"
    # An exact change (scale and precision up) is no lossy one: rewritten, every value kept.
    ev = Events(next_offset=100, next_pos=50_000)
    balances(ev, "c", {2: "-0.000001"}, 20, 6)
    assert lake.apply(ev.take()).dead == 0, lake.dead_letters()
    assert lake.schema()["balance"] == "decimal(20,6)"
    assert {i: t["balance"] for i, t in lake.texts("balance").items()} == {1: "1.234500", 2: "-0.000001"}


def test_schema_change_policy_dead_letter_sends_even_an_exact_type_change_to_the_dead_letters(make_format_lake):
    lake = make_format_lake(schema_change_policy="dead_letter")
    ev = Events()
    balances(ev, "c", STORED, 12, 2)
    lake.apply(ev.take())
    balances(ev, "u", {3: "5.5"}, 16, 4)
    report = lake.apply(ev.take())

    assert report.dead == 1 and lake.schema()["balance"] == "decimal(12,2)"
    assert {i: t["balance"] for i, t in lake.texts("balance").items()} == STORED
    [dl] = lake.dead_letters()
    assert "--schema_change_policy evolve" in dl["reason"]
