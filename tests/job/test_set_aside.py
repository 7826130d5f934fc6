"""One table can never stop the others (jobs/batch.py): a table whose batch fails in a way running it
again does not cure is set aside (its changes to the dead letters, a mark, the alarm's line) while
every other table of the batch commits; a transient failure still fails the batch; a set-aside table
resumes by its documented fix and ends equal to the source. On Iceberg here; every format in
tests/stack/test_set_aside_formats.py."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from cdc_events import Events
from cdc_workload import Workload

NAMES = ("t0", "t1", "t2")


def loads() -> dict[str, Workload]:
    return {
        n: Workload(seed=i, keys=8, events=Events(topic=f"mdb.inventory.{n}", table=n)) for i, n in enumerate(NAMES)
    }


def set_aside_letters(lake, name: str) -> list[dict]:
    root = lake.dead_dir / "_set_aside" / f"{lake.namespace}.{name}"
    return [
        json.loads(line) for f in sorted(root.glob("since-*/batch-*/*.json")) for line in f.read_text().splitlines()
    ]


def properties(lake, name: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table(name)}").collect()}


def test_a_table_failing_for_good_is_set_aside_while_the_others_commit_and_resumes_equal_to_the_source(
    make_lake, caplog, tmp_path
):
    from cdclake.common.report import STOPPED_PHRASE
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.jobs.job import run_stream
    from cdclake.local.faults import TableFault

    lake = make_lake(table_concurrency="3")
    w = loads()
    lake.apply([r for n in NAMES for r in w[n].batch(4)], batch_id=0)
    before = dict(w["t1"].expected)
    caplog.set_level(logging.INFO, logger="cdclake")
    # The fault: t1's statements fail with Spark's own AnalysisException, every time.
    lake.processor = BatchProcessor(lake.spark, lake.settings, fault=TableFault(frozenset({"inventory_t1"})))
    first = lake.apply([r for n in NAMES for r in w[n].batch(6)], batch_id=1)
    for n in ("t0", "t2"):
        lake.assert_rows(w[n].expected, name=f"inventory_{n}")
    lake.assert_rows(before, name="inventory_t1")  # nothing of its batch committed
    t1 = next(t for t in first.tables if t.table == lake.table("inventory_t1"))
    assert t1.set_aside.startswith("AnalysisException: [UNRESOLVED_COLUMN") and t1.dead == t1.events == 6
    assert "inventory_t1: 6 ev" in first.line() and "STOPPED-FOLLOWING[set aside since batch 1:" in first.line()
    [error] = [r.getMessage() for r in caplog.records if STOPPED_PHRASE in r.getMessage()]
    assert error.startswith(f"table {lake.table('inventory_t1')} {STOPPED_PHRASE}: set aside;")
    assert "replay --resume inventory_t1" in error
    mark = json.loads(properties(lake, "inventory_t1")["cdc.set-aside"])
    assert mark["batch"] == 1 and mark["reason"] == t1.set_aside
    assert len(set_aside_letters(lake, "inventory_t1")) == 6
    assert {d["reason"] for d in set_aside_letters(lake, "inventory_t1")} == {
        f"table set aside since batch 1: {t1.set_aside}"
    }

    # Later batches: t1's changes go straight to the dead letters (not tried again), the others flow;
    # also after a restart without the fault, until it is resumed.
    caplog.clear()
    lake.apply([r for n in NAMES for r in w[n].batch(4)], batch_id=2)
    assert not [r for r in caplog.records if "TEST fault injection" in r.getMessage()]
    lake.processor = BatchProcessor(lake.spark, lake.settings)
    lake.apply([r for n in NAMES for r in w[n].batch(4)], batch_id=3)
    for n in ("t0", "t2"):
        lake.assert_rows(w[n].expected, name=f"inventory_{n}")
    lake.assert_rows(before, name="inventory_t1")
    assert len(set_aside_letters(lake, "inventory_t1")) == 14
    assert "STOPPED-FOLLOWING[set aside since batch 1:" in caplog.records[-1].getMessage()

    # The fix: the cause removed (the fault gone), the table resumed by its run-once replay.
    resume = replace(
        lake.settings, run_once=True, resume_table="inventory_t1", files_path="",
        checkpoint_location=str(tmp_path / "resume"), maintenance_interval_minutes=0,
    )  # fmt: skip
    assert run_stream(lake.spark, resume) == {}
    lake.assert_rows(w["t1"].expected, name="inventory_t1")
    assert "cdc.set-aside" not in properties(lake, "inventory_t1")
    assert not (lake.dead_dir / "_set_aside" / f"{lake.namespace}.inventory_t1" / "_mark.json").exists()

    # The stream again: t1 flows; its set-aside changes replayed once more change nothing (the guard).
    lake.processor = BatchProcessor(lake.spark, lake.settings)
    lake.apply([r for n in NAMES for r in w[n].batch(4)], batch_id=4)
    again = replace(resume, resume_table="", files_path=mark["folder"], checkpoint_location=str(tmp_path / "again"))
    run_stream(lake.spark, again)
    for n in NAMES:
        lake.assert_rows(w[n].expected, name=f"inventory_{n}")


def test_an_unknown_failure_fails_the_batch_until_it_repeats_then_the_table_is_set_aside_also_across_a_restart(
    make_lake, caplog
):
    from cdclake.common.failures import REPEATS
    from cdclake.jobs.batch import BatchProcessor, Writes
    from cdclake.lake.executor import merge_changes

    lake = make_lake(table_concurrency="3")
    w = loads()
    lake.apply([r for n in NAMES for r in w[n].batch(4)], batch_id=0)
    before = dict(w["t2"].expected)
    failing = lake.table("inventory_t2")

    def merge(table, changes, *args, **kwargs):
        if table == failing:
            raise RuntimeError(f"injected: {table} cannot be written")
        merge_changes(table, changes, *args, **kwargs)

    batch = [r for n in NAMES for r in w[n].batch(5)]
    caplog.set_level(logging.ERROR, logger="cdclake")
    for attempt in range(1, REPEATS):
        # Each attempt a new process (Glue restarts the job run): the count is kept beside the dead letters.
        lake.processor = BatchProcessor(lake.spark, lake.settings, writes=Writes(keyed=merge))
        with pytest.raises(RuntimeError, match="injected"):
            lake.apply(batch, batch_id=7)
        line = caplog.records[-1].getMessage()
        assert f"attempt {attempt} of {REPEATS} before the table is set aside" in line and failing in line
    lake.processor = BatchProcessor(lake.spark, lake.settings, writes=Writes(keyed=merge))
    report = lake.apply(batch, batch_id=7)
    [t2] = [t for t in report.tables if t.set_aside]
    assert t2.table == failing and f"on {REPEATS} attempts" in t2.set_aside
    for n in ("t0", "t1"):
        lake.assert_rows(w[n].expected, name=f"inventory_{n}")
    lake.assert_rows(before, name="inventory_t2")
    assert len(set_aside_letters(lake, "inventory_t2")) == 5


def test_a_transient_failure_fails_the_batch_every_time_and_never_sets_the_table_aside(make_lake):
    from cdclake.common.failures import REPEATS
    from cdclake.jobs.batch import BatchProcessor, Writes
    from cdclake.lake.executor import merge_changes

    lake = make_lake()
    w = loads()
    failing = lake.table("inventory_t0")

    def merge(table, changes, *args, **kwargs):
        if table == failing:
            # The AWS SDK's text of a throttled Glue call (Service, Status Code, Request ID).
            raise RuntimeError(
                "software.amazon.awssdk.services.glue.model.ThrottlingException: Rate exceeded "
                "(Service: Glue, Status Code: 400, Request ID: 2f0c8f5e-0d7a-4f43-9a55-7d1c2c1f3a10)"
            )
        merge_changes(table, changes, *args, **kwargs)

    lake.processor = BatchProcessor(lake.spark, lake.settings, writes=Writes(keyed=merge))
    batch = [r for n in NAMES for r in w[n].batch(3)]
    for _ in range(REPEATS + 1):
        with pytest.raises(RuntimeError, match="ThrottlingException"):
            lake.apply(batch, batch_id=0)
    assert not (Path(lake.dead_dir) / "_set_aside" / f"{lake.namespace}.inventory_t0").exists()


def test_kill_9_after_a_table_was_set_aside_then_the_restart_keeps_its_changes_once_and_exits_3_naming_it(
    spark, warehouse, tmp_path
):
    import os

    from cdc_workload import assert_rows
    from job_runs import local_argv, run_job_script, run_status, status_rows, write_lines

    namespace = "set_aside_crash"
    w = loads()
    (tmp_path / "in").mkdir()
    write_lines(tmp_path / "in" / "0.json", [r for n in ("t0", "t1") for r in w[n].batch(5)], embed=False)
    argv = local_argv(tmp_path, warehouse, namespace, "--source", "files", "--files_path", str(tmp_path / "in"))
    argv += ["--run_once", "true", "--maintenance_interval_minutes", "0"]
    env = dict(os.environ, CDC_SPARK_MASTER="local[2]", CDC_TEST_FAIL_TABLE="inventory_t1")
    env.pop("CDC_TEST_CRASH_AT", None)
    # Killed after batch 0 set t1 aside (its changes and mark written) and t0 committed, before the
    # batch's offsets were committed.
    killed = run_job_script(argv, dict(env, CDC_TEST_CRASH_AT="after-iceberg-commit@0"))
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-3000:]
    root = tmp_path / "dead" / "_set_aside" / f"{namespace}.inventory_t1"
    assert (root / "_mark.json").exists()
    assert not (tmp_path / "checkpoint" / "commits" / "0").exists()

    # The restart, the fault cleared: batch 0 runs again; t1's mark keeps it aside, its changes are
    # written over the same folder (once), t0's are no-ops; the exit code and the log say which and why.
    del env["CDC_TEST_FAIL_TABLE"]
    again = run_job_script(argv, env)
    out = again.stdout + again.stderr
    assert again.returncode == 3, out[-4000:]
    assert f"table glue_catalog.{namespace}.inventory_t1 was set aside in this run: AnalysisException:" in out
    letters = [json.loads(x) for f in sorted(root.glob("since-*/batch-*/*.json")) for x in f.read_text().splitlines()]
    assert len(letters) == 5 and len({(d["partition"], d["offset"]) for d in letters}) == 5
    assert (tmp_path / "checkpoint" / "commits" / "0").exists()
    assert_rows(spark, f"glue_catalog.{namespace}.inventory_t0", w["t0"].expected)
    # The run's figures (EMF lines), through status: t1 stopped, t0 following with its changes.
    (tmp_path / "job.log").write_text(again.stdout)
    status = run_status(tmp_path / "job.log")
    rows = status_rows(status.stdout)
    assert rows["inventory_t1"][0] == "STOPPED" and rows["inventory_t0"][0] == "following", status.stdout
    assert "1 table(s) stopped" in status.stdout and rows["inventory_t1"][4] == "5"
