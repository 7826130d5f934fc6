"""The benchmark's data generator and correctness checker (scripts/cdcbench), without Spark:
the 70/20/10 mix, several changes per key, records that are valid Debezium envelopes in source
order, an expected-state model that equals an independent replay of the records, and a checker
that catches what the AWS sample's logic gets wrong (deletes not applied, ties on ts_ms)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from cdcbench import generator
from cdcbench.checker import compare, version_of


@pytest.mark.parametrize("n", [10, 1_000, 10_000])
def test_every_batch_has_exactly_the_70_20_10_mix(n):
    stream = generator.ChangeStream(5_000, seed=n)
    for _ in range(3):
        mix = generator.op_mix(stream.batch(n))
        assert mix == {"u": round(n * 0.7), "c": round(n * 0.2), "d": n - round(n * 0.7) - round(n * 0.2)}


def test_keys_change_several_times_per_batch_and_some_within_one_millisecond():
    changes = generator.ChangeStream(100_000).batch(10_000)
    per_key = Counter(c.key for c in changes)
    assert sum(per_key.values()) / len(per_key) > 2
    assert max(per_key.values()) >= 5
    last_ms: dict[int, int] = {}
    same_ms = 0
    for c in changes:
        same_ms += last_ms.get(c.key) == c.ts_ms
        last_ms[c.key] = c.ts_ms
    assert same_ms > 500, "ties on the envelope ts_ms are what the baseline's ordering cannot resolve"


def test_updates_and_deletes_hit_live_rows_and_inserts_take_new_keys():
    stream = generator.ChangeStream(1_000)
    live = set(range(1_000))
    for c in stream.batch(2_000) + stream.batch(2_000):
        if c.op == "c":
            assert c.key not in live and c.key >= 1_000
            live.add(c.key)
        else:
            assert c.key in live
            if c.op == "d":
                live.remove(c.key)
    assert stream.expected.row_count() == len(live)


def _records(changes: list[generator.Change]) -> list[tuple]:
    return list(generator.records(changes, generator.Template()))


def test_records_are_debezium_envelopes_in_source_order_with_tombstones_after_deletes():
    changes = generator.ChangeStream(500).batch(300)
    recs = _records(changes)
    assert len(recs) == len(changes) + sum(c.op == "d" for c in changes)
    previous = (0, 0)
    for i, (topic, partition, offset, _ts, key, value) in enumerate(recs):
        assert (topic, partition) == (generator.TOPIC, 0)
        if value is None:
            prev_value = json.loads(recs[i - 1][5])
            assert prev_value["payload"]["op"] == "d" and json.loads(key) == json.loads(recs[i - 1][4])
            assert offset == recs[i - 1][2] + 1
            continue
        v = json.loads(value)
        assert set(v) == {"schema", "payload"}
        row_fields = next(f for f in v["schema"]["fields"] if f["field"] == "after")["fields"]
        assert [f["field"] for f in row_fields] == [
            "id", "first_name", "last_name", "email", "balance", "created_at", "city", "loyalty_points", "lifetime_orders", "updated_at",
        ]  # fmt: skip
        p = v["payload"]
        src = p["source"]
        position = (int(src["file"].rsplit(".", 1)[1]), src["pos"])
        assert position > previous, "binlog positions increase in offset order"
        previous = position
        assert src["ts_ms"] % 1000 == 0, "MySQL binlog timestamps have second resolution"
        assert json.loads(key)["payload"] == {"id": (p["after"] or p["before"])["id"]}
        if p["op"] == "u":
            assert version_of(p["after"]["email"]) == version_of(p["before"]["email"]) + 1


def _replay(records: list[tuple], initial: int) -> dict[int, int]:
    """An independent model: apply the records' row images in offset order."""
    table = dict.fromkeys(range(initial), 0)
    for *_, value in sorted(records, key=lambda r: r[2]):
        if value is None:
            continue
        p = json.loads(value)["payload"]
        if p["op"] == "d":
            del table[p["before"]["id"]]
        else:
            table[p["after"]["id"]] = version_of(p["after"]["email"])
    return table


def test_the_expected_state_equals_a_replay_of_the_records():
    stream = generator.ChangeStream(2_000, seed=11)
    records = _records(stream.batch(3_000)) + _records(stream.batch(3_000))
    table = _replay(records, 2_000)
    assert stream.expected.row_count() == len(table)
    touched = {k: table.get(k) for k in stream.expected.versions}
    assert touched == stream.expected.versions
    verdict = compare(stream.expected, {k: v for k, v in touched.items() if v is not None}, len(table))
    assert verdict.correct and verdict.summary() == "correct"


def _as_the_baseline_applies_it(records: list[tuple], initial: int) -> dict[int, int]:
    """The AWS sample's semantics: per batch, newest change per `after` key by envelope ts_ms
    (ties keep the first record), upserts applied, deletes (keyed on a null `after`) never."""
    table = dict.fromkeys(range(initial), 0)
    newest: dict[int | None, tuple[int, dict]] = {}
    for *_, value in records:
        if value is None:
            continue
        p = json.loads(value)["payload"]
        key = p["after"]["id"] if p["after"] else None
        if key not in newest or p["ts_ms"] > newest[key][0]:
            newest[key] = (p["ts_ms"], p)
    for key, (_ms, p) in newest.items():
        if key is not None:
            table[key] = version_of(p["after"]["email"])
    return table


def test_the_checker_reports_the_baselines_unapplied_deletes_and_stale_rows():
    stream = generator.ChangeStream(2_000, seed=3)
    records = _records(stream.batch(5_000))
    table = _as_the_baseline_applies_it(records, 2_000)
    actual = {k: table[k] for k in stream.expected.versions if k in table}
    verdict = compare(stream.expected, actual, len(table))
    deleted = sum(v is None for v in stream.expected.versions.values())
    assert verdict.extra == deleted > 0
    assert verdict.stale > 0, "ts_ms ties resolved the wrong way"
    assert verdict.missing == 0
    assert not verdict.correct
    assert verdict.summary().startswith(f"WRONG: {deleted} not deleted")


def test_deletion_vectors_in_one_puffin_file_count_as_entries_of_one_file():
    from cdcbench.formatversions import live

    v3 = {("d/a.puffin", 4, 900), ("d/a.puffin", 60, 900), ("d/b.puffin", 4, 500)}
    assert live(v3) == (3, 2, 1400)
    v2 = {("d/x-deletes.parquet", 0, 1200), ("d/y-deletes.parquet", 0, 1300)}
    assert live(v2) == (2, 2, 2500)
