"""Column renames and drops read from the MySQL/MariaDB DDL in Debezium's schema-change events, and from
the rows of PostgreSQL's DDL log (sql/postgres/ddl_capture.sql)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cdclake.common.lake_contract import DROP, RENAME, ColumnChange, dumps, loads
from cdclake.events.source_ddl import (
    POSTGRES_DDL_TABLE,
    Relabel,
    changes_primary_key,
    column_changes,
    computed_columns,
    postgres_statement,
    postgres_statement_columns,
    set_redefinitions,
    table_ids,
    table_renames,
    translation,
)


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("ALTER TABLE customer RENAME COLUMN city TO town", [(RENAME, "city", "town")]),
        ("alter table `salesdb`.`customer` rename column `city` to `the town`", [(RENAME, "city", "the town")]),
        ("ALTER TABLE customer CHANGE COLUMN town city2 VARCHAR(64) NULL", [(RENAME, "town", "city2")]),
        ("ALTER TABLE customer CHANGE town city2 DECIMAL(16,4) NOT NULL DEFAULT 0", [(RENAME, "town", "city2")]),
        ("ALTER TABLE customer CHANGE COLUMN IF EXISTS a b INT", [(RENAME, "a", "b")]),
        ("ALTER TABLE customer CHANGE COLUMN city city VARCHAR(80)", []),  # a type change only
        (
            "ALTER TABLE t ADD COLUMN x ENUM('a,b', 'c') DEFAULT 'a,b', RENAME COLUMN a TO b, DROP COLUMN c, DROP d",
            [(RENAME, "a", "b"), (DROP, "c", None), (DROP, "d", None)],
        ),
        ("ALTER TABLE t DROP INDEX i, DROP PRIMARY KEY, DROP FOREIGN KEY f, DROP CONSTRAINT c", []),
        ("ALTER TABLE t /* RENAME COLUMN a TO b */ ADD COLUMN c INT -- , DROP COLUMN a", []),
        ("ALTER TABLE t RENAME TO t2", []),
        ("ALTER ONLINE TABLE IF EXISTS t DROP COLUMN IF EXISTS `weird``name`", [(DROP, "weird`name", None)]),
        ("CREATE TABLE t (a INT, b INT)", []),
        ("DROP TABLE t", []),
    ],
)
def test_renames_and_drops_are_read_from_alter_table_statements(ddl, expected):
    assert column_changes(ddl) == expected


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("ALTER TABLE shipment ADD PRIMARY KEY (ship_id)", True),
        ("alter table t drop primary key, add primary key (a, b)", True),
        ("ALTER TABLE t ADD CONSTRAINT pk PRIMARY KEY (a)", True),
        ("ALTER TABLE t ADD COLUMN id BIGINT AUTO_INCREMENT PRIMARY KEY FIRST", True),
        ("ALTER TABLE t ADD COLUMN note VARCHAR(20) DEFAULT 'PRIMARY KEY'", False),  # a literal
        ("ALTER TABLE t RENAME COLUMN `primary` TO `key`", False),
        ("ALTER TABLE t ADD UNIQUE KEY u (a)", False),
        ("CREATE TABLE t (a INT PRIMARY KEY)", False),  # a new table's key comes with its events
    ],
)
def test_statements_that_set_a_primary_key_are_told_apart(ddl, expected):
    assert changes_primary_key(ddl) is expected


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("ALTER TABLE t ADD COLUMN id BIGINT AUTO_INCREMENT PRIMARY KEY FIRST", ["id"]),
        ("ALTER TABLE c ADD COLUMN score INT AS (points * 2) STORED, ADD COLUMN active BIT(1) DEFAULT b'1'", ["score"]),
        ("alter table t add `x y` int generated always as (a+1) virtual", ["x y"]),
        ("ALTER TABLE t ADD c INT DEFAULT 3, ADD INDEX i (a), ADD PRIMARY KEY (a)", []),
        ("ALTER TABLE t ADD COLUMN note VARCHAR(9) DEFAULT 'AS (x)'", []),  # a literal
        ("ALTER TABLE t RENAME COLUMN a TO b", []),
        ("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY)", []),  # a new table has no rows yet
    ],
)
def test_added_columns_the_source_computes_for_existing_rows_are_named(ddl, expected):
    assert computed_columns(ddl) == expected


def test_table_ids_of_debezium_table_changes():
    assert table_ids(['"salesdb"."customer"', '"a.b"."c""d"']) == [("salesdb", "customer"), ("a.b", 'c"d')]


def test_recorded_changes_survive_the_table_property_round_trip_once_each():
    a = ColumnChange(RENAME, "city", "town", 10**30)
    b = ColumnChange(DROP, "x", None, 5)
    assert loads(dumps([a, b, a])) == [b, a]


def test_changes_at_one_position_are_recorded_in_their_order_whatever_the_hash_seed():
    script = (
        "from cdclake.common.lake_contract import KEPT, RENAME, ColumnChange, dumps; "
        "print(dumps([ColumnChange(RENAME, 'note', 'note__dropped', 13), ColumnChange(KEPT, 'note', None, 13)]))"
    )
    glue_scripts = str(Path(__file__).resolve().parents[2] / "glue_scripts")
    texts = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": glue_scripts},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert texts == {'[["rename", "note", "note__dropped", "13"], ["kept", "note", null, "13"]]\n'}


def test_changes_of_one_statement_keep_the_statements_order_through_the_table_property():
    # ALTER TABLE t RENAME COLUMN a TO tmp, RENAME COLUMN b TO a, RENAME COLUMN tmp TO b: one position.
    swap = [ColumnChange(RENAME, "a", "tmp", 7), ColumnChange(RENAME, "b", "a", 7), ColumnChange(RENAME, "tmp", "b", 7)]
    for order in (swap, swap[::-1], [swap[1], swap[0], swap[2]]):
        assert loads(dumps(order)) == order
    assert translation(loads(dumps(swap)), ["id", "a", "b"], 6) == ({"a": "b", "b": "a"}, set())


def test_an_event_written_before_a_rename_is_translated_and_one_written_after_it_is_not():
    changes = [ColumnChange(RENAME, "city", "town", 100), ColumnChange(RENAME, "town", "place", 200)]
    assert translation(changes, ["id", "city"], 50) == ({"city": "place"}, set())
    assert translation(changes, ["id", "town"], 150) == ({"town": "place"}, set())
    assert translation(changes, ["id", "place"], 250) == ({}, set())


def test_a_column_re_added_under_the_old_name_is_not_taken_for_the_renamed_one():
    changes = [ColumnChange(RENAME, "a", "b", 100)]
    # RENAME COLUMN a TO b, ADD COLUMN a: the event already has b, so its a is the new column.
    assert translation(changes, ["a", "b"], 50) == ({}, set())


def test_an_event_written_before_a_drop_loses_the_dropped_column():
    changes = [ColumnChange(DROP, "extra", None, 100)]
    assert translation(changes, ["id", "extra"], 50) == ({}, {"extra"})
    assert translation(changes, ["id", "extra"], 150) == ({}, set())  # added again after the drop


@pytest.mark.parametrize(
    "ddl, expected",
    [
        ("RENAME TABLE events TO archive", [(("db", "events"), ("db", "archive"))]),
        (
            "RENAME TABLE `t` TO `_t_old`, `_t_new` TO `t`;",
            [(("db", "t"), ("db", "_t_old")), (("db", "_t_new"), ("db", "t"))],
        ),
        ("rename table other.a to db.b", [(("other", "a"), ("db", "b"))]),
        ("ALTER TABLE a RENAME TO b", [(("db", "a"), ("db", "b"))]),
        ("ALTER TABLE `a` ADD COLUMN x INT, RENAME AS `b c`", [(("db", "a"), ("db", "b c"))]),
        ("ALTER TABLE a RENAME b", [(("db", "a"), ("db", "b"))]),
        ("RENAME TABLE /* why */ a TO b", [(("db", "a"), ("db", "b"))]),
        ("ALTER TABLE a RENAME COLUMN x TO y", []),
        ("ALTER TABLE a RENAME INDEX i TO j", []),
        ("ALTER TABLE a RENAME KEY i TO j", []),
        ("ALTER TABLE t ADD COLUMN r VARCHAR(9) DEFAULT 'RENAME TO x'", []),
        ("DROP TABLE a", []),
    ],
)
def test_table_renames_are_read_from_rename_table_and_alter_table_statements(ddl, expected):
    assert table_renames(ddl, "db") == expected


def _log_row(changes: list, **row: object) -> str:
    # As Debezium sends a row of the log: jsonb columns as JSON text.
    base = {"id": 7, "schema_name": "public", "table_name": "t", "old_schema_name": None, "old_table_name": None,
            "command_tag": "ALTER TABLE", "statement": "ALTER TABLE t ...", "changes": json.dumps(changes)}  # fmt: skip
    return json.dumps({**base, **row})


def test_a_postgres_ddl_log_row_gives_the_column_changes_and_what_happened_to_the_table() -> None:
    s = postgres_statement(
        _log_row([["drop", "b", None], ["add", None, "b"], ["rename", "a", "a 2"], ["type", "int", "text"]])
    )
    assert (s.table, s.renamed_from, s.changes) == (("public", "t"), None, [(DROP, "b", None), (RENAME, "a", "a 2")])
    assert not (s.created or s.dropped or s.key_changed)
    moved = postgres_statement(_log_row([], old_schema_name="public", old_table_name="t_old", table_name="t"))
    assert moved.renamed_from == ("public", "t_old") and moved.changes == []
    assert postgres_statement(_log_row([["create", None, None]])).created
    assert postgres_statement(_log_row([["drop_table", None, None]])).dropped
    assert postgres_statement(_log_row([["key", [], ["id"]]])).key_changed


def test_a_postgres_ddl_log_row_names_enum_relabels_using_rewrites_and_generated_columns() -> None:
    columns = json.dumps({"1": ["id", "integer"], "2": ["c", "tone"], "3": ["cs", "tone[]"]})
    s = postgres_statement(
        _log_row([["relabel", "c", ["red", "it's"]], ["relabel", "cs", ["red", "it's"]]], columns=columns)
    )
    assert s.relabels == [Relabel("c", "red", "it's", array=False), Relabel("cs", "red", "it's", array=True)]
    unknown = postgres_statement(_log_row([["relabel", "c", None]], columns=columns))
    assert unknown.relabels == [Relabel("c", None, None)]
    retyped = postgres_statement(_log_row([["type", "integer", "numeric(10,2)"], ["using", "price", "numeric(10,2)"]]))
    assert retyped.rewritten == ["price"] and retyped.changes == []
    assert postgres_statement(_log_row([["create", None, None], ["generated", "total", None]])).generated == ["total"]


@pytest.mark.parametrize("after", ["[1, 2]", "{}", '{"changes": "[[", "schema_name": "s", "table_name": "t"}', "x"])
def test_a_row_that_is_not_the_ddl_logs_is_refused_with_the_tables_name(after: str) -> None:
    with pytest.raises(ValueError, match=f"not a row of {POSTGRES_DDL_TABLE}"):
        postgres_statement(after)


def test_the_shipped_ddl_capture_writes_the_table_the_job_reads() -> None:
    sql = (Path(__file__).parents[2] / "sql" / "postgres" / "ddl_capture.sql").read_text()
    created = re.findall(r'CREATE TABLE IF NOT EXISTS :"schema"\.(\w+)', sql)
    assert created == [POSTGRES_DDL_TABLE]


@pytest.mark.parametrize(
    ("ddl", "expected"),
    [
        ("ALTER TABLE t MODIFY tags SET('c','b','a')", [("tags", ("c", "b", "a"), "SET")]),
        ("ALTER TABLE t MODIFY COLUMN `tags` SET('c','b','a') NOT NULL", [("tags", ("c", "b", "a"), "SET")]),
        ("ALTER TABLE t CHANGE COLUMN old tags SET('c','b','a')", [("tags", ("c", "b", "a"), "SET")]),
        ("ALTER TABLE t MODIFY grade ENUM('B','a,b')", [("grade", ("B", "a,b"), "ENUM")]),
        ("ALTER TABLE t ADD COLUMN n INT, MODIFY n2 BIGINT", []),  # another column, or no SET
        ("ALTER TABLE t ADD COLUMN tags2 SET('a')", []),  # added: the row events bring its values
    ],
)
def test_a_set_column_modify_or_change_gives_its_members_in_the_new_order(ddl, expected):
    # tableChanges[].table as the connector writes it: a SET's members as quoted literals.
    table = {"columns": [{"name": "tags", "typeName": "SET", "enumValues": ["'c'", "'b'", "'a'"]},
                         {"name": "n2", "typeName": "BIGINT"},
                         {"name": "grade", "typeName": "ENUM", "enumValues": ["'B'", "'a,b'"]}]}  # fmt: skip
    assert set_redefinitions(ddl, table) == expected


def test_columns_a_postgres_command_added_with_a_known_value_for_existing_rows_become_statement_columns() -> None:
    columns = {"1": ["id", "integer"], "2": ["since", "date"], "3": ["note", "text"], "4": ["price", "numeric(10,2)"],
               "5": ["due", "timestamp(3) without time zone"], "6": ["ok", "boolean"], "7": ["r", "double precision"],
               "8": ["plain", "character varying(5)"], "9": ["far", "date"], "10": ["box", "box"]}  # fmt: skip
    changes = [["add", None, c] for c in ("since", "note", "price", "due", "ok", "r", "plain", "far", "box")] + [
        ["default", "since", "2026-11-29"], ["default", "note", "it's {x}"], ["default", "price", "19.99"],
        ["default", "due", "2024-01-02 03:04:05.25"], ["default", "ok", "t"], ["default", "r", "NaN"],
        ["default", "plain", None], ["default", "far", "infinity"], ["default", "box", "(1,1),(0,0)"],
    ]  # fmt: skip
    s = postgres_statement(_log_row(changes, columns=json.dumps(columns), primary_key='["id"]'))
    assert s.keys == ("id",)
    got = {c.name: (c.spark_type.simpleString(), c.default_sql) for c in postgres_statement_columns(s)}
    assert got == {
        "since": ("date", "DATE '2026-11-29'"),
        "note": ("string", "'it\\'s {x}'"),
        "price": ("decimal(10,2)", "CAST('19.99' AS decimal(10,2))"),
        "due": ("timestamp_ntz", "CAST('2024-01-02 03:04:05.25' AS timestamp_ntz)"),
        "ok": ("boolean", "CAST(TRUE AS boolean)"),
        "r": ("double", "CAST('NaN' AS double)"),
        "plain": ("string", None),  # added without a default: null, as the rows read
    }  # an infinite date and a type the job does not map wait for the next row event
