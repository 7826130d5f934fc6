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
no markers. Readers never see
markers: the data table holds live rows only, and every reader here skips `__cdc_deletes` tables.
A source TRUNCATE is one marker for every key (`_cdc_key` '*', merge.truncate_before).
Maintenance removes markers older than `--maintenance_delete_retention_days`: a replay that must
beat a delete has to come within that time of the delete being applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..common.conflicts import RetryPolicy, retry_on_conflict
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
from .formats import Format

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

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


def create_markers(spark: SparkSession, table: str, fmt: Format) -> str:
    markers = marker_table(table)
    spark.sql(fmt.markers_sql(markers, MARKER_COLUMNS, table))
    return markers


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
    fmt: Format  # the lake's table format: the marker tables' DDL
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

    def ensure(self, table: str) -> str:
        """The marker table, created unless it is known to exist."""
        if self.newest(table) is None:
            create_markers(self.spark, table, self.fmt)
            self._newest[table] = -1
        return marker_table(table)

    def wrote(self, table: str, position: int) -> None:
        """Markers up to `position` were appended (a table not known yet is learnt when asked)."""
        if self._newest.get(table) is not None:
            self._newest[table] = max(self._newest[table] or -1, position)

    def forget(self, table: str | None = None) -> None:
        if table is None:
            self._newest.clear()
        else:
            self._newest.pop(table, None)


def _remember(table: str, deleted: DataFrame, retry: RetryPolicy, known: KnownMarkers, position: int = -1) -> None:
    """Append `deleted` (the marker columns, at positions up to `position`) to the table's markers,
    in one commit. An append reads nothing and never conflicts with a concurrent rewrite; a key
    deleted again, or a batch run again, adds a row, which the anti-join and the pruning handle
    alike."""
    markers = known.ensure(table)
    retry_on_conflict(lambda: deleted.writeTo(markers).append(), f"append to {markers}", retry)
    known.wrote(table, position)


def remember_keyed(
    table: str,
    changes: DataFrame,
    keys: list[str],
    columns: list[str],
    retry: RetryPolicy,
    known: KnownMarkers,
    position: int = -1,
) -> None:
    """Remember every delete among the batch's changes, not only the newest change per key: a
    delete followed by a newer change of its key overrules only changes older than itself, which
    that newer change overrules too. So the append needs no newest-per-key aggregate (a shuffle)."""
    deleted = changes.where(F.col(CDC_OP) == "d").select(
        F.to_json(F.struct(*[F.col(quote(k)).alias(k.lower()) for k in keys])).alias(CDC_KEY),
        CDC_SEQ,
        CDC_OFFSET,
        F.col(CDC_INGESTED_AT).alias(CDC_DELETED_AT),
        row_json(columns).alias(CDC_ROW),
    )
    _remember(table, deleted, retry, known, position)


def remember_images(
    table: str,
    changes: DataFrame,
    columns: list[str],
    match: list[str],
    retry: RetryPolicy,
    known: KnownMarkers,
    position: int = -1,
) -> None:
    """Remember the row images (tables without a key) whose newest change in the batch removes a
    copy: a delete, or the `before` of an update (keyless.py)."""
    newest = F.max(F.struct(CDC_SEQ, CDC_OFFSET, CDC_OP, CDC_INGESTED_AT, CDC_ROW)).alias("n")
    deleted = (
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
    _remember(table, deleted, retry, known, position)


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


def remember_truncate(spark: SparkSession, table: str, seq: int, retry: RetryPolicy, known: KnownMarkers) -> None:
    """A source TRUNCATE (or a table dropped and created again) at `seq`: one marker for every key
    (`_cdc_key` '*'), so a change older than it read later is dropped too. Offset -1: a change at
    the truncate's own position is newer (truncate_before keeps it)."""
    row = spark.createDataFrame(
        [(ALL_KEYS, seq, -1, None)], f"{CDC_KEY} string, _seq string, {CDC_OFFSET} bigint, {CDC_ROW} string"
    )
    marker = row.select(
        CDC_KEY,
        F.col("_seq").cast("decimal(38,0)").alias(CDC_SEQ),
        CDC_OFFSET,
        F.current_timestamp().alias(CDC_DELETED_AT),
        CDC_ROW,
    )
    _remember(table, marker, retry, known, seq)


def newest_markers(markers: DataFrame) -> DataFrame:
    """One row per key: its newest remembered delete's position (`_mkey`, `_mpos`)."""
    return markers.groupBy(F.col(CDC_KEY).alias("_mkey")).agg(F.max(F.struct(CDC_SEQ, CDC_OFFSET)).alias("_mpos"))


def newest_truncate(markers: DataFrame) -> DataFrame:
    """One row: the newest remembered truncate's position (`_tpos`, null when none)."""
    return markers.where(F.col(CDC_KEY) == ALL_KEYS).agg(F.max(F.struct(CDC_SEQ, CDC_OFFSET)).alias("_tpos"))


def rekey_markers(spark: SparkSession, table: str, keys: list[str], columns: T.StructType) -> None:
    """The source's primary key changed (lake_tables.rekey): the markers' keys are rebuilt from the
    deleted rows' images, under the new key (or as images, for a table that lost its key)."""
    markers = markers_if_any(spark, table)
    if markers is None:
        return
    row = F.from_json(F.col(CDC_ROW), columns)
    names = [f.name for f in columns.fields]
    if keys:
        key = F.to_json(F.struct(*[row.getField(k).alias(k.lower()) for k in keys]))
    else:
        key = F.sha2(F.to_json(F.struct(*[row.getField(c).alias(c.lower()) for c in names])), 256)
    key = F.when(F.col(CDC_KEY) == ALL_KEYS, F.lit(ALL_KEYS)).otherwise(key)  # a truncate stays one
    rebuilt = spark.table(markers).withColumn(CDC_KEY, key).where(F.col(CDC_KEY).isNotNull())
    # Read before the overwrite commits: one commit replaces every marker.
    rebuilt.localCheckpoint(eager=True).writeTo(markers).overwrite(F.lit(True))


def prune_sql(markers: str, older_than: str) -> str:
    """Markers applied before `older_than` (a timestamp literal) go: the maintenance bound."""
    return f"DELETE FROM {markers} WHERE {CDC_DELETED_AT} < {older_than}"


def drop_markers(spark: SparkSession, table: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {marker_table(table)}")


def move_markers(spark: SparkSession, old: str, new: str, fmt: Format) -> None:
    """A lake table renamed (lake_tables.rename_tables): its markers follow it."""
    if markers_if_any(spark, old) is None or _exists(spark, marker_table(new)):
        return
    spark.sql(fmt.moved_markers_sql(marker_table(new), marker_table(old), new))
    drop_markers(spark, old)
