"""The lake remembers deletes (cdclake/lake/deletes.py): an insert or update older than a delete, read
after it, does not bring the row back, whatever path brings it (a feed out of order, a dead letter
replayed after a fix, a raw-zone rebuild of part of the changes, a checkpoint reset); readers see
only live rows."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from cdc_events import Events, customer, email_became_int_schema
from cdc_workload import Workload, wrote_nothing
from cdctools import lake_reader as reader
from job_runs import run_job, write_lines

LOG = "inventory_log"


def read_folder(spark, folder):
    """Records of a dead-letter or raw-zone folder, read by the files source's own parser."""
    from cdclake.jobs.sources import parse_lines

    return parse_lines(spark.read.option("recursiveFileLookup", "true").text(str(folder)))


def corpus(seed: int = 5) -> tuple[list[list[dict]], dict[int, str]]:
    """A snapshot of 6 rows, then 5 batches of inserts, updates and deletes over 10 keys (several
    changes of one key per batch), and the source's rows afterwards."""
    w = Workload(seed=seed, keys=10)
    for k in range(1, 7):
        w.ev.record("r", {"id": k}, customer(k, f"snap{k}"))
        w.expected[k] = f"snap{k}"
    batches = [w.ev.take()] + [w.batch(8) for _ in range(5)]
    deleted = {k for k in range(1, 11) if k not in w.expected}
    assert deleted, "the corpus must delete keys for the test to mean anything"
    return batches, dict(w.expected)


def test_the_corpus_fed_one_batch_at_a_time_in_reverse_order_ends_equal_to_the_source(lake):
    batches, expected = corpus()
    for b in reversed(batches):
        lake.apply(b)
    lake.assert_rows(expected)
    # The markers are a table of their own; the local readers (scripts/cdctools/lake_reader.py: DuckDB over the
    # Iceberg metadata, as reconcile and the demo read) list the data table only, with live rows only.
    names = {r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN glue_catalog.{lake.namespace}").collect()}
    assert names == {"inventory_customers", "inventory_customers__cdc_deletes"}
    warehouse = Path(lake.settings.warehouse)
    assert reader.list_tables(warehouse, lake.namespace) == ["inventory_customers"]
    location = reader.table_location(warehouse, lake.namespace, "inventory_customers")
    assert {r["id"]: r["first_name"] for r in reader.rows(reader.connect(), location)} == expected


def test_a_keyless_table_fed_in_reverse_order_ends_equal_to_the_source(lake):
    from test_keyless_tables import keyless, rows

    ev = Events(topic="mdb.inventory.log", table="log")
    a, b = customer(1, "Ann"), customer(2, "Bob")
    keyless(ev, "r", a)
    keyless(ev, "r", a)
    keyless(ev, "r", b)
    first = ev.take()
    keyless(ev, "u", customer(1, "Anne"), before=a)
    keyless(ev, "d", before=b)
    second = ev.take()
    keyless(ev, "d", before=a)
    third = ev.take()
    for batch in (third, second, first):
        lake.apply(batch)
    assert rows(lake) == Counter({(1, "Anne"): 1})


def test_a_dead_letter_replayed_after_its_row_was_deleted_does_not_bring_it_back(lake, spark):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    # The source turned `email` into an int: incompatible, so the insert of id 2 is dead-lettered.
    schema = email_became_int_schema()
    ev.record("c", {"id": 2}, customer(2) | {"email": 7}, value_schema=schema)
    ev.record("c", {"id": 3}, customer(3) | {"email": 8}, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 2
    # Row 2 is deleted at the source (its delete applies: nothing to remove, but it is remembered).
    ev.record("d", {"id": 2}, before=customer(2))
    ev.tombstone({"id": 2})
    lake.apply(ev.take())

    spark.sql(f"ALTER TABLE {lake.table()} RENAME COLUMN email TO email_text")  # the operator's fix
    lake.processor.tables.forget()  # the replay runs in a job started after the fix
    lake.apply(_rows(read_folder(spark, report.dead_letter_folder)))
    lake.assert_rows({1: "Sally", 3: "Sally"})


def _rows(df) -> list[dict]:
    return [r.asDict() for r in df.collect()]


@pytest.fixture(scope="module")
def current(spark, warehouse, tmp_path_factory, lake_class):
    """A lake fed the corpus in order, with its raw zone, and the corpus as the files a file
    stream reads (one per batch): the tables are current."""
    tmp = tmp_path_factory.mktemp("current")
    lake = lake_class(spark, warehouse, tmp, raw_zone_path=str(tmp / "raw"))
    batches, expected = corpus(seed=9)
    (tmp / "in").mkdir()
    for n, b in enumerate(batches):
        lake.apply(b)
        write_lines(tmp / "in" / f"{n:04d}.json", b, embed=True)
        os.utime(tmp / "in" / f"{n:04d}.json", (1_700_000_000 + n, 1_700_000_000 + n))
    lake.assert_rows(expected)
    return lake, tmp, batches, expected


def test_a_raw_zone_rebuild_of_the_first_half_of_the_changes_into_current_tables_changes_nothing(current, spark):
    lake, tmp, batches, expected = current
    folders = sorted(p for p in (tmp / "raw").rglob("*") if p.is_dir() and any(p.glob("*.json")))
    assert len(folders) >= len(batches)
    first_half = tmp / "first_half"
    for i, folder in enumerate(folders[: len(batches) // 2]):
        (first_half / str(i)).mkdir(parents=True, exist_ok=True)
        for f in folder.glob("*.json"):
            (first_half / str(i) / f.name).write_bytes(f.read_bytes())
    lake.apply(_rows(read_folder(spark, first_half)))
    lake.assert_rows(expected)


def test_a_checkpoint_reset_to_the_earliest_offset_while_the_tables_are_current_changes_nothing(
    current, spark, warehouse
):
    lake, tmp, _batches, expected = current
    before = len(lake.commits())
    # The job started again on a new checkpoint: its file stream reads every change from the start.
    again = run_job(tmp / "reset", warehouse, lake.namespace, "--files_path", str(tmp / "in"),
                    "--max_files_per_trigger", "2")  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    spark.catalog.refreshTable(lake.table())
    lake.assert_rows(expected)
    # Every change read again is older than the table: no commit of the re-read wrote anything (not
    # even a deleted row brought back in the middle of it for a later batch to delete again).
    replayed = lake.commits()[before:]
    assert replayed and all(wrote_nothing(c) for c in replayed), replayed


def test_maintenance_forgets_deletes_older_than_the_retention_and_only_those(lake, spark):
    """The bound: markers of deletes applied more than --maintenance_delete_retention_days ago go
    (and an insert older than such a delete, replayed after that, comes back, as documented)."""
    import time

    from cdclake.lake.formats.iceberg import Iceberg
    from cdclake.lake.maintenance import MaintenancePolicy, maintain_table

    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))
    old_insert = ev.take()
    lake.apply(old_insert)
    ev.record("d", {"id": 1}, before=customer(1, "Ann"))
    lake.apply(ev.take())
    markers = lake.table() + "__cdc_deletes"
    policy = MaintenancePolicy(delete_retention_days=30)
    day = 86400
    maintain_table(spark, markers, policy, Iceberg(), now_s=time.time() + 29 * day)
    assert spark.table(markers).count() == 1
    lake.apply(old_insert)
    lake.assert_rows({})
    maintain_table(spark, markers, policy, Iceberg(), now_s=time.time() + 31 * day)
    assert spark.table(markers).count() == 0
    lake.apply(old_insert)
    lake.assert_rows({1: "Ann"})


def test_a_delete_made_before_the_primary_key_changed_still_beats_an_older_insert_read_after_it(lake):
    from test_source_ddl import keyed_by_id_and_email

    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann", email="a1@x"), pos=1000)
    ev.record("c", {"id": 2}, customer(2, "Bob", email="b@x"), pos=1100)
    first = ev.take()
    lake.apply(first)
    ev.record("d", {"id": 1}, before=customer(1, "Ann", email="a1@x"), pos=1200)
    lake.apply(ev.take())
    ev.schema_change("ALTER TABLE customers DROP PRIMARY KEY, ADD PRIMARY KEY (id, email)", pos=1300)
    keyed_by_id_and_email(ev, "c", customer(3, "Cy", email="c@x"), pos=1400)
    lake.apply(ev.take())
    lake.apply(first)  # read again after the key changed: the delete of id 1 is remembered under the new key
    lake.assert_rows([{"id": 2, "email": "b@x", "first_name": "Bob"}, {"id": 3, "email": "c@x", "first_name": "Cy"}],
                     key=("id", "email"))  # fmt: skip


def test_an_insert_older_than_a_truncate_read_after_it_does_not_come_back(lake):
    import json

    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"), pos=100)
    ev.record("c", {"id": 2}, customer(2, "Bob"), pos=200)
    before_truncate = ev.take()
    lake.apply(before_truncate)
    t = ev.record("c", {"id": 0}, customer(0), pos=300)  # the connector's truncate event: op t
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)
    ev.record("c", {"id": 3}, customer(3, "Cy"), pos=400)
    lake.apply(ev.take())
    lake.apply(before_truncate)  # read again (a replay) after the truncate was applied
    lake.assert_rows({3: "Cy"})
