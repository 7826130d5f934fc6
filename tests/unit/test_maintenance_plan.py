"""Table maintenance, the pure parts: the decision from health vs limits, the procedure calls, the
streaming cadence, conflict retries with backoff, and the arguments of both jobs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cdclake.common.conflicts import ConflictRetriesExhausted, RetryPolicy, conflict_reason, retry_on_conflict
from cdclake.common.settings import ARGS, POLICY_ARGS, ArgumentError, build_settings
from cdclake.jobs.maintenance_job import JOB_ARGS, build_job_settings
from cdclake.lake import maintenance
from cdclake.lake.formats import iceberg
from cdclake.lake.formats.iceberg import Iceberg, IcebergReport, plan_maintenance
from cdclake.lake.maintenance import Action, Cadence, MaintenancePolicy, StreamMaintainer, TableHealth

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000.0
POLICY = MaintenancePolicy(
    max_small_files=10, max_delete_files=5, max_snapshots=20, retain_last_snapshots=3, snapshot_retention_minutes=60
)


def health(**kw: Any) -> TableHealth:
    base: dict[str, Any] = {"table": "glue_catalog.cdc.t", "snapshots": 4, "oldest_snapshot_s": NOW - 60}
    return TableHealth(**(base | kw))


# ---------------------------------------------------------------- decision
def test_a_table_within_every_limit_needs_nothing():
    plan = plan_maintenance(health(data_files=10, small_data_files=10, delete_files=5, snapshots=20), POLICY, NOW)
    assert not plan.due and plan.describe() == "nothing due"


def test_too_many_small_files_plans_compaction_and_then_drops_the_dangling_deletes():
    plan = plan_maintenance(health(data_files=11, small_data_files=11, delete_files=2), POLICY, NOW)
    assert plan.actions == (Action.COMPACT, Action.DELETES)
    assert "11 small data files > 10" in plan.describe()
    # Large files are not the problem: only small ones count.
    assert not plan_maintenance(health(data_files=500, small_data_files=3), POLICY, NOW).due


def test_too_many_delete_files_plans_compaction_and_a_delete_file_rewrite():
    plan = plan_maintenance(health(delete_files=6), POLICY, NOW)
    assert plan.actions == (Action.COMPACT, Action.DELETES)
    assert "6 delete files > 5" in plan.describe()


def test_snapshots_over_the_limit_or_twice_the_retention_old_plan_expiry():
    assert plan_maintenance(health(snapshots=21), POLICY, NOW).actions == (Action.EXPIRE,)
    old = health(snapshots=8, oldest_snapshot_s=NOW - 121 * 60)
    assert plan_maintenance(old, POLICY, NOW).actions == (Action.EXPIRE,)
    # Older than the retention but not twice: expiry waits (it would otherwise run on every check).
    assert not plan_maintenance(health(snapshots=8, oldest_snapshot_s=NOW - 90 * 60), POLICY, NOW).due
    # Nothing to expire when only the snapshots to keep anyway exist.
    assert not plan_maintenance(health(snapshots=3, oldest_snapshot_s=NOW - 10_000 * 60), POLICY, NOW).due


def test_manifests_orphans_and_force():
    assert plan_maintenance(health(manifests=101), POLICY, NOW).actions == (Action.MANIFESTS,)
    with_orphans = MaintenancePolicy(remove_orphans=True)
    assert plan_maintenance(health(), with_orphans, NOW).actions == (Action.ORPHANS,)
    assert plan_maintenance(health(), POLICY, NOW, force=True).actions == (
        Action.COMPACT,
        Action.DELETES,
        Action.MANIFESTS,
        Action.EXPIRE,
    )


# ---------------------------------------------------------------- procedure calls
def test_procedures_are_called_on_the_tables_catalog_with_the_configured_limits():
    p = MaintenancePolicy(target_file_size_mb=64, min_input_files=3, delete_file_threshold=2)
    sql = iceberg.rewrite_data_files_sql("glue_catalog.cdc.orders", p)
    assert sql.startswith("CALL glue_catalog.system.rewrite_data_files(table => 'cdc.orders', strategy => 'binpack'")
    for opt in (
        "'target-file-size-bytes', '67108864'",
        "'min-input-files', '3'",
        "'delete-file-threshold', '2'",
        "'partial-progress.enabled', 'true'",
        "'max-concurrent-file-group-rewrites', '2'",
    ):
        assert opt in sql
    assert "rewrite_position_delete_files(table => 'cdc.orders'" in iceberg.rewrite_position_delete_files_sql(
        "glue_catalog.cdc.orders", p
    )
    with pytest.raises(ValueError, match=r"catalog\.namespace\.table"):
        maintenance.split_table("orders")


def test_expiry_and_orphan_cut_offs_are_utc_timestamps_and_orphans_never_younger_than_24_hours():
    p = MaintenancePolicy(snapshot_retention_minutes=30, retain_last_snapshots=7, orphan_min_age_hours=72)
    expire = iceberg.procedure_sql(Action.EXPIRE, "c.ns.t", p, NOW)
    assert "older_than => TIMESTAMP '2027-01-15 07:30:00.000000+00:00'" in expire  # NOW - 30 min
    assert "retain_last => 7" in expire
    orphans = iceberg.procedure_sql(Action.ORPHANS, "c.ns.t", p, NOW)
    assert "older_than => TIMESTAMP '2027-01-12 08:00:00.000000+00:00'" in orphans  # NOW - 72 h
    # Even a policy built around the validation cannot go below Iceberg's safe minimum.
    unsafe = MaintenancePolicy(orphan_min_age_hours=1)
    assert "TIMESTAMP '2027-01-14 08:00:00.000000+00:00'" in iceberg.procedure_sql(
        Action.ORPHANS, "c.ns.t", unsafe, NOW
    )


def test_report_line_says_what_ran_before_after_and_how_long():
    before = health(data_files=40, small_data_files=40, data_bytes=40 * 4096, delete_files=12, snapshots=25)
    after = health(data_files=1, small_data_files=1, data_bytes=150_000, delete_files=0, snapshots=3)
    report = IcebergReport("glue_catalog.cdc.t", before, plan_maintenance(before, POLICY, NOW), after)
    report.results = [
        maintenance.ActionResult(Action.COMPACT, "40->1 data files", conflicts=1),
        maintenance.ActionResult(Action.DELETES, "12->0 delete files"),
        maintenance.ActionResult(Action.EXPIRE, "90 files deleted"),
    ]
    report.seconds = 4.25
    assert report.line() == (
        "maintenance cdc.t: compact 40->1 data files, deletes 12->0 delete files, expire 90 files deleted | "
        "data files 40->1, delete files 12->0, snapshots 25->3, manifests 0->0, avg data file 4.0 KB->146.5 KB "
        "| 1 commit conflict(s) retried | 4.2s"
    )


# ---------------------------------------------------------------- streaming cadence
def test_cadence_by_batch_count_or_time():
    assert not Cadence(0, 0).enabled
    assert Cadence(3, 0).due(3, 0) and not Cadence(3, 0).due(2, 10**6)
    assert Cadence(0, 5).due(1, 300) and not Cadence(0, 5).due(10**6, 299)


def test_stream_maintainer_runs_between_batches_on_cadence_and_never_fails_the_stream(monkeypatch):
    calls: list[str] = []

    def fake_maintain(spark, table, policy, fmt, **kw):
        calls.append(table)
        if table.endswith("broken"):
            raise RuntimeError("table cannot be read")
        return IcebergReport(table, health(table=table), maintenance.MaintenancePlan())

    monkeypatch.setattr(maintenance, "maintain_table", fake_maintain)
    now = [0.0]
    cadence = Cadence(every_batches=2, interval_minutes=1)
    m = StreamMaintainer(MaintenancePolicy(), cadence, Iceberg(), clock=lambda: now[0])
    assert m.after_batch(None, ["c.ns.a"]) == [] and calls == []
    assert len(m.after_batch(None, ["c.ns.b", "c.ns.broken"])) == 2  # 2nd batch: due; the broken one is skipped
    assert calls == ["c.ns.a", "c.ns.b", "c.ns.broken"]
    now[0] = 61.0  # a minute later, one batch: due by time
    m.after_batch(None, [])
    assert len(calls) == 6


# ---------------------------------------------------------------- conflicts
class JavaThrowable:
    """Stands in for the py4j object behind a PySpark error."""

    def __init__(self, name: str, message: str, cause: JavaThrowable | None = None) -> None:
        self.name, self.message, self.cause = name, message, cause

    def getClass(self) -> Any:  # the Java API
        name = self.name
        return type("Cls", (), {"getName": lambda _self: name})()

    def getMessage(self) -> str:
        return self.message

    def getCause(self) -> JavaThrowable | None:
        return self.cause


class FakePy4JError(Exception):
    def __init__(self, java: JavaThrowable) -> None:
        super().__init__("An error occurred while calling o90.sql.")
        self.java_exception = java


def validation(msg: str = "Cannot commit, missing data files: [a.parquet]") -> FakePy4JError:
    return FakePy4JError(JavaThrowable("org.apache.iceberg.exceptions.ValidationException", msg))


def test_conflicts_are_recognised_through_the_java_cause_chain_or_the_message():
    wrapped = FakePy4JError(
        JavaThrowable(
            "org.apache.spark.SparkException",
            "Writing job aborted",
            JavaThrowable("org.apache.iceberg.exceptions.CommitFailedException", "Version 7 already exists"),
        )
    )
    assert conflict_reason(wrapped) == "CommitFailedException: Version 7 already exists"
    assert conflict_reason(validation()) == "ValidationException: Cannot commit, missing data files: [a.parquet]"
    assert conflict_reason(RuntimeError("org.apache.iceberg.exceptions.ValidationException: Found conflicting files"))
    assert conflict_reason(FakePy4JError(JavaThrowable("java.io.FileNotFoundException", "gone"))) is None
    assert conflict_reason(ValueError("boom")) is None


def test_spark_4_1s_merge_metrics_failure_is_run_again_and_other_null_pointers_are_not():
    # The text of the failure as Spark 4.1.1 raised it for a MERGE (its first lines).
    npe = RuntimeError(
        "An error occurred while calling o64.sql.\n: org.apache.spark.SparkException: Job aborted due to stage "
        "failure: Task 0 in stage 2719.0 failed 1 times, most recent failure: Lost task 0.0 in stage 2719.0: "
        'java.lang.NullPointerException: Cannot invoke "org.apache.spark.sql.classic.SparkSession.sparkContext()" '
        'because the return value of "org.apache.spark.sql.execution.SparkPlan.session()" is null\n'
        "\tat org.apache.spark.sql.execution.SparkPlan.sparkContext(SparkPlan.scala:68)\n"
        "\tat org.apache.spark.sql.execution.datasources.v2.MergeRowsExec.metrics$lzycompute(MergeRowsExec.scala:50)"
    )
    assert "MergeRowsExec.metrics" in (conflict_reason(npe) or "")
    other = RuntimeError("java.lang.NullPointerException\n\tat org.apache.spark.sql.execution.SortExec.doExecute")
    assert conflict_reason(other) is None


def test_a_conflicting_operation_is_run_again_with_exponential_backoff():
    outcomes: list[Exception | str] = [validation(), validation(), "done"]
    waits: list[float] = []

    def op() -> str:
        o = outcomes.pop(0)
        if isinstance(o, Exception):
            raise o
        return o

    seen: list[str] = []
    assert retry_on_conflict(op, "MERGE t", RetryPolicy(attempts=5), sleep=waits.append, on_conflict=seen.append)
    assert len(waits) == 2 and len(seen) == 2
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0  # doubling, with jitter in [50%, 100%]
    assert RetryPolicy(base_delay_s=1, max_delay_s=8).delay(10, rnd=lambda: 1.0) == 8


def test_conflicts_give_up_after_the_last_attempt_and_other_errors_propagate_at_once():
    def always_conflict() -> None:
        raise validation()

    with pytest.raises(ConflictRetriesExhausted, match="after 3 attempt") as e:
        retry_on_conflict(always_conflict, "compact t", RetryPolicy(attempts=3), sleep=lambda _s: None)
    assert "missing data files" in e.value.reason
    attempts = []

    def broken() -> None:
        attempts.append(1)
        raise FakePy4JError(JavaThrowable("java.lang.OutOfMemoryError", "heap"))

    with pytest.raises(FakePy4JError):
        retry_on_conflict(broken, "compact t", RetryPolicy(attempts=3), sleep=lambda _s: None)
    assert attempts == [1]


# ---------------------------------------------------------------- arguments
REQUIRED = {
    "source": "files",
    "files_path": "/in",
    "warehouse": "/w",
    "checkpoint_location": "/c",
    "dead_letter_path": "/d",
}


def test_streaming_job_maintenance_defaults_are_on_by_time_and_safe():
    s = build_settings(REQUIRED)
    assert (s.maintenance_every_batches, s.maintenance_interval_minutes) == (0, 60)
    assert s.maintenance.remove_orphans is False  # listing a whole table location does not belong between batches
    assert s.maintenance.orphan_min_age_hours >= iceberg.MIN_ORPHAN_AGE_HOURS
    custom = build_settings(REQUIRED | {"maintenance_every_batches": "5", "maintenance_max_snapshots": "30"})
    assert custom.maintenance_every_batches == 5 and custom.maintenance.max_snapshots == 30


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"maintenance_orphan_min_age_hours": "2"}, "--maintenance_orphan_min_age_hours must be >= 24"),
        ({"maintenance_every_batches": "-1"}, "--maintenance_every_batches must be >= 0"),
        ({"maintenance_remove_orphans": "yes"}, "--maintenance_remove_orphans must be true or false"),
        ({"maintenance_min_input_files": "1"}, "--maintenance_min_input_files must be >= 2"),
        (
            {"maintenance_max_snapshots": "5", "maintenance_retain_last_snapshots": "5"},
            "--maintenance_retain_last_snapshots must be below --maintenance_max_snapshots",
        ),
    ],
)
def test_invalid_maintenance_arguments_fail_with_an_actionable_message(args, message):
    with pytest.raises(ArgumentError, match=re.escape(message)):
        build_settings(REQUIRED | args)


def test_maintenance_job_arguments_and_their_safety_limits():
    js = build_job_settings({"warehouse": "s3://lake/warehouse", "namespace": "cdc_lake", "tables": "a_b, c"})
    assert js.tables == ("a_b", "c") and js.force is False
    assert js.policy.remove_orphans is True  # the scheduled job is where orphan files are removed
    assert js.catalog.catalog_name == "glue_catalog" and js.catalog.catalog_type == "glue"
    with pytest.raises(ArgumentError, match="--warehouse is required"):
        build_job_settings({})
    with pytest.raises(ArgumentError, match="must be >= 10 in the maintenance job"):
        build_job_settings({"warehouse": "/w", "maintenance_snapshot_retention_minutes": "0"})
    with pytest.raises(ArgumentError, match="plain table names"):
        build_job_settings({"warehouse": "/w", "tables": "other_ns.t"})


def test_maintenance_page_documents_the_maintenance_job_arguments_and_the_shared_limits():
    section = (ROOT / "docs" / "MAINTENANCE.md").read_text()
    shared = {a.name for a in POLICY_ARGS}
    for a in JOB_ARGS:
        if a.name in shared:
            continue  # documented once, in the job argument table (checked by test_settings.py)
        row = re.search(rf"^\| `--{a.name}` \|([^|]*)\|", section, re.M)
        assert row, f"docs/MAINTENANCE.md has no row for --{a.name}"
        assert row.group(1).strip().strip("`") == (a.default or "—"), a.name
    assert {a.name for a in POLICY_ARGS} <= {a.name for a in ARGS}
    assert "`--maintenance_remove_orphans` defaults to `true`" in section
