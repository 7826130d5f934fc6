"""What the stack tests that run the Glue job script on a stack of their own share: the job fixture's
start, its log, its Spark checkpoint and the lake's Iceberg metadata, read from outside the job."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from stack_helpers import Stack, reconciled, run_script

BATCH_CAP = 2_500  # --max_offsets_per_trigger of the job under test


def reconciled_table(stack: Stack, table: str, rows: int, wait: float = 180) -> None:
    out = reconciled(stack, "--table", table, wait=wait)
    assert re.search(rf"source +{rows} +lake +{rows} +OK", out), out


def start_job(stack: Stack, env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> None:
    """`extra`: more job arguments."""
    # Batches well below the burst's size, so that it spans several of them.
    cap = ("--max_offsets_per_trigger", str(BATCH_CAP))
    res = run_script(stack, "local-job", "start", "--", *cap, *extra, env=env)
    assert res.returncode == 0, res.stdout + res.stderr


def job_log_since_start(stack: Stack) -> str:
    return (stack.state / "logs" / "job.log").read_text(errors="replace").rsplit("local-stack starts job", 1)[-1]


def job_log_shows(stack: Stack, pattern: str, timeout: float = 60) -> str:
    """The job's log since its start, once `pattern` is in it: the batch line is written after the commit
    that reconcile may already have seen."""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, log := job_log_since_start(stack)):
        assert time.monotonic() < deadline, f"{pattern!r} not in the job log within {timeout:.0f}s:\n{log[-3000:]}"
        time.sleep(0.5)
    return log


def job_running(stack: Stack) -> bool:
    """What `local-job status` says by its exit code, read in this process from the job's run record:
    the tests poll it every half second, and a `local-job` process costs about 0.4 CPU-s."""
    from cdcstack.plumbing import JOB, read_record, record_path

    rec = read_record(record_path(stack.state, JOB))
    return rec is not None and rec.alive()


def wait_committed(stack: Stack, batch: int, timeout: float = 300) -> None:
    commits = checkpoint(stack) / "commits"
    deadline = time.monotonic() + timeout
    while batch not in batch_ids(commits):
        assert time.monotonic() < deadline, f"batch {batch} was not committed within {timeout:.0f}s"
        assert job_running(stack), job_log_since_start(stack)[-3000:]
        time.sleep(0.5)


def settled_batch(stack: Stack, timeout: float = 300) -> int:
    """The newest planned batch, once it is committed. The lake can already equal the source while
    Spark has yet to write that batch's commit file (it follows foreachBatch's return)."""
    batch = max(batch_ids(checkpoint(stack) / "offsets"))
    wait_committed(stack, batch, timeout)
    return batch


def table_version(stack: Stack, table: str) -> int:
    """The Iceberg table's current metadata version (hadoop catalog): it moves on every commit."""
    hint = stack.state / "lake" / "warehouse" / "cdc" / table / "metadata" / "version-hint.text"
    return int(hint.read_text().strip())


def ingest_times(stack: Stack, table: str, where: str) -> dict[int, Any]:
    """`_cdc_ingested_at` of the lake rows matching `where`, by cust_id (read by DuckDB, not Spark)."""
    from cdctools import lake_reader as lake

    con = lake.connect()
    try:
        location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", table)
        return {r["cust_id"]: r["_cdc_ingested_at"] for r in lake.rows(con, location, where)}
    finally:
        con.close()


def checkpoint(stack: Stack) -> Path:
    """Spark's streaming checkpoint: offsets/<batch> is written before a batch runs, commits/<batch> after."""
    return stack.state / "lake" / "checkpoints" / "cdc-job"


def end_offsets(offsets: Path, batch: int) -> dict[tuple[str, str], int]:
    """The Kafka source's end offsets of a batch in Spark's offset log: a version line, the batch's
    metadata, then one JSON line per source ({topic: {partition: offset}})."""
    source = json.loads((offsets / str(batch)).read_text().splitlines()[2])
    return {(topic, part): end for topic, parts in source.items() for part, end in parts.items()}


def batch_size(offsets: Path, batch: int) -> int:
    """Records in a batch: its end offsets minus the previous batch's (a new topic starts at 0)."""
    end = end_offsets(offsets, batch)
    start = end_offsets(offsets, batch - 1) if batch > 0 else {}
    return sum(e - start.get(tp, 0) for tp, e in end.items())


def batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.glob("*") if p.name.isdigit()} if folder.exists() else set()


def lake_columns(stack: Stack, table: str) -> list[str]:
    """The lake table's current data columns, from its Iceberg metadata."""
    from cdctools import lake_reader as lake

    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", table)
    meta = json.loads(lake.current_metadata(location).read_text())
    [schema] = [x for x in meta["schemas"] if x["schema-id"] == meta["current-schema-id"]]
    return [f["name"] for f in schema["fields"] if not f["name"].startswith("_cdc_")]
