"""Reading what changed since a point: the published change query (sql/spark/changes_since.sql) over
a lake table and its delete markers, and Iceberg's own changelog view on a copy-on-write table,
each replayed onto the table as a reader held it at that point, must give the table as it is now;
and the row lineage of an Iceberg v3 table gives the rows changed since a reader's mark."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import lake_reads
from cdc_events import Events, customer

SOURCE_COLUMNS = ("id", "first_name", "last_name", "email", "balance")


def _state(rows: list[dict[str, Any]]) -> dict[int, tuple]:
    return {r["id"]: tuple(str(r[c]) for c in SOURCE_COLUMNS) for r in rows}


def _feed(lake: Any, mark: int) -> list[dict[str, Any]]:
    return lake_reads.feed_since(lake.spark, lake.table(), mark)


def _replay(held: dict[int, dict[str, Any]], feed: list[dict[str, Any]]) -> dict[int, tuple]:
    return _state(list(lake_reads.replayed(list(held.values()), feed).values()))


class Point(NamedTuple):
    """A reader after the first batch: the rows it holds, its mark, the table's snapshot then."""

    held: dict[int, dict[str, Any]]
    mark: int
    snapshot: int
    events: Events


def _batches(lake: Any) -> Point:
    """A snapshot of five rows (the reader's point after it), then two batches of changes: an update,
    a delete, an insert; the insert deleted again, the deleted key inserted again, an update of a row
    twice in one batch."""
    ev = Events()
    for i in range(1, 6):
        ev.record("r", {"id": i}, customer(i, f"N{i}"))
    lake.apply(ev.take())
    snapshots = lake.spark.sql(f"SELECT snapshot_id FROM {lake.table()}.snapshots ORDER BY committed_at")
    point = Point(
        {r["id"]: r for r in lake.rows()},
        lake_reads.high_water(lake.spark, lake.table()),
        snapshots.collect()[-1][0],
        ev,
    )
    ev.record("u", {"id": 1}, customer(1, "N1b"), customer(1, "N1"))
    ev.record("d", {"id": 2}, before=customer(2, "N2"))
    ev.tombstone({"id": 2})
    ev.record("c", {"id": 6}, customer(6, "N6"))
    lake.apply(ev.take())
    ev.record("d", {"id": 6}, before=customer(6, "N6"))
    ev.record("c", {"id": 2}, customer(2, "Again"))
    ev.record("u", {"id": 3}, customer(3, "N3b"), customer(3, "N3"))
    ev.record("u", {"id": 3}, customer(3, "N3c"), customer(3, "N3b"))
    lake.apply(ev.take())
    return point


def test_changes_since_a_mark_replayed_onto_the_rows_held_then_give_the_table_as_it_is_now(lake):
    held, mark, _, ev = _batches(lake)
    feed = _feed(lake, mark)
    changed = {json.loads(r["row_json"])["id"] for r in feed}
    assert changed == {1, 2, 3, 6}  # the keys the source changed after the mark, no other
    assert {r["first_name"] for r in lake.rows() if r["id"] in (1, 2, 3)} == {"N1b", "Again", "N3c"}
    assert _replay(held, feed) == _state(lake.rows())
    # Read again from the newest apply time in what was read: nothing more.
    assert _feed(lake, lake_reads.high_water(lake.spark, lake.table())) == []

    # A source TRUNCATE, then an insert: one 'truncate' change, and the replay still ends equal.
    t = ev.record("c", {"id": 0}, customer(0))  # made a truncate: Debezium's op t, no key, no images
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)
    ev.record("c", {"id": 9}, customer(9, "After"))
    lake.apply(ev.take())
    feed = _feed(lake, mark)
    assert [r["change"] for r in feed].count("truncate") == 1
    assert lake.ids() == [9]
    assert _replay(held, feed) == _state(lake.rows())


def test_icebergs_changelog_view_of_a_copy_on_write_table_replays_to_the_table_as_it_is_now(make_lake):
    lake = make_lake(write_mode="copy-on-write")
    held, _, start, _ = _batches(lake)
    view = f"cl_{lake.namespace}"
    lake.spark.sql(
        f"CALL glue_catalog.system.create_changelog_view(table => '{lake.table()}', "
        f"options => map('start-snapshot-id', '{start}'), identifier_columns => array('id'), "
        f"changelog_view => '{view}')"
    )
    removes = ("DELETE", "UPDATE_BEFORE")
    order = f"_change_ordinal, NOT (_change_type IN {removes})"
    changes = lake.spark.sql(f"SELECT * FROM {view} ORDER BY {order}").collect()
    state = _state(list(held.values()))
    for c in changes:  # within a snapshot, what it removed before what it added
        if c["_change_type"] in removes:
            state.pop(c["id"], None)
        else:
            state[c["id"]] = tuple(str(c[col]) for col in SOURCE_COLUMNS)
    assert state == _state(lake.rows())
    assert {c["id"] for c in changes} == {1, 2, 3, 6}


def test_row_lineage_of_a_v3_merge_on_read_table_gives_every_row_changed_since_a_readers_mark(make_lake):
    # Iceberg v3 keeps per row the sequence number of the snapshot that last wrote it
    # (`_last_updated_sequence_number`): a reader's mark is the largest it read, and the rows above it
    # are the ones changed since, as they are now (deletes: the markers). This works on the default
    # merge-on-read, where the changelog view is refused.
    lake = make_lake(iceberg_format_version="3")
    held, _, _, _ = _batches(lake)
    t = lake.table()
    mark = _lineage_mark(lake, _first_snapshot(lake))
    rows = lake.spark.sql(f"SELECT id, first_name FROM {t} WHERE _last_updated_sequence_number > {mark}").collect()
    now = {r["id"]: r["first_name"] for r in lake.rows()}
    assert {r["id"]: r["first_name"] for r in rows} == {k: now[k] for k in (1, 2, 3)}
    assert now.keys() - {r["id"] for r in rows} == held.keys() - {1, 2, 3}


def _first_snapshot(lake: Any) -> int:
    return lake.spark.sql(f"SELECT snapshot_id FROM {lake.table()}.snapshots ORDER BY committed_at").first()[0]


def _lineage_mark(lake: Any, snapshot: int) -> int:
    """What a reader at `snapshot` kept as its mark: the largest sequence number among the rows it read.
    (Not an SQL max(): Iceberg 1.11.0 pushes it down to the files' statistics and fails to find the
    column, unless spark.sql.iceberg.aggregate-push-down.enabled is false.)"""
    q = f"SELECT _last_updated_sequence_number AS s FROM {lake.table()} VERSION AS OF {snapshot}"
    return max(r["s"] for r in lake.spark.sql(q).collect())
