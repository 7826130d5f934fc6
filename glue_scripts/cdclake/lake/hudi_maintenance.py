"""Maintenance of Apache Hudi tables (`--table_format hudi`): Hudi 0.15's own table services, run
through its Spark SQL procedures (never an Iceberg procedure or metadata table):

    run_clustering   packs the table's small base files into files of about
                     `--maintenance_target_file_size_mb` (one `replacecommit`; a lone small file is left)
    run_clean        deletes the file versions the newest `--maintenance_retain_last_snapshots` commits
                     no longer read (KEEP_LATEST_COMMITS, as the writer's inline cleaning): Iceberg's
                     snapshot expiry
    archive_commits  moves the oldest commits off the active timeline (`.hoodie/`) into its archive
                     (`.hoodie/archived/`) when it holds more than `--maintenance_max_snapshots` (also
                     when clustering's own commit pushed it over), down to the newest retained + 1
                     (`formats.hudi_timeline_bounds`): Iceberg's snapshot limit

The health comes from Hudi's procedures too: the latest base file of each file group
(`show_fsview_latest`), every base file version kept (`show_fsview_all`) and the completed commits
of the active timeline (`show_commits`). The job's tables are not partitioned, so one partition
path, the table's root, holds every file.

Hudi 0.15 plans its table services in single-writer mode: run them where nothing else writes the
table at the same time, i.e. the streaming job between micro-batches (StreamMaintainer), or the
maintenance job while the streaming job is stopped (docs/MAINTENANCE.md, "Hudi tables").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..common.maintenance_policy import MaintenancePolicy
from ..common.sqltext import sql_string
from .deletes import is_marker_table
from .formats import hudi_timeline_bounds
from .maintenance import (
    Action,
    MaintenancePlan,
    MaintenanceReport,
    TableHealth,
    human_bytes,
    prune_delete_markers,
    run_statement,
    split_table,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Cleaning first: the versions clustering replaces can only be cleaned once its commit is older than
# the retained ones (a later run), so cleaning before it frees the older versions now and loses nothing.
HUDI_ORDER = (Action.CLEAN, Action.COMPACT, Action.ARCHIVE)
# Rows a listing procedure returns at most (each defaults to 10 or 20).
LISTING_LIMIT = 1_000_000
# A table property of hoodie.properties: the partitions of the table's metadata table, if it has one.
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"

_NO_DELETE_FILES = "Hudi's copy-on-write tables rewrite the files they change: a Hudi table has no delete files"
_NO_ORPHANS = (
    "Hudi 0.15 has no orphan file removal: its writer rolls back a failed write's files, and run_clean deletes "
    "the file versions that no retained commit reads"
)
# The maintenance arguments that mean nothing for a Hudi table, each with the reason.
NO_HUDI_MEANING: dict[str, str] = {
    "maintenance_min_input_files": "Hudi's clustering packs any two or more small files",
    "maintenance_max_delete_files": _NO_DELETE_FILES,
    "maintenance_delete_file_threshold": _NO_DELETE_FILES,
    "maintenance_max_manifests": "a Hudi table has no manifests (its timeline is archived instead)",
    "maintenance_snapshot_retention_minutes": (
        "Hudi's cleaning keeps the file versions of the newest --maintenance_retain_last_snapshots commits, "
        "by count, not by time"
    ),
    "maintenance_remove_orphans": _NO_ORPHANS,
    "maintenance_orphan_min_age_hours": _NO_ORPHANS,
}


@dataclass(frozen=True)
class HudiHealth(TableHealth):
    """TableHealth from Hudi's file system view and timeline: `data_files` are the latest base files
    (one per file group), `file_versions` every base file version still kept, `snapshots` the
    completed commits of the active timeline."""

    file_versions: int = 0


def health_from_views(
    table: str, latest: list[dict[str, Any]], every: list[dict[str, Any]], commits: int, small_file_bytes: int
) -> HudiHealth:
    """A table's health from the rows of `show_fsview_latest`, `show_fsview_all` and the commit count."""
    sizes = [int(r.get("data_file_size") or 0) for r in latest if r.get("data_file")]
    return HudiHealth(
        table=table,
        data_files=len(sizes),
        small_data_files=sum(1 for s in sizes if s < small_file_bytes),
        data_bytes=sum(sizes),
        snapshots=commits,
        file_versions=sum(1 for r in every if r.get("data_file")),
    )


def plan_hudi_maintenance(h: HudiHealth, p: MaintenancePolicy, force: bool = False) -> MaintenancePlan:
    """Clustering when more than `max_small_files` base files are small; cleaning when the table keeps
    file versions older than the latest (Hudi's cleaner deletes those no retained commit reads, and
    commits nothing when there are none); archival when the active timeline holds more commits
    than its bound; `force` plans all three."""
    why: dict[Action, str] = {}
    if h.small_data_files > p.max_small_files:
        why[Action.COMPACT] = f"{h.small_data_files} small base files > {p.max_small_files}"
    if h.file_versions > h.data_files:
        why[Action.CLEAN] = f"{h.file_versions - h.data_files} older file versions"
    _, most = hudi_timeline_bounds(p)
    if h.snapshots > most:
        why[Action.ARCHIVE] = f"{h.snapshots} commits on the active timeline > {most}"
    if force:
        for a in HUDI_ORDER:
            why.setdefault(a, "forced")
    return MaintenancePlan(tuple((a, why[a]) for a in HUDI_ORDER if a in why))


def _options(opts: dict[str, Any]) -> str:
    """Hudi's procedure options: one string of `key=value` pairs separated by commas."""
    return sql_string(",".join(f"{k}={v}" for k, v in opts.items()))


def clustering_sql(table: str, p: MaintenancePolicy) -> str:
    _, ref = split_table(table)
    opts = {
        "hoodie.clustering.plan.strategy.target.file.max.bytes": p.target_file_size_bytes,
        "hoodie.clustering.plan.strategy.small.file.limit": p.small_file_bytes,
        # A lone small file rewritten into one file of the same size is work for nothing.
        "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "false",
    }
    return f"CALL run_clustering(table => {sql_string(ref)}, op => 'scheduleAndExecute', options => {_options(opts)})"


def clean_sql(table: str, p: MaintenancePolicy) -> str:
    _, ref = split_table(table)
    return (
        f"CALL run_clean(table => {sql_string(ref)}, clean_policy => 'KEEP_LATEST_COMMITS', "
        f"retain_commits => {int(p.retain_last_snapshots)})"
    )


def archive_sql(table: str, p: MaintenancePolicy, metadata_table: bool) -> str:
    """`metadata_table`: the table has Hudi's metadata table, whose own timeline the archival reads."""
    _, ref = split_table(table)
    keep, most = hudi_timeline_bounds(p)
    return (
        f"CALL archive_commits(table => {sql_string(ref)}, min_commits => {keep}, max_commits => {most}, "
        f"retain_commits => {int(p.retain_last_snapshots)}, enable_metadata => {str(metadata_table).lower()})"
    )


def hudi_statement(action: Action, table: str, p: MaintenancePolicy, metadata_table: bool) -> str:
    if action is Action.COMPACT:
        return clustering_sql(table, p)
    if action is Action.CLEAN:
        return clean_sql(table, p)
    if action is Action.ARCHIVE:
        return archive_sql(table, p, metadata_table)
    raise ValueError(f"{action} is not a Hudi maintenance action")


def hudi_outcome(action: Action, rows: list[dict[str, Any]]) -> str:
    """A procedure's result rows in a few words (archival returns only its exit status)."""
    if action is Action.COMPACT:
        groups = sum(int(r.get("input_group_size") or 0) for r in rows if r.get("state") == "COMPLETED")
        return f"{groups} file group(s) written" if groups else "nothing to pack"
    if action is Action.CLEAN:
        return f"{int(rows[0].get('total_files_deleted') or 0)} files deleted" if rows else "nothing to clean"
    return "done" if rows and rows[0].get("result") == 0 else f"result {rows[0].get('result') if rows else None}"


def hudi_health(spark: SparkSession, table: str, policy: MaintenancePolicy) -> HudiHealth:
    _, ref = split_table(table)
    name = sql_string(ref)

    def rows(sql: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in spark.sql(sql).collect()]

    latest = rows(f"CALL show_fsview_latest(table => {name}, partition_path => '', limit => {LISTING_LIMIT})")
    every = rows(f"CALL show_fsview_all(table => {name}, path_regex => '', limit => {LISTING_LIMIT})")
    commits = len(rows(f"CALL show_commits(table => {name}, limit => {LISTING_LIMIT})"))
    return health_from_views(table, latest, every, commits, policy.small_file_bytes)


def has_metadata_table(spark: SparkSession, table: str) -> bool:
    _, ref = split_table(table)
    props = {
        r["key"]: r["value"] for r in spark.sql(f"CALL show_table_properties(table => {sql_string(ref)})").collect()
    }
    return bool(props.get(METADATA_PARTITIONS))


def over_bound_after_clustering(spark: SparkSession, report: MaintenanceReport, policy: MaintenancePolicy) -> bool:
    """Clustering's own commit may have pushed the active timeline over its bound (archival not planned)."""
    if not any(r.action is Action.COMPACT and not r.error for r in report.results):
        return False
    _, ref = split_table(report.table)
    commits = spark.sql(f"CALL show_commits(table => {sql_string(ref)}, limit => {LISTING_LIMIT})").count()
    return commits > hudi_timeline_bounds(policy)[1]


class HudiReport(MaintenanceReport):
    def line(self) -> str:
        name = self.table.split(".", 1)[-1]
        b = self.before
        a = self.after or b
        versions = getattr(b, "file_versions", 0), getattr(a, "file_versions", 0)
        state = (
            f"base files {b.data_files}->{a.data_files}, file versions {versions[0]}->{versions[1]}, "
            f"commits {b.snapshots}->{a.snapshots}, avg {human_bytes(b.avg_data_file_bytes)}->"
            f"{human_bytes(a.avg_data_file_bytes)}"
        )
        if not self.plan.due:
            return f"maintenance {name}: nothing due | {state} | {self.seconds:.1f}s"
        ran = ", ".join(r.line() for r in self.results)
        return f"maintenance {name}: {ran} | {state} | {self.seconds:.1f}s"


def maintain_hudi_table(
    spark: SparkSession,
    table: str,
    policy: MaintenancePolicy,
    *,
    force: bool = False,
    now_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> HudiReport:
    """Prune a delete-marker table's old markers, measure `table`, run the Hudi table services its plan
    calls for, measure again. Like maintenance.maintain_table, a failed action is in the report."""
    t0 = time.monotonic()
    if is_marker_table(table):
        prune_delete_markers(spark, table, policy, time.time() if now_s is None else now_s)
    before = hudi_health(spark, table, policy)
    plan = plan_hudi_maintenance(before, policy, force=force)
    report = HudiReport(table, before, plan)
    if plan.due:
        for action in HUDI_ORDER:
            if action in plan.actions or (
                action is Action.ARCHIVE and over_bound_after_clustering(spark, report, policy)
            ):
                sql = hudi_statement(
                    action, table, policy, action is Action.ARCHIVE and has_metadata_table(spark, table)
                )
                report.results.append(
                    run_statement(
                        spark, table, action, sql, lambda rows, a=action: hudi_outcome(a, rows), policy, sleep
                    )
                )
        report.after = hudi_health(spark, table, policy)
    report.seconds = time.monotonic() - t0
    return report
