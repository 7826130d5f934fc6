"""The one atomic MERGE per table per batch, as SQL text (executor.py runs it; the tables' DDL is the
format's, formats/)."""

from __future__ import annotations

from ..common.conflicts import RetryPolicy
from ..common.lake_contract import CDC_OFFSET, CDC_OP, CDC_SEQ, METADATA_COLUMNS
from ..common.sqltext import quote, sql_string
from ..events.ordering import newer_than
from .deletes import live_changes_sql

# A MERGE that loses to a concurrent compaction ("missing data files") is planned again from the new
# snapshot; patiently, because giving up fails the batch and with it the streaming job.
MERGE_RETRY = RetryPolicy(attempts=8, base_delay_s=1.0, max_delay_s=30.0)


def merge_sql(
    table: str,
    source_view: str,
    keys: list[str],
    columns: list[str],
    keep: dict[str, str] | None = None,
    markers: str | None = None,
    *,
    guard_in_source: bool = False,
) -> str:
    """One MERGE applying inserts, updates and deletes, guarded by the source-log position so a
    replayed or late change never overwrites a newer row, nor brings back a row deleted later
    (`markers`: the table's delete markers, deletes.py).

    `keep`: column -> SQL literal; an update whose value is that literal (the connector's
    placeholder for a value it could not send, see unavailable.py) leaves the lake value as it is.

    `guard_in_source`: the guard and the kept values are resolved in the MERGE's source, joined with
    the table, so that its clauses read the change only (guarded_source_sql)."""
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    newer = newer_than(f"s.{CDC_SEQ}", f"s.{CDC_OFFSET}", f"t.{CDC_SEQ}", f"t.{CDC_OFFSET}")
    all_cols = columns + list(METADATA_COLUMNS)
    keep = keep or {}
    source = live_changes_sql(source_view, markers, keys) if markers else source_view
    if guard_in_source:
        source = guarded_source_sql(table, source, on, newer, keys[0], all_cols, keep)
        keep = {}
    guard = "" if guard_in_source else f" AND {newer}"

    def assign(c: str) -> str:
        if c in keep:
            return f"t.{quote(c)} = CASE WHEN s.{quote(c)} = {keep[c]} THEN t.{quote(c)} ELSE s.{quote(c)} END"
        return f"t.{quote(c)} = s.{quote(c)}"

    set_list = ", ".join(assign(c) for c in all_cols)
    insert_cols = ", ".join(quote(c) for c in all_cols)
    insert_vals = ", ".join(f"s.{quote(c)}" for c in all_cols)
    return (
        f"MERGE INTO {table} t USING {source} s ON {on} "
        f"WHEN MATCHED AND s.{CDC_OP} = 'd'{guard} THEN DELETE "
        f"WHEN MATCHED AND s.{CDC_OP} <> 'd'{guard} THEN UPDATE SET {set_list} "
        f"WHEN NOT MATCHED AND s.{CDC_OP} <> 'd' THEN INSERT ({insert_cols}) VALUES ({insert_vals})"
    )


def guarded_source_sql(
    table: str, source: str, on: str, newer: str, key: str, columns: list[str], keep: dict[str, str]
) -> str:
    """The changes of `source` newer than the row `table` holds of their key (or of a key it does not
    hold), each kept column's placeholder replaced by the stored value: the MERGE's guard and `keep`
    evaluated before the MERGE. Hudi's MERGE into a merge-on-read table appends updates to log files
    without reading the stored row, and a clause condition or assignment that names the table's
    columns fails there (apache/hudi#12180)."""

    def pick(c: str) -> str:
        if c in keep:
            return f"CASE WHEN t.{quote(key)} IS NOT NULL AND s.{quote(c)} = {keep[c]} THEN t.{quote(c)} ELSE s.{quote(c)} END AS {quote(c)}"
        return f"s.{quote(c)}"

    select = ", ".join(pick(c) for c in columns)
    return f"(SELECT {select} FROM {source} s LEFT JOIN {table} t ON {on} WHERE {newer})"


def truncate_sql(table: str, seq: int) -> str:
    """A source TRUNCATE: remove every row written from a change older than the truncate (the
    executor then remembers it, deletes.truncate_marker, so such a change read later does not
    come back)."""
    return f"DELETE FROM {table} WHERE {CDC_SEQ} IS NULL OR {CDC_SEQ} < {seq}"


def partition_delete_sql(table: str, seq: int, condition: str) -> str:
    """A source DROP/TRUNCATE PARTITION: remove the rows the partition held (`condition`) written
    from a change older than the statement; a row changed after it is another row of the source."""
    return f"DELETE FROM {table} WHERE ({condition}) AND ({CDC_SEQ} IS NULL OR {CDC_SEQ} < {seq})"


def set_order_sql(table: str, column: str, members: tuple[str, ...], seq: int, kind: str = "SET") -> str:
    """A SET or ENUM column redefined at `seq`: each value written before it reads as the source
    converts it (ALTER copies by text; a member equal but for case is the new member): a SET lists its
    members in the new definition's order (its text is its members joined by commas, none holds a
    comma), a member no longer defined left out; an ENUM value no member matches is '' (what
    MariaDB/MySQL store for it under a non-strict sql_mode; strict refuses the ALTER)."""
    c, listed = quote(column), f"array({', '.join(map(sql_string, members))})"
    if kind == "ENUM":
        match = f"coalesce(element_at(filter({listed}, m -> lower(m) = lower({c})), 1), '')"
        ordered = f"CASE WHEN array_contains({listed}, {c}) THEN {c} ELSE {match} END"
    else:
        ordered = f"array_join(filter({listed}, m -> exists(split({c}, ','), v -> lower(v) = lower(m))), ',')"
    return (f"UPDATE {table} SET {c} = {ordered} WHERE {c} IS NOT NULL AND {c} <> {ordered} "
            f"AND ({CDC_SEQ} IS NULL OR {CDC_SEQ} < {seq})")  # fmt: skip
