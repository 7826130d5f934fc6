"""Runs a table's plan (table_plan.py) against the catalog: the one place the batch's DDL, MERGEs
and marker writes run.

Each step is one or a few statements, built by the pure SQL text functions where they live
(evolution.py, merge.py, keyless.py, deletes.py, formats.py); the write step decodes the table's
schema groups and hands them to the `Writes` (by default this module's `merge_changes` and
`merge_multiset`), then appends the batch's delete markers. What the plan leaves (the table's state, what the
process remembers of it) goes back to `LakeTables` once the steps ran; a step that changed the
table in a way the plan does not model exactly (renames, drops, a new key, the drop mark) makes
the next batch read the table's state from the catalog again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.conflicts import retry_on_conflict
from ..common.lake_contract import (
    ALL_METADATA_COLUMNS,
    CDC_COPY,
    CDC_INGESTED_AT,
    CDC_SEQ,
    COLUMN_CHANGES_PROPERTY,
    KEY_BATCH_PROPERTY,
    KEY_POSITION_PROPERTY,
    KEY_PROPERTY,
    PROPERTY_PREFIX,
    SET_ASIDE_PROPERTY,
    SOURCE_DROP_PROPERTIES,
    SOURCE_DROPPED_POSITION_PROPERTY,
    SOURCE_DROPPED_PROPERTY,
    WriteMode,
    keys_text,
)
from ..common.report import TableReport
from ..common.sqltext import properties_sql, quote, sql_string, table_properties
from ..events.decode import RAW_KEEP, SchemaGroup, as_leaf, conform, decode_group, group_rows, to_lake_names
from ..events.ordering import latest_per_key
from . import table_plan
from .deadletter import as_dead_letters
from .deletes import (
    KnownMarkers,
    create_markers_sql,
    drop_markers_sql,
    image_deletes,
    keyed_deletes,
    marker_table,
    markers_if_any,
    markers_to_move,
    rekeyed_markers,
    truncate_marker,
)
from .evolution import Columns, alter_sql, backfill_sql, carried_properties, default_sql
from .formats import Format, Iceberg
from .keyless import copies_to_write, merge_multiset_sql
from .merge import MERGE_RETRY, merge_sql, truncate_sql
from .unavailable import carry_within_batch, keep_existing, placeholder_columns

log = logging.getLogger("cdclake")

_LEVELS = {
    table_plan.Level.INFO: logging.INFO,
    table_plan.Level.WARNING: logging.WARNING,
    table_plan.Level.ERROR: logging.ERROR,
}


@dataclass
class Written:
    """One write of a table in the batch: its decoded rows (decode.as_leaf) and what counting them needs."""

    ident: str
    report: TableReport
    decoded: DataFrame
    good: list[SchemaGroup]
    columns: Columns
    fills: dict[str, str]
    keys: list[str]


@dataclass
class Execution:
    """One table's plan being run: where it writes, what it has written and rejected."""

    ident: str
    groups: list[SchemaGroup]
    report: TableReport
    batch_id: int
    full: DataFrame  # the batch's classified records (dead letters are built from them)
    cached: DataFrame  # the same, persisted, without key and value text (decoded from them)
    written: list[Written]  # the batch's list: counted after every table's write
    dead: list[DataFrame] = field(default_factory=list)
    fills: dict[str, str] = field(default_factory=dict)  # source defaults of the run being written


class Executor:
    """Runs plans. `write_mode`: what a created table's row-level writes do; `writes`: the keyed and
    keyless writes; `placeholder`: the connector's unavailable-value text;
    `fmt`: the table format, whose DDL differs (formats.py)."""

    def __init__(
        self, spark: SparkSession, write_mode: WriteMode, writes: Writes, placeholder: str, fmt: Format | None = None
    ) -> None:
        self.spark = spark
        self.write_mode = write_mode
        self.writes = writes
        self.placeholder = placeholder
        self.fmt = fmt or Iceberg()
        self.markers = KnownMarkers(spark)  # what the job knows of each table's delete markers

    def run(self, plan: table_plan.TablePlan, ex: Execution) -> None:
        """Every step of `plan`, in order."""
        for step in plan.steps:
            getattr(self, "_" + type(step).__name__)(step, ex)

    def sql(self, statement: str) -> DataFrame:
        return self.spark.sql(statement)

    # -------------------------------------------------------------- notes and dead letters
    def _Note(self, s: table_plan.Note, ex: Execution) -> None:
        log.log(_LEVELS[s.level], s.message)

    def _ColumnsChanged(self, s: table_plan.ColumnsChanged, ex: Execution) -> None:
        log.log(_LEVELS[s.level], "table %s: %s", ex.ident, s.what)

    def _RememberEarly(self, s: table_plan.RememberEarly, ex: Execution) -> None:
        """Nothing to do in the catalog: LakeTables keeps them (TablePlan.memory)."""

    def _ReplaceOnCreate(self, s: table_plan.ReplaceOnCreate, ex: Execution) -> None:
        log.info("table %s: created again at the source with another key; replaced at its creation", ex.ident)

    def _DeadLetter(self, s: table_plan.DeadLetter, ex: Execution) -> None:
        """The group's records as dead letters, counted in the table's report."""
        g = ex.groups[s.group]
        if s.loud:
            log.error("table %s: %d event(s) rejected to dead letters: %s", ex.ident, g.events, s.reason)
        ex.dead.append(as_dead_letters(group_rows(ex.full, g), s.reason, ex.batch_id))
        tr = ex.report
        tr.dead += g.events
        tr.dead_reasons[s.reason] = tr.dead_reasons.get(s.reason, 0) + g.events

    # -------------------------------------------------------------- column renames and drops
    def _RenameColumn(self, s: table_plan.RenameColumn, ex: Execution) -> None:
        # The source name of an escaped name first (formats.Format.name_properties).
        self._name_properties(ex.ident, [s.new])
        # Metadata only: Iceberg columns have ids, Delta's tables map names (formats.DELTA_COLUMN_MAPPING).
        self.sql(f"ALTER TABLE {ex.ident} RENAME COLUMN {quote(s.old)} TO {quote(s.new)}")

    def _CopyThenDrop(self, s: table_plan.CopyThenDrop, ex: Execution) -> None:
        # Re-running this is harmless: the old column is dropped last.
        new, old = quote(s.new), quote(s.old)
        self.sql(f"UPDATE {ex.ident} SET {new} = {old} WHERE {CDC_SEQ} IS NULL OR {CDC_SEQ} < {s.seq}")
        self.sql(f"ALTER TABLE {ex.ident} DROP COLUMN {old}")

    def _DropColumn(self, s: table_plan.DropColumn, ex: Execution) -> None:
        self.sql(f"ALTER TABLE {ex.ident} DROP COLUMN {quote(s.name)}")

    def _SetKey(self, s: table_plan.SetKey, ex: Execution) -> None:
        self._set_properties(ex.ident, {KEY_PROPERTY: keys_text(list(s.keys))})

    def _RecordColumnChanges(self, s: table_plan.RecordColumnChanges, ex: Execution) -> None:
        self._set_properties(ex.ident, {COLUMN_CHANGES_PROPERTY: table_plan.dumps(list(s.changes))})

    def _name_properties(self, ident: str, lake_names: list[str]) -> None:
        props = self.fmt.name_properties(lake_names)
        if props:
            self._set_properties(ident, props)

    def _set_properties(self, ident: str, props: dict[str, str]) -> None:
        self.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({properties_sql(props)})")

    def _unset_properties(self, ident: str, names: list[str]) -> None:
        self.sql(f"ALTER TABLE {ident} UNSET TBLPROPERTIES IF EXISTS ({', '.join(map(sql_string, names))})")

    # -------------------------------------------------------------- a primary key changed at the source
    def _Rekey(self, s: table_plan.Rekey, ex: Execution) -> None:
        """The source's primary key changed by ALTER TABLE: the lake table keeps its rows and takes
        the new key, metadata only. Each statement can run again; the copy column a multiset MERGE
        reads goes last, after the key property, so a batch run again before that still finds it."""
        fields = {f.name.lower(): f for f in self.spark.table(ex.ident).schema.fields}
        new = {k.lower() for k in s.keys}
        for k in s.old_keys:
            f = fields.get(k.lower())
            if f is not None and k.lower() not in new and not f.nullable:
                self.sql(f"ALTER TABLE {ex.ident} ALTER COLUMN {quote(f.name)} DROP NOT NULL")
        # The markers first: a batch run again re-keys them again from the rows they keep.
        data = [f for f in self.spark.table(ex.ident).schema.fields if f.name not in ALL_METADATA_COLUMNS]
        markers = markers_if_any(self.spark, ex.ident)
        if markers is not None:
            rebuilt = rekeyed_markers(self.spark.table(markers), list(s.keys), T.StructType(data))
            # Read before the overwrite commits: one commit replaces every marker.
            rebuilt.localCheckpoint(eager=True).writeTo(markers).overwrite(F.lit(True))
        self.markers.forget(ex.ident)
        keys = list(s.keys)
        props = {KEY_PROPERTY: keys_text(keys), KEY_POSITION_PROPERTY: str(s.position), KEY_BATCH_PROPERTY: s.batch}
        self._set_properties(ex.ident, props)
        if CDC_COPY in fields:
            self.sql(f"ALTER TABLE {ex.ident} DROP COLUMN {CDC_COPY}")
        what = f"primary key {_key_text(list(s.old_keys))} -> {_key_text(keys)}"
        log.warning("table %s: %s at the source; the lake table keeps its rows under the new key", ex.ident, what)

    # -------------------------------------------------------------- create and evolve
    def _ColumnDefaults(self, s: table_plan.ColumnDefaults, ex: Execution) -> None:
        """Each candidate's source default as a SQL literal (one row through Spark each)."""
        for name, index, column in s.candidates:
            spec = next(c for c in ex.groups[index].columns or [] if c.name == column)
            expr = default_sql(self.spark, spec)
            if expr is not None:
                ex.fills[name] = expr
        ex.fills.update(dict(s.literals))

    def _CreateTable(self, s: table_plan.CreateTable, ex: Execution) -> None:
        keys = list(s.keys)
        self.sql(self.fmt.create_table_sql(ex.ident, s.columns, keys, self.write_mode, s.replace))
        log.info(
            "table %s %s: key %s, %d columns",
            ex.ident,
            "replaced (created again at the source with another key)" if s.replace else "created",
            keys or "none (rows as a multiset)",
            len(s.columns),
        )
        if s.replace:
            # REPLACE TABLE keeps table properties: what the dropped table carried goes (its drop
            # mark, recorded column changes, pending backfills), and so do its deletes, under its key.
            stale = [k for k in table_properties(self.spark, ex.ident) if k.startswith(PROPERTY_PREFIX)]
            stale = [k for k in stale if k != KEY_PROPERTY]
            if stale:
                self._unset_properties(ex.ident, stale)
            self.sql(drop_markers_sql(ex.ident))
            self.markers.forget(ex.ident)
        if s.record:
            self._RecordColumnChanges(table_plan.RecordColumnChanges(s.record), ex)

    def _AlterSchema(self, s: table_plan.AlterSchema, ex: Execution) -> None:
        added = {n.lower() for n, _ in s.plan.add}
        fills = {n: e for n, e in ex.fills.items() if n.lower() in added}
        # A column type behind a table feature (Delta's timestamp_ntz) needs the feature first.
        existing = [t for n, t in s.plan.final if n.lower() not in added]
        features = self.fmt.features_sql(ex.ident, existing, [t for _, t in s.plan.add])
        if features:
            self.sql(features)
        self._name_properties(ex.ident, [n for n, _ in s.plan.add])
        for statement in alter_sql(ex.ident, s.plan, fills, widen=self.fmt.widens_in_place):
            self.sql(statement)
        if s.plan.widen and not self.fmt.widens_in_place:
            # Every widening converts each value exactly: a rewrite is the same change, one commit.
            self._rewrite(ex.ident, [(n, new) for n, _old, new in s.plan.widen])
        log.info("table %s schema evolved: %s", ex.ident, s.plan.describe())

    def _RewriteType(self, s: table_plan.RewriteType, ex: Execution) -> None:
        statements = self.fmt.retype_sql(ex.ident, s.plan.rewrite)
        if statements is None:
            self._rewrite(ex.ident, s.plan.final)
        for statement in statements or []:
            self.sql(statement)

    def _rewrite(self, ident: str, final: Columns) -> None:
        """One REPLACE TABLE ... AS SELECT commit: readers see the old table or the converted one,
        with its properties, partitioning and (Iceberg, formats.Iceberg.session_conf) required key.
        REPLACE resets a sort order (the job sets none): a metadata commit right after sets it back."""
        current = [f.name for f in self.spark.table(ident).schema.fields]
        props = carried_properties(self.spark, ident, self.fmt.reserved_properties)
        described = [(r["col_name"], r["data_type"]) for r in self.sql(f"DESCRIBE TABLE EXTENDED {ident}").collect()]
        order = self.fmt.write_order_sql(ident, self._sort_fields(ident))
        self.sql(self.fmt.rewrite_sql(ident, current, final, props, self.fmt.partition_terms(described)))
        if order:
            self.sql(order)

    def _sort_fields(self, ident: str) -> list[tuple[str, str, str, str]]:
        """(column, transform, direction, null order) of each of the table's sort fields, from
        Iceberg's own table object (Spark SQL shows the order only as unquoted text)."""
        if not self.fmt.sort_orders:
            return []
        jvm = self.spark.sparkContext._jvm
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, ident)  # type: ignore[union-attr]
        schema = table.schema()
        return [
            (
                schema.findColumnName(f.sourceId()),
                f.transform().toString(),
                f.direction().toString(),
                f.nullOrder().toString(),
            )
            for f in table.sortOrder().fields()
        ]

    def _BackfillDefaults(self, s: table_plan.BackfillDefaults, ex: Execution) -> None:
        pending = dict(s.pending)
        pending.update({n: e for n, e in ex.fills.items() if n.lower() in s.added})
        if not pending:
            return
        for name, expr in pending.items():
            for statement in backfill_sql(ex.ident, name, expr):
                self.sql(statement)
        log.info("table %s: existing rows given the source default of %s", ex.ident, ", ".join(pending))

    # -------------------------------------------------------------- truncate and write
    def _Truncate(self, s: table_plan.Truncate, ex: Execution) -> None:
        self._truncate(ex.ident, s.seq)

    def _truncate(self, ident: str, seq: int) -> None:
        """Rows older than `seq` go, and the truncate is remembered (deletes.py): such a change
        read later does not come back."""
        self.sql(truncate_sql(ident, seq))
        self._remember(ident, truncate_marker(self.spark, seq), seq)

    def _Write(self, s: table_plan.Write, ex: Execution) -> None:
        """Decode the groups and write what decodes. The decoded rows are kept until the
        batch counts them (table_writer.count_written): the events per op and those that did not decode."""
        good = []
        for v in s.groups:
            g = ex.groups[v.index]
            g.renamed, g.ignored = dict(v.renamed), set(v.ignored)
            good.append(g)
        fills, ex.fills = ex.fills, {}
        columns, keys = list(s.columns), list(s.keys)
        decoded = as_leaf(decoded_rows(ex.cached, good, columns, fills))
        ex.written.append(Written(ex.ident, ex.report, decoded, good, columns, fills, keys))
        changes = decoded.where(F.col("_decode_error").isNull()).drop("_decode_error", *[f"_raw_{c}" for c in RAW_KEEP])
        if s.truncate is not None:
            self._truncate(ex.ident, s.truncate)
            changes = changes.where(F.col(CDC_SEQ) > F.lit(str(s.truncate)).cast(T.DecimalType(38, 0)))
        changes = changes.withColumn(CDC_INGESTED_AT, F.current_timestamp())
        self._merge(ex.ident, changes, s, columns, good)

    def _merge(
        self, ident: str, changes: DataFrame, s: table_plan.Write, columns: Columns, good: list[SchemaGroup]
    ) -> None:
        """Write the decoded changes: newest per key, or per row image for a table without a key.
        Then the batch's deletes are remembered (deletes.py) for later batches' writes; a crash
        between the two commits re-runs the batch, which writes them then."""
        names = [n for n, _ in columns]
        keys = list(s.keys)
        # Read the markers only when one may be newer than a change: not in a stream read in order.
        oldest = None if any(g.min_seq is None for g in good) else min(g.min_seq or 0 for g in good)
        markers = self.markers.to_consult(ident, oldest)
        newest_seq = max(g.max_seq for g in good)
        if not keys:
            self.writes.keyless(ident, changes, names, list(s.match), markers=markers)
            if s.deletes:
                self._remember(ident, image_deletes(changes, names, list(s.match)), newest_seq)
            return
        newest = latest_per_key(changes, keys)
        keep = None
        unavailable = placeholder_columns(columns, self.placeholder) if s.toasted else {}
        if unavailable:
            # Only batches with an update lacking a TOASTed value pay for this (unavailable.py).
            newest = carry_within_batch(newest, changes, keys, unavailable, self.placeholder)
            keep = keep_existing(unavailable, self.placeholder)
        self.writes.keyed(ident, newest, keys, names, keep, markers=markers)
        if s.deletes:
            self._remember(ident, keyed_deletes(changes, keys, names), newest_seq)

    def _remember(self, ident: str, deleted: DataFrame, position: int) -> None:
        """Append `deleted` (the marker columns, at positions up to `position`) to the table's
        markers, in one commit; the marker table is created first unless it is known to exist. An
        append reads nothing and never conflicts with a concurrent rewrite; a key deleted again, or
        a batch run again, adds a row, which the anti-join and the pruning handle alike."""
        if self.markers.newest(ident) is None:
            self.sql(create_markers_sql(ident, self.fmt))
            self.markers.created(ident)
        markers = marker_table(ident)

        def append() -> None:
            if self.fmt.v2_writes:
                deleted.writeTo(markers).append()
            else:  # by position: `deleted` has the marker table's columns in their order
                deleted.write.insertInto(markers)

        retry_on_conflict(append, f"append to {markers}", MERGE_RETRY)
        self.markers.wrote(ident, position)

    # -------------------------------------------------------------- a DROP TABLE at the source
    def _UnmarkDropped(self, s: table_plan.UnmarkDropped, ex: Execution) -> None:
        self._unset_properties(ex.ident, list(SOURCE_DROP_PROPERTIES))
        log.info("table %s: created again at the source; rows older than its drop removed, mark cleared", ex.ident)

    def _MarkDropped(self, s: table_plan.MarkDropped, ex: Execution) -> None:
        when = datetime.fromtimestamp(s.drop_ts or time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self._set_properties(
            ex.ident, {SOURCE_DROPPED_PROPERTY: when, SOURCE_DROPPED_POSITION_PROPERTY: str(s.drop_seq)}
        )
        log.warning(
            "table %s: dropped at the source at %s; lake table kept, marked %s", ex.ident, when, SOURCE_DROPPED_PROPERTY
        )

    def _DropTable(self, s: table_plan.DropTable, ex: Execution) -> None:
        self.sql(f"DROP TABLE IF EXISTS {ex.ident}")
        self.sql(drop_markers_sql(ex.ident))
        self.markers.forget(ex.ident)
        log.warning("table %s: dropped at the source, lake table dropped (--dropped_table_policy drop)", ex.ident)

    # -------------------------------------------------------------- a table set aside (jobs/batch.py)
    def mark_set_aside(self, ident: str, mark: str | None) -> None:
        """Set (a `SetAsideMark` as JSON) or clear (None) the table's set-aside property."""
        if mark is None:
            self._unset_properties(ident, [SET_ASIDE_PROPERTY])
        else:
            self._set_properties(ident, {SET_ASIDE_PROPERTY: mark})

    def table_exists(self, ident: str) -> bool:
        return bool(self.spark.catalog.tableExists(ident))

    # -------------------------------------------------------------- reads before planning
    def has_rows_after(self, ident: str, seq: int) -> bool:
        """Whether the lake table holds rows newer than `seq` (table_plan.drop_probe)."""
        return bool(self.sql(f"SELECT 1 FROM {ident} WHERE {CDC_SEQ} > {seq} LIMIT 1").count())

    def rows_after(self, ident: str, seq: int) -> int:
        return int(self.sql(f"SELECT count(*) AS n FROM {ident} WHERE {CDC_SEQ} > {seq}").first()["n"])  # type: ignore[index]

    def table_names(self, namespace: str) -> list[str]:
        # The session catalog (Delta's) lists the session's temporary views too.
        return [r["tableName"] for r in self.sql(f"SHOW TABLES IN {namespace}").collect() if not r["isTemporary"]]

    # -------------------------------------------------------------- the namespace and its tables
    def create_namespace(self, namespace: str) -> None:
        self.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")

    def drop_identifier_fields(self, ident: str, keys: list[str]) -> bool:
        """Drop a table's identifier fields (formats.Iceberg.key_fields_sql); False when it had none
        or the format declares no key."""
        statement = self.fmt.key_fields_sql(ident, keys)
        if statement is None:
            return False
        try:
            self.sql(statement)
        except Exception as e:
            if "identifier field" not in str(e).lower():
                raise
            return False
        log.warning(
            "table %s: dropped its identifier fields %s (Iceberg 1.7.1 cannot MERGE merge-on-read into them)",
            ident,
            keys,
        )
        return True

    def move_table(self, old: str, new: str, properties: dict[str, str]) -> None:
        """A table renamed at the source: the old name's lake table becomes the new name's, rows and
        `properties`, in one CREATE TABLE AS SELECT commit (the same on every catalog; the Hadoop
        catalog cannot rename), its delete markers follow, then the old one is dropped."""
        self.sql(self.fmt.copy_sql(new, old, properties))
        self.finish_move(old, new)

    def finish_move(self, old: str, new: str) -> None:
        """The rest of a move whose copy is made: the markers follow, the old table goes."""
        if markers_to_move(self.spark, old, new):
            self.sql(self.fmt.moved_markers_sql(marker_table(new), marker_table(old), new))
            self.sql(drop_markers_sql(old))
        self.markers.forget(old)
        self.markers.forget(new)
        self.sql(f"DROP TABLE {old}")


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
    """Apply newest-per-key changes (data columns + _cdc_* metadata) to `table` in one commit
    (merge.merge_sql). `markers`: the delete markers to anti-join the changes with
    (deletes.KnownMarkers.to_consult), None for none."""
    # Inside foreachBatch the batch DataFrame belongs to a cloned session: the temp view and the
    # MERGE must use that session, not the one the job started with.
    session = changes.sparkSession
    view = "cdc_changes_" + table.replace(".", "_").replace("`", "")
    changes.createOrReplaceTempView(view)
    try:
        # Safe to run again: the position guard makes a re-applied change a no-op.
        if isinstance(markers, LookUp):
            markers = markers_if_any(session, table)
        statement = merge_sql(table, view, keys, columns, keep, markers)
        retry_on_conflict(lambda: session.sql(statement), f"MERGE into {table}", MERGE_RETRY)
    finally:
        session.catalog.dropTempView(view)


def merge_multiset(
    table: str,
    changes: DataFrame,
    columns: list[str],
    match: list[str],
    *,
    markers: str | None | LookUp = LOOK_UP,
) -> None:
    """Apply a batch's changes of a keyless table in one commit (keyless.py). `markers`: the delete
    markers whose positions count (deletes.KnownMarkers.to_consult), None for none."""
    session = changes.sparkSession
    view = "cdc_copies_" + table.replace(".", "_").replace("`", "")
    if isinstance(markers, LookUp):
        markers = markers_if_any(session, table)

    def attempt() -> None:
        # Counted against the table as it is now: a MERGE re-planned after a conflict reads it again.
        marked = session.table(markers) if markers else None
        copies_to_write(session.table(table), changes, columns, match, marked).createOrReplaceTempView(view)
        session.sql(merge_multiset_sql(table, view, columns, match))

    try:
        retry_on_conflict(attempt, f"MERGE into {table}", MERGE_RETRY)
    finally:
        session.catalog.dropTempView(view)


# (table, newest change per key, key columns, data columns, TOAST placeholders to keep: column -> SQL
# literal; keyword `markers`: the delete markers to consult)
KeyedWrite = Callable[[str, DataFrame, list[str], list[str], dict[str, str] | None], None]
# (table, changes, data columns, the columns that identify a row image; keyword `markers`)
KeylessWrite = Callable[[str, DataFrame, list[str], list[str]], None]


@dataclass(frozen=True)
class Writes:
    """How a table's changes reach it, in one commit per table per batch: the MERGEs above by
    default. The benchmark passes an append here to measure everything but the row-level write,
    tests a MERGE that fails or waits."""

    keyed: KeyedWrite = merge_changes
    keyless: KeylessWrite = merge_multiset


def decoded_rows(
    classified: DataFrame, groups: list[SchemaGroup], columns: Columns, fills: dict[str, str]
) -> DataFrame:
    """The groups' events decoded and conformed to the lake columns, as one DataFrame."""
    return reduce(
        DataFrame.unionByName,
        [conform(to_lake_names(decode_group(classified, g), g), columns, fills) for g in groups],
    )


def _key_text(keys: list[str]) -> str:
    return "(" + ", ".join(keys) + ")" if keys else "none"
