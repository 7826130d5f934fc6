"""The job's guarantees written once and run on every table format of the registry (`format_lake`:
tests/job/conftest.py and format_lakes.py): ordering and de-duplication by source position, deletes,
replays of old batches, truncates, composite and missing keys, schema changes and dead letters. A
case a format cannot do is skipped by its capability row (`needs`), with the row's reason. The core
cases (`every_write_mode`) run once more with `--write_mode merge-on-read` where a format's lakes are
otherwise copy-on-write (Iceberg's are merge-on-read already; Delta refuses it)."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pytest
from cdc_events import (
    ORDER_LINES_KEY_SCHEMA,
    Events,
    customer,
    decimal_b64,
    dropped_email_schema,
    email_became_int_schema,
    order_lines_schema,
    renamed_schema,
    row_fields,
    value_schema_of,
    wider_balance_schema,
)
from cdc_events import with_row_fields as with_fields
from cdclake.lake.formats import Capability


def truncate(ev: Events, pos: int) -> None:
    """The connector's truncate event of `ev`'s table: op t, no key, no row images."""
    t = ev.record("c", {"id": 0}, customer(0), pos=pos)
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)


@pytest.mark.every_write_mode
def test_delete_after_update_in_same_batch_removes_row_and_insert_after_delete_recreates_it(format_lake):
    ev = Events()
    for i in (1, 2, 3):
        ev.record("c", {"id": i}, customer(i, "Ann"))
    format_lake.apply(ev.take())
    ev.record("u", {"id": 1}, customer(1, "Anna"), customer(1, "Ann"))
    ev.record("d", {"id": 1}, before=customer(1, "Anna"))
    ev.record("d", {"id": 2}, before=customer(2, "Ann"))
    ev.record("c", {"id": 2}, customer(2, "Reborn"))
    # A key inserted, updated and deleted inside the batch leaves nothing; a tombstone is no change.
    ev.record("c", {"id": 7}, customer(7, "Tim"))
    ev.record("u", {"id": 7}, customer(7, "Tom"), customer(7, "Tim"))
    ev.record("d", {"id": 7}, before=customer(7, "Tom"))
    ev.tombstone({"id": 7})
    ev.record("u", {"id": 3}, customer(3, "Anne", balance="11.25"), customer(3, "Ann"))
    report = format_lake.apply(ev.take())
    assert (report.changes, report.tombstones, report.dead) == (8, 1, 0)
    rows = format_lake.by_id()
    assert {i: r["first_name"] for i, r in rows.items()} == {2: "Reborn", 3: "Anne"}
    assert (Decimal(str(rows[3]["balance"])), rows[3]["_cdc_op"], rows[2]["_cdc_op"]) == (Decimal("11.25"), "u", "c")


@pytest.mark.every_write_mode
def test_changes_are_ordered_by_source_position_and_a_late_change_loses_to_the_stored_row(format_lake):
    ev = Events()
    same_ms = 1795303971000
    # Kafka order differs from the binlog's: the position decides, then the row index, then the offset.
    ev.record("u", {"id": 1}, customer(1, "third"), pos=3000, ts_ms=same_ms, offset=10)
    ev.record("u", {"id": 1}, customer(1, "first"), pos=1000, ts_ms=same_ms, offset=11)
    ev.record("u", {"id": 2}, customer(2, "row1"), pos=500, row=1, offset=12)
    ev.record("u", {"id": 2}, customer(2, "row0"), pos=500, row=0, offset=13)
    ev.record("u", {"id": 3}, customer(3, "earlier"), pos=600, offset=14)
    ev.record("u", {"id": 3}, customer(3, "later"), pos=600, offset=15)
    # A rotated binlog's file index compares as a number ("1000000" after "999999").
    ev.record("u", {"id": 4}, customer(4, "rotated"), file="mysql-bin.1000000", pos=4, offset=16)
    ev.record("u", {"id": 4}, customer(4, "before-rotation"), file="mysql-bin.999999", pos=9999, offset=17)
    ev.record("c", {"id": 5}, customer(5, "newer"), pos=5000, offset=18)
    # A PostgreSQL source's changes are ordered by LSN.
    pg = Events(topic="pg.public.customers", db="inventory", table="customers", template_dir="postgres")
    row = {"last_name": "y", "email": "e", "balance": "1.00", "created_at": "2026-11-21T23:53:06Z"}
    pg.record("c", {"id": 1}, {"id": 1, "first_name": "oldest", **row}, lsn=100, offset=1)
    pg.record("u", {"id": 1}, {"id": 1, "first_name": "newest", **row}, lsn=300, offset=2)
    pg.record("u", {"id": 1}, {"id": 1, "first_name": "middle", **row}, lsn=200, offset=3)
    format_lake.apply(ev.take() + pg.take())
    # Later batches: an update and a delete older than the stored rows, a re-snapshot at 3's position.
    ev.record("u", {"id": 1}, customer(1, "late-older"), pos=2000, offset=19)
    ev.record("d", {"id": 5}, before=customer(5, "older"), pos=4000, offset=20)
    ev.record("r", {"id": 3}, customer(3, "snapshot"), pos=600, offset=21)
    pg.record("u", {"id": 1}, {"id": 1, "first_name": "late", **row}, lsn=250, offset=4)
    format_lake.apply(ev.take() + pg.take())
    assert format_lake.first_names() == {1: "third", 2: "row1", 3: "later", 4: "rotated", 5: "newer"}
    # PostgreSQL tables are <schema>_<table>; decimal.handling.mode=string in this capture: text.
    assert [(r["first_name"], r["balance"]) for r in format_lake.rows("public_customers")] == [("newest", "1.00")]


@pytest.mark.every_write_mode
def test_replaying_old_batches_changes_nothing_and_an_insert_older_than_its_delete_stays_deleted(format_lake):
    ev = Events()
    for i in (1, 2, 3):
        ev.record("c", {"id": i}, customer(i, "v1"), pos=100 * i)
    ev.record("d", {"id": 3}, before=customer(3, "v1"), pos=400)
    old = ev.take()
    format_lake.apply(old, batch_id=0)
    ev.record("u", {"id": 1}, customer(1, "v2"), customer(1, "v1"), pos=500)
    ev.record("u", {"id": 2}, customer(2, "v2"), customer(2, "v1"), pos=600)
    format_lake.apply(ev.take(), batch_id=1)
    before = format_lake.rows()
    # A later batch: the first read again (e.g. the raw zone replayed, or a checkpoint's), and an insert
    # of 3 older than its delete (only the table's delete markers know 3 was deleted).
    ev.record("c", {"id": 3}, customer(3, "Undead"), pos=350)
    format_lake.apply(old + ev.take(), batch_id=2)
    # Every column, `_cdc_ingested_at` included: no row was rewritten, not even with equal values.
    assert format_lake.rows() == before
    assert format_lake.first_names() == {1: "v2", 2: "v2"}


@pytest.mark.every_write_mode
def test_truncate_removes_rows_older_than_it_and_keeps_later_changes_of_a_composite_key(format_lake):
    lines = Events(topic="mdb.inventory.order_lines", table="order_lines")
    schema = order_lines_schema()

    def line(op: str, o: int, n: int, sku: str, pos: int) -> None:
        key = {"order_id": o, "line_no": n}
        lines.record(op, key, key | {"sku": sku}, value_schema=schema, key_schema=ORDER_LINES_KEY_SCHEMA, pos=pos)

    for o, n, sku, pos in ((1, 1, "A", 100), (1, 2, "B", 200), (2, 1, "C", 300), (2, 2, "D", 400)):
        line("c", o, n, sku, pos)
    format_lake.apply(lines.take())
    # Changes before the truncate are gone with it; after it, an update of a truncated row's key
    # inserts it again by the whole key, and a delete of another finds nothing.
    line("u", 1, 2, "B2", 500)
    truncate(lines, pos=600)
    line("c", 3, 1, "E", 700)
    line("u", 1, 2, "B3", 800)
    line("d", 2, 2, "D", 900)
    report = format_lake.apply(lines.take())
    assert report.truncates == 1
    name = "inventory_order_lines"
    got = [(r["order_id"], r["line_no"], r["sku"]) for r in format_lake.rows(name, order=("order_id", "line_no"))]
    assert got == [(1, 2, "B3"), (3, 1, "E")]
    assert format_lake.properties(name)["cdc.primary-key"] == "order_id,line_no"


def keyless(ev: Events, op: str, after: dict | None = None, before: dict | None = None) -> None:
    rec = ev.record(op, {"id": (after or before)["id"]}, after, before)
    rec["key"] = None  # what the connector sends for a table without a primary key


@pytest.mark.needs(Capability.KEYLESS_TABLES)
def test_a_keyless_table_keeps_duplicates_and_a_delete_or_update_touches_one_copy(make_format_lake):
    lake = make_format_lake(keyless_table_policy="multiset")
    ev = Events(topic="mdb.inventory.log", table="log")
    a, b = customer(1, "Ann"), customer(2, "Bob")
    for row in (a, a, a, b):
        keyless(ev, "c", row)
    report = lake.apply(ev.take())
    assert report.dead == 0 and report.tables[0].inserts == 4
    keyless(ev, "d", before=a)
    keyless(ev, "u", customer(1, "Anne"), before=a)
    batch = ev.take()
    lake.apply(batch, batch_id=5)
    lake.apply(batch, batch_id=5)  # replayed after a crash before the offset commit: counted once
    rows = lake.rows("inventory_log", order=("id", "first_name"))
    assert Counter((r["id"], r["first_name"]) for r in rows) == Counter({(1, "Ann"): 1, (1, "Anne"): 1, (2, "Bob"): 1})
    assert {r["_cdc_copy"] for r in rows} == {1}


def test_keyless_table_policy_dead_letter_sends_a_keyless_tables_changes_to_the_dead_letters(make_format_lake):
    # The one policy every format offers (Capability.KEYLESS_TABLES: the formats that refuse multiset).
    lake = make_format_lake(keyless_table_policy="dead_letter")
    ev = Events(topic="mdb.inventory.log", table="log")
    keyless(ev, "c", customer(1, "Ann"))
    keyless(ev, "c", customer(1, "Ann"))
    keyless(ev, "d", before=customer(1, "Ann"))
    report = lake.apply(ev.take())
    assert report.dead == 3 and not lake.exists("inventory_log")
    assert {d["reason"] for d in lake.dead_letters()} == {
        "record has no JSON key: the table has no primary key (--keyless_table_policy dead_letter)"
    }


def test_an_incompatible_type_change_goes_to_the_dead_letters_with_its_reason_and_the_rest_applies(format_lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1), pos=100)
    format_lake.apply(ev.take())
    # `email` becomes an int at the source: no safe conversion exists.
    bad = ev.record("u", {"id": 1}, customer(1) | {"email": 42}, pos=200, value_schema=email_became_int_schema())
    orders = Events(topic="mdb.inventory.orders", table="orders")
    orders.record("c", {"id": 10}, customer(10, "order-ish"))
    report = format_lake.apply(ev.take() + orders.take())
    assert report.dead == 1
    [letter] = format_lake.dead_letters()
    assert letter["reason"].startswith(
        f"incompatible schema change: table {format_lake.table()} column 'email' is string"
    ), letter["reason"]
    # The original record at its position, for a replay once the cause is fixed.
    assert (letter["topic"], letter["partition"], letter["offset"]) == (bad["topic"], bad["partition"], bad["offset"])
    assert json.loads(letter["value"]) == json.loads(bad["value"])
    assert format_lake.by_id()[1]["email"] == "sally1@example.com", "the lake row is untouched"
    assert format_lake.ids("inventory_orders") == [10]


def test_add_rename_drop_and_widen_columns_keep_every_rows_values(make_format_lake):
    lake = make_format_lake(dropped_column_policy="drop")
    ev = Events()
    for i in (1, 2):
        ev.record("c", {"id": i}, customer(i), pos=100 * i)
    lake.apply(ev.take())
    # loyalty_tier added (rows before it get the source default) and balance widened to DECIMAL(14,2).
    wide = wider_balance_schema()
    ev.record("u", {"id": 1}, customer(1, "Al", loyalty_tier="silver", balance="123456789.99"), pos=300,
              value_schema=wide)  # fmt: skip
    report = lake.apply(ev.take())
    assert "balance decimal(10,2)->decimal(14,2)" in report.tables[0].schema
    # last_name renamed to surname, with a row after it; then email dropped.
    ev.schema_change("ALTER TABLE customers RENAME COLUMN last_name TO surname", pos=400, offset=0)
    row = customer(2, "Bea", loyalty_tier="gold")
    row["surname"] = row.pop("last_name") + "-Renamed"
    ev.record("u", {"id": 2}, row, pos=500, value_schema=renamed_schema())
    ev.schema_change("ALTER TABLE customers DROP COLUMN email", pos=600, offset=1)
    row = customer(1, "Al", loyalty_tier="silver", balance="123456789.99")
    row["surname"] = row.pop("last_name")
    del row["email"]
    ev.record("u", {"id": 1}, row, pos=700, value_schema=dropped_email_schema())
    report = lake.apply(ev.take())
    assert report.tables[0].schema == "last_name->surname (renamed), -email (dropped)"
    schema = lake.schema()
    assert [c for c in schema if not c.startswith("_cdc_")] == [
        "id", "first_name", "surname", "balance", "created_at", "loyalty_tier",
    ]  # fmt: skip
    assert schema["balance"] == "decimal(14,2)" and schema["loyalty_tier"] == "string"
    rows = lake.by_id()
    assert Decimal(str(rows[1]["balance"])) == Decimal("123456789.99")
    assert (rows[1]["surname"], rows[1]["loyalty_tier"]) == ("Thomas", "silver")
    assert (rows[2]["surname"], rows[2]["loyalty_tier"], rows[2]["first_name"]) == ("Thomas-Renamed", "gold", "Bea")


def with_columns(precision: int = 10, scale: int = 2, **types: str) -> dict:
    """customers' value schema with `balance` DECIMAL(precision, scale) and extra optional columns of
    these Connect types, as Debezium sends it after the source's ALTER TABLE."""
    schema = value_schema_of("mariadb/c_insert.json")
    fields = [*row_fields(schema), *({"type": t, "optional": True, "field": n} for n, t in types.items())]
    for f in fields:
        if f["field"] == "balance":
            f["parameters"] = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return with_fields(schema, fields)


def test_exact_type_changes_widen_or_rewrite_the_columns_keeping_every_value(format_lake):
    ev = Events()
    old = with_columns(visits="int32", code="int32", ratio="float32")
    ev.record("c", {"id": 1}, customer(1, visits=5, code=-2147483648, ratio=0.5), value_schema=old)
    ev.record("c", {"id": 2}, customer(2, visits=6, code=42, ratio=1.5, balance="-0.01"), value_schema=old)
    format_lake.apply(ev.take())
    # Widened (int -> bigint, float -> double), and changed exactly (int -> string, decimal scale up).
    new = with_columns(16, 4, visits="int64", code="string", ratio="float64")
    row = customer(2, visits=2**40, code="B-7", ratio=0.25) | {"balance": decimal_b64("123456789012.3456", 4)}
    ev.record("u", {"id": 2}, row, value_schema=new)
    report = format_lake.apply(ev.take())
    assert report.dead == 0, format_lake.dead_letters()
    # A narrower type still arriving (e.g. another partition lagging) is stored in the wider column.
    narrower = with_columns(16, 4, visits="int32")
    ev.record("c", {"id": 3}, customer(3, visits=7) | {"balance": decimal_b64("10.5", 4)}, value_schema=narrower)
    assert format_lake.apply(ev.take()).dead == 0
    schema = format_lake.schema()
    assert [schema[c] for c in ("visits", "code", "ratio", "balance")] == [
        "bigint",
        "string",
        "double",
        "decimal(16,4)",
    ]
    rows = format_lake.by_id()
    assert {i: (r["visits"], r.get("code"), r.get("ratio"), Decimal(str(r["balance"]))) for i, r in rows.items()} == {
        1: (5, "-2147483648", 0.5, Decimal("10.5")),
        2: (2**40, "B-7", 0.25, Decimal("123456789012.3456")),
        3: (7, None, None, Decimal("10.5")),
    }
