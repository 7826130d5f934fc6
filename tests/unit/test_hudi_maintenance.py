"""Maintenance of Hudi tables, the pure parts: the plan from a table's file system view and timeline,
Hudi's own procedures with the job's limits (never an Iceberg procedure), the maintenance job's
arguments with `--table_format hudi`, and the streaming job maintaining its Hudi tables between
micro-batches. tests/job/test_hudi.py runs it on the Hudi corpus's lake."""

from __future__ import annotations

import pytest
from cdclake.common.settings import ArgumentError, TableFormat, build_settings
from cdclake.jobs.job import stream_maintainer
from cdclake.jobs.maintenance_job import build_job_settings
from cdclake.lake.formats import FORMATS
from cdclake.lake.formats.hudi import (
    NO_HUDI_MEANING,
    Hudi,
    HudiHealth,
    HudiReport,
    health_from_views,
    hudi_outcome,
    hudi_statement,
    hudi_timeline_bounds,
    plan_hudi_maintenance,
)
from cdclake.lake.formats.iceberg import Iceberg
from cdclake.lake.maintenance import Action, ActionResult, MaintenancePolicy

MIB = 1024 * 1024
POLICY = MaintenancePolicy(max_small_files=2, target_file_size_mb=8, retain_last_snapshots=3, max_snapshots=20)
TABLE = "spark_catalog.cdc.t"


def view(*sizes: int, base: str = "f") -> list[dict]:
    """Rows of show_fsview_latest / show_fsview_all: one base file of each size."""
    return [
        {"file_id": f"{base}{i}", "data_file": f"/w/{base}{i}.parquet", "data_file_size": s}
        for i, s in enumerate(sizes)
    ]


def test_health_counts_latest_base_files_small_ones_older_versions_and_commits():
    latest = view(1 * MIB, 7 * MIB, 2 * MIB)
    every = latest + view(1 * MIB, 1 * MIB, base="old")
    h = health_from_views(TABLE, latest, every, commits=12, small_file_bytes=POLICY.small_file_bytes)
    assert (h.data_files, h.small_data_files, h.data_bytes) == (3, 2, 10 * MIB)  # 7 MiB >= 75% of 8 MiB
    assert (h.file_versions, h.snapshots) == (5, 12)
    assert health_from_views(TABLE, [], [], 0, 1).data_files == 0  # an empty table
    # A merge-on-read table's file slices: their log files are its delete files.
    slices = [r | {"num_delta_files": n} for r, n in zip(latest, (2, 0, 3), strict=True)]
    assert health_from_views(TABLE, slices, every, 1, POLICY.small_file_bytes).delete_files == 5


def test_a_merge_on_read_tables_log_files_are_compacted_past_the_delete_file_limit_before_clustering():
    policy = MaintenancePolicy(max_delete_files=4, max_small_files=2)
    assert not plan_hudi_maintenance(HudiHealth(TABLE, data_files=2, delete_files=4), policy).due
    plan = plan_hudi_maintenance(HudiHealth(TABLE, data_files=3, small_data_files=3, delete_files=5), policy)
    assert plan.describe() == "compact logs (5 log files > 4), compact (3 small base files > 2)"
    # Forced: compaction only where there are log files to compact (a copy-on-write table has none).
    assert Action.LOGS not in plan_hudi_maintenance(HudiHealth(TABLE), policy, force=True).actions
    assert Action.LOGS in plan_hudi_maintenance(HudiHealth(TABLE, delete_files=1), policy, force=True).actions
    assert hudi_statement(Action.LOGS, TABLE, policy, False) == (
        "CALL run_compaction(op => 'scheduleAndExecute', table => 'cdc.t', "
        "options => 'hoodie.compact.inline.max.delta.commits=1')"
    )
    rows = [{"timestamp": "2", "operation_size": 3, "state": "COMPLETED"}]
    assert hudi_outcome(Action.LOGS, rows) == "3 file group(s) compacted"
    assert hudi_outcome(Action.LOGS, []) == "nothing to compact"


def test_clustering_cleaning_and_archival_are_due_by_the_jobs_limits_and_force_plans_all():
    tidy = HudiHealth(TABLE, data_files=3, small_data_files=2, file_versions=3, snapshots=20)
    assert not plan_hudi_maintenance(tidy, POLICY).due
    messy = HudiHealth(TABLE, data_files=4, small_data_files=3, file_versions=9, snapshots=21)
    plan = plan_hudi_maintenance(messy, POLICY)
    # Cleaning first: what clustering replaces is cleanable only once its commit is older than the retained.
    assert plan.actions == (Action.CLEAN, Action.COMPACT, Action.ARCHIVE)
    assert plan.describe() == (
        "clean (5 older file versions), compact (3 small base files > 2), "
        "archive (21 commits on the active timeline > 20)"
    )
    assert plan_hudi_maintenance(tidy, POLICY, force=True).actions == (Action.CLEAN, Action.COMPACT, Action.ARCHIVE)
    assert Hudi.maintenance_order == (Action.CLEAN, Action.LOGS, Action.COMPACT, Action.ARCHIVE)


def test_the_timeline_is_archived_to_the_retained_commits_and_its_bound_always_exceeds_them():
    assert hudi_timeline_bounds(POLICY) == (4, 20)
    # Hudi refuses a maximum not above the minimum, and a minimum not above the cleaning's retention.
    assert hudi_timeline_bounds(MaintenancePolicy(retain_last_snapshots=30, max_snapshots=10)) == (31, 32)


def test_hudi_tables_get_hudis_procedures_with_the_jobs_limits_never_an_iceberg_procedure():
    clustering = hudi_statement(Action.COMPACT, TABLE, POLICY, metadata_table=False)
    assert clustering == (
        "CALL run_clustering(table => 'cdc.t', op => 'scheduleAndExecute', options => "
        "'hoodie.clustering.plan.strategy.target.file.max.bytes=8388608,"
        "hoodie.clustering.plan.strategy.small.file.limit=6291456,"
        "hoodie.clustering.plan.strategy.single.group.clustering.enabled=false')"
    )
    assert hudi_statement(Action.CLEAN, TABLE, POLICY, False) == (
        "CALL run_clean(table => 'cdc.t', clean_policy => 'KEEP_LATEST_COMMITS', retain_commits => 3)"
    )
    assert hudi_statement(Action.ARCHIVE, TABLE, POLICY, True) == (
        "CALL archive_commits(table => 'cdc.t', min_commits => 4, max_commits => 20, retain_commits => 3, "
        "enable_metadata => true)"
    )
    for action in (Action.DELETES, Action.MANIFESTS, Action.EXPIRE, Action.ORPHANS, Action.VACUUM):
        with pytest.raises(ValueError, match="not a Hudi maintenance action"):
            hudi_statement(action, TABLE, POLICY, False)


def test_each_procedures_result_rows_and_the_report_line_say_what_changed():
    assert hudi_outcome(Action.COMPACT, [{"timestamp": "1", "input_group_size": 1, "state": "COMPLETED"}]) == (
        "1 file group(s) written"
    )
    assert hudi_outcome(Action.COMPACT, []) == "nothing to pack"
    assert hudi_outcome(Action.CLEAN, [{"total_files_deleted": 4}]) == "4 files deleted"
    assert hudi_outcome(Action.CLEAN, []) == "nothing to clean"
    assert hudi_outcome(Action.ARCHIVE, [{"result": 0}]) == "done"
    assert hudi_outcome(Action.ARCHIVE, [{"result": -1}]) == "result -1"
    before = HudiHealth(TABLE, data_files=4, small_data_files=4, data_bytes=4 * 2048, file_versions=6, snapshots=9)
    after = HudiHealth(TABLE, data_files=1, data_bytes=4096, file_versions=5, snapshots=4)
    plan = plan_hudi_maintenance(before, MaintenancePolicy(max_small_files=1, max_snapshots=5))
    results = [ActionResult(Action.COMPACT, "1 file group(s) written"), ActionResult(Action.ARCHIVE, "done")]
    line = HudiReport(TABLE, before, plan, after, results, seconds=3.0).line()
    assert line == (
        "maintenance cdc.t: compact 1 file group(s) written, archive done | base files 4->1, log files 0->0, "
        "file versions 6->5, commits 9->4, avg 2.0 KB->4.0 KB | 3.0s"
    )


def test_the_maintenance_job_takes_hudi_and_refuses_the_limits_hudi_tables_have_no_use_for():
    js = build_job_settings({"warehouse": "/w", "table_format": "hudi"})
    assert js.catalog.table_format == TableFormat.HUDI and js.catalog.catalog_name == "spark_catalog"
    hudi = FORMATS[TableFormat.HUDI]
    assert hudi.maintenance_order == (Action.CLEAN, Action.LOGS, Action.COMPACT, Action.ARCHIVE)
    assert hudi.meaningless_limits
    for name in NO_HUDI_MEANING:
        with pytest.raises(ArgumentError, match=f"with --table_format hudi, .*--{name}: "):
            build_job_settings({"warehouse": "/w", "table_format": "hudi", name: "30"})
    # The limits that mean the same for Hudi are taken.
    raw = {
        "maintenance_target_file_size_mb": "64",
        "maintenance_max_small_files": "3",
        "maintenance_max_snapshots": "40",
    }
    js = build_job_settings({"warehouse": "/w", "table_format": "hudi", **raw, "maintenance_max_delete_files": "7"})
    assert (js.policy.target_file_size_mb, js.policy.max_small_files, js.policy.max_snapshots) == (64, 3, 40)
    assert js.policy.max_delete_files == 7  # a merge-on-read table's log files
    js = build_job_settings({"warehouse": "/w", "table_format": "hudi", "maintenance_retain_last_snapshots": "5"})
    assert js.policy.retain_last_snapshots == 5 and js.policy.delete_retention_days == 30


def test_the_streaming_job_maintains_iceberg_and_hudi_tables_between_batches_and_not_delta_tables():
    base = {"source": "files", "files_path": "/in", "warehouse": "/w", "checkpoint_location": "/c"}
    base["dead_letter_path"] = "/d"
    assert isinstance(stream_maintainer(build_settings({**base, "table_format": "hudi"})).fmt, Hudi)
    iceberg = stream_maintainer(build_settings(base))
    assert iceberg is not None and isinstance(iceberg.fmt, Iceberg)
    assert stream_maintainer(build_settings({**base, "table_format": "delta"})) is None
