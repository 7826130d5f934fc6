"""The micro-batch function: raw Kafka records in, one atomic MERGE per table out.

    raw batch ──classify──> status per record ──group aggregate, summarize──> schema groups per table
        ──per table (table_writer.py)──> decode ──> plan ──> execute: ALTER, newest per key, MERGE (one commit)
        ──> each table's outcome, counted once for the batch ──> its report
    anything that cannot be applied ──> dead letters (with reason, topic/partition/offset)

This module runs a batch: classify (envelope.py), summarize (summary.py), carry out the batch's
table renames (lake_tables.py: before the tables, which run at once), hand each table's groups to
the table writer (tables with only truncates or statements too), write the dead letters and log
the batch's line (report.py) and its metrics (metrics.py, EMF lines).

Both sources (Spark's Kafka source on Glue, the files source, and the local Kafka client) call
`BatchProcessor.process(raw_df, batch_id)`. Spark actions per batch: one group aggregate over the
classified batch, the MERGE per table, one count of the decoded rows of all tables (events per
op, decode errors), and a dead-letter write only when there is something to write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import reduce
from typing import TypeVar

from pyspark import inheritable_thread_target
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.failures import REPEATS, Failure, Kind, after_attempts, classify_exception
from ..common.lake_contract import SchemaChangePolicy, SetAsideMark
from ..common.metrics import LOCAL_STREAMING_JOB, batch_metrics, emit, job_name
from ..common.report import BatchReport, FollowWatch, TableReport
from ..common.settings import Settings, WireFormat
from ..events.avro_batch import AvroDecoder
from ..events.decode import SchemaGroup, as_leaf
from ..events.decode import release as release_rows
from ..events.envelope import DEAD
from ..events.summary import BatchSummary, group_aggregate, summarize
from ..lake.deadletter import archive_raw, as_dead_letters, write_dead_letters
from ..lake.formats.capabilities import Capability
from ..lake.lake_tables import Item, LakeTables
from ..lake.read_point import ReadPoint
from ..lake.set_aside import SetAsideStore, table_records
from ..lake.table_plan import TableDDL
from ..lake.table_writer import (
    ClassifiedBatch,
    PlannedTable,
    TableOutcome,
    TableWriter,
    WriteCounts,
    Writes,
    executor,
    set_aside_reason,
    table_report,
)
from ..local.faults import BETWEEN_TABLES, CrashPoint, TableFault
from .concurrency import concurrency, run_bounded
from .transaction_gate import TransactionGate

log = logging.getLogger("cdclake")


class SchemaChangeError(RuntimeError):
    """A type change the lake cannot take exactly, under --schema_change_policy fail: the batch
    fails before anything is committed and runs again (from the checkpoint) after the fix."""


_UNCACHED = ("key", "value", "_payload_json")

# Adaptive execution re-plans a query at each shuffle and runs every stage as a Spark job of its
# own; on a batch of a few hundred records it has nothing to improve, and the batch runs 9 Spark
# jobs where 4 do (docs/BENCHMARKS.md, same CPU). A batch of fewer records than this runs with it
# off and one shuffle partition (no task per empty partition), from its group aggregate on (whose
# result is a few rows whatever the batch); a larger batch, from its tables on, with the session's.
SMALL_BATCH_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
SMALL_BATCH_RECORDS = 5_000

R = TypeVar("R")


class BatchProcessor:
    """Applies micro-batches to the lake. Keeps a cache of table schemas across batches, so a
    steady stream makes no catalog call except the MERGE itself.

    `writes`: how each table's changes are written (table_writer.Writes: the MERGEs by default).
    `fault`, `crash`: tests only (local/faults.py). `resume`: the lake table a resume run replays (its mark is
    not followed in this run; job.py clears it when the run did not set the table aside again)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        writes: Writes | None = None,
        fault: TableFault | None = None,
        resume: str | None = None,
        crash: CrashPoint | None = None,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.tables = LakeTables(spark, settings, executor(spark, settings, writes))
        self.avro = AvroDecoder(
            settings.wire_format == WireFormat.AVRO, placeholder=settings.unavailable_value_placeholder
        )
        self._writer = TableWriter(spark, settings, self.tables, self.avro)
        self._schemas: dict[int, str] = {}  # _schema_id -> _value_schema, of earlier batches
        self._follow = FollowWatch()  # tables whose changes all go to the dead letters, batch after batch
        self.tables.executor.catalog.create_namespace(f"{settings.catalog_name}.{settings.namespace}")
        self.store = SetAsideStore(spark, settings.dead_letter_path)
        self._aside: dict[str, SetAsideMark] = self.store.marks()  # tables set aside, by lake table
        self._fault, self.resume, self._crash = fault, resume, crash
        self.set_aside_in_run: dict[str, str] = {}  # lake table -> why, of the batches this process ran
        self.job = job_name(settings.extra, LOCAL_STREAMING_JOB)  # the metrics' Job dimension
        self.gate = TransactionGate(spark, settings)
        # With whole transactions (and a format that has versions), a read point across the tables.
        fmt = self.tables.executor.fmt
        publish = self.gate.keep and fmt.supports(Capability.READ_POINT)
        namespace = f"{settings.catalog_name}.{settings.namespace}"
        self.read_point = ReadPoint(spark, self.tables.executor, namespace) if publish else None

    def _known_schema(self, schema_id: int, text: str | None) -> str | None:
        """The value schema of a group: from this batch when it is new, else from an earlier one."""
        if text is None:
            return self._schemas.get(schema_id)
        if len(self._schemas) >= 256:  # schemas change rarely; a full cache is simply refilled
            self._schemas.clear()
        self._schemas[schema_id] = text
        return text

    def forget(self, ident: str | None = None) -> None:
        """Drop cached table state (after a failure, the catalog is the truth)."""
        self.tables.forget(ident)
        if self.read_point is not None:
            self.read_point.forget()

    # ------------------------------------------------------------------ the batch
    def process(self, raw: DataFrame, batch_id: int) -> BatchReport:
        t0 = time.monotonic()
        report = BatchReport(batch_id)
        raw = self.gate.with_held(raw, batch_id)  # --transactions keep: what the previous batch held
        # Avro records of the Glue Schema Registry read with their schema versions (one Spark action
        # with --wire_format avro); those that cannot be decoded are dead letters naming why.
        classified = self.avro.classify(raw, self.gate.keep)
        # What the batch reads more than once is kept (computed by the group aggregate), without
        # the record's key and value text and the payload (most of a record's bytes): only dead
        # letters need those, and they are recomputed from `classified` when there are any. The
        # value schema (~80% of a record) is kept only for schemas not seen in an earlier batch.
        # As a one-node plan (decode.as_leaf): every table's decode builds on it.
        schema = F.col("_value_schema")
        if self._schemas:
            schema = F.when(~F.col("_schema_id").isin(sorted(self._schemas)), schema)
        cached = as_leaf(classified.withColumn("_value_schema", schema).drop(*_UNCACHED))
        conf = raw.sparkSession.conf
        session = {k: conf.get(k) for k in SMALL_BATCH_CONF}
        for k, v in SMALL_BATCH_CONF.items():
            conf.set(k, v)

        def sized(records: int) -> None:
            for k, v in (session if records >= SMALL_BATCH_RECORDS else SMALL_BATCH_CONF).items():
                conf.set(k, v)

        try:
            self._process(self._gated(batch_id, classified, cached, raw, report), report, sized)
        except Exception:
            self.forget()
            raise
        finally:
            for k, v in session.items():
                conf.set(k, v)
            release_rows(cached)
            self.avro.release()
        report.seconds = time.monotonic() - t0
        log.info(report.line())
        aside = [t for t in self._aside if t != self.resume]
        emit(batch_metrics(self.job, report, aside, int(time.time() * 1000)))
        return report

    def _gated(
        self, batch_id: int, classified: DataFrame, cached: DataFrame, raw: DataFrame, report: BatchReport
    ) -> ClassifiedBatch:
        """The batch without the records held for the rest of their source transaction (written to
        the held store first, transaction_gate.py)."""
        held = self.gate.hold(cached, raw, batch_id, report)
        if held is None:
            return ClassifiedBatch(batch_id, classified, cached)
        return ClassifiedBatch(batch_id, classified.where(~held), cached.where(~held))

    def _process(self, batch: ClassifiedBatch, report: BatchReport, sized: Callable[[int], None]) -> None:
        """`sized(records)`: told the batch's size once the group aggregate has it."""
        s = self.settings
        rows = group_aggregate(batch.cached, s.unavailable_value_placeholder).collect()
        if not rows:
            return
        summary = summarize(rows, self._known_schema)
        sized(summary.records)
        batch.fingerprint = summary.fingerprint
        if s.raw_zone_path:
            # Archived before anything is applied, so the raw zone always holds what the lake has.
            newest = summary.newest_timestamp if summary.newest_timestamp is not None else time.time()
            day = datetime.fromtimestamp(newest, UTC).strftime("%Y-%m-%d")
            archive_raw(batch.full, s.raw_zone_path, day, batch.batch_id, summary.fingerprint)
        _count(report, summary)
        routed = self.tables.route(batch.cached, summary)
        report.tables += routed.moved
        statements = routed.statements
        outcomes = self._apply_tables(batch, routed.items(), routed.truncated, statements)
        if any(d.relabels for d in statements.values()):  # PostgreSQL's enum labels: after the writes
            self.tables.relabel(statements, self.settings.table_identifier)
        counts, undecodable = self._writer.count_written(batch, outcomes)
        dead: list[DataFrame] = []  # the batch's undecodable records first, then each table's
        if summary.dead:
            dead.append(as_dead_letters(batch.full.where(F.col("_status") == DEAD), F.col("_reason"), batch.batch_id))
        dead += undecodable
        for outcome, counted in zip(outcomes, counts, strict=True):
            if outcome.took_effect:
                dead += self._take(batch, report, outcome, counted)
        if dead:
            report.dead_letter_folder = write_dead_letters(
                reduce(DataFrame.unionByName, dead), s.dead_letter_path, batch.batch_id, summary.fingerprint
            )
            log.warning(report.dead_letter_line())
        if summary.newest_source_ts is not None:
            report.behind_seconds = max(0.0, time.time() - summary.newest_source_ts)
        if self.read_point is not None:
            written = [tr.table for tr in report.tables if not tr.set_aside]
            newest = max((g.max_seq for gs in routed.tables.values() for g in gs), default=None)
            self.read_point.publish(batch.batch_id, written, newest, summary.newest_source_ts)

    def _apply_tables(
        self,
        batch: ClassifiedBatch,
        items: list[Item],
        truncated: dict[tuple[str, str], int],
        statements: dict[tuple[str, str], TableDDL],
    ) -> list[TableOutcome]:
        """Every table of the batch, up to --table_concurrency at once; a table that fails for
        good comes back set aside, any other failure fails the batch (concurrency.py)."""
        workers = concurrency(self.settings.table_concurrency, self.spark.sparkContext.defaultParallelism)

        def plan(item: Item) -> tuple[Item, PlannedTable | TableOutcome]:
            return item, self._guarded(batch, item, lambda: self._plan(batch, item, truncated, statements))

        def execute(planned: tuple[Item, PlannedTable | TableOutcome]) -> TableOutcome:
            item, p = planned
            if isinstance(p, TableOutcome):
                return p
            outcome = self._guarded(batch, item, lambda: self._execute(batch, p))
            if self._crash is not None and len(items) > 1:  # tests only: one table committed, others not
                self._crash.reached(BETWEEN_TABLES, batch.batch_id)
            return outcome

        if self.settings.schema_change_policy == SchemaChangePolicy.FAIL:
            # Every table planned before any is written: a lossy change fails the batch first.
            planned = run_bounded(plan, items, workers, inheritable_thread_target)
            _fail_on_lossy_change([p for _, p in planned if isinstance(p, PlannedTable)])
            outcomes = run_bounded(execute, planned, workers, inheritable_thread_target)
        else:
            outcomes = run_bounded(lambda item: execute(plan(item)), items, workers, inheritable_thread_target)
        # A table set aside has no writes to count: what it decoded before it failed was freed
        # (Executor.run), its outcome is its records as dead letters.
        return outcomes

    def _plan(
        self,
        batch: ClassifiedBatch,
        item: Item,
        truncated: dict[tuple[str, str], int],
        statements: dict[tuple[str, str], TableDDL],
    ) -> PlannedTable | TableOutcome:
        (table, groups), ident = item, self.settings.table_identifier(*item[0])
        mark = self._marked(ident)
        if mark is not None:
            return self._set_aside(batch, ident, table, groups, mark)
        decoded = self._writer.decode(batch, table, groups, truncated.get(table), statements.get(table))
        return self._writer.plan(batch, decoded)

    def _execute(self, batch: ClassifiedBatch, planned: PlannedTable) -> TableOutcome:
        if self._fault is not None and self._fault.hits(planned.ident, batch.batch_id):
            self._fault.fail(self.spark, planned.ident)
        return self._writer.execute(batch, planned)

    # ------------------------------------------------------------------ tables set aside
    def _marked(self, ident: str) -> SetAsideMark | None:
        """The table's mark: this process's (or the dead-letter path's, read at start), else its table
        property (read with its state). None in the run that resumes it."""
        if ident == self.resume:
            return None
        mark = self._aside.get(ident)
        if mark is None:
            state = self.tables.state(ident)
            mark = state.set_aside if state is not None else None
        return mark

    def _guarded(self, batch: ClassifiedBatch, item: Item, fn: Callable[[], R]) -> R | TableOutcome:
        """`fn()`; when it fails for good, the table's outcome set aside instead; other failures raise."""
        try:
            return fn()
        except Exception as e:
            (table, groups), ident = item, self.settings.table_identifier(*item[0])
            failure = self._judge(batch, ident, e)
            if failure.kind != Kind.PERMANENT:
                raise
            return self._set_aside(batch, ident, table, groups, None, failure)

    def _judge(self, batch: ClassifiedBatch, ident: str, e: Exception) -> Failure:
        """What the table's failure is; an unknown one counts this attempt (durably, set_aside.py)."""
        self.forget(ident)  # the catalog is the truth again
        failure, note = classify_exception(e), ""
        if failure.kind == Kind.UNKNOWN:
            attempts = self.store.count_attempt(ident, batch.fingerprint)
            failure = after_attempts(failure, attempts)
            note = f", attempt {attempts} of {REPEATS} before the table is set aside"
        if failure.kind != Kind.PERMANENT:
            log.error(
                "table %s failed in batch %d (%s%s): %s; the batch fails and runs again",
                ident, batch.batch_id, failure.kind, note, failure.reason,
            )  # fmt: skip
        return failure

    def _set_aside(
        self,
        batch: ClassifiedBatch,
        ident: str,
        table: tuple[str, str],
        groups: list[SchemaGroup],
        mark: SetAsideMark | None,
        failure: Failure | None = None,
    ) -> TableOutcome:
        """The table's outcome set aside: its records of the batch as dead letters, its mark (a new
        one when `failure` set it aside now). A resume run keeps the mark it replays."""
        events = sum(g.events for g in groups)
        keep = ident == self.resume and (mark := mark or self.store.mark(ident)) is not None
        new = mark is None
        if mark is None:
            at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            reason = failure.reason if failure is not None else "set aside"
            mark = self.store.new_mark(ident, reason, batch.batch_id, batch.fingerprint, at)
        records = table_records(batch.full, table, groups, set_aside_reason(mark), batch.batch_id)
        return TableOutcome(ident, events, set_aside=mark, new=new, keep=keep, set_aside_records=records)

    def _take(
        self, batch: ClassifiedBatch, report: BatchReport, outcome: TableOutcome, counts: WriteCounts
    ) -> list[DataFrame]:
        """A table's outcome into the batch's report; its dead letters for the batch's folder. A table
        set aside has its changes written to its own folder and its mark kept, here, before the
        batch's offsets are committed."""
        mark = outcome.set_aside
        if mark is None:
            tr = table_report(outcome, counts)
            report.tables.append(tr)
            report.dead += tr.dead
            if self._follow.note(tr):
                log.error(tr.stopped_line())
            return outcome.dead_letters
        if outcome.keep:
            folder = mark.folder
        else:
            folder = self.store.write_changes(
                reduce(DataFrame.unionByName, outcome.dead_letters), mark, batch.batch_id, batch.fingerprint
            )
        tr = table_report(outcome, counts, folder)
        report.tables.append(tr)
        report.dead += tr.dead
        report.set_aside += tr.dead
        if outcome.new:
            self._keep_mark(mark)
        self.set_aside_in_run[tr.table] = mark.reason
        log.error(tr.set_aside_line(batch.batch_id))
        return []

    def _keep_mark(self, mark: SetAsideMark) -> None:
        """The mark in the dead-letter path (what a restarted job reads) and as the table's property
        (what users see; a table the lake does not have, or that refuses it, keeps only the file)."""
        self.store.write_mark(mark)
        self._aside[mark.table] = mark
        try:
            if self.tables.executor.catalog.table_exists(mark.table):
                self.tables.executor.ddl.mark_set_aside(mark.table, mark.to_json())
        except Exception as e:  # the table may be what refuses statements
            log.warning("table %s: the set-aside property could not be set (%s); the mark file holds it", mark.table, e)
        self.forget(mark.table)

    def forget_mark(self, ident: str) -> None:
        """A resumed table: its mark removed from the dead-letter path, the property and this process."""
        self.store.clear_mark(ident)
        self._aside.pop(ident, None)
        if self.tables.executor.catalog.table_exists(ident):
            self.tables.executor.ddl.mark_set_aside(ident, None)
        self.forget(ident)


def _fail_on_lossy_change(planned: list[PlannedTable]) -> None:
    """--schema_change_policy fail: every table is planned before any is written; the batch fails
    (nothing committed) when a type change of a table the lake has cannot be applied exactly."""
    problems = [p for t in planned for p in t.plan.lossy]
    if problems:
        for p in problems:
            log.error("%s (--schema_change_policy fail: the batch fails, nothing is committed)", p)
        raise SchemaChangeError("; ".join(problems))


def _count(report: BatchReport, summary: BatchSummary) -> None:
    """The batch's own counts (the tables add their dead letters as they are applied)."""
    report.records = summary.records
    report.changes = summary.changes
    report.tombstones = summary.tombstones
    report.schema_events = summary.schema_events
    report.truncates = summary.truncates
    report.dead = summary.dead
    report.dead_reasons = dict(summary.dead_reasons)


__all__ = ["BatchProcessor", "BatchReport", "SchemaChangeError", "TableReport", "Writes"]
