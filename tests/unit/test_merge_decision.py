"""The decision of the batch's MERGE (cdclake.lake.merge.merge_sql): which change of a key reaches the
lake row, run as SQL by a real engine. DuckDB runs MERGE INTO; two spellings of Spark's dialect are
given to it in its own: backquoted identifiers in double quotes, and the assigned column of
`UPDATE SET t.c = ...` without its table alias."""

from __future__ import annotations

import re

import duckdb
from cdclake.lake.merge import merge_sql

COLUMNS = ["id", "name"]
TABLE = "id INTEGER, name VARCHAR, _cdc_op VARCHAR, _cdc_seq DECIMAL(38,0), _cdc_offset BIGINT, "
TABLE += "_cdc_source_ts BIGINT, _cdc_ingested_at TIMESTAMP"


def in_duckdb_dialect(statement: str) -> str:
    return re.sub(r"(SET |, )t\.", r"\1", statement).replace("`", '"')


def merged(stored: list[tuple], changes: list[tuple], keep: dict[str, str] | None = None) -> list[tuple]:
    """The lake rows (id, name, op, seq, offset) after merging `changes` into `stored`, each a tuple
    (id, name, op, seq, offset): the same with the guard in the MERGE's clauses and in its source
    (guard_in_source, Hudi's form)."""
    results = []
    for guard_in_source in (False, True):
        con = duckdb.connect()
        con.execute(f"CREATE TABLE t ({TABLE})")
        con.execute(f"CREATE TABLE s ({TABLE})")
        for table, rows in (("t", stored), ("s", changes)):
            for r in rows:
                con.execute(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, 0, now())", list(r))
        con.execute(in_duckdb_dialect(merge_sql("t", "s", ["id"], COLUMNS, keep, guard_in_source=guard_in_source)))
        results.append(con.execute("SELECT id, name, _cdc_op, _cdc_seq, _cdc_offset FROM t ORDER BY id").fetchall())
    assert results[0] == results[1], results
    return results[0]


def test_a_change_newer_than_the_stored_row_replaces_it_and_an_older_one_is_a_no_op():
    stored = [(1, "a", "c", 100, 5)]
    assert merged(stored, [(1, "b", "u", 101, 0)]) == [(1, "b", "u", 101, 0)]
    assert merged(stored, [(1, "b", "u", 100, 6)]) == [(1, "b", "u", 100, 6)]  # same position, later offset
    assert merged(stored, [(1, "b", "u", 99, 9)]) == stored
    assert merged(stored, [(1, "b", "u", 100, 5)]) == stored  # the same change applied again


def test_a_delete_removes_the_row_only_when_newer():
    stored = [(1, "a", "c", 100, 5)]
    assert merged(stored, [(1, "a", "d", 101, 0)]) == []
    assert merged(stored, [(1, "a", "d", 99, 0)]) == stored


def test_a_change_of_a_new_key_is_inserted_unless_it_is_a_delete():
    assert merged([], [(1, "a", "c", 1, 0), (2, "b", "u", 2, 0), (3, "c", "d", 3, 0)]) == [
        (1, "a", "c", 1, 0),
        (2, "b", "u", 2, 0),
    ]


def test_a_row_written_without_a_position_counts_as_older():
    assert merged([(1, "a", None, None, None)], [(1, "b", "u", 1, 0)]) == [(1, "b", "u", 1, 0)]


def test_a_kept_column_whose_update_carries_the_placeholder_keeps_the_lake_value():
    keep = {"name": "'__debezium_unavailable_value'"}
    stored = [(1, "long text", "c", 100, 0)]
    placeholder = [(1, "__debezium_unavailable_value", "u", 101, 0)]
    assert merged(stored, placeholder, keep) == [(1, "long text", "u", 101, 0)]
    assert merged(stored, [(1, "new text", "u", 101, 0)], keep) == [(1, "new text", "u", 101, 0)]
    # A new key's insert carrying the placeholder keeps it (no lake value to keep).
    assert merged([], placeholder, keep) == placeholder
