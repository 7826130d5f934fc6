"""The jobs' figures as CloudWatch embedded-metric-format (EMF) lines: JSON objects printed on stdout,
which CloudWatch Logs turns into metrics as it ingests the job's log (no CloudWatch API call).

Pure functions turn what a job already computed (report.py's BatchReport, the maintenance figures)
into EMF dicts; `emit` is the one place that prints them. Dimensions are few on purpose, since every
metric name x dimension value is a custom metric billed per month: the job's name (Glue's --JOB_NAME,
so each stack's jobs are apart) and, for table figures, the lake table's short name.
cloudformation/cdc-pipeline.yaml's dashboard and alarms, and status, read these names.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from .report import BatchReport, TableReport

NAMESPACE = "CdcLake"
JOB = "Job"
TABLE = "Table"
# The job's name where Glue gives none (a local run): what status shows; also the streaming query's
# name. A deployed job is named by the template (<stack>-cdc-iceberg), whatever the table format.
LOCAL_STREAMING_JOB = "cdc-lake"
LOCAL_MAINTENANCE_JOB = "cdc-maintenance"

# Per table and batch (dimensions Job, Table): changes applied by operation, dead letters, commits
# that changed rows, 1 while the table is stopped (set aside, or every change dead-lettered batch
# after batch), 1 in each batch of a table marked as no longer equal to the source (a statement
# that changed its rows without change events and that the job cannot follow), and the seconds its
# apply took.
TABLE_METRICS: dict[str, str] = {
    "Inserts": "Count",
    "Updates": "Count",
    "Deletes": "Count",
    "DeadLetters": "Count",
    "Commits": "Count",
    "Stopped": "Count",
    "NotEqual": "Count",
    "ApplySeconds": "Seconds",
}
# Per batch (dimension Job): what the alarms watch, one metric each whatever the number of tables.
# BatchDeadLetters: the records written to the batch's dead-letter folder (the changes of a table set
# aside go to its own folder, and count in StoppedTables). Only with --transactions keep: HeldRecords
# (records held for the rest of their source transaction) and TransactionsAppliedOpen (transactions
# applied without all of them read, after --transaction_hold_seconds; alarm TransactionAppliedOpen).
BATCH_METRICS: dict[str, str] = {
    "Records": "Count",
    "BatchDeadLetters": "Count",
    "StoppedTables": "Count",
    "NotEqualTables": "Count",
    "BatchSeconds": "Seconds",
    "BehindSourceSeconds": "Seconds",
    "HeldRecords": "Count",
    "TransactionsAppliedOpen": "Count",
}
# Per table and maintenance run (dimensions Job, Table): the table's files after the run, 1 when an
# action failed (other than losing to concurrent commits), and the run's seconds for the table.
MAINTENANCE_METRICS: dict[str, str] = {
    "DataFiles": "Count",
    "DeleteFiles": "Count",
    "MaintenanceFailed": "Count",
    "MaintenanceSeconds": "Seconds",
}


def job_name(extra: dict[str, str], default: str) -> str:
    """The Glue job's name (Glue passes --JOB_NAME to every run), else the local default."""
    return extra.get("JOB_NAME") or default


def short_table(ident: str) -> str:
    """catalog.namespace.table -> table: the namespace is the stack's, the job's dimension says which."""
    return ident.rsplit(".", 1)[-1]


def emf(now_ms: int, dimensions: list[str], values: dict[str, Any], units: dict[str, str]) -> dict[str, Any]:
    """One EMF object: `values` holds the dimensions' values, the metrics (those named in `units`
    that have a value) and any other properties (kept in the log line, searchable in Logs Insights)."""
    metrics = [{"Name": n, "Unit": u} for n, u in units.items() if values.get(n) is not None]
    aws = {
        "Timestamp": now_ms,
        "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [dimensions], "Metrics": metrics}],
    }
    return {"_aws": aws, **{k: v for k, v in values.items() if v is not None}}


def is_stopped(tr: TableReport) -> bool:
    return bool(tr.set_aside or tr.stopped_batches)


def table_metrics(job: str, batch_id: int, tr: TableReport, now_ms: int) -> dict[str, Any]:
    wrote = not tr.set_aside and bool(tr.inserts or tr.updates or tr.deletes or tr.truncated)
    values = {
        JOB: job,
        TABLE: short_table(tr.table),
        "Batch": batch_id,
        "Inserts": tr.inserts,
        "Updates": tr.updates,
        "Deletes": tr.deletes,
        "DeadLetters": tr.dead,
        "Commits": int(wrote),
        "Stopped": int(is_stopped(tr)),
        "NotEqual": int(bool(tr.diverged)),
        "ApplySeconds": round(tr.seconds, 3),
    }
    return emf(now_ms, [JOB, TABLE], values, TABLE_METRICS)


def batch_metrics(job: str, report: BatchReport, set_aside: Iterable[str], now_ms: int) -> list[dict[str, Any]]:
    """The batch's EMF objects: one per table of the batch, one per table set aside that had nothing
    in it (its state is reported every batch, so the alarm holds until it is resumed), one for the batch."""
    lines = [table_metrics(job, report.batch_id, tr, now_ms) for tr in report.tables]
    seen = {tr.table for tr in report.tables}
    idle = [TableReport(t, set_aside="set aside") for t in sorted(set(set_aside) - seen)]
    lines += [table_metrics(job, report.batch_id, tr, now_ms) for tr in idle]
    stopped = {tr.table for tr in report.tables if is_stopped(tr)} | {tr.table for tr in idle}
    values = {
        JOB: job,
        "Batch": report.batch_id,
        "Records": report.records,
        "BatchDeadLetters": report.dead - report.set_aside,  # the batch's folder; set aside counts as Stopped
        "StoppedTables": len(stopped),
        "NotEqualTables": sum(1 for tr in report.tables if tr.diverged),
        "BatchSeconds": round(report.seconds, 3),
        "BehindSourceSeconds": None if report.behind_seconds is None else round(report.behind_seconds, 3),
        "HeldRecords": report.held_records,
        "TransactionsAppliedOpen": None if report.held_records is None else report.released_open,
    }
    lines.append(emf(now_ms, [JOB], values, BATCH_METRICS))
    return lines


def maintenance_metrics(
    job: str, table: str, files: tuple[int, int] | None, failed: bool, seconds: float, now_ms: int
) -> dict[str, Any]:
    """A table's maintenance figures; `files` (data files, delete files after the run) is None when
    the run failed before it could read them."""
    data_files, delete_files = files if files is not None else (None, None)
    values = {
        JOB: job,
        TABLE: short_table(table),
        "DataFiles": data_files,
        "DeleteFiles": delete_files,
        "MaintenanceFailed": int(failed),
        "MaintenanceSeconds": round(seconds, 3),
    }
    return emf(now_ms, [JOB, TABLE], values, MAINTENANCE_METRICS)


def emit(lines: list[dict[str, Any]], out: TextIO | None = None) -> None:
    """Print each object as one line of its own on stdout: CloudWatch Logs reads an EMF object only
    when it is the whole log event, so never through the logger's prefix."""
    stream = out or sys.stdout
    stream.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    stream.flush()


def parse(line: str) -> dict[str, Any] | None:
    """The EMF object of a log line, else None (status reads the job's log with it)."""
    if not line.startswith('{"_aws"'):
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
