"""The scheduled maintenance job (glue_scripts/cdc_maintenance_job.py), free of `awsglue`.

It runs beside the streaming job, on the same tables: every commit it makes may race a streaming
MERGE. Both sides cope: each maintenance procedure is re-run on a commit conflict (with backoff), the
MERGE likewise (merge.py), rewrites commit file group by file group, and the tables get more
patient `commit.retry.*` properties. Snapshots younger than a micro-batch are never expired here,
since an in-flight MERGE may still be reading their files. Hudi tables are the exception: Hudi 0.15
plans its table services in single-writer mode, so with `--table_format hudi` this job must run
while the streaming job is stopped (the streaming job maintains its Hudi tables itself, between
micro-batches: jobs/job.py).

Exit code: 0 when every due action ran, or only lost to concurrent commits (the next run retries);
1 when an action failed for another reason; 2 for invalid arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from ..common.logs import configure_logging
from ..common.metrics import LOCAL_MAINTENANCE_JOB, emit, job_name, maintenance_metrics
from ..common.settings import (
    MAINTENANCE_CATALOG_ARGS,
    MAINTENANCE_JOB_ARGS,
    POLICY_NAMES,
    ArgumentError,
    Settings,
    TableFormat,
    build_policy,
    check_catalog,
    parse_job_argv,
)
from ..lake.formats import Format, format_of
from ..lake.maintenance import MaintenancePolicy, MaintenanceReport, list_tables, maintain_table
from ..local.session import local_session

log = logging.getLogger("cdclake")

# An in-flight MERGE reads the files of the snapshot it started from; expiring that snapshot could
# delete them under it. No micro-batch should take this long.
MIN_CONCURRENT_RETENTION_MINUTES = 10

# Defined in settings.py with every other job argument (single source of the table in docs/CONFIGURATION.md).
JOB_ARGS = MAINTENANCE_JOB_ARGS


@dataclass(frozen=True)
class MaintenanceJobSettings:
    catalog: Settings  # catalog_name, catalog_type, warehouse, namespace (session and table names)
    tables: tuple[str, ...] = ()
    force: bool = False
    policy: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    extra: dict[str, str] = field(default_factory=dict)


def maintain(spark: SparkSession, table: str, policy: MaintenancePolicy, force: bool, fmt: Format) -> MaintenanceReport:
    """One table's maintenance beside the stream: what the format sets on a table it shares with the
    streaming job (Iceberg: patient commit retries for both writers), then the maintenance frame."""
    fmt.prepare_shared_writes(spark, table)
    return maintain_table(spark, table, policy, fmt, force=force)


def refuse_meaningless(table_format: TableFormat, raw: dict[str, str]) -> None:
    """A limit given for a format that has no such thing is a mistake to name, not to ignore."""
    reasons = format_of(table_format).meaningless_limits
    given = [name for name in reasons if name in raw]
    if given:
        why = "; ".join(f"--{n}: {reasons[n]}" for n in given)
        fmt = table_format.value
        raise ArgumentError(
            f"with --table_format {fmt}, leave out what {fmt.capitalize()} tables have no use for ({why})"
        )


def build_job_settings(raw: dict[str, str]) -> MaintenanceJobSettings:
    v = {a.name: a.value(raw) for a in JOB_ARGS if a.name not in POLICY_NAMES}
    if not v["warehouse"]:
        raise ArgumentError("--warehouse is required")
    check_catalog(v, raw)
    refuse_meaningless(v["table_format"], raw)
    policy = build_policy(raw, tuple(a for a in JOB_ARGS if a.name in POLICY_NAMES))
    if policy.snapshot_retention_minutes < MIN_CONCURRENT_RETENTION_MINUTES:
        raise ArgumentError(
            f"--maintenance_snapshot_retention_minutes must be >= {MIN_CONCURRENT_RETENTION_MINUTES} in the "
            "maintenance job: it runs beside the streaming job, whose MERGE may still read a younger snapshot"
        )
    catalog = Settings(**{name: v[name] for name in MAINTENANCE_CATALOG_ARGS})
    extra = {k: val for k, val in raw.items() if k not in {a.name for a in JOB_ARGS}}
    return MaintenanceJobSettings(catalog, v["tables"], v["force"], policy, extra)


def run_maintenance(spark: SparkSession, js: MaintenanceJobSettings) -> int:
    """Maintain every selected table; one line per table and one for the run. Returns the exit code."""
    t0 = time.monotonic()
    c = js.catalog
    if js.tables:
        tables = [f"{c.catalog_name}.{c.namespace}.{t}" for t in js.tables]
    else:
        tables = list_tables(spark, c.catalog_name, c.namespace)
    fmt = format_of(c.table_format)
    failed = maintained = conflicts = 0
    job = job_name(js.extra, LOCAL_MAINTENANCE_JOB)
    for table in tables:
        t1 = time.monotonic()
        try:
            report = maintain(spark, table, js.policy, js.force, fmt)
        except Exception:
            log.exception("maintenance of %s failed", table)
            emit([maintenance_metrics(job, table, None, True, time.monotonic() - t1, int(time.time() * 1000))])
            failed += 1
            continue
        (log.warning if report.failed else log.info)(report.line())
        emit([_figures(job, report)])
        failed += report.failed
        maintained += report.plan.due
        conflicts += report.conflicts
    log.info(
        "maintenance run: %d table(s), %d maintained, %d failed, %d commit conflict(s) retried | %.1fs",
        len(tables),
        maintained,
        failed,
        conflicts,
        time.monotonic() - t0,
    )
    return 1 if failed else 0


def _figures(job: str, report: MaintenanceReport) -> dict[str, Any]:
    health = report.after or report.before
    files = (health.data_files, health.delete_files)
    return maintenance_metrics(job, report.table, files, report.failed, report.seconds, int(time.time() * 1000))


def main(
    argv: list[str],
    session_factory: Callable[[Settings], SparkSession] | None = None,
    raw_args: dict[str, str] | None = None,
) -> int:
    configure_logging()
    try:
        js = build_job_settings(raw_args if raw_args is not None else parse_job_argv(argv, JOB_ARGS))
    except ArgumentError as e:
        log.error("invalid job arguments: %s", e)
        return 2
    spark = session_factory(js.catalog) if session_factory else local_session(js.catalog, app_name="cdc-maintenance")
    return run_maintenance(spark, js)
