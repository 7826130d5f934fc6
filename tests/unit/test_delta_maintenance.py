"""Maintenance of Delta tables, the pure parts: Delta's own statements (never an Iceberg procedure),
the plan from a table's file count, the maintenance job's arguments with `--table_format delta`, and
Delta's commit conflicts recognised for a re-run. tests/job/test_delta_lake.py runs it on a lake."""

from __future__ import annotations

import pytest
from cdclake.common.conflicts import conflict_reason
from cdclake.common.settings import ArgumentError, TableFormat
from cdclake.jobs.maintenance_job import build_job_settings
from cdclake.lake.formats import FORMATS
from cdclake.lake.formats.delta import (
    NO_DELTA_MEANING,
    DeltaReport,
    delta_statement,
    optimize_outcome,
    plan_delta_maintenance,
    retention_value,
)
from cdclake.lake.maintenance import Action, ActionResult, MaintenancePolicy, TableHealth
from test_maintenance_plan import FakePy4JError, JavaThrowable

POLICY = MaintenancePolicy(max_small_files=10, snapshot_retention_minutes=60)
TABLE = "spark_catalog.cdc.t"


def test_delta_tables_get_optimize_and_vacuum_never_an_iceberg_procedure_or_metadata_table():
    assert delta_statement(Action.COMPACT, TABLE) == f"OPTIMIZE {TABLE}"
    assert delta_statement(Action.VACUUM, TABLE) == f"VACUUM {TABLE}"
    for action in (Action.DELETES, Action.MANIFESTS, Action.EXPIRE, Action.ORPHANS):
        with pytest.raises(ValueError, match="not a Delta maintenance action"):
            delta_statement(action, TABLE)
    assert FORMATS[TableFormat.DELTA].maintenance_order == (Action.COMPACT, Action.VACUUM)
    assert all(f.maintenance_order for f in FORMATS.values())  # every format its own maintenance


def test_optimize_is_due_over_the_file_limit_vacuum_with_orphan_removal_and_force_plans_both():
    few, many = TableHealth(TABLE, data_files=10), TableHealth(TABLE, data_files=11)
    assert not plan_delta_maintenance(few, POLICY).due
    assert plan_delta_maintenance(many, POLICY).actions == (Action.COMPACT,)
    orphans = MaintenancePolicy(max_small_files=10, remove_orphans=True, snapshot_retention_minutes=60)
    plan = plan_delta_maintenance(many, orphans)
    assert plan.actions == (Action.COMPACT, Action.VACUUM)
    assert plan.describe() == "compact (11 files > 10), vacuum (files unreferenced for 60 min)"
    assert plan_delta_maintenance(few, POLICY, force=True).actions == (Action.COMPACT, Action.VACUUM)
    assert retention_value(120) == "interval 120 minutes"


def test_delta_report_line_says_files_before_and_after_and_what_optimize_did():
    summary = optimize_outcome([{"path": "/w/t", "metrics": {"numFilesRemoved": 5, "numFilesAdded": 1}}])
    assert summary == "5->1 files"
    before, after = TableHealth(TABLE, data_files=5, data_bytes=5 * 2048), TableHealth(TABLE, 1, data_bytes=9000)
    plan = plan_delta_maintenance(before, MaintenancePolicy(max_small_files=1))
    report = DeltaReport(TABLE, before, plan, after, [ActionResult(Action.COMPACT, summary)], seconds=2.0)
    assert report.line() == "maintenance cdc.t: compact 5->1 files | files 5->1, avg 2.0 KB->8.8 KB | 2.0s"


def test_the_maintenance_job_takes_the_table_format_and_refuses_limits_delta_has_no_use_for():
    js = build_job_settings({"warehouse": "/w", "table_format": "delta"})
    assert js.catalog.table_format == TableFormat.DELTA and js.catalog.catalog_name == "spark_catalog"
    assert build_job_settings({"warehouse": "/w"}).catalog.table_format == TableFormat.ICEBERG
    for name in NO_DELTA_MEANING:
        with pytest.raises(ArgumentError, match=f"--{name}: "):
            build_job_settings({"warehouse": "/w", "table_format": "delta", name: "30"})
        build_job_settings({"warehouse": "/w", name: "30"})  # Iceberg's
    # The limits that mean the same for Delta are taken.
    js = build_job_settings(
        {
            "warehouse": "/w",
            "table_format": "delta",
            "maintenance_target_file_size_mb": "64",
            "maintenance_max_small_files": "3",
        }
    )
    assert js.policy.target_file_size_mb == 64 and js.policy.max_small_files == 3
    with pytest.raises(ArgumentError, match="--catalog_name must be spark_catalog"):
        build_job_settings({"warehouse": "/w", "table_format": "delta", "catalog_name": "glue_catalog"})


def test_deltas_concurrent_modification_errors_are_commit_conflicts_to_run_again():
    lost = FakePy4JError(
        JavaThrowable("io.delta.exceptions.ConcurrentDeleteReadException", "This transaction attempted to read ...")
    )
    assert conflict_reason(lost) == "ConcurrentDeleteReadException: This transaction attempted to read ..."
    assert conflict_reason(FakePy4JError(JavaThrowable("io.delta.exceptions.ConcurrentAppendException", "x")))
