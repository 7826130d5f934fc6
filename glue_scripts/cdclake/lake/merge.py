"""Lake tables: creation on first sight and the one atomic MERGE per table per batch."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ..common.conflicts import RetryPolicy, retry_on_conflict
from ..common.lake_contract import CDC_OFFSET, CDC_OP, CDC_SEQ, KEY_PROPERTY, METADATA_COLUMNS, WriteMode, keys_text
from ..common.sqltext import properties_sql, quote
from ..events.decode import COPY_COLUMN, META_COLUMNS
from ..events.ordering import newer_than
from .deletes import live_changes_sql, markers_if_any

log = logging.getLogger(__name__)

# A MERGE that loses to a concurrent compaction ("missing data files") is planned again from the new
# snapshot; patiently, because giving up fails the batch and with it the streaming job.
MERGE_RETRY = RetryPolicy(attempts=8, base_delay_s=1.0, max_delay_s=30.0)


def create_table_sql(
    table: str,
    columns: list[tuple[str, T.DataType]],
    keys: list[str],
    write_mode: WriteMode,
    replace: bool = False,
) -> str:
    """The statement that creates an Iceberg v2 table: key columns NOT NULL, the key named in the `cdc.primary-key` property.
    `replace`: replace an existing table in one commit (its snapshots stay in the metadata).

    The key is deliberately not declared as Iceberg identifier fields: with Iceberg 1.7.1 (Glue 5.0) a
    merge-on-read MERGE into a table that has identifier fields fails ("Cannot add fieldId 1 as an
    identifier field: field does not exist"), and the MERGE names its key columns itself."""
    key_lower = {k.lower() for k in keys}
    # A table without a key numbers the copies of a row (keyless.py).
    meta = META_COLUMNS + ([] if keys else [COPY_COLUMN])
    defs = [f"{quote(n)} {t.simpleString()}{' NOT NULL' if n.lower() in key_lower else ''}" for n, t in columns + meta]
    mode = WriteMode(write_mode).value
    props = {
        "format-version": "2",
        "write.delete.mode": mode,
        "write.update.mode": mode,
        "write.merge.mode": mode,
        # Position deletes, not equality deletes: every engine (Athena included) reads them.
        "write.delete.granularity": "file",
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "100",
        KEY_PROPERTY: keys_text(keys),
    }
    tblprops = properties_sql(props)
    create = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE IF NOT EXISTS"
    return f"{create} {table} ({', '.join(defs)}) USING iceberg TBLPROPERTIES ({tblprops})"


def drop_identifier_fields_sql(table: str, keys: list[str]) -> str:
    """Remove the key's identifier-field declaration from a table that has one (tables written by
    earlier releases): Iceberg 1.7.1's merge-on-read MERGE fails on such a table. Metadata only;
    Iceberg refuses it on a table without them (executor.Executor.drop_identifier_fields)."""
    return f"ALTER TABLE {table} DROP IDENTIFIER FIELDS {', '.join(quote(k) for k in keys)}"


def merge_sql(
    table: str,
    source_view: str,
    keys: list[str],
    columns: list[str],
    keep: dict[str, str] | None = None,
    markers: str | None = None,
) -> str:
    """One MERGE applying inserts, updates and deletes, guarded by the source-log position so a
    replayed or late change never overwrites a newer row, nor brings back a row deleted later
    (`markers`: the table's delete markers, deletes.py).

    `keep`: column -> SQL literal; an update whose value is that literal (the connector's
    placeholder for a value it could not send, see unavailable.py) leaves the lake value as it is."""
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    newer = newer_than(f"s.{CDC_SEQ}", f"s.{CDC_OFFSET}", f"t.{CDC_SEQ}", f"t.{CDC_OFFSET}")
    all_cols = columns + list(METADATA_COLUMNS)
    keep = keep or {}

    def assign(c: str) -> str:
        if c in keep:
            return f"t.{quote(c)} = CASE WHEN s.{quote(c)} = {keep[c]} THEN t.{quote(c)} ELSE s.{quote(c)} END"
        return f"t.{quote(c)} = s.{quote(c)}"

    set_list = ", ".join(assign(c) for c in all_cols)
    insert_cols = ", ".join(quote(c) for c in all_cols)
    insert_vals = ", ".join(f"s.{quote(c)}" for c in all_cols)
    source = live_changes_sql(source_view, markers, keys) if markers else source_view
    return (
        f"MERGE INTO {table} t USING {source} s ON {on} "
        f"WHEN MATCHED AND s.{CDC_OP} = 'd' AND {newer} THEN DELETE "
        f"WHEN MATCHED AND s.{CDC_OP} <> 'd' AND {newer} THEN UPDATE SET {set_list} "
        f"WHEN NOT MATCHED AND s.{CDC_OP} <> 'd' THEN INSERT ({insert_cols}) VALUES ({insert_vals})"
    )


class LookUp:
    """merge_changes(markers=LOOK_UP): the catalog says whether the table has markers to consult."""


LOOK_UP = LookUp()


def merge_changes(
    table: str,
    changes: DataFrame,
    keys: list[str],
    columns: list[str],
    keep: dict[str, str] | None = None,
    *,
    markers: str | None | LookUp = LOOK_UP,
) -> None:
    """Apply newest-per-key changes (data columns + _cdc_* metadata) to `table` in one commit.
    `markers`: the delete markers to anti-join the changes with (deletes.KnownMarkers.to_consult),
    None for none."""
    # Inside foreachBatch the batch DataFrame belongs to a cloned session: the temp view and the
    # MERGE must use that session, not the one the job started with.
    session = changes.sparkSession
    view = "cdc_changes_" + table.replace(".", "_").replace("`", "")
    changes.createOrReplaceTempView(view)
    try:
        # Safe to run again: the position guard makes a re-applied change a no-op.
        if isinstance(markers, LookUp):
            markers = markers_if_any(session, table)
        retry_on_conflict(
            lambda: session.sql(merge_sql(table, view, keys, columns, keep, markers)),
            f"MERGE into {table}",
            MERGE_RETRY,
        )
    finally:
        session.catalog.dropTempView(view)


def truncate_sql(table: str, seq: int) -> str:
    """A source TRUNCATE: remove every row written from a change older than the truncate (the
    executor then remembers it, deletes.remember_truncate, so such a change read later does not
    come back)."""
    return f"DELETE FROM {table} WHERE {CDC_SEQ} IS NULL OR {CDC_SEQ} < {seq}"
