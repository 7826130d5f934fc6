"""The micro-batch function: raw Kafka records in, one atomic MERGE per table out.

    raw batch ──classify──> status per record ──group aggregate, summarize──> schema groups per table
        ──per table (table_writer.py)──> plan schema, ALTER ──> decode ──newest per key──> MERGE (one commit)
    anything that cannot be applied ──> dead letters (with reason, topic/partition/offset)

This module runs a batch: classify (envelope.py), summarize (summary.py), hand each table's groups
to the table writer, apply truncates and statements of tables without changes (lake_tables.py),
write the dead letters and log the batch's line (report.py).

Both sources (Spark's Kafka source on Glue, the files source, and the local Kafka client) call
`BatchProcessor.process(raw_df, batch_id)`. Spark actions per batch: one group aggregate over the
classified batch, the MERGE per table, one count of the decoded rows of all tables (events per
op, decode errors), and a dead-letter write only when there is something to write.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import reduce

from pyspark import inheritable_thread_target
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.lake_contract import SchemaChangePolicy
from ..common.report import BatchReport, FollowWatch, TableReport
from ..common.settings import Settings, WireFormat
from ..events.decode import SchemaGroup, as_leaf, cut_at
from ..events.decode import release as release_rows
from ..events.envelope import DEAD, classify
from ..events.schema_registry import AvroDecoder
from ..events.summary import BatchSummary, group_aggregate, summarize
from ..lake.deadletter import archive_raw, as_dead_letters, write_dead_letters
from ..lake.lake_tables import LakeTables, follow_renames, read_statements
from ..lake.table_plan import TableDDL
from ..lake.table_writer import ClassifiedBatch, PlannedTable, TableOutcome, TableWriter, Writes, executor, release
from .concurrency import concurrency, run_bounded

log = logging.getLogger("cdclake")


class SchemaChangeError(RuntimeError):
    """A type change the lake cannot take exactly, under --schema_change_policy fail: the batch
    fails before anything is committed and runs again (from the checkpoint) after the fix."""


_UNCACHED = ("key", "value", "_payload_json")


class BatchProcessor:
    """Applies micro-batches to the lake. Keeps a cache of table schemas across batches, so a
    steady stream makes no catalog call except the MERGE itself.

    `writes`: how each table's changes are written (table_writer.Writes: the MERGEs by default)."""

    def __init__(self, spark: SparkSession, settings: Settings, writes: Writes | None = None) -> None:
        self.spark = spark
        self.settings = settings
        self.tables = LakeTables(spark, settings, executor(spark, settings, writes))
        self._writer = TableWriter(spark, settings, self.tables)
        self.avro = AvroDecoder(settings.wire_format == WireFormat.AVRO)
        self._schemas: dict[int, str] = {}  # _schema_id -> _value_schema, of earlier batches
        self._follow = FollowWatch()  # tables whose changes all go to the dead letters, batch after batch
        self.tables.executor.create_namespace(f"{settings.catalog_name}.{settings.namespace}")

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

    # ------------------------------------------------------------------ the batch
    def process(self, raw: DataFrame, batch_id: int) -> BatchReport:
        t0 = time.monotonic()
        report = BatchReport(batch_id)
        # Avro records of the Glue Schema Registry as JsonConverter text (one Spark action with
        # --wire_format avro); those that cannot be decoded are dead letters naming why.
        decoded = self.avro.decode(raw)
        classified = decoded.mark(classify(decoded.raw))
        # What the batch reads more than once is kept (computed by the group aggregate), without
        # the record's key and value text and the payload (most of a record's bytes): only dead
        # letters need those, and they are recomputed from `classified` when there are any. The
        # value schema (~80% of a record) is kept only for schemas not seen in an earlier batch.
        # As a one-node plan (decode.as_leaf): every table's decode builds on it.
        schema = F.col("_value_schema")
        if self._schemas:
            schema = F.when(~F.col("_schema_id").isin(sorted(self._schemas)), schema)
        cached = as_leaf(classified.withColumn("_value_schema", schema).drop(*_UNCACHED))
        batch = ClassifiedBatch(batch_id, classified, cached)
        try:
            self._process(batch, report)
        except Exception:
            self.forget()
            raise
        finally:
            release(batch.written)
            release_rows(cached)
            decoded.release()
        report.seconds = time.monotonic() - t0
        log.info(report.line())
        return report

    def _process(self, batch: ClassifiedBatch, report: BatchReport) -> None:
        s = self.settings
        rows = group_aggregate(batch.cached, s.unavailable_value_placeholder).collect()
        if not rows:
            return
        summary = summarize(rows, self._known_schema)
        batch.fingerprint = summary.fingerprint
        if s.raw_zone_path:
            # Archived before anything is applied, so the raw zone always holds what the lake has.
            newest = summary.newest_timestamp if summary.newest_timestamp is not None else time.time()
            day = datetime.fromtimestamp(newest, UTC).strftime("%Y-%m-%d")
            archive_raw(batch.full, s.raw_zone_path, day, batch.batch_id, summary.fingerprint)
        _count(report, summary)
        dead: list[DataFrame] = []
        if summary.dead:
            dead.append(as_dead_letters(batch.full.where(F.col("_status") == DEAD), F.col("_reason"), batch.batch_id))
        statements, renames = read_statements(batch.cached) if summary.schema_events else ({}, [])
        tables, truncated = summary.tables, summary.truncated
        if renames:
            report.tables += self.tables.rename_tables(renames)
        if follow := self.tables.renames_to_follow(renames, list(tables)):
            # A table's events on both sides of its rename share a schema: cut them apart first
            # (no Spark action unless a group has events on both sides).
            tables = {t: cut_at(batch.cached, gs, [r.seq for r in follow if r.old == t]) for t, gs in tables.items()}
            tables, truncated = follow_renames(tables, truncated, follow)
        items = sorted(tables.items())
        workers = concurrency(s.table_concurrency, self.spark.sparkContext.defaultParallelism)

        def plan(item: tuple[tuple[str, str], list[SchemaGroup]]) -> PlannedTable:
            table, groups = item
            return self._writer.plan(batch, table, groups, truncated.get(table), statements.get(table))

        def execute(planned: PlannedTable) -> TableOutcome:
            return self._writer.execute(batch, planned)

        if s.schema_change_policy == SchemaChangePolicy.FAIL:
            # Every table planned before any is written: a lossy change fails the batch first.
            planned = run_bounded(plan, items, workers, inheritable_thread_target)
            _fail_on_lossy_change(planned)
            outcomes = run_bounded(execute, planned, workers, inheritable_thread_target)
        else:
            outcomes = run_bounded(lambda item: execute(plan(item)), items, workers, inheritable_thread_target)
        dead += self._writer.count_written(batch)
        for outcome in outcomes:
            report.tables.append(outcome.report)
            report.dead += outcome.report.dead
            if self._follow.note(outcome.report):
                log.error(outcome.report.stopped_line())
            dead += outcome.dead_letters
        report.tables += self._without_changes(batch, tables, truncated, statements)
        if dead:
            report.dead_letter_folder = write_dead_letters(
                reduce(DataFrame.unionByName, dead), s.dead_letter_path, batch.batch_id, summary.fingerprint
            )
            log.warning(report.dead_letter_line())
        if summary.newest_source_ts is not None:
            report.behind_seconds = max(0.0, time.time() - summary.newest_source_ts)

    def _without_changes(
        self,
        batch: ClassifiedBatch,
        tables: dict[tuple[str, str], list[SchemaGroup]],
        truncated: dict[tuple[str, str], int],
        statements: dict[tuple[str, str], TableDDL],
    ) -> list[TableReport]:
        """Truncates and statements of tables that have no change events in the batch."""
        out = []
        for table in sorted((set(truncated) | set(statements)) - set(tables)):
            planned = self._writer.plan(batch, table, [], truncated.get(table), statements.get(table))
            tr = self._writer.execute(batch, planned).report
            if tr.schema or tr.truncated or tr.source_dropped:
                out.append(tr)
        return out


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
