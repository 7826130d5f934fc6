"""MySQL DDL from Debezium's schema-change events: a column rename is an Iceberg rename, in order
with the table's data changes whichever batch brings the statement; DROP TABLE and DROP COLUMN
follow --dropped_table_policy and --dropped_column_policy."""

from __future__ import annotations

import copy

import pytest
from cdc_events import Events, customer, key_schema, load, row_fields, value_schema_of, with_row_fields

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
    assert {f.name: f.nullable for f in lake.spark.table(lake.table()).schema}["id"]
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
    from cdclake.batch import BatchProcessor
    from cdclake.table_writer import Writes

    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))["key"] = None  # no primary key yet
    lake.apply(ev.take())
    ev.record("u", {"id": 1}, customer(1, "Anna"), before=customer(1, "Ann"))["key"] = None
    ev.schema_change("ALTER TABLE customers ADD PRIMARY KEY (id)")
    ev.record("c", {"id": 2}, customer(2, "Bob"))
    batch = ev.take()

    def crash_on_new_key(table, changes, keys, columns, keep=None):  # the keyless part is written
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
