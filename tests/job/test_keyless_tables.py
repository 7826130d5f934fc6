"""Tables without a primary key (Debezium sends their changes with a null Kafka key): the lake holds
exactly the source's rows as a multiset, duplicates included, also when a batch is applied twice."""

from __future__ import annotations

import json
from collections import Counter

from cdc_events import Events, customer

NAME = "inventory_log"


def keyless(ev: Events, op: str, after: dict | None = None, before: dict | None = None, **kw) -> dict:
    rec = ev.record(op, {"id": (after or before)["id"]}, after, before, **kw)
    rec["key"] = None  # what the connector sends for a table without a primary key
    return rec


def rows(lake) -> Counter:
    data = lake.spark.sql(f"SELECT id, first_name FROM {lake.table(NAME)}").collect()
    return Counter((r["id"], r["first_name"]) for r in data)


def test_duplicates_are_kept_and_a_delete_or_update_touches_one_copy(lake):
    ev = Events(topic="mdb.inventory.log", table="log")
    a, b = customer(1, "Ann"), customer(2, "Bob")
    for row in (a, a, a, b):
        keyless(ev, "c", a if row is a else b)
    report = lake.apply(ev.take())
    assert report.dead == 0 and report.tables[0].inserts == 4
    assert rows(lake) == Counter({(1, "Ann"): 3, (2, "Bob"): 1})
    keyless(ev, "d", before=a)
    keyless(ev, "u", customer(1, "Anne"), before=a)
    report = lake.apply(ev.take())
    assert (report.tables[0].updates, report.tables[0].deletes) == (1, 1)
    assert rows(lake) == Counter({(1, "Ann"): 1, (1, "Anne"): 1, (2, "Bob"): 1})
    copies = lake.spark.sql(f"SELECT id, first_name, _cdc_copy FROM {lake.table(NAME)} ORDER BY 1, 2").collect()
    assert [tuple(r) for r in copies] == [(1, "Ann", 1), (1, "Anne", 1), (2, "Bob", 1)]
    assert lake.identifier_fields(NAME) == set()  # rows as a multiset: no key to declare


def test_a_keyless_batch_applied_twice_counts_once(lake):
    ev = Events(topic="mdb.inventory.log", table="log")
    a = customer(1, "Ann")
    keyless(ev, "r", a)
    keyless(ev, "r", a)
    lake.apply(ev.take(), batch_id=0)
    keyless(ev, "c", a)
    keyless(ev, "d", before=a)
    keyless(ev, "c", customer(2, "Bob"))
    batch = ev.take()
    lake.apply(batch, batch_id=1)
    lake.apply(batch, batch_id=1)  # replayed after a crash before the offset commit
    assert rows(lake) == Counter({(1, "Ann"): 2, (2, "Bob"): 1})
    keyless(ev, "d", before=a)
    batch = ev.take()
    lake.apply(batch, batch_id=2)
    lake.apply(batch, batch_id=2)
    assert rows(lake) == Counter({(1, "Ann"): 1, (2, "Bob"): 1})


def test_a_truncate_and_later_inserts_of_a_keyless_table_leave_only_the_later_rows(lake):
    ev = Events(topic="mdb.inventory.log", table="log")
    a = customer(1, "Ann")
    keyless(ev, "c", a)
    keyless(ev, "c", a)
    lake.apply(ev.take())
    t = ev.record("c", {"id": 0}, customer(0))  # the connector's truncate event: op t, no row images
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)
    keyless(ev, "c", a)
    lake.apply(ev.take())
    assert rows(lake) == Counter({(1, "Ann"): 1})


def test_a_keyless_delete_without_its_before_image_is_dead_lettered_with_the_fix(lake):
    ev = Events(topic="mdb.inventory.log", table="log")
    keyless(ev, "c", customer(1))
    lake.apply(ev.take())
    rec = ev.record("d", {"id": 1}, None, None)
    rec["key"] = None
    report = lake.apply(ev.take())
    assert report.dead == 1
    assert "REPLICA IDENTITY FULL" in lake.dead_letters()[0]["reason"]
    assert rows(lake) == Counter({(1, "Sally"): 1})
