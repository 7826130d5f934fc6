"""Records that are not changes of a table: schemaless JSON and the connectors' heartbeats.
Malformed records and their dead letters, on every format: test_every_format_failures.py."""

from __future__ import annotations

import json

from cdc_events import Events, connect_json, customer, load


def test_schemaless_json_events_use_the_documented_fallback(lake):
    ev = Events(topic="mdb.inventory.plain", table="plain")
    rec = ev.record("c", {"id": 1}, customer(1))
    value = json.loads(rec["value"])
    key = json.loads(rec["key"])
    rec["value"] = json.dumps(value["payload"])  # value.converter.schemas.enable=false
    rec["key"] = json.dumps(key["payload"])
    rec2 = ev.record("u", {"id": 1}, customer(1, "Updated"))
    rec2["value"] = json.dumps(json.loads(rec2["value"])["payload"])
    rec2["key"] = json.dumps(json.loads(rec2["key"])["payload"])
    report = lake.apply(ev.take())
    assert report.dead == 0
    [row] = lake.rows("inventory_plain")
    assert row["first_name"] == "Updated"
    assert row["id"] == 1 and isinstance(row["id"], int)
    assert row["balance"] == customer(1)["balance"], "without a schema a decimal stays as the connector sent it"


def test_heartbeats_of_both_connectors_are_neither_dead_letters_nor_a_lake_table(lake):
    # A topic pattern may match the heartbeat topics (<prefix>-heartbeat.<prefix>, e.g. `salesdb.*`), and
    # PostgreSQL's heartbeat table is in the captured schema's topic pattern: the job skips all three.
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    heartbeats = [
        ("salesdb-heartbeat.salesdb", "mariadb/heartbeat_topic.json"),
        ("salesdb-heartbeat.salesdb", "postgres/heartbeat_topic.json"),
        ("salesdb.public.cdclake_heartbeat", "postgres/heartbeat_table_u.json"),
    ]
    records = ev.take()
    for i, (topic, fixture) in enumerate(heartbeats):
        message = load(fixture)
        beat = Events(topic=topic, next_offset=i).raw(connect_json(message["key"]), connect_json(message["value"]))
        records.append(beat)

    report = lake.apply(records)

    assert lake.ids() == [1]
    assert report.records == 4 and report.dead == 0 and lake.dead_letters() == []
    tables = [r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN glue_catalog.{lake.namespace}").collect()]
    assert tables == ["inventory_customers"]
