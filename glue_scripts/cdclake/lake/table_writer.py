"""One table's change events of a micro-batch: planned, executed, reported.

    schema groups ──resolve, cut at the table's column changes (Spark)──> GroupFacts
        ──plan_table (table_plan.py, no Spark)──> TablePlan: DDL, dead letters, the write
        ──Executor (executor.py)──> the catalog: DDL, decode, the write (1 commit)
    every table's decoded rows ──count_written──> ops and decode errors (1 Spark action per batch)

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
from ..events.decode import SchemaGroup, cut_at, resolve_groups
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


@dataclass
class TableOutcome:
    report: TableReport
    dead_letters: list[DataFrame] = field(default_factory=list)
    written: tuple[Written, ...] = ()  # decoded and written, not counted yet (count_written)
    # A table set aside (jobs/batch.py): its mark; `new`: set aside by this batch; `keep`: its
    # changes are the ones a resume replays, already in the mark's folder.
    set_aside: SetAsideMark | None = None
    new: bool = False
    keep: bool = False


@dataclass
class PlannedTable:
    """One table's plan for the batch, with the schema groups its steps name."""

    ident: str
    groups: list[SchemaGroup]
    plan: TablePlan
    events: int
    started: float


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
    def __init__(self, spark: SparkSession, settings: Settings, tables: LakeTables) -> None:
        self.spark = spark
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

    def plan(
        self,
        batch: ClassifiedBatch,
        table: tuple[str, str],
        groups: list[SchemaGroup],
        truncate_seq: int | None,
        statements: TableDDL | None,
    ) -> PlannedTable:
        """Plan the batch's schema groups of one source table (and its truncate, and the drop or
        column changes its statements name). Reads only: the groups' schemas, the cuts at the
        table's column changes, and (for a DROP TABLE read) whether the lake has newer rows."""
        started = time.monotonic()
        ident = self.settings.table_identifier(*table)
        self.tables.claim(ident, table)
        events = sum(g.events for g in groups)
        resolve_groups(self.spark, batch.cached, groups)
        fmt = self.executor.fmt
        statements = lake_named(ident, groups, statements, fmt)
        state, memory = self.tables.state(ident), self.tables.memory(ident)
        cuts = cut_positions(state, group_facts(groups, fmt), statements, self.policies, memory)
        # Events on both sides of a column's drop or rename may share a schema: cut them apart.
        groups = cut_at(batch.cached, groups, cuts)
        probe = drop_probe(state, statements)
        plan = plan_table(
            state,
            group_facts(groups, fmt),
            statements,
            self.policies,
            memory,
            table=ident,
            batch=batch.fingerprint,
            truncate=truncate_seq,
            newer_rows=probe is not None and self.executor.catalog.has_rows_after(ident, probe),
        )
        return PlannedTable(ident, groups, plan, events, started)

    def execute(self, batch: ClassifiedBatch, planned: PlannedTable) -> TableOutcome:
        """Run the table's plan; its report and dead letters."""
        plan = planned.plan
        ex = Execution(planned.ident, planned.groups, batch.batch_id, batch.full, batch.cached)
        run = self.executor.run(plan, ex)
        self.tables.settle(planned.ident, plan)
        return TableOutcome(table_report(planned, run), [r.rows for r in run.rejected], run.written)

    # ------------------------------------------------------------------ counting what was written
    def count_written(self, batch: ClassifiedBatch, outcomes: list[TableOutcome]) -> list[DataFrame]:
        """Events per op and decode error of every table the batch wrote, in one Spark action over
        the persisted decoded rows (instead of one per table): the tables' reports get their
        counts, and the events that did not decode come back as dead letters. Releases the rows."""
        written = [(w, o.report) for o in outcomes for w in o.written]
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
            for i, (w, report) in enumerate(written):
                dead += _undecodable(batch, w, report, counts[i])
                _count_ops(report, counts[i], w.keys)
            return dead
        finally:
            release([w for w, _ in written])


def table_report(planned: PlannedTable, run: TableRun) -> TableReport:
    """The table's report from its plan and what running it did (the op counts and the events that
    did not decode come with the batch's count, `TableWriter.count_written`)."""
    plan = planned.plan
    reasons: dict[str, int] = {}
    for r in run.rejected:
        reasons[r.reason] = reasons.get(r.reason, 0) + r.events
    return TableReport(
        planned.ident,
        events=planned.events,
        dead=sum(reasons.values()),
        dead_reasons=reasons,
        schema="; ".join(plan.schema),
        truncated=plan.truncated,
        source_dropped=plan.source_dropped,
        diverged=plan.diverged,
        seconds=time.monotonic() - planned.started,
    )


def union_all(parts: list[DataFrame]) -> DataFrame:
    """The union of `parts` (same columns, same order), built as a balanced tree: each union
    analyses the whole tree below it, so unions one after another cost the square of the number of
    parts, halves n log n."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    return union_all(parts[:half]).union(union_all(parts[half:]))


def _undecodable(batch: ClassifiedBatch, w: Written, tr: TableReport, counts: list[Any]) -> list[DataFrame]:
    """The events that did not decode, as dead letters, counted in the table's report."""
    bad = sum(r["count"] for r in counts if not r["ok"])
    if not bad:
        return []
    tr.dead += bad
    for r in counts:
        if not r["ok"]:
            tr.dead_reasons[r["_decode_error"]] = tr.dead_reasons.get(r["_decode_error"], 0) + r["count"]
    log.error("table %s: %d event(s) could not be decoded; sent to dead letters", w.ident, bad)
    # Decoded again from the uncached records (they hold the key and value text). A local
    # checkpoint makes them a leaf of the plan: without it the optimizer merges the envelope
    # parsing into every decoded column and spends minutes planning a handful of rows.
    again = decoded_rows(batch.full.localCheckpoint(eager=False), w.groups, w.columns, w.fills)
    errors = again.where(F.col("_decode_error").isNotNull())
    return [as_dead_letters(errors, F.col("_decode_error"), batch.batch_id, "_raw_")]


def _count_ops(tr: TableReport, counts: list[Any], keys: list[str]) -> None:
    """The table's inserts, updates and deletes, from the counts (not computed again)."""
    ops: dict[str, int] = defaultdict(int)
    for r in counts:
        if r["ok"]:
            ops[r[CDC_OP]] += r["count"]
    # A keyless update was counted as a delete of `before` too (decode.py).
    tr.inserts, tr.updates, tr.deletes = ops["c"] + ops["r"], ops["u"], ops["d"] - (0 if keys else ops["u"])
