"""Maintenance of Delta Lake tables (`--table_format delta`): Delta's own commands, never Iceberg's
procedures (a Delta table has no `.files` metadata table and Delta's catalog no `system` procedures).

    OPTIMIZE  bin-packs small files into files of about `--maintenance_target_file_size_mb`; it
              commits no data change, and nothing at all when no two small files can be packed
    VACUUM    deletes the files that no table version younger than the retention references: the
              ones earlier MERGEs, rewrites and OPTIMIZE replaced (Iceberg's expire_snapshots) and
              the ones no commit wrote (Iceberg's remove_orphan_files)

The retention is the table property `delta.deletedFileRetentionDuration`, set from
`--maintenance_snapshot_retention_minutes` before VACUUM: Delta's VACUUM refuses a retention
shorter than the table's own (its safety check, default 7 days), and the property tells every
other writer of the table the same number. Delta keeps versions in its log by time
(`delta.logRetentionDuration`, 30 days), not by count, and its MERGE rewrites whole files (no
deletion vectors), so the Iceberg limits on snapshots, manifests and delete files mean nothing
here: `NO_DELTA_MEANING` lists them, and the maintenance job refuses them with `--table_format delta`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..common.conflicts import retry_on_conflict
from ..common.maintenance_policy import MaintenancePolicy
from ..common.sqltext import properties_sql, table_properties
from .deletes import is_marker_table
from .maintenance import (
    Action,
    MaintenancePlan,
    MaintenanceReport,
    TableHealth,
    human_bytes,
    prune_delete_markers,
    run_statement,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
# OPTIMIZE's sizes are session settings in Delta 3.3: the file size it writes, and the size under
# which a file is packed with others.
OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
# VACUUM lists the table's folders in this many Spark tasks, 10,000 by default: 80 s for a table of
# one folder on 2 busy local cores, 9 s with one task per core.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
DELTA_ORDER = (Action.COMPACT, Action.VACUUM)

_NO_DELETE_FILES = (
    "Delta's MERGE rewrites the files it touches (no deletion vectors): a Delta table has no delete files"
)
_VERSIONS_BY_TIME = "Delta keeps table versions in its log by time (delta.logRetentionDuration), not by count"
# The maintenance arguments that mean nothing for a Delta table, each with the reason.
NO_DELTA_MEANING: dict[str, str] = {
    "maintenance_min_input_files": "OPTIMIZE packs any two or more small files",
    "maintenance_max_delete_files": _NO_DELETE_FILES,
    "maintenance_delete_file_threshold": _NO_DELETE_FILES,
    "maintenance_max_snapshots": _VERSIONS_BY_TIME,
    "maintenance_retain_last_snapshots": _VERSIONS_BY_TIME,
    "maintenance_max_manifests": "a Delta table has no manifests (Delta checkpoints its own log)",
    "maintenance_orphan_min_age_hours": (
        "VACUUM deletes unreferenced files after one retention, --maintenance_snapshot_retention_minutes"
    ),
}


def retention_value(minutes: int) -> str:
    return f"interval {int(minutes)} minutes"


def delta_health(spark: SparkSession, table: str) -> TableHealth:
    """The table's file count and size from its current version (DESCRIBE DETAIL: no per-file
    sizes, so every file is counted; OPTIMIZE itself leaves the large ones alone)."""
    d = spark.sql(f"DESCRIBE DETAIL {table}").first()
    assert d is not None  # DESCRIBE DETAIL has one row
    return TableHealth(table=table, data_files=int(d["numFiles"] or 0), data_bytes=int(d["sizeInBytes"] or 0))


def plan_delta_maintenance(h: TableHealth, p: MaintenancePolicy, force: bool = False) -> MaintenancePlan:
    """OPTIMIZE when the table has more files than `max_small_files`; VACUUM when orphan removal
    is on (the scheduled job's default); `force` plans both."""
    why: dict[Action, str] = {}
    if h.data_files > p.max_small_files:
        why[Action.COMPACT] = f"{h.data_files} files > {p.max_small_files}"
    if p.remove_orphans:
        why[Action.VACUUM] = f"files unreferenced for {p.snapshot_retention_minutes} min"
    if force:
        for a in DELTA_ORDER:
            why.setdefault(a, "forced")
    return MaintenancePlan(tuple((a, why[a]) for a in DELTA_ORDER if a in why))


def delta_statement(action: Action, table: str) -> str:
    if action is Action.COMPACT:
        return f"OPTIMIZE {table}"
    if action is Action.VACUUM:
        return f"VACUUM {table}"  # the retention is the table's RETENTION_PROPERTY
    raise ValueError(f"{action} is not a Delta maintenance action")


def optimize_outcome(rows: list[dict[str, Any]]) -> str:
    m = (rows[0].get("metrics") if rows else None) or {}
    return f"{m.get('numFilesRemoved', 0)}->{m.get('numFilesAdded', 0)} files"


def vacuum_outcome(spark: SparkSession, table: str) -> str:
    """VACUUM returns only the table's path; Delta records what it deleted as a `VACUUM END` version."""
    last = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()
    if last is not None and last["operation"] == "VACUUM END":
        return f"{last['operationMetrics'].get('numDeletedFiles', 0)} files deleted"
    return "done"


def ensure_retention(spark: SparkSession, table: str, p: MaintenancePolicy) -> None:
    """Set RETENTION_PROPERTY to the policy's retention where it differs (one metadata commit)."""
    value = retention_value(p.snapshot_retention_minutes)
    if table_properties(spark, table).get(RETENTION_PROPERTY) != value:
        kv = properties_sql({RETENTION_PROPERTY: value})
        sql = f"ALTER TABLE {table} SET TBLPROPERTIES ({kv})"
        retry_on_conflict(lambda: spark.sql(sql), f"properties {table}", p.retry)


class DeltaReport(MaintenanceReport):
    def line(self) -> str:
        name = self.table.split(".", 1)[-1]
        b, a = self.before, self.after or self.before
        files = f"files {b.data_files}->{a.data_files}, avg {human_bytes(b.avg_data_file_bytes)}->{human_bytes(a.avg_data_file_bytes)}"
        if not self.plan.due:
            return f"maintenance {name}: nothing due | {files} | {self.seconds:.1f}s"
        ran = ", ".join(r.line() for r in self.results)
        conflicts = f" | {self.conflicts} commit conflict(s) retried" if self.conflicts else ""
        return f"maintenance {name}: {ran} | {files}{conflicts} | {self.seconds:.1f}s"


def maintain_delta_table(
    spark: SparkSession,
    table: str,
    policy: MaintenancePolicy,
    *,
    force: bool = False,
    now_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DeltaReport:
    """Measure `table`, OPTIMIZE and VACUUM it as its plan says, measure again. Like
    maintenance.maintain_table, a failed action is in the report, not raised."""
    t0 = time.monotonic()
    if is_marker_table(table):
        prune_delete_markers(spark, table, policy, time.time() if now_s is None else now_s)
    before = delta_health(spark, table)
    plan = plan_delta_maintenance(before, policy, force=force)
    report = DeltaReport(table, before, plan)
    if plan.due:
        spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(policy.target_file_size_bytes))
        spark.conf.set(OPTIMIZE_MIN_FILE_SIZE, str(policy.small_file_bytes))
        spark.conf.set(LISTING_PARALLELISM, str(spark.sparkContext.defaultParallelism))
        for action in plan.actions:
            if action is Action.VACUUM:
                ensure_retention(spark, table, policy)
                res = run_statement(spark, table, action, delta_statement(action, table), lambda _: "", policy, sleep)
                if not res.error:
                    res.summary = vacuum_outcome(spark, table)
            else:
                res = run_statement(
                    spark, table, action, delta_statement(action, table), optimize_outcome, policy, sleep
                )
            report.results.append(res)
        report.after = delta_health(spark, table)
    report.seconds = time.monotonic() - t0
    return report
