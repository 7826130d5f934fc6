"""Table maintenance: what keeps a streaming CDC table healthy for months, one frame for every format.

Each table format (formats/) measures a table's health from its own metadata, plans the actions
the health calls for, runs each (its own statements) and says the outcome; `maintain_table` is the
frame around them: prune a delete-marker table's old markers, measure, run what is due in the
format's order (and what the actions themselves made due), measure again, report one line. A
statement that loses a commit race to a concurrent writer is run again (conflicts.py), and a
failed action is in the report, never raised. `StreamMaintainer` runs this from the streaming job
between micro-batches, so it never races the job's own MERGE; the scheduled maintenance job
(maintenance_job.py) runs it beside the stream.
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
from ..common.maintenance_policy import MaintenancePolicy
from .deletes import is_marker_table, prune_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .formats.base import Format

log = logging.getLogger("cdclake")


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


# -------------------------------------------------------------------------------------- decision
class Action(StrEnum):
    COMPACT = "compact"
    DELETES = "deletes"
    MANIFESTS = "manifests"
    EXPIRE = "expire"
    ORPHANS = "orphans"
    VACUUM = "vacuum"  # Delta's expiry and orphan removal in one command (formats/delta.py)
    CLEAN = "clean"  # Hudi's cleaning of old file versions (formats/hudi.py)
    ARCHIVE = "archive"  # Hudi's archival of its timeline (formats/hudi.py)
    LOGS = "compact logs"  # Hudi's compaction of a merge-on-read table's log files (formats/hudi.py)


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


# ------------------------------------------------------------------------------------ statements
def split_table(table: str) -> tuple[str, str]:
    """`glue_catalog.cdc.orders` -> (`glue_catalog`, `cdc.orders`): procedures are called on the
    catalog and take the table without it."""
    catalog, _, ref = table.partition(".")
    if not ref:
        raise ValueError(f"table {table!r} must be catalog.namespace.table")
    return catalog, ref


def timestamp_sql(epoch_s: float) -> str:
    """A TIMESTAMP literal with an explicit UTC offset: correct whatever the session time zone."""
    return "TIMESTAMP '" + datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "+00:00'"


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

    def state(self) -> str:
        """The table before (and after) in the format's own measures (each format's report says)."""
        raise NotImplementedError

    def line(self) -> str:
        """One readable line: what ran, the table before and after, conflicts, duration."""
        name = self.table.split(".", 1)[-1]
        if not self.plan.due:
            return f"maintenance {name}: nothing due | {self.state()} | {self.seconds:.1f}s"
        ran = ", ".join(r.line() for r in self.results)
        conflicts = f" | {self.conflicts} commit conflict(s) retried" if self.conflicts else ""
        return f"maintenance {name}: {ran} | {self.state()}{conflicts} | {self.seconds:.1f}s"


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
    fmt: Format,
    *,
    force: bool = False,
    now_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MaintenanceReport:
    """Measure `table` (of format `fmt`), run what its health calls for in the format's order, measure
    again. Does not raise for a failed action (see MaintenanceReport.failed); raises only if the
    table cannot be read at all."""
    t0 = time.monotonic()
    now = time.time() if now_s is None else now_s
    if is_marker_table(table):
        prune_delete_markers(spark, table, policy, now)
    before = fmt.maintenance_health(spark, table, policy)
    plan = fmt.maintenance_plan(before, policy, now, force)
    report = fmt.maintenance_report(table, before, plan)
    if plan.due:
        fmt.prepare_maintenance(spark, table, policy)
        for action in fmt.maintenance_order:
            if action in plan.actions or fmt.due_after(spark, report, action, policy):
                report.results.append(fmt.run_maintenance(spark, table, action, policy, now, sleep))
        report.after = fmt.maintenance_health(spark, table, policy)
    report.seconds = time.monotonic() - t0
    return report


def prune_delete_markers(spark: SparkSession, markers: str, policy: MaintenancePolicy, now_s: float) -> int:
    """The bound of the delete memory (deletes.py): markers of deletes applied more than
    `delete_retention_days` ago go (0: kept for ever). Returns how many went."""
    if policy.delete_retention_days <= 0:
        return 0
    cutoff = timestamp_sql(now_s - policy.delete_retention_days * 86400)
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
        fmt: Format,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`fmt`: the format of the tables, whose maintenance `maintain_table` runs."""
        self.policy, self.cadence, self.clock, self.sleep = policy, cadence, clock, sleep
        self.fmt = fmt
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
                report = maintain_table(spark, table, self.policy, self.fmt, sleep=self.sleep)
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
