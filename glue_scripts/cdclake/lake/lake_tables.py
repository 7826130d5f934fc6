"""The lake tables as the job knows them, and the DDL it runs on them.

`LakeTables` caches each table's columns, key and recorded column changes between batches, so a
steady stream makes no catalog call except the MERGE itself. It creates and evolves tables
(CREATE / ALTER / REPLACE … AS SELECT, source defaults backfilled), applies the source's column
renames and drops (ddl.py), and does what --dropped_table_policy says for a table dropped at the
source. `read_statements` reads a batch's schema-change events per table.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import (
    ALL_METADATA_COLUMNS,
    CDC_COPY,
    CDC_SEQ,
    CDC_SOURCE_TS,
    COLUMN_CHANGES_PROPERTY,
    DROP,
    KEPT,
    KEY_BATCH_PROPERTY,
    KEY_POSITION_PROPERTY,
    KEY_PROPERTY,
    MARKER_SUFFIX,
    PROPERTY_PREFIX,
    RENAME,
    RENAMED_AT_PROPERTY,
    RENAMED_PREFIX,
    SOURCE_DROP_PROPERTIES,
    SOURCE_DROPPED_POSITION_PROPERTY,
    SOURCE_DROPPED_PROPERTY,
    ColumnChange,
    DropPolicy,
    TableState,
    dumps,
    keys_text,
)
from ..common.report import TableReport
from ..common.settings import Settings
from ..common.sqltext import properties_sql, quote, sql_string, table_properties
from ..events import ddl as D
from ..events.decode import SchemaGroup
from .deletes import drop_markers, move_markers, rekey_markers
from .evolution import (
    RESERVED_PROPERTIES,
    SchemaPlan,
    apply_plan,
    backfill_defaults,
    default_sql,
    rewrite_table,
)
from .merge import create_table, drop_identifier_fields, truncate_before

log = logging.getLogger("cdclake")


@dataclass
class TableDDL:
    """What the batch's schema-change events say about one table."""

    changes: list[ColumnChange] = field(default_factory=list)
    drop_seq: int | None = None
    drop_ts: float | None = None
    create_seq: int | None = None
    key_seqs: list[int] = field(default_factory=list)  # ALTER TABLE statements that set a primary key


@dataclass(frozen=True)
class TableRename:
    old: tuple[str, str]  # (db, table) at the source
    new: tuple[str, str]
    seq: int  # the statement's position
    # The schema-change event's Kafka offset: the connector sends one event per pair of a
    # `RENAME TABLE a TO b, c TO d`, all at the statement's position, in statement order.
    offset: int = 0
    step: int = 0  # the pair's place in its event's statement (one event may name several pairs)

    @property
    def order(self) -> tuple[int, int, int]:
        return self.seq, self.offset, self.step

    @property
    def mark(self) -> str:
        """What the moved lake table records (RENAMED_AT_PROPERTY): which step gave it its name, so
        a batch run again after a crash in the middle of `RENAME TABLE a TO tmp, b TO a, tmp TO b`
        redoes only the steps not done."""
        return f"{self.seq}:{self.offset}"


def _rename_property(r: TableRename) -> tuple[str, str]:
    return f"{RENAMED_PREFIX}{r.seq}.{r.offset}.{r.step}", json.dumps([list(r.old), list(r.new)])


def recorded_renames(props: dict[str, str]) -> list[TableRename]:
    """The rename steps a table's properties record (see RENAMED_PREFIX)."""
    out = []
    for k, v in props.items():
        if not k.startswith(RENAMED_PREFIX):
            continue
        seq, offset, step = k[len(RENAMED_PREFIX) :].split(".")
        (old_db, old_table), (new_db, new_table) = json.loads(v)
        out.append(TableRename((old_db, old_table), (new_db, new_table), int(seq), int(offset), int(step)))
    return out


def _mark_order(mark: str | None) -> tuple[int, int]:
    seq, _, offset = (mark or "0:0").partition(":")
    return int(seq), int(offset or 0)


def read_statements(classified: DataFrame) -> tuple[dict[tuple[str, str], TableDDL], list[TableRename]]:
    """Column renames/drops and table drops of the batch's schema-change events, per table, and the
    table renames in source order (MySQL; one more Spark action, only in batches that have
    schema-change events)."""
    rows = (
        classified.where(F.col("_ddl").isNotNull())
        .select(
            "_ddl",
            "_ddl_tables",
            "_src_db",
            CDC_SEQ,
            "offset",
            F.col(CDC_SOURCE_TS).cast("double").alias("ts"),
        )
        # The events of one statement share its position: their offsets keep the statement's order.
        .orderBy(CDC_SEQ, "offset")
        .collect()
    )
    out: dict[tuple[str, str], TableDDL] = defaultdict(TableDDL)
    renames: list[TableRename] = []
    for r in rows:
        seq = int(r[CDC_SEQ])
        renames += [
            TableRename(old, new, seq, int(r["offset"]), step)
            for step, (old, new) in enumerate(D.table_renames(r["_ddl"], r["_src_db"] or ""))
        ]
        for change in r["_ddl_tables"] or []:
            for db, tbl in D.table_ids([change["id"]]):
                if change["type"] == "DROP":
                    t = out[(db, tbl)]
                    if t.drop_seq is None or seq > t.drop_seq:
                        t.drop_seq, t.drop_ts = seq, r["ts"]
                elif change["type"] == "CREATE":
                    t = out[(db, tbl)]
                    t.create_seq = max(seq, t.create_seq or 0)
                elif change["type"] == "ALTER":
                    out[(db, tbl)].changes += [ColumnChange(k, o, n, seq) for k, o, n in D.column_changes(r["_ddl"])]
                    if D.changes_primary_key(r["_ddl"]):
                        out[(db, tbl)].key_seqs.append(seq)
                    if computed := D.computed_columns(r["_ddl"]):
                        log.warning(
                            "source table %s.%s: column(s) %s added by ALTER TABLE get their values for existing "
                            "rows at the source without change events: the lake holds null there for rows not "
                            "changed since (scripts/reconcile shows them); take a new Debezium snapshot of the "
                            "table to fill them",
                            db,
                            tbl,
                            ", ".join(computed),
                        )
    return dict(out), renames


def follow_renames(
    tables: dict[tuple[str, str], list[SchemaGroup]], truncated: dict[tuple[str, str], int], renames: list[TableRename]
) -> tuple[dict[tuple[str, str], list[SchemaGroup]], dict[tuple[str, str], int]]:
    """The batch's schema groups and truncates by the table they belong to once the batch's
    RENAME TABLE statements are applied: events written before a rename go to the new name (a
    group's events are all of one source table, so its newest position decides)."""

    def now_named(table: tuple[str, str], seq: int) -> tuple[str, str]:
        for r in renames:
            if r.seq > seq and r.old == table:
                table = r.new
        return table

    groups: dict[tuple[str, str], list[SchemaGroup]] = defaultdict(list)
    for table, gs in tables.items():
        for g in gs:
            groups[now_named(table, g.max_seq)].append(g)
    moved: dict[tuple[str, str], int] = {}
    for table, seq in truncated.items():
        target = now_named(table, seq)
        moved[target] = max(seq, moved.get(target, 0))
    return dict(groups), moved


def newest_drop(stmt: TableDDL | None, state: TableState | None) -> int | None:
    """Position of the newest DROP TABLE at the source: this batch's, or one the table is marked with."""
    return max((x for x in (stmt.drop_seq if stmt else None, state.dropped_seq if state else None) if x), default=None)


class LakeTables:
    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        self._states: dict[str, TableState | None] = {}
        # --dropped_table_policy drop: lake tables this process dropped, with the DROP's position
        # (a late event older than it must not bring the table back).
        self._dropped: dict[str, int] = {}
        # Renames read before the job has created the table (kept until it does, in this process).
        self._early: dict[str, list[ColumnChange]] = defaultdict(list)
        # Tables created again at the source with another primary key: replaced at their creation.
        self._replacing: set[str] = set()
        # RENAME TABLE steps carried out by this process: (position, old, new); the connector sends a
        # statement's events again after a restart of its own.
        self._renamed: set[tuple[int, tuple[str, str], tuple[str, str]]] = set()
        # Every RENAME TABLE step read by this process, in source order: events of an old name written
        # before a step but read in a later batch (a job catching up reads the small schema-change
        # topic ahead of the tables' topics) follow it to the table that has the rows now.
        self._rename_history: list[TableRename] = []
        self._renames_loaded = False  # the ones recorded by the lake tables (a job started again)

    # ------------------------------------------------------------------ cached state
    def state(self, ident: str) -> TableState | None:
        """The table's state (None: no such table), from the catalog on first use."""
        if ident not in self._states:
            self._states[ident] = self._load(ident) if self.spark.catalog.tableExists(ident) else None
        return self._states[ident]

    def _load(self, ident: str) -> TableState:
        schema = self.spark.table(ident).schema
        cols = [(f.name, f.dataType) for f in schema.fields if f.name not in ALL_METADATA_COLUMNS]
        state = TableState.from_properties(cols, table_properties(self.spark, ident))
        drop_identifier_fields(self.spark, ident, state.keys)
        return state

    def forget(self, ident: str | None = None) -> None:
        """Drop cached table state (after a failure, the catalog is the truth)."""
        if ident is None:
            self._states.clear()
        else:
            self._states.pop(ident, None)

    def renames_to_follow(self, renames: list[TableRename], tables: list[tuple[str, str]]) -> list[TableRename]:
        """The batch's renames added to the ones read before, all in source order: what the batch's
        events (of `tables`) are routed by (follow_renames). The renames of earlier runs of the job are
        read from the lake tables' properties once, when a batch first has events of a table the lake
        does not hold (a copy tool's table that was renamed away, or a new table). A step read again (a
        batch run again, the connector sending a statement again) is kept once."""
        if not self._renames_loaded and any(self.state(self.settings.table_identifier(*t)) is None for t in tables):
            renames = self._lake_renames() + renames
        known = set(self._rename_history)
        for r in renames:
            if r not in known:
                self._rename_history.append(r)
                known.add(r)
        self._rename_history.sort(key=lambda r: r.order)
        return list(self._rename_history)

    def _lake_renames(self) -> list[TableRename]:
        """Every rename step recorded by the namespace's lake tables: one catalog listing and one
        properties read per table, once per process."""
        self._renames_loaded = True
        ns = f"{self.settings.catalog_name}.{self.settings.namespace}"
        names = [r["tableName"] for r in self.spark.sql(f"SHOW TABLES IN {ns}").collect()]
        found = [
            r
            for n in names
            if not n.endswith(MARKER_SUFFIX)
            for r in recorded_renames(table_properties(self.spark, f"{ns}.{n}"))
        ]
        if found:
            log.info("%d table rename(s) recorded in %s: late events of the old names follow them", len(found), ns)
        return found

    def rename_tables(self, renames: list[TableRename]) -> list[TableReport]:
        """The batch's RENAME TABLE statements, in source order (`RENAME TABLE t TO t_old, t_new TO t`
        as online schema change tools run it included): each old name's lake table becomes the new
        name's, rows and table properties, in one CREATE TABLE AS SELECT commit (the same on every
        catalog; the Hadoop catalog cannot rename), then the old one is dropped."""
        out = []
        for r in renames:
            old, new = self.settings.table_identifier(*r.old), self.settings.table_identifier(*r.new)
            if old == new or (r.seq, r.old, r.new) in self._renamed or self._moved_already(old, new, r):
                continue  # a step done before: this batch run again, or the connector sent it again
            if self.state(new) is not None:
                log.error(
                    "table %s: renamed from %s at the source, but the lake has both: the new name's events were "
                    "applied before the RENAME statement was read; rebuild %s from the raw zone or a new snapshot",
                    new,
                    old,
                    new,
                )
                continue
            self._early_rows(old, new, r)
            tblprops = properties_sql(
                {**self._properties(old), RENAMED_AT_PROPERTY: r.mark, **dict([_rename_property(r)])}
            )
            self.spark.sql(f"CREATE TABLE {new} USING iceberg TBLPROPERTIES ({tblprops}) AS SELECT * FROM {old}")
            move_markers(self.spark, old, new)
            self.spark.sql(f"DROP TABLE {old}")
            self.forget(new)
            self._states[old] = None
            self._renamed.add((r.seq, r.old, r.new))
            log.warning("table %s: renamed from %s at the source; the lake table moved with its rows", new, old)
            out.append(TableReport(new, schema=f"renamed from {old.rsplit('.', 1)[-1]}"))
        return out

    def _early_rows(self, old: str, new: str, r: TableRename) -> None:
        """Rows of the old name written after the rename were read before the statement (the
        schema-change topic behind the table's): they are another table's, and an update or delete
        among them changed a row of this one. Named in an error with the fix; the move goes on."""
        if _mark_order(table_properties(self.spark, old).get(RENAMED_AT_PROPERTY))[0] == r.seq:
            return  # named by an earlier step of this statement: that step looked already
        early = self.spark.sql(f"SELECT count(*) AS n FROM {old} WHERE {CDC_SEQ} > {r.seq}").first()["n"]
        if early:
            log.error(
                "table %s: %d row(s) of changes written after the source renamed it to %s were applied to it "
                "before the RENAME statement was read; they belong to the table that has the name now. "
                "Rebuild both tables from the raw zone or a new snapshot",
                old,
                early,
                new,
            )

    def _properties(self, ident: str) -> dict[str, str]:
        return {k: v for k, v in table_properties(self.spark, ident).items() if k not in RESERVED_PROPERTIES}

    def _moved_already(self, old: str, new: str, r: TableRename) -> bool:
        """Whether step `r` was carried out before (a batch run again after a crash), finishing it
        when it stopped between its copy and the drop: the old name's lake table, if any, got its
        name at a later step, or the new name's table is this step's copy."""
        old_mark = table_properties(self.spark, old).get(RENAMED_AT_PROPERTY) if self.state(old) else None
        if self.state(old) is None or _mark_order(old_mark) > _mark_order(r.mark):
            return True
        if self.state(new) is not None and table_properties(self.spark, new).get(RENAMED_AT_PROPERTY) == r.mark:
            move_markers(self.spark, old, new)
            self.spark.sql(f"DROP TABLE {old}")
            self._states[old] = None
            return True
        return False

    def replace_when_created(self, ident: str, drop_seq: int) -> None:
        """The source table was dropped (at `drop_seq`) and created again with another primary key,
        which the lake table cannot take: the table's next CREATE replaces it, and events of the
        dropped table read late are ignored."""
        self._replacing.add(ident)
        self._dropped[ident] = drop_seq
        self._states[ident] = None

    def dropped_after(self, ident: str, seq: int) -> bool:
        """--dropped_table_policy drop: this process dropped the table at a position after `seq`."""
        return ident in self._dropped and seq <= self._dropped[ident]

    def known_changes(self, ident: str, state: TableState | None, stmt: TableDDL | None) -> list[ColumnChange]:
        """Renames and drops after an event was written, for events read after the statement: the
        table's recorded ones, or for a table not created yet the ones read so far (taken)."""
        if state is not None:
            return state.column_changes
        return self._early.pop(ident, []) + self._recorded(stmt.changes if stmt else [])

    # ------------------------------------------------------------------ create and evolve
    def evolve(
        self,
        ident: str,
        state: TableState | None,
        plan: SchemaPlan,
        keys: list[str],
        fills: dict[str, str],
        known: list[ColumnChange],
    ) -> str:
        """Bring the table to `plan` (CREATE, or ALTER and rewrite) and give existing rows the
        source defaults of added columns (`fills`) and of a backfill a crash left pending. Returns
        the plan's description when the table changed, else ""."""
        # A new table has no existing rows to backfill.
        pending = dict(state.pending_backfill) if state is not None else {}
        if plan.create:
            replace = ident in self._replacing
            create_table(self.spark, ident, plan.final, keys, self.settings.write_mode, replace)
            log.info(
                "table %s %s: key %s, %d columns",
                ident,
                "replaced (created again at the source with another key)" if replace else "created",
                keys or "none (rows as a multiset)",
                len(plan.final),
            )
            if replace:
                self._replacing.discard(ident)
                self._forget_source_history(ident)
                drop_markers(self.spark, ident)  # deletes of the dropped table, under its key
            if known:
                self._record_column_changes(ident, known)
        elif plan.changed:
            added = {n.lower() for n, _ in plan.add}
            new_defaults = {n: e for n, e in fills.items() if n.lower() in added}
            apply_plan(self.spark, ident, plan, new_defaults)
            pending.update(new_defaults)
            if plan.rewrite:
                rewrite_table(self.spark, ident, plan)
            log.info("table %s schema evolved: %s", ident, plan.describe())
        if pending:
            backfill_defaults(self.spark, ident, pending)
            log.info("table %s: existing rows given the source default of %s", ident, ", ".join(pending))
        if not (plan.changed or pending):
            return ""
        self._states[ident] = TableState(
            plan.final,
            keys,
            column_changes=known,
            dropped_seq=state.dropped_seq if state else None,
            key_position=state.key_position if state else None,
            key_batch=state.key_batch if state else None,
        )
        return plan.describe()

    def new_column_defaults(self, plan: SchemaPlan, groups: list[SchemaGroup]) -> dict[str, str]:
        """Source defaults (SQL literals) of columns that some of this batch's schema groups lack
        because they were added at the source meanwhile."""
        if plan.create:
            names = {n.lower() for n, _ in plan.final}
            new = {n for n in names if any(n not in {c.lower() for c, _ in g.lake_columns()} for g in groups)}
        else:
            new = {n.lower() for n, _ in plan.add}
        out: dict[str, str] = {}
        for g in reversed(groups):  # the newest schema knows the current default
            for spec in g.columns or []:
                name = g.renamed.get(spec.name, spec.name)
                if name.lower() in new and name not in out and spec.name not in g.ignored:
                    expr = default_sql(self.spark, spec)
                    if expr is not None:
                        out[name] = expr
            new -= {n.lower() for n, _ in g.lake_columns()}
        return out

    # ------------------------------------------------------------------ a primary key changed at the source
    def rekey(self, ident: str, state: TableState, keys: list[str], position: int, batch: str) -> str:
        """The source table's primary key changed by ALTER TABLE (other columns, or one added to a
        table without): the source's rows stay as they were, so the lake table keeps its rows and
        takes the new key, metadata only. Each step can run again; the copy column a multiset MERGE
        reads goes last, after the key property, so a batch run again before that still finds it."""
        fields = {f.name.lower(): f for f in self.spark.table(ident).schema.fields}
        new = {k.lower() for k in keys}
        for k in state.keys:
            f = fields.get(k.lower())
            if f is not None and k.lower() not in new and not f.nullable:
                self.spark.sql(f"ALTER TABLE {ident} ALTER COLUMN {quote(f.name)} DROP NOT NULL")
        # The markers first: a batch run again re-keys them again from the rows they keep.
        data = [f for f in self.spark.table(ident).schema.fields if f.name not in ALL_METADATA_COLUMNS]
        rekey_markers(self.spark, ident, keys, T.StructType(data))
        props = {KEY_PROPERTY: keys_text(keys), KEY_POSITION_PROPERTY: str(position), KEY_BATCH_PROPERTY: batch}
        self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({properties_sql(props)})")
        if CDC_COPY in fields:
            self.spark.sql(f"ALTER TABLE {ident} DROP COLUMN {CDC_COPY}")
        self.forget(ident)
        what = f"primary key {_key_text(state.keys)} -> {_key_text(keys)}"
        log.warning("table %s: %s at the source; the lake table keeps its rows under the new key", ident, what)
        return what

    # ------------------------------------------------------------------ column renames and drops
    def _recorded(self, changes: list[ColumnChange]) -> list[ColumnChange]:
        """The changes the lake records: renames, and drops (as KEPT when the lake keeps the column)."""
        if self.settings.dropped_column_policy == DropPolicy.DROP:
            return list(changes)
        return [replace(c, kind=KEPT) if c.kind == DROP else c for c in changes]

    def _record_column_changes(self, ident: str, changes: list[ColumnChange]) -> None:
        props = properties_sql({COLUMN_CHANGES_PROPERTY: dumps(changes)})
        self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({props})")

    def apply_column_changes(self, ident: str, changes: list[ColumnChange]) -> str:
        """Apply column renames (and drops, --dropped_column_policy drop) to an existing lake table,
        in source order; each is a no-op when already applied. Returns what was done, for the log."""
        state = self.state(ident)
        assert state is not None
        todo = [c for c in sorted(self._recorded(changes), key=lambda c: c.seq) if c not in state.column_changes]
        if not todo:
            return ""
        done = []
        keys = list(state.keys)
        recorded = list(state.column_changes)
        for ch in todo:
            # A column renamed onto the name of a dropped column the lake kept: the kept one moves aside.
            kept = D.kept_drop(recorded + todo, ch.new, before=ch.seq) if ch.kind == RENAME and ch.new else None
            if kept is not None:
                aside, what = self._set_aside(ident, kept)
                recorded.append(aside)
                done.append(what)
            done += self._apply_column_change(ident, ch, keys)
            if ch.kind == RENAME and ch.new:
                keys = [ch.new if k.lower() == ch.old.lower() else k for k in keys]
        if keys != state.keys:
            self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({properties_sql({KEY_PROPERTY: keys_text(keys)})})")
        self._record_column_changes(ident, recorded + todo)
        self.forget(ident)  # the catalog is the truth for the new column names
        if done:
            log.info("table %s: source DDL applied: %s", ident, ", ".join(done))
        return ", ".join(done)

    def set_aside_readded(self, ident: str, groups: list[SchemaGroup]) -> str:
        """Columns dropped at the source and kept in the lake that the source has added again under
        the same name (a group of events after the drop carries the name): each kept column moves
        aside to `<name>__dropped` with its values, recorded as a rename at the drop's position (so
        events written before the drop still fill it), and the name is free for the new column,
        whatever its type. Returns what was done, for the log."""
        state = self.state(ident)
        if state is None:
            return ""
        recorded, done = list(state.column_changes), []
        for k in [c for c in state.column_changes if c.kind == KEPT]:
            carried = [g for g in groups if not g.error and (g.min_seq or g.max_seq) > k.seq]
            if D.kept_drop(recorded, k.old) == k and any(_has_column(g, k.old) for g in carried):
                aside, what = self._set_aside(ident, k)
                recorded.append(aside)
                done.append(what)
        if not done:
            return ""
        self._record_column_changes(ident, recorded)
        self.forget(ident)
        log.warning("table %s: %s", ident, "; ".join(done))
        return ", ".join(done)

    def _set_aside(self, ident: str, kept: ColumnChange) -> tuple[ColumnChange, str]:
        """Rename the lake column of a kept dropped column out of the way (metadata only)."""
        lake = {f.name.lower(): f.name for f in self.spark.table(ident).schema.fields}
        name = lake.get(kept.old.lower())
        if name is None:
            # Renamed by a run that crashed before recording it: the newest aside name is the one.
            taken = {n for n in lake if n.startswith(kept.old.lower() + D.SET_ASIDE_SUFFIX)}
            name, aside = kept.old, lake[max(taken, key=lambda n: (len(n), n))] if taken else kept.old
        else:
            aside = D.set_aside_name(name, set(lake))
            self.spark.sql(f"ALTER TABLE {ident} RENAME COLUMN {quote(name)} TO {quote(aside)}")
            self.forget(ident)
        what = f"{name}->{aside} (dropped at the source and added again: the old values set aside)"
        return ColumnChange(RENAME, name, aside, kept.seq), what

    def _apply_column_change(self, ident: str, ch: ColumnChange, keys: list[str]) -> list[str]:
        """One rename or drop, against the table as it is now; what was done, for the log."""
        lake = {f.name.lower(): f.name for f in self.spark.table(ident).schema.fields}
        old = lake.get(ch.old.lower())
        if ch.kind == RENAME and ch.new:
            new = lake.get(ch.new.lower())
            if old and not new:
                # Metadata only: Iceberg columns have ids, the data files follow.
                self.spark.sql(f"ALTER TABLE {ident} RENAME COLUMN {quote(old)} TO {quote(ch.new)}")
                return [f"{old}->{ch.new} (renamed)"]
            if old and new:
                # Events with the new name were applied before the statement was read, and added
                # it as a column: rows last written before the rename hold their value under the
                # old name. Re-running this is harmless: the old column is dropped last.
                self.spark.sql(
                    f"UPDATE {ident} SET {quote(new)} = {quote(old)} WHERE {CDC_SEQ} IS NULL OR {CDC_SEQ} < {ch.seq}"
                )
                self.spark.sql(f"ALTER TABLE {ident} DROP COLUMN {quote(old)}")
                return [f"{old}->{new} (renamed after its new name had arrived)"]
        elif ch.kind == DROP and old and old.lower() not in {k.lower() for k in keys}:
            self.spark.sql(f"ALTER TABLE {ident} DROP COLUMN {quote(old)}")
            return [f"-{old} (dropped)"]
        return []

    def apply_statements(self, ident: str, stmt: TableDDL) -> TableReport | None:
        """A batch's statements for a table without data events in the batch."""
        if self.state(ident) is None:
            self._early[ident] += self._recorded(stmt.changes)
            return None
        tr = TableReport(ident)
        if stmt.changes:
            tr.schema = self.apply_column_changes(ident, stmt.changes)
        self.after_drop(ident, stmt, False, False, tr)
        return tr if tr.schema or tr.truncated or tr.source_dropped else None

    # ------------------------------------------------------------------ tables dropped at the source
    def after_drop(self, ident: str, stmt: TableDDL | None, recreated: bool, truncated: bool, tr: TableReport) -> None:
        """A DROP TABLE at the source (this batch's, or one the lake table is marked with), once the
        batch's changes of the table are applied. `recreated`: the batch showed the table created
        again after the drop; `truncated`: the rows older than the drop are deleted already."""
        state = self.state(ident)
        if state is None:
            return
        drop = newest_drop(stmt, state)
        if drop is None:
            return
        if not recreated and stmt is not None and stmt.drop_seq is not None:
            # The new table's events may have been read before the statement.
            recreated = bool(self.spark.sql(f"SELECT 1 FROM {ident} WHERE {CDC_SEQ} > {drop} LIMIT 1").count())
        if not recreated:
            recreated = stmt is not None and (stmt.create_seq or 0) > drop
        if recreated:
            if not truncated:
                # What remains of the dropped table goes: the new one started empty.
                truncate_before(self.spark, ident, drop)
                tr.truncated = True
            if state.dropped_seq is not None:
                self._unmark_dropped(ident)
        elif stmt is not None and stmt.drop_seq is not None:
            tr.source_dropped = self._source_dropped(ident, stmt)

    def _source_dropped(self, ident: str, stmt: TableDDL) -> str:
        """--dropped_table_policy: keep the lake table and mark it, or drop it."""
        assert stmt.drop_seq is not None
        if self.settings.dropped_table_policy == DropPolicy.DROP:
            self.spark.sql(f"DROP TABLE IF EXISTS {ident}")
            drop_markers(self.spark, ident)
            self._states[ident] = None
            self._dropped[ident] = stmt.drop_seq
            log.warning("table %s: dropped at the source, lake table dropped (--dropped_table_policy drop)", ident)
            return "dropped"
        when = datetime.fromtimestamp(stmt.drop_ts or time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        props = {SOURCE_DROPPED_PROPERTY: when, SOURCE_DROPPED_POSITION_PROPERTY: str(stmt.drop_seq)}
        self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({properties_sql(props)})")
        self.forget(ident)
        log.warning(
            "table %s: dropped at the source at %s; lake table kept, marked %s", ident, when, SOURCE_DROPPED_PROPERTY
        )
        return "kept, marked"

    def _forget_source_history(self, ident: str) -> None:
        """Remove what a replaced table carried over of the dropped one (REPLACE TABLE keeps table
        properties): its drop mark, recorded column changes and pending backfills."""
        props = list(table_properties(self.spark, ident))
        stale = [k for k in props if k.startswith(PROPERTY_PREFIX) and k != KEY_PROPERTY]
        if stale:
            self.spark.sql(f"ALTER TABLE {ident} UNSET TBLPROPERTIES IF EXISTS ({', '.join(map(sql_string, stale))})")

    def _unmark_dropped(self, ident: str) -> None:
        keys = ", ".join(sql_string(k) for k in SOURCE_DROP_PROPERTIES)
        self.spark.sql(f"ALTER TABLE {ident} UNSET TBLPROPERTIES IF EXISTS ({keys})")
        self.forget(ident)
        log.info("table %s: created again at the source; rows older than its drop removed, mark cleared", ident)


def _has_column(g: SchemaGroup, name: str) -> bool:
    return name.lower() in {c.name.lower() for c in g.columns or []}


def _key_text(keys: list[str]) -> str:
    return "(" + ", ".join(keys) + ")" if keys else "none"
