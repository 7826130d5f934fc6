"""Operations and ordering: what the lake table holds after batches of Debezium events."""

from __future__ import annotations

from decimal import Decimal

from cdc_events import Events, customer
from cdc_workload import wrote_nothing


def test_snapshot_insert_update_delete_each_apply_to_the_table(lake):
    ev = Events()
    ev.record("r", {"id": 1}, customer(1, "Sally"))
    ev.record("r", {"id": 2}, customer(2, "George"))
    ev.record("r", {"id": 3}, customer(3, "Edward"))
    report = lake.apply(ev.take())
    assert report.changes == 3
    assert lake.ids() == [1, 2, 3]

    ev.record("c", {"id": 4}, customer(4, "Anne", balance="99.99"))
    ev.record("u", {"id": 1}, customer(1, "Sally", email="sally.t@example.com", balance="11.25"), customer(1))
    ev.record("d", {"id": 2}, before=customer(2, "George"))
    ev.tombstone({"id": 2})
    lake.apply(ev.take())

    lake.assert_rows(
        [
            {"id": 1, "email": "sally.t@example.com", "balance": Decimal("11.25"), "_cdc_op": "u"},
            {"id": 3, "email": "edward3@example.com", "balance": Decimal("10.50"), "_cdc_op": "r"},
            {"id": 4, "email": "anne4@example.com", "balance": Decimal("99.99"), "_cdc_op": "c"},
        ]
    )


def test_replaying_an_old_batch_changes_nothing(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "v1"))
    ev.record("c", {"id": 2}, customer(2, "v1"))
    old = ev.take()
    lake.apply(old)
    ev.record("u", {"id": 1}, customer(1, "v2"), customer(1, "v1"))
    ev.record("u", {"id": 2}, customer(2, "v2"), customer(2, "v1"))
    lake.apply(ev.take())
    before, commits = lake.rows(), lake.commits()
    lake.apply(old)  # e.g. a checkpoint replay after a crash, or a re-read of the raw zone
    lake.assert_rows({1: "v2", 2: "v2"})
    # Every column, `_cdc_ingested_at` included: no row was rewritten, not even with equal values.
    assert lake.rows() == before
    # The MERGE still commits, an empty snapshot: it wrote no row and no delete.
    after = lake.commits()
    assert after[: len(commits)] == commits and len(after) == len(commits) + 1
    assert wrote_nothing(after[-1]), after[-1]


def test_replaying_the_same_batch_twice_is_idempotent(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "a"))
    ev.record("u", {"id": 1}, customer(1, "b"))
    ev.record("c", {"id": 2}, customer(2, "x"))
    ev.record("d", {"id": 2}, before=customer(2, "x"))
    batch = ev.take()
    lake.apply(batch, batch_id=5)
    lake.assert_rows({1: "b"})
    once, commits = lake.rows(), lake.commits()
    assert not wrote_nothing(commits[-1])
    lake.apply(batch, batch_id=5)  # the same batch re-run after a crash
    lake.assert_rows({1: "b"})
    # Applied once, not twice: the re-run rewrote no row (`_cdc_ingested_at` would move), and its
    # commit (Iceberg commits a MERGE that matched nothing too) wrote no row and no delete.
    assert lake.rows() == once
    after = lake.commits()
    assert after[: len(commits)] == commits and len(after) == len(commits) + 1
    assert wrote_nothing(after[-1]), after[-1]


def test_one_merge_commit_per_table_per_batch(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    n = lake.snapshots()
    ev.record("c", {"id": 2}, customer(2))
    ev.record("u", {"id": 1}, customer(1, "x"))
    ev.record("d", {"id": 2}, before=customer(2))
    ev.record("c", {"id": 3}, customer(3))
    lake.apply(ev.take())
    assert lake.snapshots() == n + 1
    assert lake.ids() == [1, 3]


def test_a_small_batch_runs_in_at_most_five_spark_jobs_and_leaves_the_session_settings_as_they_were(lake):
    """A few changes of a known table: the group aggregate, the MERGE, the delete markers' append and
    the count, one Spark job each (adaptive execution would run each shuffle as a job of its own)."""
    ev = Events()
    for i in range(1, 5):
        ev.record("c", {"id": i}, customer(i))
    lake.apply(ev.take())
    ev.record("d", {"id": 1}, before=customer(1))
    lake.apply(ev.take())  # creates the table's delete markers
    conf, sc = lake.spark.conf, lake.spark.sparkContext
    settings = {k: conf.get(k) for k in ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")}
    ev.record("u", {"id": 2}, customer(2, "x"), customer(2))
    ev.record("d", {"id": 3}, before=customer(3))
    ev.record("c", {"id": 5}, customer(5))
    sc.setJobGroup("small-batch", "small-batch")
    try:
        lake.apply(ev.take())
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup("small-batch")) <= 5
    assert {k: conf.get(k) for k in settings} == settings
    assert lake.ids() == [2, 4, 5]


def test_composite_primary_key(lake):
    ev = Events(topic="mdb.inventory.order_lines", table="order_lines")
    from cdc_events import ORDER_LINES_KEY_SCHEMA, order_lines_schema

    schema = order_lines_schema()

    def rec(op, o, n, sku):
        row = {"order_id": o, "line_no": n, "sku": sku}
        ev.record(op, {"order_id": o, "line_no": n}, row, value_schema=schema, key_schema=ORDER_LINES_KEY_SCHEMA)

    rec("c", 1, 1, "A")
    rec("c", 1, 2, "B")
    rec("c", 2, 1, "C")
    lake.apply(ev.take())
    rec("u", 1, 2, "B2")
    rec("d", 2, 1, "C")
    lake.apply(ev.take())
    rows = lake.rows("inventory_order_lines", order="order_id, line_no")
    assert [(r["order_id"], r["line_no"], r["sku"]) for r in rows] == [(1, 1, "A"), (1, 2, "B2")]
    assert lake.identifier_fields("inventory_order_lines") == {"order_id", "line_no"}
    props = {
        r["key"]: r["value"]
        for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table('inventory_order_lines')}").collect()
    }
    assert props["cdc.primary-key"] == "order_id,line_no"


def test_schema_change_events_are_counted_and_not_applied(lake):
    from cdc_events import load

    ev = Events()
    msg = load("mariadb/schema_change_alter.json")
    ev.raw(__import__("json").dumps(msg["key"]), __import__("json").dumps(msg["value"]))
    ev.record("c", {"id": 1}, customer(1))
    report = lake.apply(ev.take())
    assert report.schema_events == 1 and report.dead == 0
    assert lake.ids() == [1]


def test_a_batch_with_several_tables_applies_each(lake):
    customers = Events()
    orders = Events(topic="mdb.inventory.orders", table="orders")
    customers.record("c", {"id": 1}, customer(1))
    orders.record("c", {"id": 10}, customer(10, "order-ish"))
    customers.record("c", {"id": 2}, customer(2))
    report = lake.apply(customers.take() + orders.take())
    assert sorted(t.table.split(".")[-1] for t in report.tables) == ["inventory_customers", "inventory_orders"]
    assert lake.ids() == [1, 2]
    assert lake.ids("inventory_orders") == [10]


def test_copy_on_write_tables_apply_the_same_changes(make_lake):
    lake = make_lake(write_mode="copy-on-write")
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    ev.record("c", {"id": 2}, customer(2))
    lake.apply(ev.take())
    ev.record("u", {"id": 1}, customer(1, "changed"))
    ev.record("d", {"id": 2}, before=customer(2))
    lake.apply(ev.take())
    assert [(r["id"], r["first_name"]) for r in lake.rows()] == [(1, "changed")]
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert props["write.merge.mode"] == "copy-on-write"


def test_new_tables_declare_their_key_as_identifier_fields_and_take_merge_on_read_merges(lake):
    ev = Events()
    ev.record("r", {"id": 1}, customer(1, "Sally"))
    ev.record("r", {"id": 2}, customer(2, "George"))
    lake.apply(ev.take())
    props = dict(lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect())
    assert props["cdc.primary-key"] == "id" and props["write.merge.mode"] == "merge-on-read"
    # Other engines and writers (Flink, the Iceberg Kafka Connect sink) read the key from here.
    assert lake.identifier_fields() == {"id"}
    ev.record("u", {"id": 1}, customer(1, "Sally", balance="5.00"), customer(1, "Sally"))
    ev.record("d", {"id": 2}, before=customer(2, "George"))
    lake.apply(ev.take())
    assert lake.ids() == [1] and str(lake.by_id()[1]["balance"]) == "5.00"


def test_a_table_without_identifier_fields_gets_them_when_a_job_run_loads_it(lake):
    ev = Events()
    ev.record("r", {"id": 1}, customer(1, "Sally"))
    lake.apply(ev.take())
    # A table of an earlier release (which did not declare them), or one whose DDL pass stopped
    # between dropping and declaring them again.
    lake.spark.sql(f"ALTER TABLE {lake.table()} DROP IDENTIFIER FIELDS id")
    lake.processor = type(lake.processor)(lake.spark, lake.settings)  # a new job run
    ev.record("u", {"id": 1}, customer(1, "Sal"), customer(1, "Sally"))
    lake.apply(ev.take())
    assert lake.identifier_fields() == {"id"}
    assert lake.by_id()[1]["first_name"] == "Sal"
