"""The executor's DDL (executor.py dispatches to it): column renames and drops, a primary key
changed at the source, creating and evolving a table, source defaults, a DROP TABLE's mark, and a
table's set-aside mark. Each step's statements are built by the pure SQL text functions where they
live (evolution.py, deletes.py, formats/)."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import (
    ALL_METADATA_COLUMNS,
    CDC_COPY,
    CDC_SEQ,
    COLUMN_CHANGES_PROPERTY,
    KEY_BATCH_PROPERTY,
    KEY_POSITION_PROPERTY,
    KEY_PROPERTY,
    PARTITION_DELETES_PROPERTY,
    PROPERTY_PREFIX,
    SET_ASIDE_PROPERTY,
    SOURCE_DIVERGED_PROPERTY,
    SOURCE_DROP_PROPERTIES,
    SOURCE_DROPPED_POSITION_PROPERTY,
    SOURCE_DROPPED_PROPERTY,
    SOURCE_PARTITIONING_PROPERTY,
    WriteMode,
    dumps,
    keys_text,
)
from ..common.sqltext import quote, sql_string, table_properties
from . import table_plan
from .deletes import KnownMarkers, drop_markers_sql, markers_if_any, rekeyed_markers
from .evolution import Columns, alter_sql, backfill_sql, carried_properties, default_sql
from .execution import Execution, Statements
from .formats import Format

log = logging.getLogger("cdclake")


class SchemaDDL(Statements):
    """A table's DDL steps. `write_mode`: what a created table's row-level writes do."""

    def __init__(self, spark: SparkSession, fmt: Format, markers: KnownMarkers, write_mode: WriteMode) -> None:
        super().__init__(spark, fmt, markers)
        self.write_mode = write_mode

    # -------------------------------------------------------------- column renames and drops
    def rename_column(self, s: table_plan.RenameColumn, ex: Execution) -> None:
        # The source name of an escaped name first (formats.Format.name_properties).
        self.name_properties(ex.ident, [s.new])
        # Metadata only: Iceberg columns have ids, Delta's tables map names (formats.delta.DELTA_COLUMN_MAPPING).
        self.sql(f"ALTER TABLE {ex.ident} RENAME COLUMN {quote(s.old)} TO {quote(s.new)}")

    def copy_then_drop(self, s: table_plan.CopyThenDrop, ex: Execution) -> None:
        # Re-running this is harmless: the old column is dropped last.
        new, old = quote(s.new), quote(s.old)
        self.sql(f"UPDATE {ex.ident} SET {new} = {old} WHERE {CDC_SEQ} IS NULL OR {CDC_SEQ} < {s.seq}")
        self.sql(f"ALTER TABLE {ex.ident} DROP COLUMN {old}")

    def drop_column(self, s: table_plan.DropColumn, ex: Execution) -> None:
        self.sql(f"ALTER TABLE {ex.ident} DROP COLUMN {quote(s.name)}")

    def set_key(self, s: table_plan.SetKey, ex: Execution) -> None:
        self.set_properties(ex.ident, {KEY_PROPERTY: keys_text(list(s.keys))})

    def record_column_changes(self, s: table_plan.RecordColumnChanges, ex: Execution) -> None:
        self.set_properties(ex.ident, {COLUMN_CHANGES_PROPERTY: dumps(list(s.changes))})

    # -------------------------------------------------------------- a primary key changed at the source
    def rekey(self, s: table_plan.Rekey, ex: Execution) -> None:
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
        self.set_properties(ex.ident, props)
        if CDC_COPY in fields:
            self.sql(f"ALTER TABLE {ex.ident} DROP COLUMN {CDC_COPY}")
        what = f"primary key {_key_text(list(s.old_keys))} -> {_key_text(keys)}"
        log.warning("table %s: %s at the source; the lake table keeps its rows under the new key", ex.ident, what)

    # -------------------------------------------------------------- create and evolve
    def column_defaults(self, s: table_plan.ColumnDefaults, ex: Execution) -> dict[str, str]:
        """Each candidate's source default as a SQL literal (one row through Spark each), by column."""
        fills = {}
        for name, index, column in s.candidates:
            spec = next(c for c in ex.groups[index].columns or [] if c.name == column)
            expr = default_sql(self.spark, spec)
            if expr is not None:
                fills[name] = expr
        return fills | dict(s.literals)

    def create_table(self, s: table_plan.CreateTable, ex: Execution) -> None:
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
                self.unset_properties(ex.ident, stale)
            self.sql(drop_markers_sql(ex.ident))
            self.markers.forget(ex.ident)
        if s.record:
            self.record_column_changes(table_plan.RecordColumnChanges(s.record), ex)

    def alter_schema(self, s: table_plan.AlterSchema, ex: Execution, defaults: dict[str, str]) -> None:
        """`defaults`: the source defaults found for the write (the added columns' are their defaults)."""
        added = {n.lower() for n, _ in s.plan.add}
        fills = {n: e for n, e in defaults.items() if n.lower() in added}
        # A column type behind a table feature (Delta's timestamp_ntz) needs the feature first.
        existing = [t for n, t in s.plan.final if n.lower() not in added]
        features = self.fmt.features_sql(ex.ident, existing, [t for _, t in s.plan.add])
        if features:
            self.sql(features)
        self.name_properties(ex.ident, [n for n, _ in s.plan.add])
        for statement in alter_sql(ex.ident, s.plan, fills, widen=self.fmt.widens_in_place):
            self.sql(statement)
        if s.plan.widen and not self.fmt.widens_in_place:
            # Every widening converts each value exactly: a rewrite is the same change, one commit.
            self._rewrite(ex.ident, [(n, new) for n, _old, new in s.plan.widen])
        log.info("table %s schema evolved: %s", ex.ident, s.plan.describe())

    def rewrite_type(self, s: table_plan.RewriteType, ex: Execution) -> None:
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

    def backfill_defaults(self, s: table_plan.BackfillDefaults, ex: Execution, defaults: dict[str, str]) -> None:
        pending = dict(s.pending)
        pending.update({n: e for n, e in defaults.items() if n.lower() in s.added})
        if not pending:
            return
        for name, expr in pending.items():
            for statement in backfill_sql(ex.ident, name, expr):
                self.sql(statement)
        log.info("table %s: existing rows given the source default of %s", ex.ident, ", ".join(pending))

    # -------------------------------------------------------------- a DROP TABLE at the source
    def unmark_dropped(self, s: table_plan.UnmarkDropped, ex: Execution) -> None:
        self.unset_properties(ex.ident, list(SOURCE_DROP_PROPERTIES))
        log.info("table %s: created again at the source; rows older than its drop removed, mark cleared", ex.ident)

    def mark_dropped(self, s: table_plan.MarkDropped, ex: Execution) -> None:
        when = datetime.fromtimestamp(s.drop_ts or time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        self.set_properties(
            ex.ident, {SOURCE_DROPPED_PROPERTY: when, SOURCE_DROPPED_POSITION_PROPERTY: str(s.drop_seq)}
        )
        log.warning(
            "table %s: dropped at the source at %s; lake table kept, marked %s", ex.ident, when, SOURCE_DROPPED_PROPERTY
        )

    def drop_table(self, s: table_plan.DropTable, ex: Execution) -> None:
        self.sql(f"DROP TABLE IF EXISTS {ex.ident}")
        self.sql(drop_markers_sql(ex.ident))
        self.markers.forget(ex.ident)
        log.warning("table %s: dropped at the source, lake table dropped (--dropped_table_policy drop)", ex.ident)

    # -------------------------------------------------------------- PostgreSQL's enum labels (lake_tables.py)
    def relabel(self, ident: str, column: str, old: str, new: str, seq: int, in_array: bool) -> None:
        """ALTER TYPE ... RENAME VALUE at `seq`: the lake's values of `column` written before it read the
        new label, as the source's do; a later change's value is the source's own. An array of the enum
        is its JSON text (connect_types.py): its elements are relabelled one by one."""
        col, before = quote(column), f"({CDC_SEQ} IS NULL OR {CDC_SEQ} < {seq})"
        old_sql, new_sql = sql_string(old), sql_string(new)
        if in_array:
            items = f"from_json({col}, 'array<string>')"
            relabelled = f"to_json(transform({items}, x -> CASE WHEN x = {old_sql} THEN {new_sql} ELSE x END))"
            self.sql(f"UPDATE {ident} SET {col} = {relabelled} WHERE array_contains({items}, {old_sql}) AND {before}")
        else:
            self.sql(f"UPDATE {ident} SET {col} = {new_sql} WHERE {col} = {old_sql} AND {before}")

    # -------------------------------------------------------------- partition maintenance at the source
    def record_partitioning(self, s: table_plan.RecordPartitioning, ex: Execution) -> None:
        props = {PARTITION_DELETES_PROPERTY: json.dumps([list(d) for d in s.deletes])}
        if s.partitioning:
            props[SOURCE_PARTITIONING_PROPERTY] = s.partitioning
        self.set_properties(ex.ident, props)
        if not s.partitioning:
            self.unset_properties(ex.ident, [SOURCE_PARTITIONING_PROPERTY])

    def mark_diverged(self, s: table_plan.MarkDiverged, ex: Execution) -> None:
        """The mark stays until the table is rebuilt (the planner's error line says how)."""
        self.set_properties(ex.ident, {SOURCE_DIVERGED_PROPERTY: s.what})

    # -------------------------------------------------------------- a table set aside (jobs/batch.py)
    def mark_set_aside(self, ident: str, mark: str | None) -> None:
        """Set (a `SetAsideMark` as JSON) or clear (None) the table's set-aside property."""
        if mark is None:
            self.unset_properties(ident, [SET_ASIDE_PROPERTY])
        else:
            self.set_properties(ident, {SET_ASIDE_PROPERTY: mark})


def _key_text(keys: list[str]) -> str:
    return "(" + ", ".join(keys) + ")" if keys else "none"
