"""Delete memory: the source-log position of every deleted key, so an older change loses to it.

The MERGE guard (merge.py) compares a change with the stored row's position; a delete removes the
row and with it the position. Without a memory, an insert or update older than the delete that
arrives after it (a dead letter replayed after a fix, a raw-zone rebuild into current tables, a
checkpoint reset, any feed out of order) would re-create the row.

Each lake table that has seen a delete has a marker table beside it, `<table>__cdc_deletes`:

    _cdc_key         the deleted key as JSON of its columns (tables without a key: a SHA-256 of
                     the row image's JSON, see keyless.py)
    _cdc_seq, _cdc_offset   the position of the newest delete of that key
    _cdc_deleted_at  when the job applied it (what the maintenance bound counts from)
    _cdc_row         the deleted row's image as JSON (a primary key changed at the source re-keys
                     the markers from it)

The table's one MERGE reads its changes anti-joined with the markers: an insert or update not
newer than a delete of its key is dropped there, inside the same guarded MERGE. After it commits,
the batch's deletes are appended to the markers, in a commit of their own: a crash between the two
re-runs the batch (its offsets are not committed), whose MERGE then changes nothing and whose
markers are written then. Within a batch the changes of a key are
ordered as before, so the batch's own deletes need no marker. The job knows, between batches, the
newest position its markers hold (`KnownMarkers`): a batch whose changes are all newer than that,
as every batch of a stream read in order is, cannot lose a change to a marker, and its MERGE reads
no markers. This module builds the markers' statements and rows; the executor (executor.py)
creates, appends to, rewrites and drops marker tables. Readers never see
markers: the data table holds live rows only, and every reader here skips `__cdc_deletes` tables.
A source TRUNCATE is one marker for every key (`_cdc_key` '*', `truncate_marker`).
Maintenance removes markers older than `--maintenance_delete_retention_days`: a replay that must
beat a delete has to come within that time of the delete being applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..common.lake_contract import (
    CDC_DELETED_AT,
    CDC_INGESTED_AT,
    CDC_KEY,
    CDC_OFFSET,
    CDC_OP,
    CDC_ROW,
    CDC_SEQ,
    MARKER_SUFFIX,
)
from ..common.sqltext import quote, sql_string
from ..events.ordering import newer_than

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

    from .formats import Format

ALL_KEYS = "*"  # the `_cdc_key` of a truncate's marker: it stands for every key
MARKER_COLUMNS = f"{CDC_KEY} string NOT NULL, {CDC_SEQ} decimal(38,0), {CDC_OFFSET} bigint, {CDC_DELETED_AT} timestamp, {CDC_ROW} string"


def marker_table(table: str) -> str:
    """The marker table of a lake table (same catalog and namespace)."""
    return table + MARKER_SUFFIX


def is_marker_table(name: str) -> bool:
    return name.lower().endswith(MARKER_SUFFIX)


def key_json_sql(alias: str, keys: list[str]) -> str:
    """SQL: a keyed row's `_cdc_key` (the key columns as JSON, names in lower case)."""
    fields = ", ".join(f"{sql_string(k.lower())}, {alias}.{quote(k)}" for k in keys)
    return f"to_json(named_struct({fields}))"


def image_key(columns: list[str], alias: str = "") -> Column:
    """A keyless row's `_cdc_key`: the SHA-256 of its image over `columns` (names in lower case)."""
    prefix = f"{alias}." if alias else ""
    return F.sha2(F.to_json(F.struct(*[F.col(prefix + quote(c)).alias(c.lower()) for c in columns])), 256)


def row_json(columns: list[str]) -> Column:
    return F.to_json(F.struct(*[F.col(quote(c)) for c in columns]))


def _exists(spark: SparkSession, table: str) -> bool:
    return spark.catalog.tableExists(table)


def markers_if_any(spark: SparkSession, table: str) -> str | None:
    """The table's marker table, or None when it has none (no delete seen yet)."""
    markers = marker_table(table)
    return markers if _exists(spark, markers) else None


def create_markers_sql(table: str, fmt: Format) -> str:
    """SQL: the marker table of `table`, created in the lake's table format."""
    return fmt.markers_sql(marker_table(table), MARKER_COLUMNS, table)


def drop_markers_sql(table: str) -> str:
    return f"DROP TABLE IF EXISTS {marker_table(table)}"


@dataclass
class KnownMarkers:
    """Each lake table's markers as the job knows them between batches: whether the marker table
    exists, and a position no marker is newer than. Learnt from the catalog (and one aggregate
    over the markers) the first time a table is asked about, then kept up to date by the job's own
    writes, so a steady stream makes no catalog call for its markers and reads them only when a
    change is not newer than that position (a replay, a reset, a feed out of order). Like the
    table state (lake_tables.LakeTables), forgotten after a failure: the catalog is the truth.
    Maintenance only removes markers, which leaves the position an upper bound still."""

    spark: SparkSession
    # table -> newest marker position (-1: the marker table is empty), None: no marker table
    _newest: dict[str, int | None] = field(default_factory=dict, init=False, repr=False)

    def newest(self, table: str) -> int | None:
        if table not in self._newest:
            markers = marker_table(table)
            if not _exists(self.spark, markers):
                self._newest[table] = None
            else:
                top = self.spark.table(markers).agg(F.max(CDC_SEQ)).first()[0]
                self._newest[table] = -1 if top is None else int(top)
        return self._newest[table]

    def to_consult(self, table: str, oldest: int | None) -> str | None:
        """The marker table a MERGE of changes at positions from `oldest` on (None: unknown) must
        anti-join with, or None when no marker can overrule any of them."""
        newest = self.newest(table)
        if newest is None or (oldest is not None and newest < oldest):
            return None
        return marker_table(table)

    def created(self, table: str) -> None:
        """The table's marker table was created (empty)."""
        self._newest[table] = -1

    def wrote(self, table: str, position: int) -> None:
        """Markers up to `position` were appended (a table not known yet is learnt when asked)."""
        if self._newest.get(table) is not None:
            self._newest[table] = max(self._newest[table] or -1, position)

    def forget(self, table: str | None = None) -> None:
        if table is None:
            self._newest.clear()
        else:
            self._newest.pop(table, None)


def keyed_deletes(changes: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    """The markers of every delete among the batch's changes, not only the newest change per key: a
    delete followed by a newer change of its key overrules only changes older than itself, which
    that newer change overrules too. So the append needs no newest-per-key aggregate (a shuffle)."""
    return changes.where(F.col(CDC_OP) == "d").select(
        F.to_json(F.struct(*[F.col(quote(k)).alias(k.lower()) for k in keys])).alias(CDC_KEY),
        CDC_SEQ,
        CDC_OFFSET,
        F.col(CDC_INGESTED_AT).alias(CDC_DELETED_AT),
        row_json(columns).alias(CDC_ROW),
    )


def image_deletes(changes: DataFrame, columns: list[str], match: list[str]) -> DataFrame:
    """The markers of the row images (tables without a key) whose newest change in the batch
    removes a copy: a delete, or the `before` of an update (keyless.py)."""
    newest = F.max(F.struct(CDC_SEQ, CDC_OFFSET, CDC_OP, CDC_INGESTED_AT, CDC_ROW)).alias("n")
    return (
        changes.select(
            image_key(match).alias(CDC_KEY),
            CDC_SEQ,
            CDC_OFFSET,
            CDC_OP,
            CDC_INGESTED_AT,
            row_json(columns).alias(CDC_ROW),
        )
        .groupBy(CDC_KEY)
        .agg(newest)
        .where(F.col(f"n.{CDC_OP}") == "d")
        .select(
            CDC_KEY,
            F.col(f"n.{CDC_SEQ}").alias(CDC_SEQ),
            F.col(f"n.{CDC_OFFSET}").alias(CDC_OFFSET),
            F.col(f"n.{CDC_INGESTED_AT}").alias(CDC_DELETED_AT),
            F.col(f"n.{CDC_ROW}").alias(CDC_ROW),
        )
    )


def overrules_sql(marker: str, change: str) -> str:
    """SQL predicate, the decision: the remembered delete (alias `marker`) of the change's key
    overrules the change (alias `change`). A delete is never overruled (the MERGE's own guard
    decides); an insert or update is when it is not newer than the delete."""
    newer = newer_than(f"{change}.{CDC_SEQ}", f"{change}.{CDC_OFFSET}", f"{marker}.{CDC_SEQ}", f"{marker}.{CDC_OFFSET}")
    return f"({change}.{CDC_OP} <> 'd' AND NOT {newer})"


def live_changes_sql(source_view: str, markers: str, keys: list[str]) -> str:
    """SQL: the changes of `source_view` that no remembered delete of their key, nor a remembered
    truncate, overrules (anti-joins: a key may have several markers)."""
    return (
        f"(SELECT s.* FROM {source_view} s WHERE NOT EXISTS (SELECT 1 FROM {markers} d "
        f"WHERE d.{CDC_KEY} = {key_json_sql('s', keys)} AND {overrules_sql('d', 's')}) "
        f"AND NOT EXISTS (SELECT 1 FROM {markers} d WHERE d.{CDC_KEY} = {sql_string(ALL_KEYS)} "
        f"AND {overrules_sql('d', 's')}))"
    )


def truncate_marker(spark: SparkSession, seq: int) -> DataFrame:
    """A source TRUNCATE (or a table dropped and created again) at `seq`: one marker for every key
    (`_cdc_key` '*'), so a change older than it read later is dropped too. Offset -1: a change at
    the truncate's own position is newer (the write keeps it)."""
    row = spark.createDataFrame(
        [(ALL_KEYS, seq, -1, None)], f"{CDC_KEY} string, _seq string, {CDC_OFFSET} bigint, {CDC_ROW} string"
    )
    return row.select(
        CDC_KEY,
        F.col("_seq").cast("decimal(38,0)").alias(CDC_SEQ),
        CDC_OFFSET,
        F.current_timestamp().alias(CDC_DELETED_AT),
        CDC_ROW,
    )


def newest_markers(markers: DataFrame) -> DataFrame:
    """One row per key: its newest remembered delete's position (`_mkey`, `_mpos`)."""
    return markers.groupBy(F.col(CDC_KEY).alias("_mkey")).agg(F.max(F.struct(CDC_SEQ, CDC_OFFSET)).alias("_mpos"))


def newest_truncate(markers: DataFrame) -> DataFrame:
    """One row: the newest remembered truncate's position (`_tpos`, null when none)."""
    return markers.where(F.col(CDC_KEY) == ALL_KEYS).agg(F.max(F.struct(CDC_SEQ, CDC_OFFSET)).alias("_tpos"))


def rekeyed_markers(markers: DataFrame, keys: list[str], columns: T.StructType) -> DataFrame:
    """The source's primary key changed (table_plan.Rekey): the markers' keys rebuilt from the
    deleted rows' images, under the new key (or as images, for a table that lost its key)."""
    row = F.from_json(F.col(CDC_ROW), columns)
    names = [f.name for f in columns.fields]
    if keys:
        key = F.to_json(F.struct(*[row.getField(k).alias(k.lower()) for k in keys]))
    else:
        key = F.sha2(F.to_json(F.struct(*[row.getField(c).alias(c.lower()) for c in names])), 256)
    key = F.when(F.col(CDC_KEY) == ALL_KEYS, F.lit(ALL_KEYS)).otherwise(key)  # a truncate stays one
    return markers.withColumn(CDC_KEY, key).where(F.col(CDC_KEY).isNotNull())


def prune_sql(markers: str, older_than: str) -> str:
    """Markers applied before `older_than` (a timestamp literal) go: the maintenance bound."""
    return f"DELETE FROM {markers} WHERE {CDC_DELETED_AT} < {older_than}"


def markers_to_move(spark: SparkSession, old: str, new: str) -> bool:
    """A lake table renamed: whether its markers are to follow it (it has some, and the new name
    has none yet: a move run again after a crash finds them moved)."""
    return markers_if_any(spark, old) is not None and not _exists(spark, marker_table(new))
