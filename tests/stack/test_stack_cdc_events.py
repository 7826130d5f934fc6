"""What Debezium delivers to Kafka for the demo scenario (sql/01..04) on the local stack."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from stack_helpers import CUSTOMER_TOPIC, ORDERS_TOPIC, Event, Stack, by_key, count, decimal_value

pytestmark = pytest.mark.stack

CUSTOMER_COLUMNS = {
    "cust_id", "name", "email", "mktsegment", "city", "country_code",
    "acct_balance", "loyalty_points", "birth_date", "created_at", "updated_at",
}  # fmt: skip


def test_snapshot_of_customer_arrives_as_read_events(stack: Stack) -> None:
    events = stack.events(CUSTOMER_TOPIC, lambda ev: len({e.key["cust_id"] for e in ev if e.op == "r"}) >= 30)
    reads = {e.key["cust_id"]: e for e in events if e.op == "r"}

    assert sorted(reads) == list(range(1, 31))
    first = reads[1]
    assert first.before is None
    assert set(first.after) == CUSTOMER_COLUMNS
    assert first.payload["source"]["snapshot"] in ("first", "true", "last", "first_in_data_collection")
    assert first.after["name"] == "Amelia Hart"
    assert reads[11].after["name"] == "Zoë Müller"  # utf8mb4 survives end to end
    assert reads[10].after["city"] is None

    types = first.row_fields()
    assert types["acct_balance"]["name"] == "org.apache.kafka.connect.data.Decimal"
    scale = int(types["acct_balance"]["parameters"]["scale"])
    assert decimal_value(first.after["acct_balance"], scale) == Decimal("711.56")
    assert decimal_value(reads[3].after["acct_balance"], scale) == Decimal("-283.84")
    assert types["birth_date"]["name"] == "io.debezium.time.Date"
    assert date.fromordinal(date(1970, 1, 1).toordinal() + first.after["birth_date"]) == date(1984, 3, 12)
    assert types["created_at"]["name"] == "io.debezium.time.Timestamp"  # DATETIME: ms
    assert types["updated_at"]["name"] == "io.debezium.time.MicroTimestamp"  # DATETIME(6): us
    assert reads[9].after["updated_at"] % 1_000_000 == 999_999
    assert types["mktsegment"]["name"] == "io.debezium.data.Enum"


def test_inserts_updates_deletes_produce_change_events_with_full_rows_and_a_tombstone(stack: Stack) -> None:
    stack.sql_file("02_changes.sql")

    # Events of different rows land on different partitions: wait for every row the test checks.
    def done(ev: list[Event]) -> bool:
        return (
            all(count(ev, "c", cust_id=i) for i in (31, 32, 33))
            and count(ev, "u", cust_id=7) == 1
            and count(ev, "u", cust_id=10) == 2
            and all(count(ev, None, cust_id=i) for i in (3, 32))
        )

    events = stack.events(CUSTOMER_TOPIC, done)

    created = [e for e in events if e.op == "c"]
    assert {e.key["cust_id"] for e in created} >= {31, 32, 33}
    # Every column of the row (03's ADD COLUMN may already have run: its column is in the schema too).
    assert all(e.before is None and set(e.after) == set(e.row_fields()) >= CUSTOMER_COLUMNS for e in created)

    # An update carries the whole row before and after, not only the changed columns.
    (moved,) = [e for e in by_key(events, cust_id=7) if e.op == "u"]
    assert set(moved.before) == set(moved.after) == set(moved.row_fields()) >= CUSTOMER_COLUMNS
    assert (moved.before["city"], moved.after["city"]) == ("Malmö", "Gothenburg")
    assert moved.before["name"] == moved.after["name"] == "Hannah Lindqvist"

    # Two updates of one row in one transaction: two events, in commit order.
    twice = [e for e in by_key(events, cust_id=10) if e.op == "u"]
    assert [e.after["city"] for e in twice] == [None, "Boston"]
    assert twice[1].before == twice[0].after

    # A delete: the full old row, no new row, then a tombstone for log compaction.
    row3 = by_key(events, cust_id=3)
    delete = next(e for e in row3 if e.op == "d")
    assert delete.after is None
    assert set(delete.before) == set(delete.row_fields("before")) >= CUSTOMER_COLUMNS
    assert delete.before["name"] == "Priya Raman"
    tombstone = row3[row3.index(delete) + 1]
    assert tombstone.value is None
    assert (tombstone.partition, tombstone.offset) == (delete.partition, delete.offset + 1)

    # Inserted and deleted in the same script: both events are there, in order.
    assert [e.op for e in by_key(events, cust_id=32)] == ["c", "d", None]


def test_added_column_shows_in_the_schema_of_the_next_event(stack: Stack) -> None:
    stack.sql_file("03_add_status_column.sql")
    events = stack.events(
        CUSTOMER_TOPIC,
        lambda ev: count(ev, "r", cust_id=1)
        and count(ev, "u", cust_id=12)
        and all(count(ev, "c", cust_id=i) for i in (34, 35)),
    )

    before_alter = next(e for e in by_key(events, cust_id=1) if e.op == "r")
    assert "status" not in before_alter.row_fields()

    (update,) = [e for e in by_key(events, cust_id=12) if e.op == "u"]
    status = update.row_fields()["status"]
    assert status["type"] == "string" and status["optional"] is True and status.get("default") == "Green"
    assert update.before["status"] == "Green"  # the existing row reads the default
    assert update.after["status"] == "Amber"
    (inserted,) = by_key(events, cust_id=34)
    assert inserted.after["status"] == "Green"

    # The DDL itself is published on the schema-change topic (named after the topic prefix).
    ddl = stack.events("salesdb", lambda ev: any("ADD COLUMN status" in (e.payload.get("ddl") or "") for e in ev))
    assert any(e.payload.get("databaseName") == "salesdb" for e in ddl)


def test_second_table_with_composite_key_gets_its_own_topic(stack: Stack) -> None:
    stack.sql_file("04_second_table.sql")
    events = stack.events(
        ORDERS_TOPIC,
        lambda ev: count(ev, "c", order_id=1001, line_no=2)
        and count(ev, "u", order_id=1001, line_no=1)
        and count(ev, None, order_id=1003, line_no=3),
    )

    keys = {tuple(e.key.values()) for e in events}
    assert (1001, 1) in keys and (1001, 2) in keys
    (shipped,) = [e for e in by_key(events, order_id=1001, line_no=1) if e.op == "u"]
    assert shipped.key_fields == ("order_id", "line_no")
    assert shipped.after["state"] == "SHIPPED"
    # BIGINT UNSIGNED with bigint.unsigned.handling.mode=precise: a decimal, no overflow.
    tracking = shipped.row_fields()["tracking_no"]
    assert tracking["name"] == "org.apache.kafka.connect.data.Decimal"
    assert decimal_value(shipped.after["tracking_no"], 0) == Decimal(18446744073709551000)
    assert [e.op for e in by_key(events, order_id=1003, line_no=3)] == ["c", "d", None]
