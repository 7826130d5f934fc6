"""MySQL DDL from Debezium's schema-change events: a column rename is an Iceberg rename, in order
with the table's data changes whichever batch brings the statement; DROP TABLE and DROP COLUMN
follow --dropped_table_policy and --dropped_column_policy."""

from __future__ import annotations

import copy
import json
from decimal import Decimal

import pytest
from cdc_events import (
    Events,
    customer,
    customers_table,
    decimal_b64,
    key_schema,
    load,
    row_fields,
    value_schema_of,
    with_row_fields,
    with_set_and_enum,
)

BASE = value_schema_of("mariadb/c_insert.json")


def renamed_schema(old: str = "email", new: str = "email_address") -> dict:
    fields = copy.deepcopy(row_fields(BASE))
    for f in fields:
        if f["field"] == old:
            f["field"] = new
    return with_row_fields(BASE, fields)


def without(column: str) -> dict:
    return with_row_fields(BASE, [f for f in row_fields(BASE) if f["field"] != column])


def renamed_row(id_: int, first: str, email: str) -> dict:
    row = customer(id_, first)
    del row["email"]
    row["email_address"] = email
    return row


RENAME = "ALTER TABLE customers RENAME COLUMN email TO email_address"


def columns(lake, name: str = "inventory_customers") -> list[str]:
    return [f.name for f in lake.spark.table(lake.table(name)).schema if not f.name.startswith("_cdc_")]


def seed(lake, ev: Events) -> None:
    for i in (1, 2, 3):
        ev.record("c", {"id": i}, customer(i, email=f"old{i}@example.com"))
    lake.apply(ev.take())


def test_a_rename_with_data_before_and_after_it_in_one_batch_renames_the_lake_column_in_place(lake):
    ev = Events()
    seed(lake, ev)
    files_before = {r["file_path"] for r in lake.spark.sql(f"SELECT file_path FROM {lake.table()}.files").collect()}
    ev.record("u", {"id": 1}, customer(1, "Before", email="before1@example.com"))
    ev.schema_change(RENAME)
    ev.record("u", {"id": 2}, renamed_row(2, "After", "after2@example.com"), value_schema=renamed_schema())
    report = lake.apply(ev.take())
    assert report.dead == 0 and "email->email_address (renamed)" in report.tables[0].schema
    assert columns(lake) == ["id", "first_name", "last_name", "email_address", "balance", "created_at"]
    lake.assert_rows({1: "before1@example.com", 2: "after2@example.com", 3: "old3@example.com"}, column="email_address")
    # Metadata only: row 3's data file is still the one written before the rename.
    files_after = {r["file_path"] for r in lake.spark.sql(f"SELECT file_path FROM {lake.table()}.files").collect()}
    assert files_before & files_after


def test_a_rename_is_applied_and_reported_when_every_event_beside_it_is_dead_lettered(lake):
    ev = Events()
    seed(lake, ev)
    ev.schema_change(RENAME)
    bad = renamed_schema()  # and `email_address` turned into an int: no safe conversion
    for f in row_fields(bad):
        if f["field"] == "email_address":
            f["type"] = "int32"
    ev.record("u", {"id": 2}, renamed_row(2, "After", "x") | {"email_address": 42}, value_schema=bad)
    report = lake.apply(ev.take())
    assert report.dead == 1
    assert "email->email_address (renamed)" in report.tables[0].schema
    assert columns(lake) == ["id", "first_name", "last_name", "email_address", "balance", "created_at"]
    lake.assert_rows({1: "old1@example.com", 2: "old2@example.com", 3: "old3@example.com"}, column="email_address")


def test_a_rename_read_before_the_data_applies_to_events_written_before_it_that_are_read_later(lake):
    ev = Events()
    seed(lake, ev)
    old_pos = ev.next_pos
    ev.next_pos += 1000
    ev.schema_change(RENAME)  # read in its own batch ...
    lake.apply(ev.take())
    assert "email_address" in columns(lake) and "email" not in columns(lake)
    # ... then an update written before the rename (older position, another topic's lag) and one after.
    ev.record("u", {"id": 1}, customer(1, "Late", email="late1@example.com"), pos=old_pos)
    ev.record("u", {"id": 2}, renamed_row(2, "After", "after2@example.com"), value_schema=renamed_schema())
    report = lake.apply(ev.take())
    assert report.dead == 0 and report.tables[0].schema == ""
    assert "email" not in columns(lake)
    lake.assert_rows({1: "late1@example.com", 2: "after2@example.com", 3: "old3@example.com"}, column="email_address")


def test_data_with_the_new_name_read_before_the_rename_statement_ends_equal_to_the_source(lake):
    ev = Events()
    seed(lake, ev)
    rename_pos = ev.next_pos
    ev.next_pos += 100
    ev.record("u", {"id": 2}, renamed_row(2, "After", "after2@example.com"), value_schema=renamed_schema())
    report = lake.apply(ev.take())  # the lake cannot know yet: the new name arrives as a new column
    assert "+email_address string" in report.tables[0].schema
    ev.schema_change(RENAME, pos=rename_pos)
    report = lake.apply(ev.take())
    assert "email->email_address (renamed after its new name had arrived)" in report.tables[0].schema
    assert columns(lake) == ["id", "first_name", "last_name", "balance", "created_at", "email_address"]
    lake.assert_rows({1: "old1@example.com", 2: "after2@example.com", 3: "old3@example.com"}, column="email_address")


def test_a_rename_applied_twice_by_a_replayed_batch_is_a_no_op(lake):
    ev = Events()
    seed(lake, ev)
    late_pos = ev.next_pos
    ev.next_pos += 100
    ev.schema_change("ALTER TABLE `customers` CHANGE COLUMN `email` `email_address` VARCHAR(255) NOT NULL")
    ev.record("u", {"id": 2}, renamed_row(2, "After", "after2@example.com"), value_schema=renamed_schema())
    batch = ev.take()
    lake.apply(batch, batch_id=7)
    snapshots = lake.snapshots()
    report = lake.apply(batch, batch_id=7)  # the job crashed before Spark committed batch 7
    assert report.dead == 0 and report.tables[0].schema == ""
    assert columns(lake) == ["id", "first_name", "last_name", "email_address", "balance", "created_at"]
    lake.assert_rows({1: "old1@example.com", 2: "after2@example.com", 3: "old3@example.com"}, column="email_address")
    assert lake.snapshots() == snapshots + 1  # the replayed MERGE's empty commit, nothing else
    # A new processor (a restarted job) reads the recorded rename from the table.
    fresh = type(lake)(lake.spark, lake.settings.warehouse, lake.dead_dir.parent, namespace=lake.namespace)
    ev.record("u", {"id": 3}, customer(3, "Late", email="late3@example.com"), pos=late_pos)
    assert fresh.apply(ev.take()).dead == 0
    assert "email" not in columns(lake)
    assert lake.by_id()[3]["email_address"] == "late3@example.com"


def test_a_dropped_table_is_kept_and_marked_and_its_recreation_starts_from_empty(lake):
    ev = Events()
    seed(lake, ev)
    ev.schema_change("DROP TABLE `customers`", change="DROP")
    report = lake.apply(ev.take())
    assert report.tables[0].source_dropped == "kept, marked"
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert props["cdc.source-dropped"].endswith("Z") and int(props["cdc.source-dropped-position"]) > 0
    assert lake.ids() == [1, 2, 3]
    # CREATE TABLE again, one insert: the lake table is the new table, the mark is gone.
    ev.schema_change("CREATE TABLE customers (id INT PRIMARY KEY)", change="CREATE")
    ev.record("c", {"id": 9}, customer(9))
    lake.apply(ev.take())
    lake.assert_rows({9: "Sally"})
    props = {r["key"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert "cdc.source-dropped" not in props


def test_a_recreated_table_read_before_its_drop_statement_keeps_only_the_new_rows(lake):
    ev = Events()
    seed(lake, ev)
    drop_pos = ev.next_pos
    ev.next_pos += 100
    ev.record("c", {"id": 9}, customer(9))  # the new table's insert, read first
    ev.record("c", {"id": 2}, customer(2, "Reborn"))
    lake.apply(ev.take())
    ev.schema_change("DROP TABLE customers", change="DROP", pos=drop_pos)
    report = lake.apply(ev.take())
    assert report.tables[0].truncated and not report.tables[0].source_dropped
    lake.assert_rows({2: "Reborn", 9: "Sally"})


def test_dropped_table_policy_drop_drops_the_lake_table_and_ignores_older_events_read_late(make_lake):
    lake = make_lake(dropped_table_policy="drop")
    ev = Events()
    seed(lake, ev)
    old_pos = ev.next_pos
    ev.next_pos += 100
    ev.schema_change("DROP TABLE customers", change="DROP")
    assert lake.apply(ev.take()).tables[0].source_dropped == "dropped"
    assert not lake.spark.catalog.tableExists(lake.table())
    ev.record("u", {"id": 1}, customer(1, "Late"), pos=old_pos)
    lake.apply(ev.take())
    assert not lake.spark.catalog.tableExists(lake.table())


def test_dropped_column_policy_decides_whether_a_dropped_column_leaves_the_lake(make_lake):
    for policy, expected in (("keep", True), ("drop", False)):
        lake = make_lake(dropped_column_policy=policy)
        ev = Events()
        seed(lake, ev)
        old_pos = ev.next_pos
        ev.next_pos += 100
        ev.schema_change("ALTER TABLE customers DROP COLUMN last_name")
        ev.record("u", {"id": 1}, {k: v for k, v in customer(1, "New").items() if k != "last_name"},
                  value_schema=without("last_name"))  # fmt: skip
        lake.apply(ev.take())
        ev.record("u", {"id": 2}, customer(2, "Late"), pos=old_pos)  # written before the drop, read after it
        assert lake.apply(ev.take()).dead == 0
        assert ("last_name" in columns(lake)) is expected, policy
        lake.assert_rows({1: "New", 2: "Late", 3: "Sally"})


def test_a_dropped_table_created_again_without_rows_yet_is_empty_in_the_lake(lake):
    ev = Events()
    seed(lake, ev)
    ev.schema_change("DROP TABLE customers", change="DROP")
    lake.apply(ev.take())
    ev.schema_change("CREATE TABLE customers (id INT PRIMARY KEY)", change="CREATE")
    report = lake.apply(ev.take())
    assert report.tables[0].truncated
    assert lake.ids() == []
    props = {r["key"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert "cdc.source-dropped" not in props


def _composite_key() -> dict:
    schema = copy.deepcopy(load("mariadb/c_insert.json")["key"]["schema"])
    schema["fields"].append({"type": "string", "optional": False, "field": "first_name"})
    return schema


@pytest.mark.parametrize("same_batch", [True, False], ids=["drop-and-create-in-one-batch", "create-in-a-later-batch"])
def test_a_table_created_again_with_another_primary_key_replaces_the_lake_table(lake, same_batch):
    ev = Events()
    seed(lake, ev)
    ev.schema_change("DROP TABLE `customers`", change="DROP")
    if not same_batch:
        lake.apply(ev.take())
    ev.schema_change(
        "CREATE TABLE customers (id INT, first_name VARCHAR(10), PRIMARY KEY (id, first_name))", change="CREATE"
    )
    key = _composite_key()
    ev.record("c", {"id": 9, "first_name": "Nine"}, customer(9, "Nine"), key_schema=key)
    ev.record("c", {"id": 9, "first_name": "Nina"}, customer(9, "Nina"), key_schema=key)
    report = lake.apply(ev.take())
    assert report.dead == 0
    lake.assert_rows([{"id": 9, "first_name": "Nina"}, {"id": 9, "first_name": "Nine"}], key=("id", "first_name"))
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert props["cdc.primary-key"] == "id,first_name"
    assert not {"cdc.source-dropped", "cdc.source-dropped-position"} & set(props)
    # The new table takes updates and deletes by its key; a restarted job reads it as it is now.
    fresh = type(lake)(lake.spark, lake.settings.warehouse, lake.dead_dir.parent, namespace=lake.namespace)
    ev.record("d", {"id": 9, "first_name": "Nine"}, customer(9, "Nine"), key_schema=key)
    assert fresh.apply(ev.take()).dead == 0
    lake.assert_rows([{"id": 9, "first_name": "Nina"}], key=("id", "first_name"))


def test_a_table_renamed_at_the_source_moves_to_its_new_name_with_its_rows(lake):
    ev = Events()
    seed(lake, ev)
    clients = Events(topic="mdb.inventory.clients", table="clients")
    ev.record("u", {"id": 1}, customer(1, "Before"), pos=10_000)
    ev.schema_change("RENAME TABLE customers TO clients", pos=10_100)
    clients.record("c", {"id": 4}, customer(4, "After"), pos=10_200)
    clients.record("u", {"id": 2}, customer(2, "Moved"), pos=10_300)
    report = lake.apply(ev.take() + clients.take())
    assert report.dead == 0
    assert "renamed from inventory_customers" in {t.schema for t in report.tables}
    lake.assert_rows({1: "Before", 2: "Moved", 3: "Sally", 4: "After"}, name="inventory_clients")
    assert not lake.spark.catalog.tableExists(lake.table())
    props = {
        r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table('inventory_clients')}").collect()
    }
    assert props["cdc.primary-key"] == "id" and props["write.delete.mode"] == "merge-on-read"
    assert lake.identifier_fields("inventory_clients") == {"id"}  # CREATE TABLE AS SELECT had none


def test_an_online_schema_change_copy_then_swap_leaves_the_lake_equal_to_the_source(lake):
    # What pt-online-schema-change and gh-ost do: copy into a new table (triggers or the binlog keep
    # it current), swap the two names in one RENAME TABLE, drop the old table.
    ev = Events()
    seed(lake, ev)
    shadow = Events(topic="mdb.inventory._customers_new", table="_customers_new")
    for i in (1, 2, 3):
        shadow.record("c", {"id": i}, customer(i, f"Copy{i}"), pos=10_000 + i)
    ev.record("u", {"id": 2}, customer(2, "During"), pos=10_100)
    shadow.record("u", {"id": 2}, customer(2, "During"), pos=10_101)
    lake.apply(ev.take() + shadow.take())
    ev.schema_change("RENAME TABLE `customers` TO `_customers_old`, `_customers_new` TO `customers`", pos=10_200)
    ev.record("u", {"id": 3}, customer(3, "After swap"), pos=10_300)
    old = Events(table="_customers_old")
    old.schema_change("DROP TABLE `_customers_old`", change="DROP", pos=10_400, offset=ev.next_ddl_offset)
    report = lake.apply(ev.take() + old.take())
    assert report.dead == 0
    lake.assert_rows({1: "Copy1", 2: "During", 3: "After swap"})
    assert not lake.spark.catalog.tableExists(lake.table("inventory__customers_new"))
    props = {r["key"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table('inventory__customers_old')}").collect()}
    assert "cdc.source-dropped" in props  # --dropped_table_policy keep: the old table stays, marked


@pytest.mark.parametrize("restarted", [False, True], ids=["same run", "job started again"])
def test_a_copy_then_swap_whose_statement_is_read_before_the_copys_events_ends_equal_to_the_source(lake, restarted):
    # A job catching up (the batch size capped by --max_offsets_per_trigger) reads the small
    # schema-change topic ahead of the copy's many events: the swap is applied before them.
    ev = Events()
    seed(lake, ev)
    shadow = Events(topic="mdb.inventory._customers_new", table="_customers_new")
    shadow.record("c", {"id": 1}, customer(1, "Copy1"), pos=10_001)
    lake.apply(shadow.take())
    ev.record("u", {"id": 2}, customer(2, "During"), pos=10_100)  # the source table, before the swap
    during = ev.take()
    ev.schema_change("RENAME TABLE `customers` TO `_customers_old`, `_customers_new` TO `customers`", pos=10_200)
    ev.record("u", {"id": 3}, customer(3, "After swap"), pos=10_300)
    lake.apply(ev.take())
    print("PROPS", {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()})
    if restarted:  # the renames this process applied are known from the lake tables' properties only
        from cdclake.jobs.batch import BatchProcessor

        lake.processor = BatchProcessor(lake.spark, lake.settings)
    # Read late: the rest of the copy (under the shadow's name) and a change of the old table.
    for i in (2, 3):
        shadow.record("c", {"id": i}, customer(i, f"Copy{i}"), pos=10_000 + i)
    shadow.record("u", {"id": 2}, customer(2, "During (trigger)"), pos=10_101)
    report = lake.apply(shadow.take() + during)
    print("TABLES", [r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN glue_catalog.{lake.namespace}").collect()])
    print(
        "ROWS", [r.asDict() for r in lake.spark.sql(f"SELECT id, first_name, _cdc_seq FROM {lake.table()}").collect()]
    )
    assert report.dead == 0
    lake.assert_rows({1: "Copy1", 2: "During (trigger)", 3: "After swap"})
    lake.assert_rows({1: "Sally", 2: "During", 3: "Sally"}, name="inventory__customers_old")
    assert not lake.spark.catalog.tableExists(lake.table("inventory__customers_new"))


# ---------------------------------------------------------------- a primary key changed by ALTER TABLE
ID_EMAIL_KEY = key_schema("customers", ("int32", "id"), ("string", "email"))


def keyed_by_id_and_email(ev: Events, op: str, row: dict, **kw) -> dict:
    key = {"id": row["id"], "email": row["email"]}
    if op == "d":
        return ev.record("d", key, before=row, key_schema=ID_EMAIL_KEY, **kw)
    return ev.record(op, key, row, key_schema=ID_EMAIL_KEY, **kw)


def key_property(lake, name: str = "inventory_customers") -> str:
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table(name)}").collect()}
    return props["cdc.primary-key"]


def test_a_primary_key_widened_at_the_source_rekeys_the_lake_table_and_later_changes_apply_by_it(lake):
    ev = Events()
    for i in (1, 2):
        ev.record("c", {"id": i}, customer(i, "Ann", email=f"a{i}@x"))
    lake.apply(ev.take())
    # One batch: a change under the old key, the ALTER, then rows that only the new key tells apart.
    ev.record("u", {"id": 1}, customer(1, "Anna", email="a1@x"))
    ev.schema_change("ALTER TABLE customers DROP PRIMARY KEY, ADD PRIMARY KEY (id, email)")
    keyed_by_id_and_email(ev, "c", customer(3, "Cy", email="c@x"))
    keyed_by_id_and_email(ev, "c", customer(3, "Cyd", email="d@x"))
    keyed_by_id_and_email(ev, "d", customer(2, "Ann", email="a2@x"))
    keyed_by_id_and_email(ev, "u", customer(1, "Annie", email="a1@x"))
    report = lake.apply(ev.take())

    assert report.dead == 0, lake.dead_letters()
    [tr] = report.tables
    assert "primary key (id) -> (id, email)" in tr.schema
    assert key_property(lake) == "id,email"
    # email was an optional lake column: identifier fields must be required, so none are declared.
    assert lake.identifier_fields() == set()
    lake.assert_rows(
        [
            {"id": 1, "email": "a1@x", "first_name": "Annie"},
            {"id": 3, "email": "c@x", "first_name": "Cy"},
            {"id": 3, "email": "d@x", "first_name": "Cyd"},
        ],
        key=("id", "email"),
    )


def test_a_column_that_leaves_the_primary_key_may_be_null_in_later_rows(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann", email="a@x"))
    lake.apply(ev.take())
    fields = copy.deepcopy(row_fields(BASE))
    for f in fields:
        if f["field"] == "id":
            f["optional"] = True
    email_key = key_schema("customers", ("string", "email"))
    ev.schema_change("ALTER TABLE customers DROP PRIMARY KEY, MODIFY id INT NULL, ADD PRIMARY KEY (email)")
    ev.record("c", {"email": "n@x"}, customer(None, "Nil", email="n@x"),
              value_schema=with_row_fields(BASE, fields), key_schema=email_key)  # fmt: skip
    report = lake.apply(ev.take())

    assert report.dead == 0, lake.dead_letters()
    assert key_property(lake) == "email"
    assert {f.name: f.nullable for f in lake.spark.table(lake.table()).schema}["id"]  # id's declaration went first
    assert lake.identifier_fields() == set()
    lake.assert_rows(
        [{"email": "a@x", "id": 1, "first_name": "Ann"}, {"email": "n@x", "id": None, "first_name": "Nil"}], key="email"
    )


def test_a_change_written_before_the_key_changed_but_read_after_it_is_applied_by_the_new_key(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann", email="a1@x"), pos=1000)
    ev.record("c", {"id": 2}, customer(2, "Bob", email="b@x"), pos=1100)
    lake.apply(ev.take())
    ev.schema_change("ALTER TABLE customers DROP PRIMARY KEY, ADD PRIMARY KEY (id, email)", pos=1300)
    keyed_by_id_and_email(ev, "c", customer(3, "Cy", email="c@x"), pos=1400)
    lake.apply(ev.take())
    # Another partition's change of id 2, written before the ALTER, arrives a batch later.
    late = Events(partition=1)
    late.record("u", {"id": 2}, customer(2, "Bobby", email="b@x"), pos=1200)
    report = lake.apply(late.take())
    assert report.dead == 0, lake.dead_letters()
    lake.assert_rows(
        [
            {"id": 1, "email": "a1@x", "first_name": "Ann"},
            {"id": 2, "email": "b@x", "first_name": "Bobby"},
            {"id": 3, "email": "c@x", "first_name": "Cy"},
        ],
        key=("id", "email"),
    )


def test_a_primary_key_added_to_a_keyless_table_keeps_its_rows_and_applies_later_changes_by_it(lake):
    ev = Events()
    for i, name in ((1, "Ann"), (2, "Bob")):
        ev.record("c", {"id": i}, customer(i, name))["key"] = None  # no primary key: a null Kafka key
    lake.apply(ev.take())
    assert "_cdc_copy" in lake.spark.table(lake.table()).columns
    ev.schema_change("ALTER TABLE customers ADD PRIMARY KEY (id)")
    ev.record("u", {"id": 1}, customer(1, "Anna"))
    ev.record("d", {"id": 2}, before=customer(2, "Bob"))
    ev.record("c", {"id": 3}, customer(3, "Cy"))
    report = lake.apply(ev.take())

    assert report.dead == 0, lake.dead_letters()
    assert "primary key none -> (id)" in report.tables[0].schema
    assert key_property(lake) == "id"
    assert "_cdc_copy" not in lake.spark.table(lake.table()).columns
    lake.assert_rows({1: "Anna", 3: "Cy"})


def test_a_batch_run_again_after_it_changed_the_key_applies_each_change_once(lake):
    """A crash after the key change but before the batch's offsets were committed: the batch runs
    again, its events older than the key change are not dead letters, and nothing doubles."""
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.lake.table_writer import Writes

    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))["key"] = None  # no primary key yet
    lake.apply(ev.take())
    ev.record("u", {"id": 1}, customer(1, "Anna"), before=customer(1, "Ann"))["key"] = None
    ev.schema_change("ALTER TABLE customers ADD PRIMARY KEY (id)")
    ev.record("c", {"id": 2}, customer(2, "Bob"))
    batch = ev.take()

    def crash_on_new_key(table, changes, keys, columns, keep=None, **_):  # the keyless part is written
        raise RuntimeError("killed before the new key's MERGE")

    lake.processor = BatchProcessor(lake.spark, lake.settings, Writes(keyed=crash_on_new_key))
    with pytest.raises(RuntimeError, match="killed"):
        lake.apply(batch, batch_id=1)
    assert key_property(lake) == "id", "the key changed before the crash"
    lake.processor = BatchProcessor(lake.spark, lake.settings)  # the restarted job
    lake.apply(batch, batch_id=1)
    report = lake.apply(batch, batch_id=1)

    assert report.dead == 0 and lake.dead_letters() == []
    lake.assert_rows({1: "Anna", 2: "Bob"})


def test_a_key_changed_to_a_column_the_lake_rows_lack_goes_to_dead_letters_with_the_fix(lake):
    """ALTER TABLE t ADD COLUMN row_id … AUTO_INCREMENT PRIMARY KEY numbers existing rows at the
    source without change events: the lake cannot know which number each of its rows got."""
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))["key"] = None
    lake.apply(ev.take())
    fields = [{"type": "int64", "optional": False, "field": "row_id"}, *row_fields(BASE)]
    ev.record("c", {"row_id": 2}, {"row_id": 2, **customer(2, "Bob")},
              value_schema=with_row_fields(BASE, fields), key_schema=key_schema("customers", ("int64", "row_id")))  # fmt: skip
    report = lake.apply(ev.take())

    assert report.dead == 1
    [dead] = lake.dead_letters()
    assert dead["reason"] == (
        "primary key changed at the source from none to ['row_id'], but ['row_id'] are not columns of the lake "
        "table, so it cannot match its rows by them (a key column added by ALTER TABLE gets its values at the "
        "source without change events; or the table was dropped and created again and the DROP is not read "
        "yet): drop the lake table and take a new Debezium snapshot of the table"
    )
    assert key_property(lake) == ""
    assert [(r["id"], r["first_name"]) for r in lake.rows()] == [(1, "Ann")]


def test_a_table_created_without_a_key_that_gets_one_within_the_first_batch_keeps_every_row(lake):
    """CREATE TABLE without a key, rows, ALTER TABLE … ADD PRIMARY KEY, more changes: all read in the
    lake's first batch of the table (a DBA's script while the job was behind)."""
    ev = Events()
    for i, name in ((1, "Ann"), (2, "Bob"), (3, "Cy")):
        ev.record("c", {"id": i}, customer(i, name))["key"] = None
    ev.record("u", {"id": 3}, customer(3, "Cyd"), before=customer(3, "Cy"))["key"] = None
    ev.schema_change("ALTER TABLE customers ADD PRIMARY KEY (id)")
    ev.record("u", {"id": 1}, customer(1, "Anna"))
    ev.record("d", {"id": 2}, before=customer(2, "Bob"))
    report = lake.apply(ev.take())

    assert report.dead == 0, lake.dead_letters()
    assert key_property(lake) == "id"
    lake.assert_rows({1: "Anna", 3: "Cyd"})


def test_a_keyless_record_beside_keyed_ones_of_a_new_table_without_a_key_statement_is_a_dead_letter(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))["key"] = None
    ev.record("c", {"id": 2}, customer(2, "Bob"))
    report = lake.apply(ev.take())
    assert [d["reason"] for d in lake.dead_letters()] == ["record has no JSON key (does the table have a primary key?)"]
    assert report.dead == 1 and key_property(lake) == "id"
    lake.assert_rows({2: "Bob"})


def test_a_column_the_source_computes_for_existing_rows_is_named_in_a_warning(lake, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="cdclake")
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))
    lake.apply(ev.take())
    ev.schema_change("ALTER TABLE customers ADD COLUMN twice INT AS (id * 2) STORED")
    ev.record("u", {"id": 1}, customer(1, "Anna"))
    lake.apply(ev.take())
    [line] = [r.getMessage() for r in caplog.records if "without change events" in r.getMessage()]
    assert line.startswith("source table inventory.customers: column(s) twice added by ALTER TABLE")
    assert "take a new Debezium snapshot of the table" in line


# ---------------------------------------------------------------- tables swapped by one RENAME TABLE
def rename_events(ev: Events, pairs: list[tuple[str, str]], pos: int) -> list[dict]:
    """The schema-change events the MySQL connector writes for `RENAME TABLE a TO b, c TO d, ...`:
    one per pair, each with that pair's statement and the new name in `tableChanges`, all at the
    statement's binlog position, on consecutive offsets of the schema-change topic."""
    out = []
    for old, new in pairs:
        one = Events(table=new, next_ddl_offset=ev.next_ddl_offset)
        out.append(one.schema_change(f"RENAME TABLE `{old}` TO `{new}`", pos=pos))
        ev.next_ddl_offset = one.next_ddl_offset
    return out


def seed_tables(lake, names: tuple[str, ...]) -> dict[str, Events]:
    """A lake table per name, each holding one row whose first_name says which table it came from."""
    tables = {n: Events(topic=f"mdb.inventory.{n}", table=n) for n in names}
    batch = []
    for i, (n, ev) in enumerate(tables.items()):
        ev.next_pos = 1000 + i
        ev.record("c", {"id": 1}, customer(1, f"from_{n}"))
        batch += ev.take()
    lake.apply(batch)
    return tables


def holds(lake, name: str) -> str | None:
    if not lake.spark.catalog.tableExists(lake.table(f"inventory_{name}")):
        return None
    return ",".join(r["first_name"] for r in lake.rows(f"inventory_{name}"))


SWAP = [("a", "tmp"), ("b", "a"), ("tmp", "b")]


@pytest.mark.parametrize("policy", ["keep", "drop"])
def test_two_tables_swapped_through_a_temporary_name_each_hold_the_others_rows(make_lake, policy):
    lake = make_lake(dropped_table_policy=policy)
    tables = seed_tables(lake, ("a", "b"))
    ddl = Events()
    ddl.next_ddl_offset = 40
    statement = rename_events(ddl, SWAP, pos=5000)
    tables["a"].record("u", {"id": 2}, customer(2, "written_to_a_before"), pos=4000)
    # After the swap, `a` is the old `b`: a new row there, and one more in `b` (the old `a`).
    tables["a"].record("c", {"id": 3}, customer(3, "new_in_a"), pos=6000)
    tables["b"].record("c", {"id": 4}, customer(4, "new_in_b"), pos=6100)
    # Debezium's events in any order in the batch: their offsets say the statement's order.
    report = lake.apply(statement[::-1] + tables["a"].take() + tables["b"].take())
    assert report.dead == 0, lake.dead_letters()
    assert (holds(lake, "a"), holds(lake, "b"), holds(lake, "tmp")) == (
        "from_b,new_in_a",
        "from_a,written_to_a_before,new_in_b",
        None,
    )
    # The batch run again after a crash (its offsets not committed): nothing moves twice.
    lake.apply(statement[::-1] + tables["a"].take(), batch_id=1)
    assert (holds(lake, "a"), holds(lake, "b")) == ("from_b,new_in_a", "from_a,written_to_a_before,new_in_b")


def test_a_swap_stopped_between_its_steps_is_finished_by_the_batch_run_again(lake):
    seed_tables(lake, ("a", "b"))
    statement = rename_events(Events(), SWAP, pos=5000)
    # The job died after the first step and the second step's copy: `tmp` and both `a`s exist.
    lake.apply(statement[:1])
    first = {
        r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table('inventory_tmp')}").collect()
    }
    second = first["cdc.renamed-at"].split(":")[0] + f":{statement[1]['offset']}"
    lake.spark.sql(
        f"CREATE TABLE {lake.table('inventory_a')} USING iceberg TBLPROPERTIES ('cdc.primary-key'='id', "
        f"'cdc.renamed-at'='{second}') AS SELECT * FROM {lake.table('inventory_b')}"
    )
    restarted = type(lake)(lake.spark, lake.settings.warehouse, lake.dead_dir.parent, namespace=lake.namespace)
    report = restarted.apply(statement, batch_id=0)
    assert report.dead == 0
    assert (holds(lake, "a"), holds(lake, "b"), holds(lake, "tmp")) == ("from_b", "from_a", None)


def test_three_tables_rotated_by_one_rename_and_the_same_swap_twice_end_as_at_the_source(lake):
    seed_tables(lake, ("a", "b", "c"))
    ddl = Events()
    rotation = rename_events(ddl, [("a", "tmp"), ("b", "a"), ("c", "b"), ("tmp", "c")], pos=5000)
    lake.apply(rotation)
    assert (holds(lake, "a"), holds(lake, "b"), holds(lake, "c")) == ("from_b", "from_c", "from_a")
    # The same swap twice, in one batch and then once more in a later batch: swapped, back, swapped.
    twice = rename_events(ddl, SWAP, pos=6000) + rename_events(ddl, SWAP, pos=7000)
    lake.apply(twice)
    assert (holds(lake, "a"), holds(lake, "b")) == ("from_b", "from_c")
    lake.apply(rename_events(ddl, SWAP, pos=8000))
    assert (holds(lake, "a"), holds(lake, "b"), holds(lake, "tmp")) == ("from_c", "from_b", None)


# ---------------------------------------------------------------- a column dropped and added again
def readded(schema_fields: list[dict], column: str, field: dict) -> dict:
    """The envelope schema after `DROP COLUMN column` then `ADD COLUMN column ...`: the column last."""
    return with_row_fields(BASE, [f for f in schema_fields if f["field"] != column] + [field | {"field": column}])


DECIMAL_6_1 = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
               "parameters": {"scale": "1", "connect.decimal.precision": "6"}}  # fmt: skip


@pytest.mark.parametrize("policy", ["keep", "drop"])
def test_a_column_dropped_and_added_again_with_another_type_is_the_new_column_in_the_lake(make_lake, policy):
    lake = make_lake(dropped_column_policy=policy)
    ev = Events()
    seed(lake, ev)
    before_drop = ev.next_pos
    ev.next_pos += 100
    ev.schema_change("ALTER TABLE customers DROP COLUMN last_name")
    ev.schema_change("ALTER TABLE customers ADD COLUMN last_name DECIMAL(6,1)")
    schema = readded(row_fields(BASE), "last_name", DECIMAL_6_1)
    row = customer(1, "New") | {"last_name": decimal_b64("12.5", 1)}
    ev.record("u", {"id": 1}, row, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()
    assert ("last_name->last_name__dropped" in report.tables[0].schema) is (policy == "keep")
    # Written before the drop, read after it: its last_name is the dropped column's.
    ev.record("u", {"id": 2}, customer(2, "Late") | {"last_name": "Late-Thomas"}, pos=before_drop)
    ev.record("c", {"id": 4}, customer(4, "Four") | {"last_name": decimal_b64("-3.0", 1)}, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()
    types = {f.name: f.dataType.simpleString() for f in lake.spark.table(lake.table()).schema}
    assert types["last_name"] == "decimal(6,1)"
    rows = lake.by_id()
    # The source: rows 2 and 3 were not changed since the column came back, so they hold null there.
    assert {i: r["last_name"] for i, r in rows.items()} == {1: Decimal("12.5"), 2: None, 3: None, 4: Decimal("-3.0")}
    if policy == "keep":
        # The dropped column's values stay, under another name (null for rows changed since, as any
        # column dropped at the source).
        assert {i: r["last_name__dropped"] for i, r in rows.items()} == {
            1: None, 2: "Late-Thomas", 3: "Thomas", 4: None
        }  # fmt: skip
    else:
        assert "last_name__dropped" not in types
    # A restarted job reads what was done from the table: nothing moves again.
    fresh = type(lake)(lake.spark, lake.settings.warehouse, lake.dead_dir.parent, namespace=lake.namespace,
                       dropped_column_policy=policy)  # fmt: skip
    ev.record("u", {"id": 3}, customer(3, "Three") | {"last_name": decimal_b64("1.0", 1)}, value_schema=schema)
    assert fresh.apply(ev.take()).dead == 0
    assert lake.by_id()[3]["last_name"] == Decimal("1.0") and lake.by_id()[2]["last_name"] is None


def test_the_last_column_dropped_and_added_again_alike_in_one_batch_splits_the_events_at_the_drop(lake):
    """Dropped and added again with its type, as the last column: the events before and after carry
    the same schema, and one batch holds both."""
    ev = Events()
    seed(lake, ev)
    ev.record("u", {"id": 1}, customer(1, "Before") | {"created_at": "2026-01-01T00:00:00Z"})
    ev.schema_change("ALTER TABLE customers DROP COLUMN created_at")
    ev.schema_change("ALTER TABLE customers ADD COLUMN created_at TIMESTAMP NULL")
    ev.record("u", {"id": 2}, customer(2, "After") | {"created_at": "2026-02-02T00:00:00Z"})
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()
    rows = lake.by_id()
    assert {i: r["created_at"] is None for i, r in rows.items()} == {1: True, 2: False, 3: True}
    assert rows[1]["created_at__dropped"] is not None and rows[2]["created_at__dropped"] is None


def test_a_column_added_written_dropped_and_added_again_in_one_batch_holds_the_new_default_and_sets_the_old_aside(
    lake,
):
    """An existing table's new column added, written, dropped and added again with another default,
    all read in one batch: the lake never had the first column, yet its values are another column's
    (the source's rows read the second default unless changed since)."""
    ev = Events()
    seed(lake, ev)
    tier = {"type": "string", "optional": False, "field": "tier"}
    ev.schema_change("ALTER TABLE customers ADD COLUMN tier VARCHAR(255) NOT NULL DEFAULT 'bronze'",
                     table=customers_table(add=(("tier", "bronze"),)))  # fmt: skip
    ev.record("u", {"id": 1}, customer(1, "Gold") | {"tier": "gold"}, value_schema=readded(row_fields(BASE), "tier", tier | {"default": "bronze"}))  # fmt: skip
    ev.schema_change("ALTER TABLE customers DROP COLUMN tier", table=customers_table())
    ev.schema_change("ALTER TABLE customers ADD COLUMN tier VARCHAR(255) NOT NULL DEFAULT 'silver'",
                     table=customers_table(add=(("tier", "silver"),)))  # fmt: skip
    ev.record("u", {"id": 2}, customer(2, "Platinum") | {"tier": "platinum"}, value_schema=readded(row_fields(BASE), "tier", tier | {"default": "silver"}))  # fmt: skip
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()
    rows = lake.by_id()
    assert {i: r["tier"] for i, r in rows.items()} == {1: "silver", 2: "platinum", 3: "silver"}
    # The first column's values, set aside: each row's value when it was dropped.
    assert {i: r.get("tier__dropped") for i, r in rows.items()} == {1: "gold", 2: "bronze", 3: "bronze"}
    assert "tier->tier__dropped (added, dropped at the source and added again" in report.tables[0].schema


CREATE_CUSTOMERS = (
    "CREATE TABLE customers (id INT PRIMARY KEY, first_name VARCHAR(255) NOT NULL, last_name VARCHAR(255) NOT NULL, "
    "email VARCHAR(255) NOT NULL, balance DECIMAL(10,2) DEFAULT 0.00, created_at TIMESTAMP NULL)"
)


@pytest.mark.parametrize("then", ["once", "twice", "table renamed"])
def test_a_new_tables_column_dropped_and_added_again_with_a_default_in_its_first_batch_holds_the_default(
    make_lake, then
):
    """Created, written, then `last_name` dropped and added again `DEFAULT 'back'`, all read in one
    batch with no row event after the statements: at the source every row reads 'back'."""
    lake = make_lake()
    ev = Events()
    ev.schema_change(CREATE_CUSTOMERS, "CREATE")
    for i in (1, 2, 3):
        ev.record("c", {"id": i}, customer(i))
    ev.record("u", {"id": 2}, customer(2, "Two"))
    defaults = ["back", "again"] if then == "twice" else ["back"]
    for default in defaults:
        ev.schema_change("ALTER TABLE customers DROP COLUMN last_name", table=customers_table(drop=("last_name",)))
        ev.schema_change(
            f"ALTER TABLE customers ADD COLUMN last_name VARCHAR(255) NOT NULL DEFAULT '{default}'",
            table=customers_table(drop=("last_name",), add=(("last_name", default),)),
        )
    name = "inventory_customers"
    if then == "table renamed":
        ev.schema_change("RENAME TABLE customers TO clients")
        name = "inventory_clients"
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()
    rows = lake.by_id(name)
    assert {i: (r["first_name"], r["last_name"]) for i, r in rows.items()} == {
        1: ("Sally", defaults[-1]), 2: ("Two", defaults[-1]), 3: ("Sally", defaults[-1])
    }  # fmt: skip
    # The dropped generations stay set aside (--dropped_column_policy keep), each with its values.
    assert {r["last_name__dropped"] for r in rows.values()} == {"Thomas"}
    if then == "twice":
        assert {r["last_name__dropped2"] for r in rows.values()} == {"back"}
    # The next change of a row finds the table as the statements left it.
    ev.record("u", {"id": 3}, customer(3, "Later") | {"last_name": "Now"}, value_schema=readded_last_name())
    if then != "table renamed":
        assert lake.apply(ev.take()).dead == 0, lake.dead_letters()
        assert lake.by_id(name)[3]["last_name"] == "Now" and lake.by_id(name)[1]["last_name"] == defaults[-1]


def readded_last_name() -> dict:
    fields = row_fields(BASE)
    last = next(f for f in fields if f["field"] == "last_name")
    return with_row_fields(BASE, [f for f in fields if f["field"] != "last_name"] + [last])


def test_a_column_renamed_onto_a_dropped_columns_name_takes_its_place_and_the_old_values_stay(lake):
    ev = Events()
    seed(lake, ev)
    ev.schema_change("ALTER TABLE customers DROP COLUMN email")
    ev.schema_change("ALTER TABLE customers RENAME COLUMN first_name TO email")
    fields = [
        f | {"field": "email"} if f["field"] == "first_name" else f for f in row_fields(BASE) if f["field"] != "email"
    ]
    row = {k: v for k, v in customer(1).items() if k not in ("first_name", "email")} | {"email": "Renamed"}
    ev.record("u", {"id": 1}, row, value_schema=with_row_fields(BASE, fields))
    report = lake.apply(ev.take())
    assert report.dead == 0, lake.dead_letters()
    assert columns(lake) == ["id", "email", "last_name", "email__dropped", "balance", "created_at"]
    rows = lake.by_id()
    assert {i: r["email"] for i, r in rows.items()} == {1: "Renamed", 2: "Sally", 3: "Sally"}
    assert {i: r["email__dropped"] for i, r in rows.items()} == {1: None, 2: "old2@example.com", 3: "old3@example.com"}


def _nullable(column: str, type_: str = "string", **kw) -> dict:
    return {"type": type_, "optional": True, "field": column, **kw}


_ID = {"type": "int32", "optional": False, "field": "id"}
_DEC = {"name": "org.apache.kafka.connect.data.Decimal", "version": 1,
        "parameters": {"scale": "1", "connect.decimal.precision": "6"}}  # fmt: skip
# readd_t of the stack test, schema by schema: (id, note, v, tag, memo) at first, then note dropped
# and added as a decimal, memo dropped and added with a default, tag dropped and v renamed onto it.
READD = [
    with_row_fields(BASE, [_ID, *fields])
    for fields in (
        [_nullable("note"), _nullable("v", "int32"), _nullable("tag"), _nullable("memo")],
        [_nullable("v", "int32"), _nullable("tag"), _nullable("memo"), _nullable("note", "bytes", **_DEC)],
        [_nullable("v", "int32"), _nullable("tag"), _nullable("note", "bytes", **_DEC), _nullable("memo", default="d")],
        [_nullable("tag", "int32"), _nullable("note", "bytes", **_DEC), _nullable("memo", default="d")],
    )
]


@pytest.mark.parametrize("batches_before", [(), (2, 5, 8)], ids=["one-batch", "statements-and-data-apart"])
def test_columns_set_aside_and_renamed_onto_their_names_in_one_run_of_statements_end_as_at_the_source(
    lake, batches_before
):
    ev = Events()
    for i, (n, v, t, m) in enumerate([("a", 1, "x", "m1"), ("b", 2, "y", "m2"), ("c", 3, "z", "m3")], 1):
        ev.record("c", {"id": i}, {"id": i, "note": n, "v": v, "tag": t, "memo": m}, value_schema=READD[0])
    lake.apply(ev.take())
    twelve = decimal_b64("12.5", 1)
    steps = [
        lambda: ev.schema_change("ALTER TABLE customers DROP COLUMN note"),
        lambda: ev.schema_change("ALTER TABLE customers ADD COLUMN note DECIMAL(6,1)"),
        lambda: ev.record("u", {"id": 1}, {"id": 1, "v": 1, "tag": "x", "memo": "m1", "note": twelve}, value_schema=READD[1]),
        lambda: ev.schema_change("ALTER TABLE customers DROP COLUMN memo"),
        lambda: ev.schema_change("ALTER TABLE customers ADD COLUMN memo VARCHAR(10) DEFAULT 'd'"),
        lambda: ev.record("u", {"id": 2}, {"id": 2, "v": 2, "tag": "y", "note": None, "memo": "new"}, value_schema=READD[2]),
        lambda: ev.schema_change("ALTER TABLE customers DROP COLUMN tag"),
        lambda: ev.schema_change("ALTER TABLE customers RENAME COLUMN v TO tag"),
        lambda: ev.record("u", {"id": 3}, {"id": 3, "tag": 7, "note": None, "memo": "d"}, value_schema=READD[3]),
        lambda: ev.record("c", {"id": 4}, {"id": 4, "tag": None, "note": None, "memo": "d"}, value_schema=READD[3]),
    ]  # fmt: skip
    for i, step in enumerate(steps):
        if i in batches_before:
            assert lake.apply(ev.take()).dead == 0, lake.dead_letters()
        step()
    assert lake.apply(ev.take()).dead == 0, lake.dead_letters()
    rows = {r["id"]: (r["note"], r["tag"], r["memo"]) for r in lake.rows()}
    assert rows == {1: (Decimal("12.5"), 1, "d"), 2: (None, 2, "new"), 3: (None, 7, "d"), 4: (None, None, "d")}
    dropped = {r["id"]: (r["note__dropped"], r["tag__dropped"], r["memo__dropped"]) for r in lake.rows()}
    # What each row last held before each drop; null where the row changed after the drop (as for
    # any kept column).
    assert dropped == {1: (None, "x", "m1"), 2: (None, "y", None), 3: (None, None, None), 4: (None, None, None)}


def test_statements_of_the_connectors_schema_history_topic_are_not_applied(make_lake):
    """The connector's own `<prefix>.schema-history` topic (matched by a topic pattern that starts
    with the prefix) holds every statement again, without a binlog position in `source`."""
    lake = make_lake(dropped_column_policy="drop")
    ev = Events()
    seed(lake, ev)
    record = load("mariadb/schema_history_drop_column.json")["value"]
    record["ddl"], record["databaseName"] = "ALTER TABLE customers DROP COLUMN last_name", "inventory"
    record["tableChanges"][0]["id"] = '"inventory"."customers"'
    history = Events(topic="mdb.schema-history")
    history.raw(None, json.dumps(record))
    report = lake.apply(history.take())
    assert report.dead == 0 and report.schema_events == 1
    assert "last_name" in columns(lake)
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    assert "cdc.column-changes" not in props


def test_a_change_written_after_a_swap_but_read_before_its_statement_is_named_in_an_error(lake, caplog):
    import logging

    caplog.set_level(logging.ERROR, logger="cdclake")
    tables = seed_tables(lake, ("a", "b"))
    # The new `a` (the old `b`) gets a row; the schema-change topic is read a batch later.
    tables["a"].record("c", {"id": 5}, customer(5, "after_swap"), pos=6000)
    lake.apply(tables["a"].take())
    lake.apply(rename_events(Events(), SWAP, pos=5000))
    [error] = [r.getMessage() for r in caplog.records if "before the RENAME statement was read" in r.getMessage()]
    assert error.startswith(f"table {lake.table('inventory_a')}: 1 row(s) of changes written after the source")
    assert "Rebuild both tables from the raw zone" in error


# ---------------------------------------------------------------- partition maintenance at the source
PARTITIONED = (
    "CREATE TABLE `customers` (`id` int(11) NOT NULL, `first_name` varchar(255) NOT NULL, `last_name` varchar(255) "
    "NOT NULL, `email` varchar(255) NOT NULL, `balance` decimal(10,2) DEFAULT 0.00, `created_at` timestamp NULL, "
    "PRIMARY KEY (`id`)) ENGINE=InnoDB DEFAULT CHARSET=latin1 PARTITION BY RANGE (`id`)\n(PARTITION `p0` VALUES LESS "
    "THAN (3) ENGINE = InnoDB,\n PARTITION `p1` VALUES LESS THAN (5) ENGINE = InnoDB,\n PARTITION `pmax` VALUES LESS "
    "THAN MAXVALUE ENGINE = InnoDB)"
)


def table_property(lake, key: str) -> str | None:
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table()}").collect()}
    return props.get(key)


def test_range_partitions_dropped_or_truncated_at_the_source_take_their_rows_out_of_the_lake(make_lake):
    """MariaDB's binlog has the statement only; the partitions' bounds come from the CREATE TABLE
    (as SHOW CREATE TABLE writes it at snapshot). Changes on both sides of each statement, one read
    late, a job started again before the table's first row (the partitioning from its file beside the
    dead letters) and one started again that reads the partitioning from the table."""
    lake = make_lake()
    ev = Events()
    ev.schema_change(PARTITIONED, "CREATE", snapshot="true")
    assert lake.apply(ev.take()).dead == 0 and not lake.spark.catalog.tableExists(lake.table())
    lake = type(lake)(lake.spark, lake.settings.warehouse, lake.dead_dir.parent, namespace=lake.namespace)
    for i in range(1, 7):
        ev.record("r", {"id": i}, customer(i))
    assert lake.apply(ev.take()).dead == 0 and not list((lake.dead_dir / "_early").glob("*"))
    late = ev.next_pos
    ev.next_pos += 100  # a change of id 3 written here is read only in the next batch
    ev.record("u", {"id": 4}, customer(4, "Four"))
    ev.schema_change("ALTER TABLE customers TRUNCATE PARTITION p1")  # ids 3, 4
    ev.record("c", {"id": 4}, customer(4, "Again"))
    ev.schema_change("ALTER TABLE `customers` DROP PARTITION p0")  # ids 1, 2
    ev.record("c", {"id": 2}, customer(2, "New"))
    report = lake.apply(ev.take())
    assert report.dead == 0 and not report.tables[0].diverged
    lake.assert_rows({2: "New", 4: "Again", 5: "Sally", 6: "Sally"})
    ev.record("u", {"id": 3}, customer(3, "Late"), pos=late)
    assert lake.apply(ev.take()).dead == 0
    lake.assert_rows({2: "New", 4: "Again", 5: "Sally", 6: "Sally"})
    # After DROP PARTITION p0, p1 holds every id below 5: a job started again reads that from the table.
    fresh = type(lake)(lake.spark, lake.settings.warehouse, lake.dead_dir.parent, namespace=lake.namespace)
    ev.schema_change("ALTER TABLE customers TRUNCATE PARTITION p1", pos=20_000)
    assert fresh.apply(ev.take()).dead == 0
    lake.assert_rows({5: "Sally", 6: "Sally"})
    assert table_property(lake, "cdc.source-diverged") is None


@pytest.mark.parametrize(
    ("create", "statement"),
    [
        ("CREATE TABLE customers (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 4",
         "ALTER TABLE customers TRUNCATE PARTITION p1"),
        ("CREATE TABLE customers (id INT PRIMARY KEY) PARTITION BY LIST (id) (PARTITION p0 VALUES IN (1, 2))",
         "ALTER TABLE customers EXCHANGE PARTITION p0 WITH TABLE other"),
    ],
    # An expression, a bound that is no constant, partitioning never read: tests/unit/test_partition_statements.py.
    ids=["hash", "exchange"],
)  # fmt: skip
def test_a_partition_statement_the_job_cannot_follow_marks_the_table_with_an_error_and_a_metric(
    lake, caplog, capsys, create, statement
):
    import logging

    caplog.set_level(logging.ERROR, logger="cdclake")
    ev = Events()
    if create:
        ev.schema_change(create, "CREATE")
    for i in (1, 2):
        ev.record("c", {"id": i}, customer(i))
    lake.apply(ev.take())
    ev.schema_change(statement)
    report = lake.apply(ev.take())
    [t] = [t for t in report.tables if t.table == lake.table()]
    assert "PARTITION p" in t.diverged and "NOT-EQUAL-TO-SOURCE" in t.line()
    # The alarm's metric filter counts this phrase (tests/cloudformation/test_cfn_alarms.py).
    lines = [r.getMessage() for r in caplog.records if "no longer equals the lake:" in r.getMessage()]
    [line] = [x for x in lines if "inventory_customers" in x]
    assert "new Debezium snapshot" in line
    if "EXCHANGE" in statement:  # the other table's rows changed too
        assert [x for x in lines if "inventory_other" in x]
    assert "PARTITION p" in table_property(lake, "cdc.source-diverged")
    lake.assert_rows({1: "Sally", 2: "Sally"})  # nothing deleted on a guess
    # Every later batch of the table says so again (the alarm holds); the rows keep following.
    capsys.readouterr()
    ev.record("c", {"id": 3}, customer(3))
    assert lake.apply(ev.take()).tables[0].diverged == t.diverged
    emf = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"_aws"')]
    assert [x["NotEqual"] for x in emf if x.get("Table") == "inventory_customers"] == [1]
    assert [x["NotEqualTables"] for x in emf if "Table" not in x] == [1]


# ---------------------------------------------------------------- SET and ENUM columns redefined
def test_set_and_enum_columns_redefined_read_their_values_as_the_source_converts_them(lake):
    """MariaDB shows a SET value's members in definition order: after MODIFY tags SET('c','b','a')
    every row reads that way, without a row event. An ALTER converts stored ENUM values by text: a
    member respelled in another case takes the new spelling, one removed (a non-strict sql_mode) reads ''.
    Changes on both sides, one read late."""
    old, _ = with_set_and_enum("a,b,c")
    new, table = with_set_and_enum("c,b,a", "A,b")
    ev = Events()
    for i, tags, grade in ((1, "a,b", "a"), (2, "b,c", "b"), (3, None, None), (5, "", "c")):
        ev.record("c", {"id": i}, customer(i) | {"tags": tags, "grade": grade}, value_schema=old)
    assert lake.apply(ev.take()).dead == 0
    late = ev.next_pos
    ev.next_pos += 100
    ev.record("u", {"id": 2}, customer(2, "Two") | {"tags": "a,c", "grade": "c"}, value_schema=old)
    ev.schema_change("ALTER TABLE customers MODIFY COLUMN tags SET('c','b','a'), MODIFY grade ENUM('A','b')",
                     table=table)  # fmt: skip
    ev.record("c", {"id": 4}, customer(4) | {"tags": "c,a", "grade": "A"}, value_schema=new)
    assert lake.apply(ev.take()).dead == 0
    rows = {i: (r["tags"], r["grade"]) for i, r in lake.by_id().items()}
    assert rows == {1: ("b,a", "A"), 2: ("c,a", ""), 3: (None, None), 4: ("c,a", "A"), 5: ("", "")}
    ev.record("u", {"id": 3}, customer(3, "Late") | {"tags": "a,b,c", "grade": "a"}, value_schema=old, pos=late)
    assert lake.apply(ev.take()).dead == 0
    assert (lake.by_id()[3]["tags"], lake.by_id()[3]["grade"]) == ("c,b,a", "A")


# ---------------------------------------------------------------- column defaults changed after the ADD
def _defaulted(columns: tuple[tuple[str, str | None], ...]) -> dict:
    """customers as tableChanges describes it with optional VARCHAR columns (name, default or None)."""
    table = customers_table(add=tuple((n, d or "") for n, d in columns))
    for c, (_, default) in zip(table["columns"][-len(columns) :], columns, strict=True):
        c.update(optional=True, defaultValueExpression=default)
    return table


def test_a_default_changed_or_dropped_after_its_add_column_leaves_the_existing_rows_the_added_default(lake):
    """MariaDB gives existing rows the default of the ADD COLUMN; a later SET DEFAULT, DROP DEFAULT or
    MODIFY with a new default changes no stored row (also through a rename, and when set twice)."""
    ev = Events()
    for i in (1, 2):
        ev.record("c", {"id": i}, customer(i))
    assert lake.apply(ev.take()).dead == 0
    for ddl, columns in (
        ("ADD COLUMN tier VARCHAR(255) DEFAULT 'gold'", (("tier", "gold"),)),
        ("ALTER COLUMN tier SET DEFAULT 'silver'", (("tier", "silver"),)),
        ("ALTER COLUMN tier SET DEFAULT 'silver'", (("tier", "silver"),)),
        ("ADD COLUMN note VARCHAR(255) DEFAULT 'n1'", (("tier", "silver"), ("note", "n1"))),
        ("ALTER COLUMN note DROP DEFAULT", (("tier", "silver"), ("note", None))),
        ("ADD COLUMN grade VARCHAR(255) DEFAULT 'a'", (("tier", "silver"), ("note", None), ("grade", "a"))),
        ("RENAME COLUMN grade TO level", (("tier", "silver"), ("note", None), ("level", "a"))),
        ("MODIFY level VARCHAR(255) DEFAULT 'b'", (("tier", "silver"), ("note", None), ("level", "b"))),
    ):
        ev.schema_change(f"ALTER TABLE customers {ddl}", table=_defaulted(columns))
    assert lake.apply(ev.take()).dead == 0  # no row event of the table after the statements
    old = {"tier": "gold", "note": "n1", "level": "a"}
    assert {i: {c: r[c] for c in old} for i, r in lake.by_id().items()} == {1: old, 2: old}
    extra = [{"type": "string", "optional": True, "field": n, "default": d} for n, d in (("tier", "silver"),
             ("note", None), ("level", "b"))]  # fmt: skip
    schema = with_row_fields(BASE, [*row_fields(BASE), *extra])
    ev.record("c", {"id": 3}, customer(3, tier="silver", note=None, level="b"), value_schema=schema)
    ev.record("u", {"id": 1}, customer(1, "One", tier="gold", note="n1", level="a"), value_schema=schema)
    assert lake.apply(ev.take()).dead == 0
    rows = {i: {c: r[c] for c in old} for i, r in lake.by_id().items()}
    assert rows == {1: old, 2: old, 3: {"tier": "silver", "note": None, "level": "b"}}
