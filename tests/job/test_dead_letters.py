"""Malformed records are dead-lettered with a reason and their position; nothing is dropped silently."""

from __future__ import annotations

import json
import logging

from cdc_events import Events, connect_json, customer, load


def test_malformed_records_go_to_dead_letters_with_reason_and_position_and_the_batch_log_names_each_reason(
    lake, caplog
):
    caplog.set_level(logging.WARNING, logger="cdclake")
    ev = Events()
    good = ev.record("c", {"id": 1}, customer(1))
    key = json.dumps(load("mariadb/c_insert.json")["key"])
    ev.raw(key, "this is not json")
    ev.raw(key, json.dumps({"schema": None, "payload": {"before": None, "after": {"id": 9}}}))  # no op
    no_key = ev.record("c", {"id": 2}, customer(2))
    no_key["key"] = None
    undecodable = ev.record("c", {"id": 3}, customer(3))
    value = json.loads(undecodable["value"])
    value["payload"]["after"]["created_at"] = "not a timestamp"
    undecodable["value"] = json.dumps(value)
    wrong_type = ev.record("c", {"id": 4}, customer(4))
    value = json.loads(wrong_type["value"])
    value["payload"]["after"]["id"] = "four"
    wrong_type["value"] = json.dumps(value)

    report = lake.apply(ev.take())

    assert lake.ids() == [1]
    assert report.records == 6 and report.dead == 5
    reasons = {(d["offset"]): d["reason"] for d in lake.dead_letters()}
    assert set(reasons) == {1, 2, 3, 4, 5} and good["offset"] not in reasons
    assert reasons[1] == "value is not a JSON object"
    assert "no Debezium `op`" in reasons[2]
    assert "no JSON key" in reasons[3]
    assert reasons[4] == (
        "could not decode column(s): created_at (io.debezium.time.ZonedTimestamp value does not fit timestamp)"
    )
    assert reasons[5] == "row image does not match its declared schema"
    # The batch's warning line names every reason with its count, the tables' ones by table.
    [line] = [r.getMessage() for r in caplog.records if "written to dead letters" in r.getMessage()]
    assert line.endswith(
        ": payload has no Debezium `op` field (1); value is not a JSON object (1); "
        "inventory_customers: could not decode column(s): created_at "
        "(io.debezium.time.ZonedTimestamp value does not fit timestamp) (1); "
        "inventory_customers: record has no JSON key (does the table have a primary key?) (1); "
        "inventory_customers: row image does not match its declared schema (1)"
    ), line


def test_dead_letters_of_a_rerun_batch_are_not_duplicated(lake):
    ev = Events()
    ev.raw("{}", "garbage")
    batch = ev.take()
    lake.apply(batch, batch_id=3)
    lake.apply(batch, batch_id=3)
    assert len(lake.dead_letters()) == 1


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
