"""kill -9 on Spark's own streaming path: the entry script with the `files` source (Spark's file
stream, foreachBatch, Spark's checkpoint with its offset and commit logs, a processingTime
trigger), killed by the test-only crash hook (CDC_TEST_CRASH_AT, cdclake/local/faults.py) on either side
of the Iceberg commit and restarted on the same checkpoint. The last restart, which is killed by no
hook, streams in this test's Spark session (a third JVM would add a third of the test's cost)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from cdc_workload import Workload, assert_rows, commits, wrote_nothing
from job_runs import STREAMING_JOB, local_argv, write_lines

NAMESPACE = "files_crash"
TABLE = f"glue_catalog.{NAMESPACE}.inventory_customers"


def job_argv(tmp: Path, warehouse: Path, *extra: str) -> list[str]:
    source = ["--source", "files", "--files_path", str(tmp / "in"), "--max_files_per_trigger", "1"]
    return local_argv(tmp, warehouse, NAMESPACE, *source, "--maintenance_interval_minutes", "0", *extra)


def job(tmp: Path, warehouse: Path, crash_at: str) -> subprocess.Popen:
    args = [sys.executable, str(STREAMING_JOB), *job_argv(tmp, warehouse)]
    env = dict(os.environ, CDC_SPARK_MASTER="local[2]")
    env.pop("CDC_TEST_CRASH_AT", None)
    env["CDC_TEST_CRASH_AT"] = crash_at
    log = (tmp / f"job-{crash_at}.log").open("a")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)


def stream_in_session(spark, argv: list[str]) -> tuple[threading.Thread, list[BaseException]]:
    """The job streaming in this test's Spark session, in a thread (stop it with stop_streams)."""
    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.jobs.job import run_stream

    errors: list[BaseException] = []

    def run() -> None:
        try:
            run_stream(spark, build_settings(parse_argv(argv)))
        except BaseException as e:  # reported by the test's thread
            errors.append(e)

    thread = threading.Thread(target=run, name="files-stream", daemon=True)
    thread.start()
    return thread, errors


def stop_streams(spark, thread: threading.Thread) -> None:
    for query in spark.streams.active:
        query.stop()
    thread.join(120)
    assert not thread.is_alive(), "the stream did not stop"


def batches(tmp: Path, log: str) -> list[int]:
    """Batch ids in Spark's offset log (planned) or commit log (done)."""
    folder = tmp / "checkpoint" / log
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []


def killed_by_the_hook(proc: subprocess.Popen, tmp: Path, point: str, batch_id: int) -> None:
    code = proc.wait(timeout=600)
    text = "".join(p.read_text() for p in sorted(tmp.glob(f"job-{point}*.log")))
    assert code == -9, f"exit {code}\n{text[-3000:]}"
    assert f"SIGKILL at {point} of batch {batch_id}" in text, text[-3000:]


def ingested(spark) -> dict[int, object]:
    spark.catalog.refreshTable(TABLE)
    return {r["id"]: r["_cdc_ingested_at"] for r in spark.sql(f"SELECT id, _cdc_ingested_at FROM {TABLE}").collect()}


def test_kill_9_before_and_after_the_iceberg_commit_on_the_spark_file_stream_then_restart_applies_each_batch_once(
    spark, warehouse, tmp_path, caplog
):
    inbox = tmp_path / "in"
    inbox.mkdir()
    w = Workload(seed=21, keys=25)
    states = []

    def add_file(n: int) -> None:
        # Several changes per key in one file, updates and deletes of rows earlier files wrote.
        write_lines(inbox / f"{n:04d}.json", w.batch(12), embed=True)
        mtime = 1_700_000_000 + n  # the file stream orders new files by modification time
        os.utime(inbox / f"{n:04d}.json", (mtime, mtime))
        states.append(dict(w.expected))

    # One run: batch 0 is applied and committed normally, then batch 1 is planned and the job is
    # killed before its MERGE.
    add_file(0)
    add_file(1)
    killed_by_the_hook(job(tmp_path, warehouse, "before-iceberg-commit@1"), tmp_path, "before-iceberg-commit", 1)
    assert (batches(tmp_path, "offsets"), batches(tmp_path, "commits")) == ([0, 1], [0])
    after_batch_0 = commits(spark, TABLE)
    assert len(after_batch_0) == 1 and not wrote_nothing(after_batch_0[0])  # batch 0 only: the lake did not move
    assert_rows(spark, TABLE, states[0])

    # Restarted: batch 1 is re-run from the offset log, its MERGE commits, the job is killed
    # before Spark records the batch in its commit log.
    killed_by_the_hook(job(tmp_path, warehouse, "after-iceberg-commit"), tmp_path, "after-iceberg-commit", 1)
    assert (batches(tmp_path, "offsets"), batches(tmp_path, "commits")) == ([0, 1], [0])
    after_batch_1 = commits(spark, TABLE)
    assert after_batch_1[:1] == after_batch_0 and len(after_batch_1) == 2
    assert not wrote_nothing(after_batch_1[-1])
    assert_rows(spark, TABLE, states[1])
    ingested_by_batch_1 = ingested(spark)

    # Restarted again, on a processingTime trigger: batch 1 is re-run once more (a no-op: every
    # change is at or behind the stored position), then batch 2 arrives while the job streams.
    caplog.set_level(logging.INFO, logger="cdclake")
    thread, errors = stream_in_session(spark, job_argv(tmp_path, warehouse, "--trigger_interval_seconds", "1"))
    try:
        deadline = time.monotonic() + 600
        while batches(tmp_path, "commits") != [0, 1]:
            assert thread.is_alive(), errors
            assert time.monotonic() < deadline, "batch 1 was not re-run and committed"
            time.sleep(0.2)
        # The re-run's MERGE commits an empty snapshot: it wrote no row and no delete, and rewrote
        # no row (`_cdc_ingested_at` would move).
        rerun = commits(spark, TABLE)
        assert rerun[:2] == after_batch_1 and len(rerun) == 3 and wrote_nothing(rerun[-1]), rerun
        assert ingested(spark) == ingested_by_batch_1
        add_file(2)
        while batches(tmp_path, "commits") != [0, 1, 2]:
            assert thread.is_alive(), errors
            assert time.monotonic() < deadline, "batch 2 was not applied"
            time.sleep(0.2)
    finally:
        stop_streams(spark, thread)
    assert not errors, errors
    assert_rows(spark, TABLE, states[2])
    final = commits(spark, TABLE)
    assert final[:3] == rerun and len(final) == 4 and not wrote_nothing(final[-1]), final
    log = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch ")]
    assert [m.split(":")[0] for m in log] == ["batch 1", "batch 2"], log
