"""The corpus the Delta and Hudi extras apply to one lake of their format (tests/job/test_delta_lake.py,
test_hudi.py): real Debezium messages (tests/fixtures/debezium/mariadb and postgres, via
cdc_events.Events) in five batches, with the table of name_corpus (names the source allows quoted)
in batches 2 to 4; `batches` says what each holds. Hudi adds a sixth (`renamed_key_batch`) and a
merge-on-read run of customers' changes (`merge_on_read_batches`).
"""

from __future__ import annotations

import json
from typing import Any

import name_corpus
import type_matrix as tm
from cdc_events import (
    ORDER_LINES_KEY_SCHEMA,
    Events,
    customer,
    dropped_email_schema,
    key_schema,
    load,
    order_lines_schema,
    renamed_schema,
    value_schema_of,
    wider_balance_schema,
    with_row_fields,
    with_set_and_enum,
)

PG_ROW = {"last_name": "Thomas", "email": "pg@example.com", "balance": "1.00", "created_at": "2026-11-21T23:53:06Z"}


def postgres_batches() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """PostgreSQL sources' events for batches 3 and 4 (tables named <schema>_<table>; those batches
    write one table each, so these take the idle slot of --table_concurrency): customers'
    inserts, then the captured REPLICA IDENTITY DEFAULT update (before=null) and delete (before holds
    only the key); a TOAST row inserted, then the captured update whose unchanged TOASTed values are
    Debezium's placeholder (the lake's values must stay); every column type of the all-types table."""
    pg = Events(topic="pg.public.customers", db="inventory", schema="public", template_dir="postgres")
    for i in (1, 2, 3):
        pg.record("c", {"id": i}, {"id": i, "first_name": f"Pg{i}", **PG_ROW}, lsn=26000000 + i, offset=i - 1)
    messages, _ = tm.load_fixtures("postgres")
    first = pg.take() + tm.kafka_records("salesdb.public.all_types", messages)
    first += tm.kafka_records("salesdb.public.toasty", [load("postgres/toast_c_insert.json")])
    updated = [
        load("postgres/u_update_replica_identity_default.json"),
        load("postgres/d_delete_replica_identity_default.json"),
    ]
    for offset, m in enumerate(updated, start=3):
        m["offset"] = offset
    second = tm.kafka_records("pg.public.customers", updated)
    second += tm.kafka_records("salesdb.public.toasty", [load("postgres/toast_u_update_unavailable_value.json")])
    return first, second


def all_types_before_its_columns() -> list[dict[str, Any]]:
    """The MariaDB all-types table as it was before every column but its key was added: a snapshot
    read of row 5 (older than every captured change; partition 1, the captured ones are in 0). Batch 5's
    captured messages then add a column of every lake type to this existing table (ALTER TABLE ADD
    COLUMN, Delta's timestamp_ntz behind a table feature), update row 5 and delete it."""
    messages, _ = tm.load_fixtures("mariadb")
    m = json.loads(json.dumps(messages[0]))
    value = m["value"]
    for f in value["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            f["fields"] = [c for c in f["fields"] if c["field"] == "id"]
    m["key"]["payload"] = {"id": 5}
    value["payload"].update(op="r", before=None, after={"id": 5})
    value["payload"]["source"].update(snapshot="true", pos=4, row=0)
    m["partition"], m["offset"] = 1, 0
    return tm.kafka_records("salesdb.salesdb.all_types", [m])


def _first_two(cust: Events, lines: Events) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Batches 1 and 2 (`batches`)."""
    ol = order_lines_schema()

    def line(op: str, o: int, n: int, sku: str, **kw: Any) -> None:
        key = {"order_id": o, "line_no": n}
        lines.record(op, key, key | {"sku": sku}, value_schema=ol, key_schema=ORDER_LINES_KEY_SCHEMA, **kw)

    # 1: inserts, an update and a delete of one table in one batch; a composite key; the all-types
    # table with its key column only.
    for i in (1, 2, 3, 4):
        cust.record("c", {"id": i}, customer(i), pos=100 * i)
    cust.record("u", {"id": 2}, customer(2, "Bea"), pos=500)
    cust.record("d", {"id": 3}, before=customer(3), pos=600)
    line("c", 1, 1, "A", pos=100)
    line("c", 1, 2, "B", pos=200)
    line("c", 2, 1, "C", pos=300)
    line("u", 1, 2, "B2", pos=400)
    first = cust.take() + lines.take() + all_types_before_its_columns()
    # SET and ENUM columns redefined in batch 2 (MariaDB converts stored values by text, no row events).
    tagged = Events(topic="mdb.inventory.tagged", table="tagged")
    old_members, _ = with_set_and_enum("a,b,c")
    for i, tags, grade in ((1, "a,b", "a"), (2, "b,c", "b"), (3, None, None), (5, "", "c")):
        tagged.record("c", {"id": i}, customer(i) | {"tags": tags, "grade": grade}, value_schema=old_members)
    first += tagged.take()
    # 2: batch 1 read again (same offsets), changes older than what the lake holds (an update of 1
    # older than its insert's row, an insert of the deleted 3 older than its delete), a newer
    # update; a truncate of order_lines, then a line after it.
    again = [dict(r) for r in first]
    cust.record("u", {"id": 1}, customer(1, "Stale"), pos=50)
    cust.record("c", {"id": 3}, customer(3, "Undead"), pos=550)
    cust.record("u", {"id": 4}, customer(4, "Dee"), pos=700)
    t = lines.record("c", {"order_id": 0, "line_no": 0}, {"order_id": 0, "line_no": 0, "sku": "x"}, pos=500)
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)
    line("c", 3, 1, "D", pos=600)
    new_members, redefined = with_set_and_enum("c,b,a", "A,b")
    tagged.schema_change("ALTER TABLE tagged MODIFY COLUMN tags SET('c','b','a'), MODIFY grade ENUM('A','b')",
                         table=redefined)  # fmt: skip
    tagged.record("c", {"id": 4}, customer(4) | {"tags": "c,a", "grade": "A"}, value_schema=new_members)
    return first, again + cust.take() + lines.take() + tagged.take()


def _third_and_fourth(cust: Events) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Batches 3 and 4 of customers (`batches`)."""
    # 3: ADD COLUMN (loyalty_tier) and balance widened in one batch.
    wide = wider_balance_schema()
    cust.record("c", {"id": 5}, customer(5, "Eve", loyalty_tier="gold"), pos=800, value_schema=wide)
    cust.record("u", {"id": 1}, customer(1, "Al", loyalty_tier="silver", balance="123456789.99"), pos=900,
                value_schema=wide)  # fmt: skip
    # A change older than the row batch 1 left (2's update at 500), in a later batch than it: only
    # the MERGE's position guard keeps it out (nothing newer of 2 is in this batch to win over it).
    cust.record("u", {"id": 2}, customer(2, "Stale", loyalty_tier="tin"), pos=450, value_schema=wide)
    third = cust.take()
    # 4: a column renamed at the source, with events after it; then a column dropped (policy drop).
    cust.schema_change("ALTER TABLE customers RENAME COLUMN last_name TO surname", pos=1000, offset=0)
    row = customer(4, "Dee", loyalty_tier="bronze")
    row["surname"] = row.pop("last_name") + "-Renamed"
    cust.record("u", {"id": 4}, row, pos=1100, value_schema=renamed_schema())
    cust.schema_change("ALTER TABLE customers DROP COLUMN email", pos=1200, offset=1)
    row = customer(5, "Eva", loyalty_tier="gold")
    row["surname"] = row.pop("last_name")
    del row["email"]
    cust.record("u", {"id": 5}, row, pos=1300, value_schema=dropped_email_schema())
    return third, cust.take()


def batches() -> list[list[dict[str, Any]]]:
    """The five batches, each a list of Kafka records."""
    cust = Events()
    lines = Events(topic="mdb.inventory.order_lines", table="order_lines")
    first, second = _first_two(cust, lines)
    third, fourth = _third_and_fourth(cust)
    # 5: every column type of the MariaDB all-types table, as captured from the connector: each one a
    # column added to the table batch 1 created.
    messages, _ = tm.load_fixtures("mariadb")
    fifth = tm.kafka_records("salesdb.salesdb.all_types", messages)
    # ... and order_lines renamed at the source: the lake table moves with its rows and markers.
    lines.schema_change("RENAME TABLE order_lines TO order_items", pos=700, offset=2)
    items = Events(topic="mdb.inventory.order_items", table="order_items")
    key = {"order_id": 4, "line_no": 1}
    items.record("c", key, key | {"sku": "E"}, pos=800, value_schema=order_lines_schema(),
                 key_schema=ORDER_LINES_KEY_SCHEMA)  # fmt: skip
    fifth += lines.take() + items.take()
    pg_first, pg_second = postgres_batches()
    # The table whose names are every kind the source allows (name_corpus), in batches 2 to 4.
    names = name_corpus.batches()
    return [first, second + names[0], third + pg_first + names[1], fourth + pg_second + names[2], fifth]


def renamed_key_batch() -> list[dict[str, Any]]:
    """A sixth batch, Hudi's own: order_items' key column line_no renamed at the source to line, then a
    line inserted under the new name (Hudi's record key fields cannot follow: dead letters)."""
    items = Events(topic="mdb.inventory.order_items", table="order_items")
    items.schema_change("ALTER TABLE order_items RENAME COLUMN line_no TO line", pos=900, offset=3)
    fields = [("int32", "order_id", False), ("int32", "line", False), ("string", "sku", True)]
    schema = with_row_fields(
        value_schema_of("mariadb/c_insert.json"), [{"type": t, "optional": o, "field": f} for t, f, o in fields]
    )
    key = {"order_id": 5, "line": 1}
    new_key = key_schema("order_items", ("int32", "order_id"), ("int32", "line"))
    items.record("c", key, key | {"sku": "F"}, pos=1000, value_schema=schema, key_schema=new_key)
    return items.take()


def merge_on_read_batches() -> list[list[dict[str, Any]]]:
    """customers' changes of batches 1-3 (inserts, an update and a delete; the replay, stale changes and
    a newer update; an added column), then a fourth of their own: 5 updated then deleted in the same
    batch, 4 updated (a key whose row only changes: Hudi appends it to a log file)."""
    topic = Events.topic
    first3 = [[r for r in b if r["topic"] == topic] for b in batches()[:3]]
    cust, wide = Events(next_offset=100), wider_balance_schema()
    cust.record("u", {"id": 5}, customer(5, "Eve2", loyalty_tier="gold"), pos=2000, value_schema=wide)
    cust.record("d", {"id": 5}, before=customer(5, "Eve2", loyalty_tier="gold"), pos=2100, value_schema=wide)
    cust.record("u", {"id": 4}, customer(4, "Dee2", loyalty_tier="bronze"), pos=2200, value_schema=wide)
    return [*first3, cust.take()]
