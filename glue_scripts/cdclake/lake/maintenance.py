"""Table maintenance: what keeps a streaming CDC table healthy for months.

Every micro-batch commits one MERGE per table. Left alone, three things grow without bound:

    small data files   each MERGE writes the rows it inserts or updates as new files
    delete files       merge-on-read: each MERGE writes position deletes for the files it touches
    snapshots          one per commit, each pinning the files it references

plus orphan files (written by a commit that failed, referenced by nothing). This module measures
them from the metadata tables (`.files`, `.snapshots`, `.manifests`), decides from configured limits
what is due (`plan_maintenance`), and runs Iceberg's Spark procedures in this order:

    rewrite_data_files             compact small files; apply the deletes of files with many of them
    rewrite_position_delete_files  merge small delete files, drop those of files compacted away
    rewrite_manifests              a few large manifests instead of many small ones
    expire_snapshots               old snapshots and the files only they reference
    remove_orphan_files            unreferenced files older than a safe minimum age

A procedure that loses a commit race to a concurrent writer is run again (conflicts.py).
`StreamMaintainer` runs this from the streaming job between micro-batches, so it never races the
job's own MERGE; the scheduled maintenance job (maintenance_job.py) runs it beside the stream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..common.conflicts import ConflictRetriesExhausted, retry_on_conflict
from ..common.lake_contract import CDC_DELETED_AT
from ..common.maintenance_policy import MIN_ORPHAN_AGE_HOURS, MaintenancePolicy
from ..common.sqltext import properties_sql, sql_string, table_properties
from .deletes import is_marker_table, prune_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cdclake")

# Both writers of a table (the streaming MERGE and a maintenance job) lose the catalog race more
# often than one writer does; Iceberg's defaults give up after 4 retries.
COMMIT_RETRY_PROPERTIES = {
    "commit.retry.num-retries": "10",
    "commit.retry.min-wait-ms": "250",
    "commit.retry.max-wait-ms": "30000",
    "commit.retry.total-timeout-ms": "600000",
}


# ---------------------------------------------------------------------------------------- health
@dataclass(frozen=True)
class TableHealth:
    """What a table's current snapshot and its history weigh, from the metadata tables."""

    table: str
    data_files: int = 0
    small_data_files: int = 0
    data_bytes: int = 0
    data_records: int = 0
    delete_files: int = 0
    deleted_rows: int = 0
    snapshots: int = 0
    oldest_snapshot_s: float | None = None  # epoch seconds of the oldest snapshot still kept
    manifests: int = 0

    @property
    def avg_data_file_bytes(self) -> int:
        return self.data_bytes // self.data_files if self.data_files else 0

    def brief(self) -> str:
        return (
            f"{self.data_files} data files ({self.small_data_files} small, avg {human_bytes(self.avg_data_file_bytes)}), "
            f"{self.delete_files} delete files, {self.snapshots} snapshots, {self.manifests} manifests"
        )


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover - the loop always returns


def health_sql(table: str, small_file_bytes: int) -> str:
    """One query over three metadata tables. `.files` lists the current snapshot's data files
    (content 0) and delete files (1 position, 2 equality): the union of `.data_files` and
    `.delete_files`. `.snapshots` is the history still kept; `.manifests` the current snapshot's."""
    return (
        "SELECT f.*, s.*, m.* FROM "
        "(SELECT count_if(content = 0) AS data_files, "
        f"count_if(content = 0 AND file_size_in_bytes < {int(small_file_bytes)}) AS small_data_files, "
        "coalesce(sum(CASE WHEN content = 0 THEN file_size_in_bytes END), 0) AS data_bytes, "
        "coalesce(sum(CASE WHEN content = 0 THEN record_count END), 0) AS data_records, "
        "count_if(content <> 0) AS delete_files, "
        "coalesce(sum(CASE WHEN content <> 0 THEN record_count END), 0) AS deleted_rows "
        f"FROM {table}.files) f "
        "CROSS JOIN (SELECT count(*) AS snapshots, unix_micros(min(committed_at)) AS oldest_snapshot_us "
        f"FROM {table}.snapshots) s "
        f"CROSS JOIN (SELECT count(*) AS manifests FROM {table}.manifests) m"
    )


def table_health(spark: SparkSession, table: str, policy: MaintenancePolicy) -> TableHealth:
    r = spark.sql(health_sql(table, policy.small_file_bytes)).first()
    assert r is not None  # aggregates without GROUP BY always return one row
    oldest = r["oldest_snapshot_us"]
    return TableHealth(
        table=table,
        data_files=int(r["data_files"]),
        small_data_files=int(r["small_data_files"]),
        data_bytes=int(r["data_bytes"]),
        data_records=int(r["data_records"]),
        delete_files=int(r["delete_files"]),
        deleted_rows=int(r["deleted_rows"]),
        snapshots=int(r["snapshots"]),
        oldest_snapshot_s=None if oldest is None else oldest / 1e6,
        manifests=int(r["manifests"]),
    )


# -------------------------------------------------------------------------------------- decision
class Action(StrEnum):
    COMPACT = "compact"
    DELETES = "deletes"
    MANIFESTS = "manifests"
    EXPIRE = "expire"
    ORPHANS = "orphans"
    VACUUM = "vacuum"  # Delta's expiry and orphan removal in one command (delta_maintenance.py)
    CLEAN = "clean"  # Hudi's cleaning of old file versions (hudi_maintenance.py)
    ARCHIVE = "archive"  # Hudi's archival of its timeline (hudi_maintenance.py)


ORDER = (Action.COMPACT, Action.DELETES, Action.MANIFESTS, Action.EXPIRE, Action.ORPHANS)
REWRITES = (Action.COMPACT, Action.DELETES, Action.MANIFESTS)


@dataclass(frozen=True)
class MaintenancePlan:
    """The actions a table needs, each with the reason, in the order they run."""

    reasons: tuple[tuple[Action, str], ...] = ()

    @property
    def actions(self) -> tuple[Action, ...]:
        return tuple(a for a, _ in self.reasons)

    @property
    def due(self) -> bool:
        return bool(self.reasons)

    def describe(self) -> str:
        return ", ".join(f"{a} ({why})" for a, why in self.reasons) or "nothing due"


def plan_maintenance(h: TableHealth, p: MaintenancePolicy, now_s: float, force: bool = False) -> MaintenancePlan:
    """Does this table need maintenance, and which? Each limit is compared with the table's health;
    `force` plans every action (a run by hand)."""
    why: dict[Action, str] = {}
    if h.small_data_files > p.max_small_files:
        why[Action.COMPACT] = f"{h.small_data_files} small data files > {p.max_small_files}"
    if h.delete_files > p.max_delete_files:
        # Deletes disappear only when their data files are rewritten (compaction applies them) or
        # when the delete files themselves are merged; both are needed.
        why.setdefault(Action.COMPACT, f"{h.delete_files} delete files > {p.max_delete_files}")
        why[Action.DELETES] = f"{h.delete_files} delete files > {p.max_delete_files}"
    if Action.COMPACT in why and h.delete_files and Action.DELETES not in why:
        # Compaction applies deletes but leaves their files behind, dangling, until they are rewritten.
        why[Action.DELETES] = "drop the deletes of compacted files"
    if h.manifests > p.max_manifests:
        why[Action.MANIFESTS] = f"{h.manifests} manifests > {p.max_manifests}"
    retention_s = p.snapshot_retention_minutes * 60
    oldest_age = None if h.oldest_snapshot_s is None else now_s - h.oldest_snapshot_s
    if h.snapshots > p.max_snapshots:
        why[Action.EXPIRE] = f"{h.snapshots} snapshots > {p.max_snapshots}"
    elif retention_s and h.snapshots > p.retain_last_snapshots and oldest_age and oldest_age > 2 * retention_s:
        # Twice the retention, not once: expiry then runs about once per retention period, not on
        # every check as soon as the oldest snapshot ages past the cut-off.
        why[Action.EXPIRE] = f"oldest snapshot {oldest_age / 60:.0f} min old > 2 x {p.snapshot_retention_minutes} min"
    if p.remove_orphans:
        why[Action.ORPHANS] = f"enabled, older than {p.orphan_min_age_hours} h"
    if force:
        for a in ORDER:
            if a is not Action.ORPHANS or p.remove_orphans:
                why.setdefault(a, "forced")
    return MaintenancePlan(tuple((a, why[a]) for a in ORDER if a in why))


# ------------------------------------------------------------------------------------ procedures
def split_table(table: str) -> tuple[str, str]:
    """`glue_catalog.cdc.orders` -> (`glue_catalog`, `cdc.orders`): procedures are called on the
    catalog and take the table without it."""
    catalog, _, ref = table.partition(".")
    if not ref:
        raise ValueError(f"table {table!r} must be catalog.namespace.table")
    return catalog, ref


def _options(opts: dict[str, Any]) -> str:
    return "map(" + ", ".join(f"{sql_string(k)}, {sql_string(str(v))}" for k, v in opts.items()) + ")"


def _timestamp(epoch_s: float) -> str:
    """A TIMESTAMP literal with an explicit UTC offset: correct whatever the session time zone."""
    return "TIMESTAMP '" + datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "+00:00'"


def rewrite_data_files_sql(table: str, p: MaintenancePolicy) -> str:
    catalog, ref = split_table(table)
    opts = {
        "target-file-size-bytes": p.target_file_size_bytes,
        "min-input-files": p.min_input_files,
        "delete-file-threshold": p.delete_file_threshold,
        # Each file group commits on its own: a conflict with a streaming commit loses one group,
        # not the whole run, and keeps each commit short.
        "partial-progress.enabled": "true",
        # The streaming job shares these executors when maintenance runs in it.
        "max-concurrent-file-group-rewrites": 2,
    }
    return f"CALL {catalog}.system.rewrite_data_files(table => {sql_string(ref)}, strategy => 'binpack', options => {_options(opts)})"


def rewrite_position_delete_files_sql(table: str, p: MaintenancePolicy) -> str:
    catalog, ref = split_table(table)
    # All of them: delete files are small, and a lone delete file left dangling by compaction would
    # otherwise stay below min-input-files forever.
    opts = {"rewrite-all": "true", "partial-progress.enabled": "true"}
    return (
        f"CALL {catalog}.system.rewrite_position_delete_files(table => {sql_string(ref)}, options => {_options(opts)})"
    )


def rewrite_manifests_sql(table: str) -> str:
    catalog, ref = split_table(table)
    return f"CALL {catalog}.system.rewrite_manifests(table => {sql_string(ref)})"


def expire_snapshots_sql(table: str, older_than_s: float, retain_last: int) -> str:
    catalog, ref = split_table(table)
    return (
        f"CALL {catalog}.system.expire_snapshots(table => {sql_string(ref)}, older_than => {_timestamp(older_than_s)}, "
        f"retain_last => {int(retain_last)})"
    )


def remove_orphan_files_sql(table: str, older_than_s: float) -> str:
    catalog, ref = split_table(table)
    return f"CALL {catalog}.system.remove_orphan_files(table => {sql_string(ref)}, older_than => {_timestamp(older_than_s)})"


def procedure_sql(action: Action, table: str, p: MaintenancePolicy, now_s: float) -> str:
    if action is Action.COMPACT:
        return rewrite_data_files_sql(table, p)
    if action is Action.DELETES:
        return rewrite_position_delete_files_sql(table, p)
    if action is Action.MANIFESTS:
        return rewrite_manifests_sql(table)
    if action is Action.EXPIRE:
        return expire_snapshots_sql(table, now_s - p.snapshot_retention_minutes * 60, p.retain_last_snapshots)
    return remove_orphan_files_sql(table, now_s - max(p.orphan_min_age_hours, MIN_ORPHAN_AGE_HOURS) * 3600)


def outcome(action: Action, rows: list[dict[str, Any]]) -> str:
    """A procedure's result rows in a few words."""
    r = rows[0] if rows else {}
    if action is Action.COMPACT:
        return f"{r.get('rewritten_data_files_count', 0)}->{r.get('added_data_files_count', 0)} data files"
    if action is Action.DELETES:
        return f"{r.get('rewritten_delete_files_count', 0)}->{r.get('added_delete_files_count', 0)} delete files"
    if action is Action.MANIFESTS:
        return f"{r.get('rewritten_manifests_count', 0)}->{r.get('added_manifests_count', 0)} manifests"
    if action is Action.EXPIRE:
        freed = sum(v for k, v in r.items() if k.startswith("deleted_") and isinstance(v, int))
        return f"{freed} files deleted"
    return f"{len(rows)} orphan files deleted"


def ensure_commit_retries(spark: SparkSession, table: str) -> None:
    """Set COMMIT_RETRY_PROPERTIES on the table where they differ (one metadata commit, once)."""
    props = table_properties(spark, table)
    missing = {k: v for k, v in COMMIT_RETRY_PROPERTIES.items() if props.get(k) != v}
    if missing:
        kv = properties_sql(missing)
        retry_on_conflict(lambda: spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({kv})"), f"properties {table}")


# ------------------------------------------------------------------------------------------ runs
@dataclass
class ActionResult:
    action: Action
    summary: str = ""
    conflicts: int = 0
    seconds: float = 0.0
    error: str | None = None  # set when the action failed (or lost every attempt to conflicts)
    gave_up_on_conflicts: bool = False

    def line(self) -> str:
        if self.gave_up_on_conflicts:
            return f"{self.action} SKIPPED (concurrent commits won {self.conflicts}x)"
        if self.error:
            return f"{self.action} FAILED ({self.error[:160]})"
        return f"{self.action} {self.summary}"


@dataclass
class MaintenanceReport:
    table: str
    before: TableHealth
    plan: MaintenancePlan
    after: TableHealth | None = None
    results: list[ActionResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def conflicts(self) -> int:
        return sum(r.conflicts for r in self.results)

    @property
    def failed(self) -> bool:
        """An action failed for a reason other than losing to concurrent commits."""
        return any(r.error and not r.gave_up_on_conflicts for r in self.results)

    def line(self) -> str:
        """One readable line: what ran, the table before and after, conflicts, duration."""
        name = self.table.split(".", 1)[-1]
        if not self.plan.due:
            return f"maintenance {name}: nothing due | {self.before.brief()} | {self.seconds:.1f}s"
        b, a = self.before, self.after or self.before
        ran = ", ".join(r.line() for r in self.results)
        change = (
            f"data files {b.data_files}->{a.data_files}, delete files {b.delete_files}->{a.delete_files}, "
            f"snapshots {b.snapshots}->{a.snapshots}, manifests {b.manifests}->{a.manifests}, "
            f"avg data file {human_bytes(b.avg_data_file_bytes)}->{human_bytes(a.avg_data_file_bytes)}"
        )
        conflicts = f" | {self.conflicts} commit conflict(s) retried" if self.conflicts else ""
        return f"maintenance {name}: {ran} | {change}{conflicts} | {self.seconds:.1f}s"


def run_action(
    spark: SparkSession,
    table: str,
    action: Action,
    policy: MaintenancePolicy,
    now_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> ActionResult:
    """One Iceberg procedure, re-run on commit conflicts (run_statement)."""
    sql = procedure_sql(action, table, policy, now_s)
    return run_statement(spark, table, action, sql, lambda rows: outcome(action, rows), policy, sleep)


def run_statement(
    spark: SparkSession,
    table: str,
    action: Action,
    sql: str,
    summarize: Callable[[list[dict[str, Any]]], str],
    policy: MaintenancePolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> ActionResult:
    """One maintenance statement, re-run on commit conflicts; `summarize` says its result rows in a
    few words. Never raises: the result carries the error, so one failing action does not keep the
    others (or other tables) from running."""
    res = ActionResult(action)
    t0 = time.monotonic()

    def call() -> list[dict[str, Any]]:
        return [r.asDict(recursive=True) for r in spark.sql(sql).collect()]

    def conflicted(_reason: str) -> None:
        res.conflicts += 1

    try:
        rows = retry_on_conflict(call, f"{action} {table}", policy.retry, sleep=sleep, on_conflict=conflicted)
        res.summary = summarize(rows)
    except ConflictRetriesExhausted as e:
        res.error, res.gave_up_on_conflicts = e.reason, True
    except Exception as e:  # reported in the line and by the caller's exit code
        res.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        log.error("maintenance %s: %s failed", table, action, exc_info=True)
    res.seconds = time.monotonic() - t0
    return res


def maintain_table(
    spark: SparkSession,
    table: str,
    policy: MaintenancePolicy,
    *,
    force: bool = False,
    now_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MaintenanceReport:
    """Measure `table`, run what its health calls for, measure again. Does not raise for a failed
    action (see MaintenanceReport.failed); raises only if the table cannot be read at all."""
    t0 = time.monotonic()
    now = time.time() if now_s is None else now_s
    if is_marker_table(table):
        prune_delete_markers(spark, table, policy, now)
    before = table_health(spark, table, policy)
    plan = plan_maintenance(before, policy, now, force=force)
    report = MaintenanceReport(table, before, plan)
    if plan.due:
        ensure_commit_retries(spark, table)
        actions = list(plan.actions)
        for action in ORDER:
            if action is Action.EXPIRE and action not in actions and any(a in REWRITES for a in actions):
                # The rewrites' own commits may have pushed the table over its snapshot limit.
                snapshots = int(spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first()["n"])  # type: ignore[index]
                if snapshots > policy.max_snapshots:
                    actions.append(action)
            if action in actions:
                report.results.append(run_action(spark, table, action, policy, now, sleep))
        report.after = table_health(spark, table, policy)
    report.seconds = time.monotonic() - t0
    return report


def prune_delete_markers(spark: SparkSession, markers: str, policy: MaintenancePolicy, now_s: float) -> int:
    """The bound of the delete memory (deletes.py): markers of deletes applied more than
    `delete_retention_days` ago go (0: kept for ever). Returns how many went."""
    if policy.delete_retention_days <= 0:
        return 0
    cutoff = _timestamp(now_s - policy.delete_retention_days * 86400)
    old = int(spark.sql(f"SELECT count(*) AS n FROM {markers} WHERE {CDC_DELETED_AT} < {cutoff}").first()["n"])  # type: ignore[index]
    if old:
        retry_on_conflict(lambda: spark.sql(prune_sql(markers, cutoff)), f"prune {markers}", policy.retry)
        log.info(
            "maintenance %s: %d delete marker(s) older than %d days removed", markers, old, policy.delete_retention_days
        )
    return old


def list_tables(spark: SparkSession, catalog: str, namespace: str) -> list[str]:
    """The namespace's tables; the session catalog (Delta's) lists the session's temporary views too."""
    rows = spark.sql(f"SHOW TABLES IN {catalog}.{namespace}").collect()
    return sorted(f"{catalog}.{namespace}.{r['tableName']}" for r in rows if not r.asDict().get("isTemporary"))


# ------------------------------------------------------------------------------ streaming cadence
@dataclass(frozen=True)
class Cadence:
    """When the streaming job maintains its tables: every N micro-batches and/or every M minutes
    (0 turns either off)."""

    every_batches: int = 0
    interval_minutes: int = 60

    @property
    def enabled(self) -> bool:
        return self.every_batches > 0 or self.interval_minutes > 0

    def due(self, batches_since: int, seconds_since: float) -> bool:
        return (self.every_batches > 0 and batches_since >= self.every_batches) or (
            self.interval_minutes > 0 and seconds_since >= self.interval_minutes * 60
        )


class StreamMaintainer:
    """Table maintenance from inside the streaming job, called after a micro-batch has committed
    and before the next one starts: it cannot race the job's own MERGE. A failure is logged and the
    stream goes on; maintenance is retried at the next due point."""

    def __init__(
        self,
        policy: MaintenancePolicy,
        cadence: Cadence,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        maintain: Callable[..., MaintenanceReport] | None = None,
    ) -> None:
        """`maintain`: one table's maintenance, a format's own; None: `maintain_table` (Iceberg's)."""
        self.policy, self.cadence, self.clock, self.sleep = policy, cadence, clock, sleep
        self.maintain = maintain
        self.tables: set[str] = set()
        self.batches_since = 0
        self.last_run = clock()
        self.last_reports: list[MaintenanceReport] = []

    def after_batch(self, spark: SparkSession, tables: Iterable[str]) -> list[MaintenanceReport]:
        """Note the tables the batch wrote; if maintenance is due, run it on every table seen."""
        self.tables.update(tables)
        self.batches_since += 1
        if not self.cadence.enabled or not self.cadence.due(self.batches_since, self.clock() - self.last_run):
            return []
        reports = []
        for table in sorted(self.tables):
            try:
                report = (self.maintain or maintain_table)(spark, table, self.policy, sleep=self.sleep)
            except Exception:
                log.exception("maintenance of %s failed; the stream goes on", table)
                continue
            reports.append(report)
            if report.plan.due:
                (log.warning if report.failed else log.info)(report.line())
            else:
                log.debug(report.line())
        self.batches_since, self.last_run = 0, self.clock()
        self.last_reports = reports
        return reports
