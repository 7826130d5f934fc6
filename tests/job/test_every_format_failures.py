"""What the job guarantees when something fails, written once and run on every table format of the
registry (`format_lake`: tests/job/conftest.py and format_lakes.py): a MERGE failing in its Spark
job, a crash between a column's ADD and its backfill, malformed records and their rerun, a delete
without its row image, a batch of only a truncate, and maintenance keeping every row."""

from __future__ import annotations

import json

import pytest
from cdc_events import Events, customer, load
from cdc_workload import Workload
from test_every_format import truncate


def test_a_merge_failing_for_another_reason_than_a_conflict_fails_the_batch_at_once_and_its_rerun_leaves_every_table_as_the_source(
    make_format_lake,
):
    lake = make_format_lake(table_concurrency="3")
    names = ["t0", "t1", "t2"]
    loads = {
        n: Workload(seed=i, keys=8, events=Events(topic=f"mdb.inventory.{n}", table=n)) for i, n in enumerate(names)
    }
    lake.apply([r for n in names for r in loads[n].batch(4)])
    before = {n: lake.rows(f"inventory_{n}") for n in names}
    lake.merges()
    batch = [r for n in names for r in loads[n].batch(6)]
    # t1's MERGE fails inside its Spark job, after it started (as a lost executor or a storage error would).
    lake.fail_merges(1, tables=["inventory_t1"])
    with pytest.raises(Exception, match=r"injected: the MERGE into \S*inventory_t1 failed"):
        lake.apply(batch, batch_id=9)
    failed = lake.merges()
    # Not a conflict: no second attempt of t1, no conflict line.
    assert [(t, fail) for t, _, fail in failed if t.endswith("inventory_t1")] == [(lake.table("inventory_t1"), True)]
    assert not [m for m in lake.logs() if "commit conflict" in m], lake.logs()
    # Every column as before, `_cdc_ingested_at` included: nothing of t1's batch was committed.
    assert lake.rows("inventory_t1") == before["t1"]

    lake.apply(batch, batch_id=9)  # what the restarted job does: the same batch again
    rerun = lake.merges()
    assert len({thread for _, thread, _ in failed + rerun}) > 1  # tables written side by side, from the pool
    for n in names:
        assert lake.first_names(f"inventory_{n}") == loads[n].expected, n


def test_a_column_default_left_unfilled_by_a_crash_after_its_add_column_is_filled_by_the_next_run(format_lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    format_lake.apply(ev.take())
    # The table as a crash between the job's ADD COLUMN and its backfill UPDATE leaves it: the pending
    # default recorded first, then the column added after the data columns (lake/evolution.alter_sql).
    format_lake.sql(
        "ALTER TABLE {table} SET TBLPROPERTIES ('cdc.backfill.tier'='CAST(\\'bronze\\' AS string)')",
        "ALTER TABLE {table} ADD COLUMN tier string AFTER created_at",
    )
    format_lake.restart()  # a new job run: nothing cached
    ev.record("c", {"id": 2}, customer(2))
    format_lake.apply(ev.take())
    assert {i: r.get("tier") for i, r in format_lake.by_id().items()} == {1: "bronze", 2: None}
    assert "cdc.backfill.tier" not in format_lake.properties()


def test_malformed_records_go_to_the_dead_letters_with_reason_and_position_once_however_often_the_batch_reruns(
    format_lake,
):
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
    batch = ev.take()

    report = format_lake.apply(batch, batch_id=3)

    assert format_lake.ids() == [1]
    assert report.records == 6 and report.dead == 5
    reasons = {(d["offset"]): d["reason"] for d in format_lake.dead_letters()}
    assert set(reasons) == {1, 2, 3, 4, 5} and good["offset"] not in reasons
    assert reasons[1] == "value is not a JSON object"
    assert "no Debezium `op`" in reasons[2]
    assert "no JSON key" in reasons[3]
    assert reasons[4] == (
        "could not decode column(s): created_at (io.debezium.time.ZonedTimestamp value does not fit timestamp)"
    )
    assert reasons[5] == "row image does not match its declared schema"
    # The batch's warning line names every reason with its count, the tables' ones by table.
    [line] = [m for m in format_lake.logs() if "written to dead letters" in m]
    assert line.endswith(
        ": payload has no Debezium `op` field (1); value is not a JSON object (1); "
        "inventory_customers: could not decode column(s): created_at "
        "(io.debezium.time.ZonedTimestamp value does not fit timestamp) (1); "
        "inventory_customers: record has no JSON key (does the table have a primary key?) (1); "
        "inventory_customers: row image does not match its declared schema (1)"
    ), line
    format_lake.apply(batch, batch_id=3)  # the batch again, after a crash before its offsets' commit
    assert sorted(d["offset"] for d in format_lake.dead_letters()) == [1, 2, 3, 4, 5]


def test_a_delete_without_its_before_image_deletes_by_the_kafka_key_and_a_batch_of_only_a_truncate_empties_the_table(
    format_lake,
):
    ev = Events()
    for i in (1, 2, 3):
        ev.record("c", {"id": i}, customer(i), pos=100 * i)
    format_lake.apply(ev.take())
    delete = ev.record("d", {"id": 2}, pos=400)  # before: null, as a connector without the old row sends it
    assert json.loads(delete["value"])["payload"]["before"] is None
    report = format_lake.apply(ev.take())
    assert (report.dead, report.tables[0].deletes, format_lake.ids()) == (0, 1, [1, 3])

    truncate(ev, pos=1000)
    report = format_lake.apply(ev.take())
    assert (report.truncates, report.changes, report.dead) == (1, 0, 0)
    assert [(t.table, t.truncated) for t in report.tables] == [(format_lake.table(), True)]
    assert format_lake.rows() == []
    ev.record("c", {"id": 4}, customer(4, "after"), pos=2000)
    format_lake.apply(ev.take())
    assert format_lake.first_names() == {4: "after"}


# Every action of every format due after four micro-batches.
SMALL = {
    "max_small_files": 3,
    "max_delete_files": 1,
    "max_snapshots": 3,
    "retain_last_snapshots": 2,
    "snapshot_retention_minutes": 0,
    "min_input_files": 2,
    "delete_file_threshold": 1,
}


def test_maintenance_of_a_table_with_every_action_due_keeps_every_row_and_the_stream_goes_on_after_it(format_lake):
    w = Workload(seed=3, keys=30)
    for _ in range(4):
        format_lake.apply(w.batch(5))
    report = format_lake.maintain(SMALL, force=True)
    assert report.actions and not report.failed, report.line
    assert report.after is not None and report.after["data_files"] <= report.before["data_files"], report.line
    assert format_lake.first_names() == w.expected
    format_lake.apply(w.batch(5))
    assert format_lake.first_names() == w.expected
