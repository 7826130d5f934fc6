"""One table's change events of a micro-batch, applied in one commit.

    schema groups ──screen──> groups the table can take (the others: dead letters, with the reason)
        ──plan schema──> CREATE / ALTER / rewrite (lake_tables.py)
        ──decode, conform (persisted)──> newest per key (TOASTed values carried) or net count per
        row image──> the write (1 commit)
    every table's decoded rows ──count_written──> ops and decode errors (1 Spark action per batch)

The write is a `Writes`: by default `merge.merge_changes` for a table with a primary key and
`keyless.merge_multiset` for one without. Everything that cannot be applied comes back to the
caller as dead letters (DataFrames, lazy) with the table's report.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import CDC_INGESTED_AT, CDC_OP, CDC_SEQ, KEPT, ColumnChange, KeylessTablePolicy, TableState
from ..common.report import TableReport
from ..common.settings import Settings
from ..events import ddl as D
from ..events.decode import (
    RAW_KEEP,
    SchemaGroup,
    conform,
    cut_at,
    decode_group,
    group_rows,
    resolve_groups,
    to_lake_names,
)
from ..events.ordering import latest_per_key
from .deadletter import as_dead_letters
from .deletes import remember_images, remember_keyed
from .evolution import Columns, SchemaPlan, plan_schema
from .keyless import merge_multiset
from .lake_tables import LakeTables, TableDDL, newest_drop
from .merge import MERGE_RETRY, merge_changes, truncate_before
from .unavailable import carry_within_batch, keep_existing, placeholder_columns

log = logging.getLogger("cdclake")

NO_KEY = "record has no JSON key (does the table have a primary key?)"

# (table, newest change per key, key columns, data columns, TOAST placeholders to keep: column -> SQL literal)
KeyedWrite = Callable[[str, DataFrame, list[str], list[str], dict[str, str] | None], None]
# (table, changes, data columns, the columns that identify a row image)
KeylessWrite = Callable[[str, DataFrame, list[str], list[str]], None]


@dataclass(frozen=True)
class Writes:
    """How a table's changes reach it, in one commit per table per batch. The benchmark passes an
    append here to measure everything but the row-level write."""

    keyed: KeyedWrite = merge_changes
    keyless: KeylessWrite = merge_multiset


@dataclass
class ClassifiedBatch:
    batch_id: int
    full: DataFrame  # classified records, as computed from the raw batch
    cached: DataFrame  # the same rows, persisted, without the record's key and value text
    fingerprint: str = ""  # the batch's offset ranges: the same when the batch runs again
    written: list[_Written] = field(default_factory=list)  # decoded and written, not counted yet


@dataclass
class Rejection:
    """Events of a schema group that go to the dead letters, and why."""

    group: SchemaGroup
    reason: str
    loud: bool = True  # logged per group (False: the caller logged one line for several)


@dataclass
class TableOutcome:
    report: TableReport
    dead_letters: list[DataFrame] = field(default_factory=list)


@dataclass
class _Run:
    """One table within one batch."""

    ident: str
    batch: ClassifiedBatch
    stmt: TableDDL | None
    report: TableReport
    started: float


@dataclass
class _Written:
    """One write of a table in the batch: its decoded rows (persisted) and what counting them needs."""

    run: _Run
    decoded: DataFrame
    good: list[SchemaGroup]
    columns: Columns
    fills: dict[str, str]
    keys: list[str]


def release(written: list[_Written]) -> None:
    """Unpersist the decoded rows of the batch's writes."""
    for w in written:
        w.decoded.unpersist()


class TableWriter:
    def __init__(self, spark: SparkSession, settings: Settings, tables: LakeTables, writes: Writes) -> None:
        self.spark = spark
        self.settings = settings
        self.tables = tables
        self.writes = writes

    def apply(
        self,
        batch: ClassifiedBatch,
        table: tuple[str, str],
        groups: list[SchemaGroup],
        truncate_seq: int | None,
        stmt: TableDDL | None,
    ) -> TableOutcome:
        """Apply the batch's schema groups of one source table (and its truncate, and the drop or
        column changes its statements name)."""
        ident = self.settings.table_identifier(*table)
        run = _Run(ident, batch, stmt, TableReport(ident, events=sum(g.events for g in groups)), time.monotonic())
        resolve_groups(self.spark, batch.cached, groups)
        renamed = ""
        if stmt is not None and stmt.changes and self.tables.state(ident) is not None:
            renamed = self.tables.apply_column_changes(ident, stmt.changes)
        run.report.schema = renamed  # reported even when every group is rejected below
        state = self.tables.state(ident)
        if (drop := _recreated_with_another_key(state, stmt, groups)) is not None:
            self.tables.replace_when_created(ident, drop)
            state = None
        known = self.tables.known_changes(ident, state, stmt)
        # Events on both sides of a column's drop or rename may share a schema: cut them apart.
        groups = cut_at(batch.cached, groups, [c.seq for c in known])
        if state is not None and any(c.kind == KEPT for c in known):
            aside = self.tables.set_aside_readded(ident, groups)
            if aside:
                run.report.schema = "; ".join(x for x in (run.report.schema, aside) if x)
                state = self.tables.state(ident)
                known = state.column_changes if state is not None else known
        good, rejected = self._screen(ident, groups, state, known, stmt)
        dead = self._reject(run, rejected)
        # A DROP TABLE at the source: the table's events newer than it are of a table created again
        # under the same name, which started empty (like a truncate at the drop).
        drop_seq = newest_drop(stmt, state)
        recreated = drop_seq is not None and (
            any(g.max_seq > drop_seq for g in good) or (stmt is not None and (stmt.create_seq or 0) > drop_seq)
        )
        if recreated:
            truncate_seq = max(truncate_seq or 0, drop_seq)
        written = False
        # Almost always one part: more only when the source's primary key changed in the batch.
        for part in key_epochs(good):
            part_dead, wrote = self._apply_part(run, part, known, truncate_seq)
            dead += part_dead
            written = written or wrote
        return self._finish(run, dead, recreated and written)

    def _apply_part(
        self, run: _Run, part: list[SchemaGroup], known: list[ColumnChange], truncate_seq: int | None
    ) -> tuple[list[DataFrame], bool]:
        """Plan, evolve and write schema groups that share one primary key; their dead letters,
        and whether anything was written."""
        state = self.tables.state(run.ident)
        keys: list[str] | None = part[-1].lake_keys()
        dead: list[DataFrame] = []
        if state is not None and state.columns and _key_lower(keys) != _key_lower(state.keys):
            keys, reason = self._key_changed(run, state, part)
            if reason is not None:
                dead = self._reject(run, [Rejection(g, reason) for g in part])
            if keys is None:
                return dead, False
            state = self.tables.state(run.ident)
        plan, good, rejected = self._plan(run.ident, state, part)
        dead += self._reject(run, rejected)
        if not good:
            return dead, False
        fills = self.tables.new_column_defaults(plan, good)
        evolved = self.tables.evolve(run.ident, state, plan, keys, fills, known)
        run.report.schema = "; ".join(x for x in (run.report.schema, evolved) if x)
        dead += self._write(run, good, plan.final, fills, keys, truncate_seq)
        return dead, True

    def _key_changed(
        self, run: _Run, state: TableState, part: list[SchemaGroup]
    ) -> tuple[list[str] | None, str | None]:
        """Schema groups whose primary key is not the lake table's: the key to write them with
        (None: not written) and why they go to the dead letters (None: they do not). Newer than the
        lake's key, they carry a key changed at the source (ALTER TABLE), which the lake table
        takes; older, they were written before the lake table took its key."""
        keys = part[-1].lake_keys()
        if state.key_position is not None and max(g.max_seq for g in part) < state.key_position:
            if state.key_batch and state.key_batch == run.batch.fingerprint:
                # This batch ran before (a restart) and wrote these events before changing the key.
                log.info("table %s: %d event(s) older than its key change were applied before it", run.ident,
                         sum(g.events for g in part))  # fmt: skip
                return None, None
            if keys and state.keys and all(_has_columns(g, state.keys) for g in part):
                return state.keys, None  # found by the lake's key; the position guard decides
            return None, (
                f"written under the primary key {keys or 'none'} before it changed at the source to "
                f"{state.keys or 'none'}, read after the lake table took the new key: apply it by hand"
            )
        if not keys:
            # A record without a key in a keyed table is far likelier broken than a dropped key.
            return None, NO_KEY
        missing = [k for k in keys if k.lower() not in {c.lower() for c, _ in state.columns}]
        if missing:
            return None, (
                f"primary key changed at the source from {state.keys or 'none'} to {keys}, but {missing} are not "
                "columns of the lake table, so it cannot match its rows by them (a key column added by ALTER TABLE "
                "gets its values at the source without change events; or the table was dropped and created again "
                "and the DROP is not read yet): drop the lake table and take a new Debezium snapshot of the table"
            )
        position = min(g.max_seq for g in part)
        what = self.tables.rekey(run.ident, state, keys, position, run.batch.fingerprint)
        run.report.schema = "; ".join(x for x in (run.report.schema, what) if x)
        return keys, None

    def _finish(self, run: _Run, dead: list[DataFrame], recreated: bool = False) -> TableOutcome:
        self.tables.after_drop(run.ident, run.stmt, recreated, recreated, run.report)
        run.report.seconds = time.monotonic() - run.started
        return TableOutcome(run.report, dead)

    # ------------------------------------------------------------------ which groups the table takes
    def _screen(
        self,
        ident: str,
        groups: list[SchemaGroup],
        state: TableState | None,
        known: list[ColumnChange],
        stmt: TableDDL | None,
    ) -> tuple[list[SchemaGroup], list[Rejection]]:
        """The groups the table can take, in the lake's column names, and the rejected ones."""
        good: list[SchemaGroup] = []
        rejected: list[Rejection] = []
        for g in groups:
            if not g.error:
                g.renamed, g.ignored = D.translation(known, [c.name for c in g.columns or []], g.max_seq)
            if not g.error and self.tables.dropped_after(ident, g.max_seq):
                # --dropped_table_policy drop: events of the table older than its DROP, read late.
                log.warning("table %s: %d event(s) older than the table's drop at the source ignored", ident, g.events)
                continue
            reason = g.error or self._key_problem(g, groups, state is None, stmt)
            if reason:
                rejected.append(Rejection(g, reason))
            else:
                good.append(g)
        return good, rejected

    def _key_problem(
        self, g: SchemaGroup, groups: list[SchemaGroup], new_table: bool, stmt: TableDDL | None
    ) -> str | None:
        """Why the group cannot be applied for its key (None: it can)."""
        if self.settings.keyless_table_policy == KeylessTablePolicy.DEAD_LETTER and not g.keys:
            return "record has no JSON key: the table has no primary key (--keyless_table_policy dead_letter)"
        # Keyless events beside keyed ones of a table the lake does not have yet: written before an
        # ALTER TABLE that added the key (in this batch), or else broken records.
        key_added_later = stmt is not None and any(s > g.max_seq for s in stmt.key_seqs)
        if new_table and not g.keys and any(x.keys for x in groups) and not key_added_later:
            return NO_KEY
        return None

    def _plan(
        self, ident: str, state: TableState | None, good: list[SchemaGroup]
    ) -> tuple[SchemaPlan, list[SchemaGroup], list[Rejection]]:
        """The lake schema for the groups; the groups it takes and those a lossy change rejects."""
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
        rejected = [Rejection(good[i], reason, loud=i not in plan.lossy) for i, reason in plan.rejected.items()]
        return plan, [g for i, g in enumerate(good) if i not in plan.rejected], rejected

    def _reject(self, run: _Run, rejected: list[Rejection]) -> list[DataFrame]:
        """The rejected groups' records as dead letters, counted in the table's report."""
        out = []
        tr = run.report
        for r in rejected:
            g = r.group
            if r.loud:
                log.error("table %s: %d event(s) rejected to dead letters: %s", run.ident, g.events, r.reason)
            out.append(as_dead_letters(group_rows(run.batch.full, g), r.reason, run.batch.batch_id))
            tr.dead += g.events
            tr.dead_reasons[r.reason] = tr.dead_reasons.get(r.reason, 0) + g.events
        return out

    # ------------------------------------------------------------------ decode and write
    def _write(
        self,
        run: _Run,
        good: list[SchemaGroup],
        columns: Columns,
        fills: dict[str, str],
        keys: list[str],
        truncate_seq: int | None,
    ) -> list[DataFrame]:
        """Decode the groups and write what decodes. The decoded rows stay persisted until the
        batch counts them (`count_written`): the events per op and the ones that did not decode."""
        decoded = _decoded(run.batch.cached, good, columns, fills).persist(StorageLevel.MEMORY_AND_DISK)
        run.batch.written.append(_Written(run, decoded, good, columns, fills, keys))
        changes = decoded.where(F.col("_decode_error").isNull()).drop("_decode_error", *[f"_raw_{c}" for c in RAW_KEEP])
        if truncate_seq is not None:
            truncate_before(self.spark, run.ident, truncate_seq)
            changes = changes.where(F.col(CDC_SEQ) > F.lit(str(truncate_seq)).cast(T.DecimalType(38, 0)))
            run.report.truncated = True
        changes = changes.withColumn(CDC_INGESTED_AT, F.current_timestamp())
        # From the group aggregate: a group said to have them may have none that decoded (or, cut
        # from a larger group, none at all), which costs the carrying or an empty append only.
        toasted = any(g.toasted for g in good)
        # Without a key an update removes a copy of its `before` image too (decode.py).
        deletes = any(g.deletes or (not keys and g.updates) for g in good)
        self._merge(run.ident, changes, keys, columns, good, toasted, deletes)
        return []

    def count_written(self, batch: ClassifiedBatch) -> list[DataFrame]:
        """Events per op and decode error of every table the batch wrote, in one Spark action over
        the persisted decoded rows (instead of one per table): the tables' reports get their
        counts, and the events that did not decode come back as dead letters. Releases the rows."""
        written, batch.written = list(batch.written), []
        try:
            counts: dict[int, list[Any]] = defaultdict(list)
            if written:
                parts = [
                    w.decoded.select(F.lit(i).alias("_w"), F.col("_decode_error").isNull().alias("ok"), CDC_OP,
                                     "_decode_error")
                    for i, w in enumerate(written)
                ]  # fmt: skip
                rows = (
                    reduce(DataFrame.unionByName, parts)
                    .groupBy("_w", "ok", CDC_OP, "_decode_error")
                    .agg(F.count(F.lit(1)).alias("count"))
                    .collect()
                )
                for r in rows:
                    counts[r["_w"]].append(r)
            dead: list[DataFrame] = []
            for i, w in enumerate(written):
                dead += self._undecodable(w, counts[i])
                _count_ops(w.run.report, counts[i], w.keys)
            return dead
        finally:
            release(written)

    def _undecodable(self, w: _Written, counts: list[Any]) -> list[DataFrame]:
        """The events that did not decode, as dead letters, counted in the table's report."""
        run, good, columns, fills = w.run, w.good, w.columns, w.fills
        bad = sum(r["count"] for r in counts if not r["ok"])
        if not bad:
            return []
        tr = run.report
        tr.dead += bad
        for r in counts:
            if not r["ok"]:
                tr.dead_reasons[r["_decode_error"]] = tr.dead_reasons.get(r["_decode_error"], 0) + r["count"]
        log.error("table %s: %d event(s) could not be decoded; sent to dead letters", run.ident, bad)
        # Decoded again from the uncached records (they hold the key and value text). A local
        # checkpoint makes them a leaf of the plan: without it the optimizer merges the envelope
        # parsing into every decoded column and spends minutes planning a handful of rows.
        again = _decoded(run.batch.full.localCheckpoint(eager=False), good, columns, fills)
        errors = again.where(F.col("_decode_error").isNotNull())
        return [as_dead_letters(errors, F.col("_decode_error"), run.batch.batch_id, "_raw_")]

    def _merge(
        self,
        ident: str,
        changes: DataFrame,
        keys: list[str],
        columns: Columns,
        good: list[SchemaGroup],
        toasted: bool,
        deletes: bool,
    ) -> None:
        """Write the decoded changes: newest per key, or per row image for a table without a key.
        Then the batch's deletes are remembered (deletes.py) for later batches' writes; a crash
        between the two commits re-runs the batch, which writes them then."""
        names = [n for n, _ in columns]
        if not keys:
            # A row is identified by the columns every event of the batch carries (a column
            # dropped at the source and kept in the lake is not compared).
            shared = set.intersection(*[{n.lower() for n, _ in g.lake_columns()} for g in good])
            match = [n for n in names if n.lower() in shared]
            self.writes.keyless(ident, changes, names, match)
            if deletes:
                remember_images(ident, changes, names, match, MERGE_RETRY)
            return
        newest = latest_per_key(changes, keys)
        keep = None
        placeholder = self.settings.unavailable_value_placeholder
        unavailable = placeholder_columns(columns, placeholder) if toasted else {}
        if unavailable:
            # Only batches with an update lacking a TOASTed value pay for this (unavailable.py).
            newest = carry_within_batch(newest, changes, keys, unavailable, placeholder)
            keep = keep_existing(unavailable, placeholder)
        self.writes.keyed(ident, newest, keys, names, keep)
        if deletes:
            remember_keyed(ident, newest, keys, names, MERGE_RETRY)


def _recreated_with_another_key(
    state: TableState | None, stmt: TableDDL | None, groups: list[SchemaGroup]
) -> int | None:
    """The position of the DROP TABLE when the batch has events of the table created again after it
    with another primary key (or without one, or with one now): the lake table cannot take them."""
    drop = newest_drop(stmt, state)
    newer = [g for g in groups if not g.error and drop is not None and g.max_seq > drop]
    if state is None or not newer:
        return None
    keys = max(newer, key=lambda g: g.max_seq).keys or []
    return drop if _key_lower(keys) != _key_lower(state.keys) else None


def key_epochs(groups: list[SchemaGroup]) -> list[list[SchemaGroup]]:
    """The groups (oldest schema first) in runs that share one primary key, in source order: a
    key changed at the source splits the table's events into the part before and after it."""
    parts: list[list[SchemaGroup]] = []
    for g in groups:
        if parts and _key_lower(parts[-1][-1].lake_keys()) == _key_lower(g.lake_keys()):
            parts[-1].append(g)
        else:
            parts.append([g])
    return parts


def _key_lower(keys: list[str]) -> list[str]:
    return [k.lower() for k in keys]


def _has_columns(g: SchemaGroup, names: list[str]) -> bool:
    have = {n.lower() for n, _ in g.lake_columns()}
    return all(n.lower() in have for n in names)


def _decoded(classified: DataFrame, groups: list[SchemaGroup], columns: Columns, fills: dict[str, str]) -> DataFrame:
    """The groups' events decoded and conformed to the lake columns, as one DataFrame."""
    return reduce(
        DataFrame.unionByName,
        [conform(to_lake_names(decode_group(classified, g), g), columns, fills) for g in groups],
    )


def _count_ops(tr: TableReport, counts: list[Any], keys: list[str]) -> None:
    """The table's inserts, updates and deletes, from the counts (not computed again)."""
    ops: dict[str, int] = defaultdict(int)
    for r in counts:
        if r["ok"]:
            ops[r[CDC_OP]] += r["count"]
    # A keyless update was counted as a delete of `before` too (decode.py).
    tr.inserts, tr.updates, tr.deletes = ops["c"] + ops["r"], ops["u"], ops["d"] - (0 if keys else ops["u"])
