"""summarize: the batch's counts, schema groups, truncates and positions from its group aggregate
rows (plain dicts here, Spark Rows in the job)."""

from __future__ import annotations

from typing import Any

from cdclake.events.summary import summarize

VALUE_V1 = '{"schema":{"type":"struct","name":"v1"}'
VALUE_V2 = '{"schema":{"type":"struct","name":"v2"}'


def row(status: str = "change", **fields: Any) -> dict[str, Any]:
    """One group aggregate row: one status, table, schema pair, topic and partition."""
    r = {
        "_status": status,
        "_reason": None,
        "_src_db": "inventory",
        "_src_table": "customers",
        "_schema_id": 1,
        "_key_schema_id": 10,
        "topic": "mdb.inventory.customers",
        "partition": 0,
        "n": 1,
        "value_schema": VALUE_V1,
        "key_schema": None,
        "sample_key": '{"id": 1}',
        "max_seq": 100,
        "min_seq": 1,
        "max_source_ts": 1_700_000_000.0,
        "min_offset": 0,
        "max_offset": 0,
        "max_timestamp": 1_700_000_001.0,
        "deletes": False,
        "updates": False,
        "toasted": False,
    }
    r.update(fields)
    return r


def no_earlier_schemas(_schema_id: int, text: str | None) -> str | None:
    return text


def test_groups_of_one_table_with_two_schema_versions_stay_separate():
    s = summarize(
        [
            row(_schema_id=1, value_schema=VALUE_V1, n=3, max_seq=100),
            row(_schema_id=2, value_schema=VALUE_V2, n=2, max_seq=200),
        ],
        no_earlier_schemas,
    )
    groups = s.tables[("inventory", "customers")]
    assert [(g.schema_id, g.value_schema, g.events, g.max_seq) for g in groups] == [
        (1, VALUE_V1, 3, 100),
        (2, VALUE_V2, 2, 200),
    ]
    assert s.changes == s.records == 5


def test_rows_of_one_schema_in_two_partitions_make_one_group_with_the_newest_position():
    s = summarize(
        [row(partition=0, n=3, max_seq=100), row(partition=1, n=4, max_seq=90, sample_key=None)],
        no_earlier_schemas,
    )
    [g] = s.tables[("inventory", "customers")]
    assert (g.events, g.max_seq, g.sample_key) == (7, 100, '{"id": 1}')


def test_a_different_key_schema_is_its_own_group():
    s = summarize([row(_key_schema_id=10), row(_key_schema_id=11, sample_key=None)], no_earlier_schemas)
    assert [g.key_schema_id for g in s.tables[("inventory", "customers")]] == [10, 11]


def test_each_table_gets_its_own_groups():
    s = summarize([row(_src_table="customers"), row(_src_table="orders", _schema_id=3)], no_earlier_schemas)
    assert sorted(s.tables) == [("inventory", "customers"), ("inventory", "orders")]


def test_a_value_schema_seen_in_an_earlier_batch_comes_from_the_lookup():
    earlier = {1: VALUE_V1}
    asked = []

    def known(schema_id: int, text: str | None) -> str | None:
        asked.append((schema_id, text))
        return text if text is not None else earlier.get(schema_id)

    s = summarize([row(value_schema=None, partition=0), row(value_schema=None, partition=1)], known)
    assert [g.value_schema for g in s.tables[("inventory", "customers")]] == [VALUE_V1]
    assert asked == [(1, None)]  # once per group, with what this batch has (nothing)


def test_tombstones_are_counted_not_grouped():
    s = summarize([row("tombstone", n=4, value_schema=None), row(n=2)], no_earlier_schemas)
    assert (s.tombstones, s.changes, s.records) == (4, 2, 6)
    assert [g.events for g in s.tables[("inventory", "customers")]] == [2]


def test_schema_events_are_counted_not_grouped():
    s = summarize([row("schema_change", n=3, _src_table=None)], no_earlier_schemas)
    assert (s.schema_events, s.records, s.tables) == (3, 3, {})


def test_dead_reasons_are_summed_over_tables_and_partitions():
    s = summarize(
        [
            row("dead", _reason="value is not a JSON object", n=2, partition=0),
            row("dead", _reason="value is not a JSON object", n=3, partition=1),
            row("dead", _reason="record key is not JSON", n=1, _src_table="orders"),
        ],
        no_earlier_schemas,
    )
    assert s.dead == 6
    assert s.dead_reasons == {"value is not a JSON object": 5, "record key is not JSON": 1}
    assert s.tables == {}


def test_truncates_keep_the_newest_position_per_table():
    s = summarize(
        [
            row("truncate", max_seq=300, partition=0),
            row("truncate", max_seq=500, partition=1),
            row("truncate", max_seq=400, partition=2),
            row("truncate", max_seq=50, _src_table="orders"),
        ],
        no_earlier_schemas,
    )
    assert s.truncates == 4
    assert s.truncated == {("inventory", "customers"): 500, ("inventory", "orders"): 50}
    assert s.tables == {}


def test_the_fingerprint_is_stable_across_row_order_and_names_every_partition_range():
    rows = [
        row(topic="a", partition=0, min_offset=5, max_offset=9),
        row("tombstone", topic="a", partition=1, min_offset=0, max_offset=3),
        row("dead", _reason="x", topic="b", partition=0, min_offset=7, max_offset=7),
    ]
    forward = summarize(rows, no_earlier_schemas).fingerprint
    assert forward == summarize(list(reversed(rows)), no_earlier_schemas).fingerprint
    assert forward == "a:0:5-9;a:1:0-3;b:0:7-7"


def test_the_newest_source_time_is_of_change_events_only():
    s = summarize(
        [
            row(max_source_ts=100.0),
            row(_schema_id=2, max_source_ts=200.0),
            row(_schema_id=3, max_source_ts=None),
            row("truncate", max_source_ts=900.0),
            row("schema_change", max_source_ts=950.0),
        ],
        no_earlier_schemas,
    )
    assert s.newest_source_ts == 200.0


def test_no_change_events_means_no_source_time():
    s = summarize([row("tombstone", max_source_ts=None), row("truncate", max_source_ts=5.0)], no_earlier_schemas)
    assert s.newest_source_ts is None


def test_the_newest_kafka_timestamp_is_over_every_record():
    s = summarize(
        [row(max_timestamp=10.0), row("dead", _reason="x", max_timestamp=30.0), row("tombstone", max_timestamp=None)],
        no_earlier_schemas,
    )
    assert s.newest_timestamp == 30.0
    assert summarize([row(max_timestamp=None)], no_earlier_schemas).newest_timestamp is None


def test_positions_collected_as_decimals_become_ints():
    from decimal import Decimal

    s = summarize([row(max_seq=Decimal("123456789012345678901234567890"))], no_earlier_schemas)
    [g] = s.tables[("inventory", "customers")]
    assert g.max_seq == 123456789012345678901234567890 and isinstance(g.max_seq, int)


def test_a_group_has_deletes_updates_and_placeholders_when_any_partition_has_them():
    s = summarize(
        [row(partition=0, deletes=True), row(partition=1, updates=True, toasted=True), row(_src_table="orders")],
        no_earlier_schemas,
    )
    [g] = s.tables[("inventory", "customers")]
    assert (g.deletes, g.updates, g.toasted) == (True, True, True)
    [other] = s.tables[("inventory", "orders")]
    assert (other.deletes, other.updates, other.toasted) == (False, False, False)
