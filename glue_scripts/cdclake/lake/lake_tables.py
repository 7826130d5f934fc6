"""The lake tables as the job knows them, and the batch's table renames.

`LakeTables` caches each table's state (columns, key, recorded column changes) between batches, so
a steady stream makes no catalog call except the MERGE itself, and keeps what the process remembers
of a table beyond it (table_plan.Memory); a table's executed plan leaves both (`settle`). It carries
out the source's RENAME TABLE statements (a lake table moved with its rows) and knows the renames
late events follow. `read_statements` reads a batch's schema-change events per table.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import (
    ALL_METADATA_COLUMNS,
    CDC_SEQ,
    CDC_SOURCE_TS,
    RENAMED_AT_PROPERTY,
    RENAMED_PREFIX,
    ColumnChange,
    TableState,
    is_job_table,
)
from ..common.names import UnsupportedName
from ..common.report import TableReport
from ..common.settings import Settings
from ..common.sqltext import table_properties
from ..events import partition_ddl, source_ddl
from ..events.decode import SchemaGroup, cut_at
from ..events.summary import BatchSummary
from .executor import Executor
from .small_files import EarlyPartitions, EarlyStore, PartitionParents
from .table_plan import (
    ColumnsChanged,
    CopyThenDrop,
    DropColumn,
    MarkDropped,
    Memory,
    RecordColumnChanges,
    Rekey,
    RenameColumn,
    SetKey,
    StatementSchema,
    TableDDL,
    TablePlan,
    UnmarkDropped,
)

log = logging.getLogger("cdclake")

# Steps after which the table's state is read from the catalog again (the plan's own is not kept).
_RELOAD = (RenameColumn, CopyThenDrop, DropColumn, SetKey, RecordColumnChanges, ColumnsChanged, Rekey, MarkDropped,
           UnmarkDropped)  # fmt: skip


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


def read_statements(
    classified: DataFrame, lake_type: Callable[[T.DataType], T.DataType] = lambda t: t
) -> tuple[dict[tuple[str, str], TableDDL], list[TableRename]]:
    """Column renames/drops, the columns after each ALTER TABLE and table drops of the batch's
    statements, per table, and the table renames in source order: MySQL's schema-change events and
    the rows of PostgreSQL's DDL log (one more Spark action, only in batches that have schema-change
    events). `lake_type`: the table format's type of a decoded column (formats.Format.lake_type)."""
    rows = (
        classified.where(F.col("_ddl").isNotNull() | F.col("_pg_ddl").isNotNull() | F.col("_snapshot_ddl").isNotNull())
        .select(
            "_ddl",
            "_ddl_tables",
            "_pg_ddl",
            "_snapshot_ddl",
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
    newest: dict[tuple[str, str], tuple[int, int, tuple[str, ...]]] = {}  # the DDL log's snapshot, per table
    for r in rows:
        if r["_snapshot_ddl"] is not None and r["_snapshot_ddl"].startswith("{"):
            _postgres_snapshot_row(newest, r)
        elif r["_snapshot_ddl"] is not None:
            # What the snapshot says a table is: its partitioning (no change of anything).
            for step in partition_ddl.partition_steps(r["_snapshot_ddl"], r["_src_db"] or ""):
                if step.partitioning is not None:
                    out[step.table].partitions.append((int(r[CDC_SEQ]), step))
        elif r["_pg_ddl"] is not None:
            renames += _postgres_statement(out, r)
        else:
            renames += _mysql_statement(out, r, lake_type)
    for table, (seq, _, children) in newest.items():
        out[table].partitions += [(seq, _pg_partition_step(table, "ATTACH", c, {})) for c in children]
    return dict(out), renames


def _postgres_snapshot_row(newest: dict[tuple[str, str], tuple[int, int, tuple[str, ...]]], r: Row) -> None:
    """A snapshot row of PostgreSQL's DDL log: history, no statement; a partitioned table's newest row
    says which tables are its partitions (a connector's first snapshot sends theirs as well)."""
    try:
        s = source_ddl.postgres_statement(r["_snapshot_ddl"])
        row_id = int(json.loads(r["_snapshot_ddl"])["id"])
    except (ValueError, KeyError, TypeError):
        return
    if row_id > newest.get(s.table, (0, -1, ()))[1]:
        newest[s.table] = (int(r[CDC_SEQ]), row_id, s.children)


def _mysql_statement(
    out: dict[tuple[str, str], TableDDL], r: Row, lake_type: Callable[[T.DataType], T.DataType]
) -> list[TableRename]:
    """One schema-change event of the MySQL connector: its table changes into `out`, its renames."""
    seq = int(r[CDC_SEQ])
    for step in partition_ddl.partition_steps(r["_ddl"] or "", r["_src_db"] or ""):
        out[step.table].partitions.append((seq, step))
    for change in r["_ddl_tables"] or []:
        for db, tbl in source_ddl.table_ids([change["id"]]):
            if change["type"] == "DROP":
                _dropped(out[(db, tbl)], seq, r["ts"])
            elif change["type"] == "CREATE":
                t = out[(db, tbl)]
                t.create_seq = max(seq, t.create_seq or 0)
            elif change["type"] == "ALTER":
                out[(db, tbl)].changes += [
                    ColumnChange(k, o, n, seq) for k, o, n in source_ddl.column_changes(r["_ddl"])
                ]
                if schema := _statement_schema(change["table"], seq, db, tbl, lake_type):
                    out[(db, tbl)].schemas.append(schema)
                redefined = source_ddl.set_redefinitions(r["_ddl"], _table_json(change["table"]))
                out[(db, tbl)].set_orders += [(seq, column, members, kind) for column, members, kind in redefined]
                if source_ddl.changes_primary_key(r["_ddl"]):
                    out[(db, tbl)].key_seqs.append(seq)
                if computed := source_ddl.computed_columns(r["_ddl"]):
                    log.warning(
                        "source table %s.%s: column(s) %s added by ALTER TABLE get their values for existing "
                        "rows at the source without change events: the lake holds null there for rows not "
                        "changed since (reconcile shows them); take a new Debezium snapshot of the "
                        "table to fill them",
                        db,
                        tbl,
                        ", ".join(computed),
                    )
    return [
        TableRename(old, new, seq, int(r["offset"]), step)
        for step, (old, new) in enumerate(source_ddl.table_renames(r["_ddl"], r["_src_db"] or ""))
    ]


def _statement_schema(
    text: str | None, seq: int, db: str, tbl: str, lake_type: Callable[[T.DataType], T.DataType]
) -> StatementSchema | None:
    """The table after an ALTER TABLE (`tableChanges[].table`): the columns whose lake type and
    default it tells exactly; the others are named in a log line and left to the next row event."""
    table = _table_json(text)
    if table is None:
        return None
    known, unknown = source_ddl.mysql_statement_columns(table)
    if unknown:
        log.info(
            "source table %s.%s: column(s) %s of the ALTER TABLE at position %d are left to the table's next "
            "row event (the statement does not tell their lake type or default exactly)",
            db,
            tbl,
            ", ".join(unknown),
            seq,
        )
    columns = tuple(replace(c, spark_type=lake_type(c.spark_type)) for c in known)
    return StatementSchema(seq, columns, tuple(str(k) for k in table.get("primaryKeyColumnNames") or ()))


def _table_json(text: str | None) -> dict | None:
    """`tableChanges[].table` as the connector wrote it (JSON text), None when there is none."""
    try:
        table = json.loads(text) if text else None
    except ValueError:
        return None
    return table if isinstance(table, dict) else None


def _postgres_statement(out: dict[tuple[str, str], TableDDL], r: Row) -> list[TableRename]:
    """One row of PostgreSQL's DDL log (one command on one table): into `out`, and its rename."""
    seq = int(r[CDC_SEQ])
    try:
        s = source_ddl.postgres_statement(r["_pg_ddl"])
    except ValueError as exc:
        log.error(
            "a row of %s at position %d is not followed: %s. Install the shipped sql/postgres/ddl_capture.sql "
            "(it writes that table's rows); a rename or drop it recorded needs the table rebuilt from a new snapshot",
            source_ddl.POSTGRES_DDL_TABLE,
            seq,
            exc,
        )
        return []
    t = out[s.table]
    t.changes += [ColumnChange(k, o, n, seq) for k, o, n in s.changes]
    t.relabels += [(seq, x) for x in s.relabels if x.old is not None]
    if added := source_ddl.postgres_statement_columns(s):
        t.schemas.append(StatementSchema(seq, tuple(added), s.keys))
    t.partitions += [(seq, _pg_partition_step(s.table, op, name, info)) for op, name, info in s.partitions]
    # Every row of a partitioned table lists its partitions (the capture's baseline of an existing table too):
    # each is attached, changing no row, so that its changes find their table (route_partitions).
    named = {name for _, name, _ in s.partitions}
    t.partitions += [(seq, _pg_partition_step(s.table, "ATTACH", c, {})) for c in s.children if c not in named]
    _not_followed(s, seq)
    if s.key_changed:
        t.key_seqs.append(seq)
    if s.created:
        t.create_seq = max(seq, t.create_seq or 0)
    if s.dropped:
        _dropped(t, seq, r["ts"])
    return [TableRename(s.renamed_from, s.table, seq, int(r["offset"]))] if s.renamed_from else []


def _pg_partition_step(table: tuple[str, str], op: str, name: str, info: dict) -> partition_ddl.PartitionStep:
    """A partition attached to or detached from PostgreSQL table `table`, as a step of its partitioning."""
    others = tuple(str(b) for b in info.get("others") or ())
    pg = partition_ddl.PgPartition(name, str(info.get("key") or ""), str(info.get("bound") or ""), others,
                                   bool(info.get("rows")))  # fmt: skip
    return partition_ddl.PartitionStep(table, op=op, names=(name,), pg=pg)


def _not_followed(s: source_ddl.PostgresStatement, seq: int) -> None:
    """A statement that changed stored values without row events in a way the job cannot redo: the lake
    table no longer equals the source, said in an ERROR line with the fix; generated columns, which
    never reach the lake, in a warning."""
    table = ".".join(s.table)
    if s.generated:
        log.warning(
            "source table %s: column(s) %s are generated (GENERATED ALWAYS AS ... STORED): PostgreSQL's pgoutput "
            "does not send their values, so the lake table has no such column; reconcile names them and "
            'compares the other columns (docs/COMPATIBILITY.md, "Limitations")',
            table,
            ", ".join(s.generated),
        )
    if s.rewritten:
        log.error(
            "source table %s no longer equals the lake: ALTER TABLE ... TYPE ... USING at position %d rewrote "
            "column(s) %s at the source without change events, and the lake keeps (casts) the old values of rows "
            "not changed since. Rebuild the lake table from a new snapshot: drop it and take a new Debezium "
            'snapshot of the table (docs/SCHEMA_CHANGES.md, "Statements without row events")',
            table,
            seq,
            ", ".join(s.rewritten),
        )
    if unknown := [x.column for x in s.relabels if x.old is None]:
        log.error(
            "source table %s no longer equals the lake: ALTER TYPE ... RENAME VALUE at position %d renamed a label "
            "of column(s) %s, but the DDL log does not say which (several RENAME VALUE of one type in one query "
            "string). Run the fix for each renamed label on the lake table: UPDATE <table> SET <column> = '<new>' "
            "WHERE <column> = '<old>', or rebuild it from a new snapshot (docs/SCHEMA_CHANGES.md, \"Statements "
            'without row events")',
            table,
            seq,
            ", ".join(unknown),
        )


def _dropped(t: TableDDL, seq: int, ts: float | None) -> None:
    if t.drop_seq is None or seq > t.drop_seq:
        t.drop_seq, t.drop_ts = seq, ts


Parents = dict[tuple[str, str], tuple[str, str]]  # a PostgreSQL partition -> its partitioned table


def route_partitions(
    tables: dict[tuple[str, str], list[SchemaGroup]],
    truncated: dict[tuple[str, str], int],
    statements: dict[tuple[str, str], TableDDL],
    renames: list[TableRename],
    parents: Parents,
) -> tuple[dict[tuple[str, str], list[SchemaGroup]], dict[tuple[str, str], int], Parents]:
    """A PostgreSQL partition's schema groups and truncates under its partitioned table (a publication
    without publish_via_partition_root names the partition), as partitioned when they were written;
    and the partitions' parents after the batch's ATTACH/DETACH and table renames."""
    steps = sorted(
        (seq, step.op, tuple(step.pg.name.split(".", 1)), parent)
        for parent, t in statements.items() for seq, step in t.partitions if step.pg is not None
    )  # fmt: skip

    def parent_at(table: tuple[str, str], seq: int) -> tuple[str, str]:
        for _ in range(8):  # a partition of a partition: up to the root
            known = parents.get(table)
            for at, op, child, parent in steps:  # a snapshot's events share the position of its DDL log rows
                if at <= seq and child == table:
                    known = parent if op == "ATTACH" else None
            if known is None:
                return table
            table = known
        return table

    groups: dict[tuple[str, str], list[SchemaGroup]] = defaultdict(list)
    for table, gs in tables.items():
        for g in gs:
            groups[parent_at(table, g.max_seq)].append(g)
    moved: dict[tuple[str, str], int] = {}
    for table, seq in truncated.items():
        target = parent_at(table, seq)
        moved[target] = max(seq, moved.get(target, 0))
    after = dict(parents)
    for _, op, child, parent in steps:
        if op == "ATTACH":
            after[child] = parent
        else:
            after.pop(child, None)
    for r in sorted(renames, key=lambda r: r.order):
        after = {(r.new if k == r.old else k): (r.new if v == r.old else v) for k, v in after.items()}
    return dict(groups), moved, after


def follow_renames(
    tables: dict[tuple[str, str], list[SchemaGroup]],
    truncated: dict[tuple[str, str], int],
    renames: list[TableRename],
    statements: dict[tuple[str, str], TableDDL] | None = None,
) -> tuple[dict[tuple[str, str], list[SchemaGroup]], dict[tuple[str, str], int], dict[tuple[str, str], TableDDL]]:
    """The batch's schema groups, truncates and statements by the table they belong to once the
    batch's RENAME TABLE statements are applied: events and statements written before a rename go
    to the new name (a group's events are all of one source table, so its newest position decides)."""

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
    return dict(groups), moved, _routed(statements or {}, now_named)


def _routed(
    statements: dict[tuple[str, str], TableDDL], now_named: Callable[[tuple[str, str], int], tuple[str, str]]
) -> dict[tuple[str, str], TableDDL]:
    """Each statement of a table under the name the table has after the batch's renames: an ALTER
    before `RENAME TABLE a TO b` is b's (a table created, altered and renamed in one batch)."""
    out: dict[tuple[str, str], TableDDL] = defaultdict(TableDDL)
    for table, t in statements.items():
        for ch in t.changes:
            out[now_named(table, ch.seq)].changes.append(ch)
        for x in t.schemas:
            out[now_named(table, x.seq)].schemas.append(x)
        for seq in t.key_seqs:
            out[now_named(table, seq)].key_seqs.append(seq)
        for seq, step in t.partitions:
            out[now_named(table, seq)].partitions.append((seq, step))
        for seq, column, members, kind in t.set_orders:
            out[now_named(table, seq)].set_orders.append((seq, column, members, kind))
        for seq, relabel in t.relabels:
            out[now_named(table, seq)].relabels.append((seq, relabel))
        if t.create_seq is not None:
            o = out[now_named(table, t.create_seq)]
            o.create_seq = max(t.create_seq, o.create_seq or 0)
        if t.drop_seq is not None:
            _dropped(out[now_named(table, t.drop_seq)], t.drop_seq, t.drop_ts)
    return dict(out)


Item = tuple[tuple[str, str], list[SchemaGroup]]  # a source table and its schema groups


@dataclass(frozen=True)
class Routed:
    """The batch's tables as the lake holds them (`LakeTables.route`): schema groups, truncates and
    statements under the name each table has after the batch's renames (a PostgreSQL partition's
    under its partitioned table), and the reports of the renames carried out."""

    tables: dict[tuple[str, str], list[SchemaGroup]]
    truncated: dict[tuple[str, str], int]
    statements: dict[tuple[str, str], TableDDL]
    moved: list[TableReport]

    def items(self) -> list[Item]:
        """Every table to apply, in order; those with only a truncate or statements after the others."""
        quiet = sorted((set(self.truncated) | set(self.statements)) - set(self.tables))
        return sorted(self.tables.items()) + [(t, []) for t in quiet]


class LakeTables:
    def __init__(self, spark: SparkSession, settings: Settings, executor: Executor) -> None:
        self.spark = spark
        self.settings = settings
        self.executor = executor  # the catalog's DDL runs there
        self._states: dict[str, TableState | None] = {}
        # --dropped_table_policy drop: lake tables this process dropped, with the DROP's position
        # (a late event older than it must not bring the table back).
        self._dropped: dict[str, int] = {}
        # Renames read before the job has created the table (kept until it does, in this process).
        self._early: dict[str, list[ColumnChange]] = defaultdict(list)
        # Partitioning, partition deletes and a divergence read before the lake table existed (Memory),
        # also in a file each (a job started again before the table's first row reads them there).
        self._partitions: dict[str, EarlyPartitions] = {}
        self._early_files = EarlyStore(spark, settings.dead_letter_path)
        self._early_loaded = False
        # PostgreSQL partitions -> their partitioned table (route_partitions), read once from its file.
        self._parents_file = PartitionParents(spark, settings.dead_letter_path)
        self._parents: Parents | None = None
        # Tables created again at the source with another primary key: replaced at their creation.
        self._replacing: set[str] = set()
        # Two records of RENAME TABLE steps, for two questions. Which steps did this process carry
        # out: (position, old, new), without the Kafka offset, since the connector sends a
        # statement's events again, at new offsets, after a restart of its own.
        self._moves_done: set[tuple[int, tuple[str, str], tuple[str, str]]] = set()
        # Which steps do late events follow: every step read by this process, in source order. Events
        # of an old name written before a step but read in a later batch (a job catching up reads the
        # small schema-change topic ahead of the tables' topics) follow it to the table that has the
        # rows now.
        self._renames_read: list[TableRename] = []
        self._renames_loaded = False  # the ones recorded by the lake tables (a job started again)
        # The source table each lake table name stands for in this process: names.lake_table_name folds
        # case and characters, so two source tables can map to one name (`claim`).
        self._sources: dict[str, tuple[str, str]] = {}
        self._claims = threading.Lock()

    def route(self, cached: DataFrame, summary: BatchSummary) -> Routed:
        """The batch's tables to apply: its statements read (one Spark action, only in a batch with
        schema-change events), the partitions' changes routed to their partitioned table, the
        RENAME TABLE statements carried out in source order (before any table is applied: the
        tables run at once, and a rename may chain names across them), and the events, truncates
        and statements of a renamed table following it."""
        statements, renames = (
            read_statements(cached, self.executor.fmt.lake_type) if summary.schema_events else ({}, [])
        )
        tables, truncated = self.route_partitions(summary.tables, summary.truncated, statements, renames)
        moved = self.rename_tables(renames) if renames else []
        if follow := self.renames_to_follow(renames, list(tables)):
            # A table's events on both sides of its rename share a schema: cut them apart first
            # (no Spark action unless a group has events on both sides).
            tables = {t: cut_at(cached, gs, [r.seq for r in follow if r.old == t]) for t, gs in tables.items()}
            tables, truncated, statements = follow_renames(tables, truncated, follow, statements)
        return Routed(tables, truncated, statements, moved)

    def route_partitions(
        self,
        tables: dict[tuple[str, str], list[SchemaGroup]],
        truncated: dict[tuple[str, str], int],
        statements: dict[tuple[str, str], TableDDL],
        renames: list[TableRename],
    ) -> tuple[dict[tuple[str, str], list[SchemaGroup]], dict[tuple[str, str], int]]:
        """The batch's groups and truncates of PostgreSQL partitions under their partitioned table; the
        partitions' parents kept (their file written only when they change)."""
        if self._parents is None:
            self._parents = self._parents_file.load()
        tables, truncated, parents = route_partitions(tables, truncated, statements, renames, self._parents)
        if parents != self._parents:
            self._parents_file.save(parents)
            self._parents = parents
        return tables, truncated

    def relabel(self, statements: dict[tuple[str, str], TableDDL], ident_of: Callable[[str, str], str]) -> list[str]:
        """PostgreSQL's ALTER TYPE ... RENAME VALUE of the batch, after its writes: each lake column of
        the enum gets the new label where it holds the old one from before the statement (the batch's own
        rows included), exactly as the source shows its rows. The lake tables changed."""
        done = []
        for table, ddl in sorted(statements.items()):
            ident = ident_of(*table)
            state = self.state(ident) if ddl.relabels else None
            if state is None or state.set_aside is not None:
                continue  # not in the lake (yet), or set aside: its rebuild brings the labels
            types = {name.lower(): t for name, t in state.columns}
            for seq, r in sorted(ddl.relabels, key=lambda x: x[0]):
                column = self.executor.fmt.column_name(r.column)
                kind = types.get(column.lower())
                if isinstance(kind, T.StringType) and r.old is not None and r.new is not None:
                    self.executor.ddl.relabel(ident, column, r.old, r.new, seq, r.array)
            done.append(ident)
            self.forget(ident)
        return done

    # ------------------------------------------------------------------ cached state
    def state(self, ident: str) -> TableState | None:
        """The table's state (None: no such table), from the catalog on first use."""
        if ident not in self._states:
            self._states[ident] = self._load(ident) if self.spark.catalog.tableExists(ident) else None
        return self._states[ident]

    def _load(self, ident: str) -> TableState:
        schema = self.spark.table(ident).schema
        hidden = self.executor.fmt.system_columns
        cols = [
            (f.name, f.dataType) for f in schema.fields if f.name not in ALL_METADATA_COLUMNS and f.name not in hidden
        ]
        props = table_properties(self.spark, ident)
        state = TableState.from_properties(cols, props)
        # A table of an earlier release, or one whose last DDL pass stopped between its statements.
        self.executor.catalog.declare_key(ident, state.keys, schema, props)
        return state

    def forget(self, ident: str | None = None) -> None:
        """Drop cached table state (after a failure, the catalog is the truth)."""
        if ident is None:
            self._states.clear()
        else:
            self._states.pop(ident, None)
        self.executor.markers.forget(ident)

    def claim(self, ident: str, table: tuple[str, str]) -> None:
        """Lake table `ident` is source table `table`'s; UnsupportedName when another source table
        (`Orders` beside `orders`, `a b` beside `a_b`) has it in this process: the two would write
        into one lake table."""
        with self._claims:
            holder = self._sources.setdefault(ident, table)
        if holder != table:
            raise UnsupportedName(
                f"source tables {'.'.join(holder)} and {'.'.join(table)} both map to lake table {ident} (lake "
                "table names are lower case, with `_` for every character but an ASCII letter, digit or `_`): "
                "rename one of them at the source; the lake follows the RENAME TABLE"
            )

    def renames_to_follow(self, renames: list[TableRename], tables: list[tuple[str, str]]) -> list[TableRename]:
        """The batch's renames added to the ones read before, all in source order: what the batch's
        events (of `tables`) are routed by (follow_renames). The renames of earlier runs of the job are
        read from the lake tables' properties once, when a batch first has events of a table the lake
        does not hold (a copy tool's table that was renamed away, or a new table). A step read again (a
        batch run again, the connector sending a statement again) is kept once."""
        if not self._renames_loaded and any(self.state(self.settings.table_identifier(*t)) is None for t in tables):
            renames = self._lake_renames() + renames
        known = set(self._renames_read)
        for r in renames:
            if r not in known:
                self._renames_read.append(r)
                known.add(r)
        self._renames_read.sort(key=lambda r: r.order)
        return list(self._renames_read)

    def _lake_renames(self) -> list[TableRename]:
        """Every rename step recorded by the namespace's lake tables: one catalog listing and one
        properties read per table, once per process."""
        self._renames_loaded = True
        ns = f"{self.settings.catalog_name}.{self.settings.namespace}"
        names = self.executor.catalog.table_names(ns)
        found = [
            r for n in names if not is_job_table(n) for r in recorded_renames(table_properties(self.spark, f"{ns}.{n}"))
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
            if old == new or (r.seq, r.old, r.new) in self._moves_done or self._moved_already(old, new, r):
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
            props = {**self._properties(old), RENAMED_AT_PROPERTY: r.mark, **dict([_rename_property(r)])}
            self.executor.catalog.move_table(old, new, props)
            self.forget(new)
            self._states[old] = None
            with self._claims:
                self._sources.pop(old, None)
                self._sources[new] = r.new
            self._moves_done.add((r.seq, r.old, r.new))
            log.warning("table %s: renamed from %s at the source; the lake table moved with its rows", new, old)
            out.append(TableReport(new, schema=f"renamed from {old.rsplit('.', 1)[-1]}"))
        return out

    def _early_rows(self, old: str, new: str, r: TableRename) -> None:
        """Rows of the old name written after the rename were read before the statement (the
        schema-change topic behind the table's): they are another table's, and an update or delete
        among them changed a row of this one. Named in an error with the fix; the move goes on."""
        if _mark_order(table_properties(self.spark, old).get(RENAMED_AT_PROPERTY))[0] == r.seq:
            return  # named by an earlier step of this statement: that step looked already
        early = self.executor.catalog.rows_after(old, r.seq)
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
        reserved = self.executor.fmt.reserved_properties
        return {k: v for k, v in table_properties(self.spark, ident).items() if k not in reserved}

    def _moved_already(self, old: str, new: str, r: TableRename) -> bool:
        """Whether step `r` was carried out before (a batch run again after a crash), finishing it
        when it stopped between its copy and the drop: the old name's lake table, if any, got its
        name at a later step, or the new name's table is this step's copy."""
        old_mark = table_properties(self.spark, old).get(RENAMED_AT_PROPERTY) if self.state(old) else None
        if self.state(old) is None or _mark_order(old_mark) > _mark_order(r.mark):
            return True
        if self.state(new) is not None and table_properties(self.spark, new).get(RENAMED_AT_PROPERTY) == r.mark:
            self.executor.catalog.finish_move(old, new)
            self._states[old] = None
            return True
        return False

    # ------------------------------------------------------------------ what a plan needs and leaves
    def memory(self, ident: str) -> Memory:
        """What this process remembers of the table beyond its catalog state (table_plan.Memory)."""
        with self._claims:  # tables are planned on several threads
            if not self._early_loaded:
                self._partitions = self._early_files.load() | self._partitions
                self._early_loaded = True
        partitioning, deletes, diverged = self._partitions.get(ident, (None, (), None))
        return Memory(
            self._dropped.get(ident),
            tuple(self._early.get(ident, ())),
            ident in self._replacing,
            partitioning,
            deletes,
            diverged,
        )

    def settle(self, ident: str, plan: TablePlan) -> None:
        """Keep what the table's executed plan left: its state (read from the catalog again after a
        step the plan does not model exactly) and the process memory."""
        m = plan.memory
        if m.dropped is not None:
            self._dropped[ident] = m.dropped
        if m.early:
            self._early[ident] = list(m.early)
        else:
            self._early.pop(ident, None)
        read = (m.partitioning, m.partition_deletes, m.diverged)
        early = read if any(read) else None
        if early != self._partitions.get(ident):
            self._early_files.save(ident, early)
        if early is not None:
            self._partitions[ident] = early
        else:
            self._partitions.pop(ident, None)
        if m.replacing:
            self._replacing.add(ident)
        else:
            self._replacing.discard(ident)
        if plan.state is not None and any(isinstance(s, _RELOAD) for s in plan.steps):
            self.forget(ident)
        else:
            self._states[ident] = plan.state
