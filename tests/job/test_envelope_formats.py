"""The batch function reads a JsonConverter envelope by cutting the compact text Kafka Connect
writes (`{"schema":...,"payload":...}`) and parsing only the payload; anything else takes the full
JSON parse. Both ways must give the same lake and the same dead letters."""

from __future__ import annotations

import json
from typing import Any

from cdc_events import Events, connect_json, customer, load


def _mixed_batch(ev: Events) -> list[dict[str, Any]]:
    """Inserts, updates, a delete with its tombstone, and several changes of one key."""
    for k in range(1, 6):
        ev.record("c", {"id": k}, customer(k, f"first{k}"))
    ev.record("u", {"id": 2}, customer(2, "second"))
    ev.record("u", {"id": 2}, customer(2, "third"))
    ev.record("d", {"id": 3}, before=customer(3))
    ev.tombstone({"id": 3})
    ev.record("u", {"id": 5}, customer(5, "Zoë ✓"))
    return ev.take()


def _spaced(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same records as another producer might write them: whitespace between tokens."""
    out = []
    for r in records:
        r = dict(r)
        for f in ("key", "value"):
            if r[f] is not None:
                r[f] = json.dumps(json.loads(r[f]), indent=1)
        out.append(r)
    return out


def test_compact_and_spaced_envelopes_give_the_same_lake_rows(make_lake):
    records = _mixed_batch(Events())
    assert records[0]["value"].startswith('{"schema":{') and ',"payload":{' in records[0]["value"]
    compact, spaced = make_lake(), make_lake()

    r1 = compact.apply(records)
    r2 = spaced.apply(_spaced(records))

    assert (r1.changes, r1.tombstones, r1.dead) == (r2.changes, r2.tombstones, r2.dead) == (9, 1, 0)
    strip = ("_cdc_ingested_at",)
    rows1 = [{k: v for k, v in r.items() if k not in strip} for r in compact.rows()]
    rows2 = [{k: v for k, v in r.items() if k not in strip} for r in spaced.rows()]
    assert rows1 == rows2
    assert [r["id"] for r in rows1] == [1, 2, 4, 5]
    assert compact.by_id()[2]["first_name"] == "third" and compact.by_id()[5]["first_name"] == "Zoë ✓"


def test_a_schema_with_a_payload_key_inside_falls_back_to_the_full_parse(lake):
    """A `,"payload":` inside the schema (here a parameter named payload) makes the cut land in
    the wrong place; the cut payload then does not parse and the full parse reads the record."""
    ev = Events()
    rec = ev.record("c", {"id": 7}, customer(7, "seven"))
    value = json.loads(rec["value"])
    value["schema"]["fields"][1]["fields"][1]["parameters"] = {"a": "b", "payload": "x"}
    rec["value"] = connect_json(value)
    assert rec["value"].index(',"payload":"x"') < rec["value"].index(',"payload":{')

    report = lake.apply(ev.take())

    assert (report.changes, report.dead) == (1, 0)
    assert lake.by_id()[7]["first_name"] == "seven"


def test_a_truncated_compact_envelope_is_a_dead_letter_not_a_change(lake):
    ev = Events()
    ok = ev.record("c", {"id": 1}, customer(1))
    broken = ev.record("c", {"id": 2}, customer(2))
    broken["value"] = broken["value"][:-40] + "}"  # cut short, still ending like an object

    report = lake.apply(ev.take())

    assert lake.ids() == [1] and ok["offset"] != broken["offset"]
    assert report.dead == 1
    assert [d["reason"] for d in lake.dead_letters()] == ["value is not a JSON object"]


def test_compact_schemaless_values_are_still_read_as_the_payload(lake):
    """schemas.enable=false: the value is the payload itself, which has no `schema` key."""
    ev = Events()
    rec = ev.record("c", {"id": 4}, customer(4, "four"))
    rec["value"] = connect_json(json.loads(rec["value"])["payload"])
    rec["key"] = connect_json({"id": 4})
    assert rec["value"].startswith('{"before":')

    report = lake.apply(ev.take())

    assert (report.changes, report.dead) == (1, 0)
    assert lake.by_id()[4]["first_name"] == "four"


def test_a_compact_envelope_with_a_null_payload_is_a_tombstone(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    key = connect_json(load("mariadb/c_insert.json")["key"])
    ev.raw(key, '{"schema":null,"payload":null}')

    report = lake.apply(ev.take())

    assert (report.changes, report.tombstones, report.dead) == (1, 1, 0)
    assert lake.ids() == [1]
