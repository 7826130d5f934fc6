"""The micro-batch function: raw Kafka records in, one atomic MERGE per table out.

    raw batch ──classify──> status per record ──group by (table, schema)──> decode per group
        ──plan schema, ALTER──> conform to lake schema ──newest per key──> MERGE (one commit)
    anything that cannot be applied ──> dead letters (with reason, topic/partition/offset)

Both sources (Spark's Kafka source on Glue, the files source, and the local Kafka client) call
`BatchProcessor.process(raw_df, batch_id)`. Spark actions per batch: one group aggregate over the
classified batch, one count per table, the MERGE per table, and a dead-letter write only when
there is something to write.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import ddl as D
from . import envelope as E
from .deadletter import archive_raw, as_dead_letters, write_dead_letters
from .decode import META_NAMES, RAW_KEEP, SchemaGroup, conform, decode_group, group_rows, to_lake_names
from .evolution import (
    BACKFILL_PREFIX,
    Columns,
    SchemaPlan,
    apply_plan,
    backfill_defaults,
    default_sql,
    plan_schema,
    rewrite_table,
)
from .keyless import merge_multiset
from .merge import create_table, drop_identifier_fields, merge_changes, truncate_before
from .ordering import latest_per_key
from .settings import Settings
from .sqltext import quote, sql_string
from .unavailable import carry_within_batch, has_placeholder, keep_existing, placeholder_columns

log = logging.getLogger("cdclake")


class SchemaChangeError(RuntimeError):
    """A type change the lake cannot take exactly, under --schema_change_policy fail: the batch
    fails before anything is committed and runs again (from the checkpoint) after the fix."""


@dataclass
class TableReport:
    table: str
    events: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    keys: int = 0
    dead: int = 0
    dead_reasons: dict[str, int] = field(default_factory=dict)
    schema: str = ""
    truncated: bool = False
    source_dropped: str = ""  # what a DROP TABLE at the source did: "kept, marked" or "dropped"
    seconds: float = 0.0

    def line(self) -> str:
        s = f"{self.table.split('.')[-1]}: {self.events} ev -> c/r {self.inserts} u {self.updates} d {self.deletes}"
        if self.schema:
            s += f" schema[{self.schema}]"
        if self.truncated:
            s += " TRUNCATED"
        if self.source_dropped:
            s += f" SOURCE-DROPPED[{self.source_dropped}]"
        if self.dead:
            s += f" dead {self.dead}"
        return s + f" {self.seconds:.1f}s"


@dataclass
class BatchReport:
    batch_id: int
    records: int = 0
    changes: int = 0
    tombstones: int = 0
    schema_events: int = 0
    truncates: int = 0
    dead: int = 0
    dead_reasons: dict[str, int] = field(default_factory=dict)
    dead_letter_folder: str | None = None
    tables: list[TableReport] = field(default_factory=list)
    behind_seconds: float | None = None
    seconds: float = 0.0

    def dead_letter_reasons(self) -> str:
        """Every reason of the batch's dead letters with its count: the batch's own (records that
        reach no table), then each table's, so the log says why without opening the files."""
        parts = [f"{k} ({v})" for k, v in sorted(self.dead_reasons.items())]
        for t in self.tables:
            parts += [f"{t.table.split('.')[-1]}: {k} ({v})" for k, v in sorted(t.dead_reasons.items())]
        return "; ".join(parts)

    def line(self) -> str:
        head = (
            f"batch {self.batch_id}: {self.records} records ({self.changes} changes, {self.tombstones} tombstones, "
            f"{self.schema_events} schema events, {self.dead} dead letters)"
        )
        tables = " | ".join(t.line() for t in self.tables)
        behind = f" | behind source {self.behind_seconds:.1f} s" if self.behind_seconds is not None else ""
        return f"{head}{' | ' + tables if tables else ''}{behind} | {self.seconds:.1f}s"


_UNCACHED = ("key", "value", "_payload_json")


@dataclass
class _Batch:
    full: DataFrame  # classified records, as computed from the raw batch
    cached: DataFrame  # the same rows, persisted, without `_UNCACHED` columns


@dataclass
class _TableState:
    columns: Columns  # data columns, without _cdc_* metadata
    keys: list[str]
    pending_backfill: dict[str, str] = field(default_factory=dict)  # left by a crash mid-evolution
    column_changes: list[D.ColumnChange] = field(default_factory=list)  # applied renames and drops
    dropped_seq: int | None = None  # position of a DROP TABLE at the source that the lake table outlived


@dataclass
class _TableDDL:
    """What the batch's schema-change events say about one table."""

    changes: list[D.ColumnChange] = field(default_factory=list)
    drop_seq: int | None = None
    drop_ts: float | None = None
    create_seq: int | None = None


class BatchProcessor:
    """Applies micro-batches to the lake. Keeps a cache of table schemas across batches, so a
    steady stream makes no catalog call except the MERGE itself."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        self._tables: dict[str, _TableState | None] = {}
        self._schemas: dict[int, str] = {}  # _schema_id -> _value_schema, of earlier batches
        # --dropped_table_policy drop: lake tables this process dropped, with the DROP's position
        # (a late event older than it must not bring the table back).
        self._dropped: dict[str, int] = {}
        # Renames read before the job has created the table (kept until it does, in this process).
        self._early: dict[str, list[D.ColumnChange]] = defaultdict(list)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog_name}.{settings.namespace}")

    # ------------------------------------------------------------------ catalog state
    def _table_state(self, ident: str) -> _TableState | None:
        if ident not in self._tables:
            if self.spark.catalog.tableExists(ident):
                schema = self.spark.table(ident).schema
                cols = [(f.name, f.dataType) for f in schema.fields if f.name not in META_NAMES]
                props = {r["key"]: r["value"] for r in self.spark.sql(f"SHOW TBLPROPERTIES {ident}").collect()}
                keys = [k for k in props.get("cdc.primary-key", "").split(",") if k]
                drop_identifier_fields(self.spark, ident, keys)
                pending = {k[len(BACKFILL_PREFIX) :]: v for k, v in props.items() if k.startswith(BACKFILL_PREFIX)}
                dropped = props.get(D.SOURCE_DROPPED_POSITION_PROPERTY)
                self._tables[ident] = _TableState(
                    cols,
                    keys,
                    pending,
                    D.loads(props.get(D.COLUMN_CHANGES_PROPERTY)),
                    int(dropped) if dropped else None,
                )
            else:
                self._tables[ident] = None
        return self._tables[ident]

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
        if ident is None:
            self._tables.clear()
        else:
            self._tables.pop(ident, None)

    # ------------------------------------------------------------------ the batch
    def process(self, raw: DataFrame, batch_id: int) -> BatchReport:
        t0 = time.monotonic()
        report = BatchReport(batch_id)
        classified = E.classify(raw)
        # What the batch reads more than once is cached, without the record's key and value text
        # and the payload (most of a record's bytes): only dead letters need those, and they are
        # recomputed from `classified` when there are any. The value schema (~80% of a record)
        # is cached only for schemas not seen in an earlier batch.
        schema = F.col("_value_schema")
        if self._schemas:
            schema = F.when(~F.col("_schema_id").isin(sorted(self._schemas)), schema)
        cached = classified.withColumn("_value_schema", schema).drop(*_UNCACHED).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self._process(_Batch(classified, cached), batch_id, report)
        except Exception:
            self.forget()
            raise
        finally:
            cached.unpersist()
        report.seconds = time.monotonic() - t0
        log.info(report.line())
        return report

    def _process(self, batch: _Batch, batch_id: int, report: BatchReport) -> None:
        s = self.settings
        summary = (
            batch.cached.groupBy(
                "_status",
                "_reason",
                "_src_db",
                "_src_table",
                "_schema_id",
                "_key_schema_id",
                "topic",
                "partition",
            )
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.first("_value_schema", ignorenulls=True).alias("value_schema"),
                F.first("_key_schema", ignorenulls=True).alias("key_schema"),
                F.first("_key_json", ignorenulls=True).alias("sample_key"),
                F.max("_cdc_seq").alias("max_seq"),
                # epoch seconds: collected datetimes would be in the driver's local time zone
                F.max(F.col("_cdc_source_ts").cast("double")).alias("max_source_ts"),
                F.min("offset").alias("min_offset"),
                F.max("offset").alias("max_offset"),
                F.max(F.col("timestamp").cast("double")).alias("max_timestamp"),
            )
            .collect()
        )
        if not summary:
            return
        fingerprint = ";".join(
            sorted({f"{r['topic']}:{r['partition']}:{r['min_offset']}-{r['max_offset']}" for r in summary})
        )
        if s.raw_zone_path:
            # Archived before anything is applied, so the raw zone always holds what the lake has.
            newest = max((r["max_timestamp"] for r in summary if r["max_timestamp"] is not None), default=time.time())
            day = datetime.fromtimestamp(newest, UTC).strftime("%Y-%m-%d")
            archive_raw(batch.full, s.raw_zone_path, day, batch_id, fingerprint)
        dead: list[DataFrame] = []
        groups: dict[tuple, SchemaGroup] = {}
        truncates: dict[tuple[str, str], int] = {}
        newest_source_ts = None
        for r in summary:
            n = r["n"]
            report.records += n
            st = r["_status"]
            if st == E.TOMBSTONE:
                report.tombstones += n
            elif st == E.SCHEMA_CHANGE:
                report.schema_events += n
            elif st == E.DEAD:
                report.dead += n
                report.dead_reasons[r["_reason"]] = report.dead_reasons.get(r["_reason"], 0) + n
            elif st == E.TRUNCATE:
                report.truncates += n
                k = (r["_src_db"], r["_src_table"])
                truncates[k] = max(truncates.get(k, 0), int(r["max_seq"]))
            elif st == E.CHANGE:
                report.changes += n
                gk = (r["_src_db"], r["_src_table"], r["_schema_id"], r["_key_schema_id"])
                g = groups.get(gk)
                if g is None:
                    value_schema = self._known_schema(r["_schema_id"], r["value_schema"])
                    groups[gk] = SchemaGroup(
                        db=r["_src_db"],
                        table=r["_src_table"],
                        schema_id=r["_schema_id"],
                        key_schema_id=r["_key_schema_id"],
                        value_schema=value_schema,
                        key_schema=r["key_schema"],
                        sample_key=r["sample_key"],
                        events=n,
                        max_seq=int(r["max_seq"]),
                    )
                else:
                    g.events += n
                    g.max_seq = max(g.max_seq, int(r["max_seq"]))
            if st == E.CHANGE and r["max_source_ts"] is not None:
                ts = r["max_source_ts"]
                newest_source_ts = ts if newest_source_ts is None else max(newest_source_ts, ts)
        if report.dead:
            dead.append(as_dead_letters(batch.full.where(F.col("_status") == E.DEAD), F.col("_reason"), batch_id))

        by_table: dict[tuple[str, str], list[SchemaGroup]] = defaultdict(list)
        for g in groups.values():
            by_table[(g.db, g.table)].append(g)
        statements = self._schema_changes(batch) if report.schema_events else {}
        if s.schema_change_policy == "fail":
            self._fail_on_lossy_change(batch, by_table)
        for (db, tbl), tgroups in sorted(by_table.items()):
            tr = self._apply_table(
                batch, batch_id, db, tbl, tgroups, truncates.get((db, tbl)), dead, statements.get((db, tbl))
            )
            report.tables.append(tr)
            report.dead += tr.dead
        for (db, tbl), seq in truncates.items():
            if (db, tbl) not in by_table:
                ident = s.table_identifier(db, tbl)
                if self._table_state(ident) is not None:
                    truncate_before(self.spark, ident, seq)
                    report.tables.append(TableReport(ident, truncated=True))
        for (db, tbl), stmt in sorted(statements.items()):
            if (db, tbl) not in by_table:
                tr = self._apply_statements(s.table_identifier(db, tbl), stmt)
                if tr is not None:
                    report.tables.append(tr)

        if dead:
            report.dead_letter_folder = write_dead_letters(
                reduce(DataFrame.unionByName, dead), s.dead_letter_path, batch_id, fingerprint
            )
            log.warning(
                "batch %s: %d record(s) written to dead letters at %s: %s",
                batch_id,
                report.dead,
                report.dead_letter_folder,
                report.dead_letter_reasons(),
            )
        if newest_source_ts is not None:
            report.behind_seconds = max(0.0, time.time() - newest_source_ts)

    def _resolve(self, batch: _Batch, groups: list[SchemaGroup]) -> None:
        groups.sort(key=lambda g: g.max_seq)  # oldest schema first, so widening follows the source
        for g in groups:
            if g.columns is None and g.error is None:
                g.resolve(infer=lambda grp: self._infer(batch.cached, grp))

    def _fail_on_lossy_change(self, batch: _Batch, by_table: dict[tuple[str, str], list[SchemaGroup]]) -> None:
        """--schema_change_policy fail: plan every table before any is written, and fail the batch
        (nothing committed) when a type change cannot be applied exactly."""
        problems = []
        for (db, tbl), groups in sorted(by_table.items()):
            ident = self.settings.table_identifier(db, tbl)
            state = self._table_state(ident)
            if state is None:
                continue
            self._resolve(batch, groups)
            cols = [[(c.name, c.spark_type) for c in g.columns or []] for g in groups if not g.error]
            plan = plan_schema(state.columns, cols, "fail", ident)
            problems += sorted(set(plan.lossy.values()))
        if problems:
            for p in problems:
                log.error("%s (--schema_change_policy fail: the batch fails, nothing is committed)", p)
            raise SchemaChangeError("; ".join(problems))

    def _apply_table(
        self,
        batch: _Batch,
        batch_id: int,
        db: str,
        tbl: str,
        groups: list[SchemaGroup],
        truncate_seq: int | None,
        dead: list[DataFrame],
        stmt: _TableDDL | None = None,
    ) -> TableReport:
        t0 = time.monotonic()
        ident = self.settings.table_identifier(db, tbl)
        tr = TableReport(ident, events=sum(g.events for g in groups))
        self._resolve(batch, groups)
        renamed = ""
        if stmt is not None and stmt.changes and self._table_state(ident) is not None:
            renamed = self._apply_column_changes(ident, stmt.changes)

        def reject(g: SchemaGroup, reason: str, loud: bool = True) -> None:
            if loud:
                log.error("table %s: %d event(s) rejected to dead letters: %s", ident, g.events, reason)
            dead.append(as_dead_letters(group_rows(batch.full, g), reason, batch_id))
            tr.dead += g.events
            tr.dead_reasons[reason] = tr.dead_reasons.get(reason, 0) + g.events

        state = self._table_state(ident)
        # Renames and drops after an event was written, for events read after the statement.
        known = (
            state.column_changes
            if state is not None
            else self._early.pop(ident, []) + self._recorded(stmt.changes if stmt else [])
        )
        good = []
        for g in groups:
            if not g.error:
                g.renamed, g.ignored = D.translation(known, [c.name for c in g.columns or []], g.max_seq)
            if g.error:
                reject(g, g.error)
            elif ident in self._dropped and g.max_seq <= self._dropped[ident]:
                # --dropped_table_policy drop: events of the table older than its DROP, read late.
                log.warning("table %s: %d event(s) older than the table's drop at the source ignored", ident, g.events)
            elif self.settings.keyless_table_policy == "dead_letter" and not g.keys:
                reject(g, "record has no JSON key: the table has no primary key (--keyless_table_policy dead_letter)")
            elif (
                state is not None
                and state.columns
                and [k.lower() for k in g.lake_keys()] != [k.lower() for k in state.keys]
            ) or (state is None and bool(g.keys) != bool(next((x.keys for x in groups if x.keys), g.keys))):
                why = (
                    "record has no JSON key (does the table have a primary key?)"
                    if not g.keys
                    else f"primary key changed: lake table has {state.keys if state else []}, event has {g.keys}"
                )
                reject(g, why)
            else:
                good.append(g)
        if not good:
            if renamed:
                tr.schema = renamed
            self._after_drop(ident, stmt, False, False, tr)
            tr.seconds = time.monotonic() - t0
            return tr
        keys = state.keys if state is not None and state.keys else good[-1].lake_keys()
        plan = plan_schema(
            state.columns if state is not None else None,
            [g.lake_columns() for g in good],
            self.settings.schema_change_policy,
            ident,
        )
        if plan.lossy:
            # One loud line per table, however many schema versions carried the change.
            n = sum(good[i].events for i in plan.lossy)
            reasons = "; ".join(sorted(set(plan.lossy.values())))
            log.error(
                "table %s: %d event(s) rejected to dead letters, the table stops following: %s", ident, n, reasons
            )
        for i, reason in plan.rejected.items():
            reject(good[i], reason, loud=i not in plan.lossy)
        good = [g for i, g in enumerate(good) if i not in plan.rejected]
        if not good:
            self._after_drop(ident, stmt, False, False, tr)
            tr.seconds = time.monotonic() - t0
            return tr
        fills = self._new_column_defaults(plan, good)
        # Existing lake rows need the default of a column added at the source (plus any backfill
        # a crash left pending); a new table has no existing rows.
        pending = dict(state.pending_backfill) if state is not None else {}
        if plan.create:
            create_table(self.spark, ident, plan.final, keys, self.settings.write_mode)
            log.info(
                "table %s created: key %s, %d columns", ident, keys or "none (rows as a multiset)", len(plan.final)
            )
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
        if plan.changed or pending:
            tr.schema = plan.describe()
            self._tables[ident] = _TableState(
                plan.final, keys, column_changes=known, dropped_seq=state.dropped_seq if state else None
            )
        if renamed:
            tr.schema = "; ".join(x for x in (renamed, tr.schema) if x)
        # A DROP TABLE at the source: the table's events newer than it are of a table created again
        # under the same name, which started empty (like a truncate at the drop).
        drop_seq = max(
            (x for x in (stmt.drop_seq if stmt else None, state.dropped_seq if state else None) if x), default=None
        )
        recreated = drop_seq is not None and (
            any(g.max_seq > drop_seq for g in good) or (stmt is not None and (stmt.create_seq or 0) > drop_seq)
        )
        if recreated:
            truncate_seq = max(truncate_seq or 0, drop_seq)

        def decode(classified: DataFrame) -> DataFrame:
            return reduce(
                DataFrame.unionByName,
                [conform(to_lake_names(decode_group(classified, g), g), plan.final, fills) for g in good],
            )

        decoded = decode(batch.cached).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            unavailable = placeholder_columns(plan.final, self.settings.unavailable_value_placeholder)
            counts = (
                # Grouped by the decode error too (null when decoded): the reasons come with the counts.
                decoded.groupBy(F.col("_decode_error").isNull().alias("ok"), "_cdc_op", "_decode_error")
                .agg(
                    F.count(F.lit(1)).alias("count"),
                    F.max(has_placeholder(unavailable, self.settings.unavailable_value_placeholder)).alias("_unavail"),
                )
                .collect()
            )
            bad = sum(r["count"] for r in counts if not r["ok"])
            if bad:
                tr.dead += bad
                for r in counts:
                    if not r["ok"]:
                        tr.dead_reasons[r["_decode_error"]] = tr.dead_reasons.get(r["_decode_error"], 0) + r["count"]
                log.error("table %s: %d event(s) could not be decoded; sent to dead letters", ident, bad)
                # Decoded again from the uncached records (they hold the key and value text). A
                # local checkpoint makes them a leaf of the plan: without it the optimizer merges the
                # envelope parsing into every decoded column and spends minutes planning a handful
                # of rows.
                dead.append(
                    as_dead_letters(
                        decode(batch.full.localCheckpoint(eager=False)).where(F.col("_decode_error").isNotNull()),
                        F.col("_decode_error"),
                        batch_id,
                        "_raw_",
                    )
                )
            changes = decoded.where(F.col("_decode_error").isNull()).drop(
                "_decode_error", *[f"_raw_{c}" for c in RAW_KEEP]
            )
            if truncate_seq is not None:
                truncate_before(self.spark, ident, truncate_seq)
                changes = changes.where(F.col("_cdc_seq") > F.lit(str(truncate_seq)).cast(T.DecimalType(38, 0)))
                tr.truncated = True
            changes = changes.withColumn("_cdc_ingested_at", F.current_timestamp())
            if not keys:
                # A row is identified by the columns every event of the batch carries (a column
                # dropped at the source and kept in the lake is not compared).
                shared = set.intersection(*[{n.lower() for n, _ in g.lake_columns()} for g in good])
                match = [n for n, _ in plan.final if n.lower() in shared]
                merge_multiset(ident, changes, [n for n, _ in plan.final], match)
            else:
                newest = latest_per_key(changes, keys)
                keep = None
                if any(r["ok"] and r["_unavail"] for r in counts):
                    # Only batches with an update lacking a TOASTed value pay for this (unavailable.py).
                    placeholder = self.settings.unavailable_value_placeholder
                    newest = carry_within_batch(newest, changes, keys, unavailable, placeholder)
                    keep = keep_existing(unavailable, placeholder)
                merge_changes(ident, newest, keys, [n for n, _ in plan.final], keep)
            ops = defaultdict(int)
            for r in counts:
                if r["ok"]:
                    ops[r["_cdc_op"]] += r["count"]
            # A keyless update was counted as a delete of `before` too (decode.py).
            tr.inserts, tr.updates, tr.deletes = ops["c"] + ops["r"], ops["u"], ops["d"] - (0 if keys else ops["u"])
            # kept for the log line; the data need not be computed again for it
        finally:
            decoded.unpersist()
        self._after_drop(ident, stmt, recreated, recreated, tr)
        tr.seconds = time.monotonic() - t0
        return tr

    # ------------------------------------------------------------------ DDL statements (ddl.py)
    def _schema_changes(self, batch: _Batch) -> dict[tuple[str, str], _TableDDL]:
        """Column renames/drops and table drops of the batch's schema-change events, per table
        (MySQL; one more Spark action, only in batches that have schema-change events)."""
        rows = (
            batch.cached.where(F.col("_ddl").isNotNull())
            .select("_ddl", "_ddl_tables", "_cdc_seq", F.col("_cdc_source_ts").cast("double").alias("ts"))
            .collect()
        )
        out: dict[tuple[str, str], _TableDDL] = defaultdict(_TableDDL)
        for r in rows:
            seq = int(r["_cdc_seq"])
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
                        out[(db, tbl)].changes += [
                            D.ColumnChange(k, o, n, seq) for k, o, n in D.column_changes(r["_ddl"])
                        ]
        return dict(out)

    def _recorded(self, changes: list[D.ColumnChange]) -> list[D.ColumnChange]:
        """The changes the lake keeps: renames always, drops only when it drops columns too."""
        return [c for c in changes if c.kind == D.RENAME or self.settings.dropped_column_policy == "drop"]

    def _record_column_changes(self, ident: str, changes: list[D.ColumnChange]) -> None:
        value = sql_string(D.dumps(changes))
        self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({sql_string(D.COLUMN_CHANGES_PROPERTY)}={value})")

    def _apply_column_changes(self, ident: str, changes: list[D.ColumnChange]) -> str:
        """Apply column renames (and drops, --dropped_column_policy drop) to an existing lake table,
        in source order; each is a no-op when already applied. Returns what was done, for the log."""
        state = self._table_state(ident)
        assert state is not None
        todo = [c for c in sorted(self._recorded(changes), key=lambda c: c.seq) if c not in state.column_changes]
        if not todo:
            return ""
        done = []
        keys = list(state.keys)
        for ch in todo:
            lake = {f.name.lower(): f.name for f in self.spark.table(ident).schema.fields}
            old = lake.get(ch.old.lower())
            if ch.kind == D.RENAME and ch.new:
                new = lake.get(ch.new.lower())
                if old and not new:
                    # Metadata only: Iceberg columns have ids, the data files follow.
                    self.spark.sql(f"ALTER TABLE {ident} RENAME COLUMN {quote(old)} TO {quote(ch.new)}")
                    done.append(f"{old}->{ch.new} (renamed)")
                elif old and new:
                    # Events with the new name were applied before the statement was read, and added
                    # it as a column: rows last written before the rename hold their value under the
                    # old name. Re-running this is harmless: the old column is dropped last.
                    self.spark.sql(
                        f"UPDATE {ident} SET {quote(new)} = {quote(old)} WHERE _cdc_seq IS NULL OR _cdc_seq < {ch.seq}"
                    )
                    self.spark.sql(f"ALTER TABLE {ident} DROP COLUMN {quote(old)}")
                    done.append(f"{old}->{new} (renamed after its new name had arrived)")
                keys = [ch.new if k.lower() == ch.old.lower() else k for k in keys]
            elif ch.kind == D.DROP and old and old.lower() not in {k.lower() for k in keys}:
                self.spark.sql(f"ALTER TABLE {ident} DROP COLUMN {quote(old)}")
                done.append(f"-{old} (dropped)")
        if keys != state.keys:
            self.spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('cdc.primary-key'={sql_string(','.join(keys))})")
        self._record_column_changes(ident, state.column_changes + todo)
        self.forget(ident)  # the catalog is the truth for the new column names
        if done:
            log.info("table %s: source DDL applied: %s", ident, ", ".join(done))
        return ", ".join(done)

    def _apply_statements(self, ident: str, stmt: _TableDDL) -> TableReport | None:
        """A batch's statements for a table without data events in the batch."""
        if self._table_state(ident) is None:
            self._early[ident] += self._recorded(stmt.changes)
            return None
        tr = TableReport(ident)
        if stmt.changes:
            tr.schema = self._apply_column_changes(ident, stmt.changes)
        self._after_drop(ident, stmt, False, False, tr)
        return tr if tr.schema or tr.truncated or tr.source_dropped else None

    def _after_drop(
        self, ident: str, stmt: _TableDDL | None, recreated: bool, truncated: bool, tr: TableReport
    ) -> None:
        """A DROP TABLE at the source (this batch's, or one the lake table is marked with), once the
        batch's changes of the table are applied. `recreated`: the batch showed the table created
        again after the drop; `truncated`: the rows older than the drop are deleted already."""
        state = self._table_state(ident)
        if state is None:
            return
        drop = max((x for x in (stmt.drop_seq if stmt else None, state.dropped_seq) if x), default=None)
        if drop is None:
            return
        if not recreated and stmt is not None and stmt.drop_seq is not None:
            # The new table's events may have been read before the statement.
            recreated = bool(self.spark.sql(f"SELECT 1 FROM {ident} WHERE _cdc_seq > {drop} LIMIT 1").count())
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

    def _source_dropped(self, ident: str, stmt: _TableDDL) -> str:
        """--dropped_table_policy: keep the lake table and mark it, or drop it."""
        assert stmt.drop_seq is not None
        if self.settings.dropped_table_policy == "drop":
            self.spark.sql(f"DROP TABLE IF EXISTS {ident}")
            self._tables[ident] = None
            self._dropped[ident] = stmt.drop_seq
            log.warning("table %s: dropped at the source, lake table dropped (--dropped_table_policy drop)", ident)
            return "dropped"
        when = datetime.fromtimestamp(stmt.drop_ts or time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        props = {D.SOURCE_DROPPED_PROPERTY: when, D.SOURCE_DROPPED_POSITION_PROPERTY: str(stmt.drop_seq)}
        self.spark.sql(
            f"ALTER TABLE {ident} SET TBLPROPERTIES ({', '.join(f'{sql_string(k)}={sql_string(v)}' for k, v in props.items())})"
        )
        self.forget(ident)
        log.warning(
            "table %s: dropped at the source at %s; lake table kept, marked %s", ident, when, D.SOURCE_DROPPED_PROPERTY
        )
        return "kept, marked"

    def _unmark_dropped(self, ident: str) -> None:
        keys = ", ".join(sql_string(k) for k in (D.SOURCE_DROPPED_PROPERTY, D.SOURCE_DROPPED_POSITION_PROPERTY))
        self.spark.sql(f"ALTER TABLE {ident} UNSET TBLPROPERTIES IF EXISTS ({keys})")
        self.forget(ident)
        log.info("table %s: created again at the source; rows older than its drop removed, mark cleared", ident)

    def _new_column_defaults(self, plan: SchemaPlan, groups: list[SchemaGroup]) -> dict[str, str]:
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

    def _infer(self, classified: DataFrame, g: SchemaGroup) -> list[T.StructField]:
        """Schemaless fallback: infer column types from this group's row images (JSON values)."""
        images = group_rows(classified, g).select(F.coalesce("_after_json", "_before_json"))
        inferred = self.spark.read.option("primitivesAsString", "false").json(images.rdd.map(lambda r: r[0]))
        return list(inferred.schema.fields)


__all__ = ["RAW_KEEP", "BatchProcessor", "BatchReport", "TableReport"]
