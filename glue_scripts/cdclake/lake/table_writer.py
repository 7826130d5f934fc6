"""One table's change events of a micro-batch: decoded, planned, executed, reported.

    schema groups ──decode: schema versions, column specs, lake names, cut at the table's column
        changes (Spark), rows (lazy)──> TableBatch ──plan_table (table_plan.py, no Spark)──> PlannedTable
        ──Executor (executor.py)──> the catalog: DDL, the write (1 commit) ──> TableOutcome
    every table's decoded rows ──count_written──> ops and decode errors (1 Spark action per batch)
        ──table_report──> each table's report, built once

The write is a `Writes` (executor.py): by default `executor.merge_changes` for a table with a primary key and
`executor.merge_multiset` for one without. Everything that cannot be applied comes back to the
caller as dead letters (DataFrames, lazy) with the table's report.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.lake_contract import CDC_OP, SetAsideMark
from ..common.names import duplicate_by_case
from ..common.report import TableReport
from ..common.settings import Settings
from ..events.avro_batch import AvroDecoder
from ..events.decode import SchemaGroup, cut_at, resolve_groups, with_rows
from ..events.decode import release as release_rows
from .deadletter import as_dead_letters
from .executor import Execution, Executor, TableRun, Writes, Written, decoded_rows, format_writes
from .formats import Format, UnsupportedName, table_format
from .lake_tables import LakeTables
from .table_plan import GroupFacts, Policies, TableDDL, TablePlan, cut_positions, drop_probe, plan_table

log = logging.getLogger("cdclake")


@dataclass
class ClassifiedBatch:
    batch_id: int
    full: DataFrame  # classified records, as computed from the raw batch
    cached: DataFrame  # the same rows, persisted, without the record's key and value text
    fingerprint: str = ""  # the batch's offset ranges: the same when the batch runs again


@dataclass(frozen=True)
class TableOutcome:
    """One table's batch as values: what its plan was and what running it did (`run`: the rows
    written, not counted yet, count_written; the events rejected). Set aside (jobs/batch.py): its
    mark, its records as `dead_letters`; `new`: set aside by this batch; `keep`: its changes are the
    ones a resume replays, already in the mark's folder."""

    ident: str
    events: int
    plan: TablePlan | None = None
    run: TableRun = field(default_factory=TableRun)
    seconds: float = 0.0
    set_aside: SetAsideMark | None = None
    new: bool = False
    keep: bool = False
    set_aside_records: DataFrame | None = None

    @property
    def dead_letters(self) -> list[DataFrame]:
        """The records the plan rejected, or those of a table set aside."""
        if self.set_aside_records is not None:
            return [self.set_aside_records]
        return [r.rows for r in self.run.rejected]

    @property
    def took_effect(self) -> bool:
        """It belongs in the batch's report: it had events, or its statements, truncate or drop changed
        it, or it is set aside (a table whose statements the lake already holds did nothing)."""
        p = self.plan
        changed = p is not None and bool(p.schema or p.truncated or p.source_dropped or p.diverged)
        return bool(self.events or changed or self.set_aside is not None)


@dataclass(frozen=True)
class WriteCounts:
    """What the batch's one count found of a table's writes: its events per op, and those that did
    not decode by reason."""

    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    undecodable: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class TableBatch:
    """One source table's share of the micro-batch, decoded before it is planned (`TableWriter.decode`):
    its schema groups (copies of the summary's) with their wire format's schemas, resolved to column
    specs, oldest schema first, under the lake's column names, cut where the table's columns changed,
    each with its rows decoded (lazy); its truncate and its statements (their columns under the
    lake's names). Planning and running the plan read it; nothing changes it."""

    ident: str
    groups: tuple[SchemaGroup, ...]
    truncate: int | None
    statements: TableDDL | None
    events: int
    started: float


@dataclass(frozen=True)
class PlannedTable:
    """One table's plan for the batch, and the decoded batch its steps name."""

    plan: TablePlan
    batch: TableBatch

    @property
    def ident(self) -> str:
        return self.batch.ident


def executor(spark: SparkSession, settings: Settings, writes: Writes | None = None) -> Executor:
    """The executor of the job's plans, with its write (the format's MERGEs by default)."""
    fmt = table_format(settings)
    return Executor(
        spark, settings.write_mode, writes or format_writes(fmt), settings.unavailable_value_placeholder, fmt
    )


def release(written: list[Written]) -> None:
    """Free the decoded rows of the batch's writes."""
    for w in written:
        release_rows(w.decoded)


def group_facts(groups: list[SchemaGroup], fmt: Format | None = None) -> list[GroupFacts]:
    """What the planner needs of the groups (resolved): no Spark. `fmt`: the table format, whose
    column types may differ from the decoded ones (formats.Format.lake_type)."""
    lake_type = fmt.lake_type if fmt is not None else (lambda t: t)
    return [
        GroupFacts(
            index=i,
            max_seq=g.max_seq,
            events=g.events,
            min_seq=g.min_seq,
            columns=None if g.columns is None else tuple((c.name, lake_type(c.spark_type)) for c in g.columns),
            keys=None if g.keys is None else tuple(g.keys),
            error=g.error,
            defaults=frozenset(c.name for c in g.columns or [] if c.default is not None),
            deletes=g.deletes,
            updates=g.updates,
            toasted=g.toasted,
        )
        for i, g in enumerate(groups)
    ]


def lake_named(table: str, groups: list[SchemaGroup], statements: TableDDL | None, fmt: Format) -> TableDDL | None:
    """The resolved groups' columns and keys, and the statements' columns, under their lake names
    (formats.Format.column_name; the groups in place, each column keeping its event name). Raises
    UnsupportedName for a name no lake table holds: two columns differing only by case."""
    for g in groups:
        if g.columns is None or any(c.field is not None for c in g.columns):
            continue  # not resolved, or named already
        pair = duplicate_by_case([c.name for c in g.columns])
        if pair:
            raise UnsupportedName(
                f"table {table}: columns {pair[0]!r} and {pair[1]!r} differ only by case, and Spark, the catalog "
                "and Athena match column names case-insensitively: rename one of them at the source"
            )
        names = {c.name.lower(): fmt.column_name(c.name) for c in g.columns}
        g.columns = [c if names[c.name.lower()] == c.name else replace(c, name=names[c.name.lower()], field=c.name)
                     for c in g.columns]  # fmt: skip
        g.keys = None if g.keys is None else [names.get(k.lower(), k) for k in g.keys]
    if statements is None or not statements.changes:
        return statements
    changes = [
        replace(c, old=fmt.column_name(c.old), new=None if c.new is None else fmt.column_name(c.new))
        for c in statements.changes
    ]
    return replace(statements, changes=changes)


class TableWriter:
    """One table of a batch: decode, plan, execute; and the batch's one count of what was written.
    `avro`: the wire format's decoder (the batch's schema versions)."""

    def __init__(self, spark: SparkSession, settings: Settings, tables: LakeTables, avro: AvroDecoder) -> None:
        self.spark = spark
        self.avro = avro
        self.settings = settings
        self.tables = tables
        self.policies = Policies(
            settings.schema_change_policy,
            settings.dropped_column_policy,
            settings.dropped_table_policy,
            settings.keyless_table_policy,
            fixed_key=table_format(settings).fixed_key,
        )
        self.executor = tables.executor

    def decode(
        self,
        batch: ClassifiedBatch,
        table: tuple[str, str],
        groups: list[SchemaGroup],
        truncate_seq: int | None,
        statements: TableDDL | None,
    ) -> TableBatch:
        """One source table's schema groups decoded, whatever their wire format: the Avro groups given
        their schema versions (avro_batch.attach), every group's Connect schema resolved (a group
        without one has its types inferred: one Spark action), its columns named as the lake names
        them (and the statements' columns), cut where the table's columns changed (one Spark action
        per group cut), its rows decoded (lazy). Raises UnsupportedName for a table or column name
        no lake table holds."""
        started = time.monotonic()
        ident = self.settings.table_identifier(*table)
        self.tables.claim(ident, table)
        copies = [replace(g) for g in groups]  # the summary's groups stay as the batch read them
        self.avro.attach(copies)
        resolve_groups(self.spark, batch.cached, copies)
        fmt = self.executor.fmt
        statements = lake_named(ident, copies, statements, fmt)
        state, memory = self.tables.state(ident), self.tables.memory(ident)
        cuts = cut_positions(state, group_facts(copies, fmt), statements, self.policies, memory)
        # Events on both sides of a column's drop or rename may share a schema: cut them apart.
        cut = cut_at(batch.cached, copies, cuts)
        decoded = tuple(with_rows(batch.cached, g) for g in cut)
        return TableBatch(ident, decoded, truncate_seq, statements, sum(g.events for g in groups), started)

    def plan(self, batch: ClassifiedBatch, tb: TableBatch) -> PlannedTable:
        """Plan the table's decoded batch (its schema groups, its truncate, and the drop or column
        changes its statements name), without Spark but for one read: for a DROP TABLE read, whether
        the lake has newer rows."""
        ident, statements = tb.ident, tb.statements
        state, memory = self.tables.state(ident), self.tables.memory(ident)
        probe = drop_probe(state, statements)
        plan = plan_table(
            state,
            group_facts(list(tb.groups), self.executor.fmt),
            statements,
            self.policies,
            memory,
            table=ident,
            batch=batch.fingerprint,
            truncate=tb.truncate,
            newer_rows=probe is not None and self.executor.catalog.has_rows_after(ident, probe),
        )
        return PlannedTable(plan, tb)

    def execute(self, batch: ClassifiedBatch, planned: PlannedTable) -> TableOutcome:
        """Run the table's plan: what it did."""
        plan, tb = planned.plan, planned.batch
        run = self.executor.run(plan, Execution(tb.ident, tb.groups, batch.batch_id, batch.full))
        self.tables.settle(tb.ident, plan)
        return TableOutcome(tb.ident, tb.events, plan, run, time.monotonic() - tb.started)

    # ------------------------------------------------------------------ counting what was written
    def count_written(
        self, batch: ClassifiedBatch, outcomes: list[TableOutcome]
    ) -> tuple[list[WriteCounts], list[DataFrame]]:
        """Events per op and decode error of every table the batch wrote, in one Spark action over
        the persisted decoded rows (instead of one per table): each outcome's counts, in order, and
        the events that did not decode as dead letters. Releases the rows."""
        written = [(w, i) for i, o in enumerate(outcomes) for w in o.run.written]
        try:
            counts: dict[int, list[Any]] = defaultdict(list)
            if written:
                parts = [
                    w.decoded.select(F.lit(i).alias("_w"), F.col("_decode_error").isNull().alias("ok"), CDC_OP,
                                     "_decode_error")
                    for i, (w, _) in enumerate(written)
                ]  # fmt: skip
                rows = (
                    union_all(parts)
                    .groupBy("_w", "ok", CDC_OP, "_decode_error")
                    .agg(F.count(F.lit(1)).alias("count"))
                    .collect()
                )
                for r in rows:
                    counts[r["_w"]].append(r)
            dead: list[DataFrame] = []
            found = [WriteCounts() for _ in outcomes]
            for i, (w, at) in enumerate(written):
                dead += _undecodable(batch, w, counts[i])
                found[at] = _added(found[at], counts[i], w.keys)
            return found, dead
        finally:
            release([w for w, _ in written])


def table_report(outcome: TableOutcome, counts: WriteCounts, set_aside_folder: str = "") -> TableReport:
    """The table's report, built once: from its plan, what running it did and the batch's count of
    its writes (or, set aside, its mark and the folder its changes went to)."""
    mark = outcome.set_aside
    if mark is not None:
        reason = set_aside_reason(mark)
        dead = {reason: outcome.events} if outcome.events else {}
        return TableReport(outcome.ident, events=outcome.events, dead=outcome.events, dead_reasons=dead,
                           set_aside=mark.reason, set_aside_since=mark.batch_id, set_aside_folder=set_aside_folder)  # fmt: skip
    reasons: dict[str, int] = {}
    for reason, n in [*((r.reason, r.events) for r in outcome.run.rejected), *counts.undecodable]:
        reasons[reason] = reasons.get(reason, 0) + n
    plan = outcome.plan
    assert plan is not None
    return TableReport(
        outcome.ident,
        events=outcome.events,
        inserts=counts.inserts,
        updates=counts.updates,
        deletes=counts.deletes,
        dead=sum(reasons.values()),
        dead_reasons=reasons,
        schema="; ".join(plan.schema),
        truncated=plan.truncated,
        source_dropped=plan.source_dropped,
        diverged=plan.diverged,
        seconds=outcome.seconds,
    )


def set_aside_reason(mark: SetAsideMark) -> str:
    """The dead letters' reason of a table set aside."""
    return f"table set aside since batch {mark.batch_id}: {mark.reason}"


def union_all(parts: list[DataFrame]) -> DataFrame:
    """The union of `parts` (same columns, same order), built as a balanced tree: each union
    analyses the whole tree below it, so unions one after another cost the square of the number of
    parts, halves n log n."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    return union_all(parts[:half]).union(union_all(parts[half:]))


def _undecodable(batch: ClassifiedBatch, w: Written, counts: list[Any]) -> list[DataFrame]:
    """The events of a write that did not decode, as dead letters."""
    bad = sum(r["count"] for r in counts if not r["ok"])
    if not bad:
        return []
    log.error("table %s: %d event(s) could not be decoded; sent to dead letters", w.ident, bad)
    # Decoded again from the uncached records (they hold the key and value text). A local
    # checkpoint makes them a leaf of the plan: without it the optimizer merges the envelope
    # parsing into every decoded column and spends minutes planning a handful of rows.
    again = decoded_rows(w.groups, w.columns, w.fills, batch.full.localCheckpoint(eager=False))
    errors = again.where(F.col("_decode_error").isNotNull())
    return [as_dead_letters(errors, F.col("_decode_error"), batch.batch_id, "_raw_")]


def _added(found: WriteCounts, counts: list[Any], keys: list[str]) -> WriteCounts:
    """`found` with one write's inserts, updates, deletes and undecodable events (from the counts)."""
    ops: dict[str, int] = defaultdict(int)
    bad: dict[str, int] = dict(found.undecodable)
    for r in counts:
        if r["ok"]:
            ops[r[CDC_OP]] += r["count"]
        else:
            bad[r["_decode_error"]] = bad.get(r["_decode_error"], 0) + r["count"]
    # A keyless update was counted as a delete of `before` too (decode.py).
    deletes = ops["d"] - (0 if keys else ops["u"])
    return WriteCounts(
        found.inserts + ops["c"] + ops["r"], found.updates + ops["u"], found.deletes + deletes, tuple(bad.items())
    )
