"""The Glue entry scripts run as processes, as a user runs them locally, and the `files` source's input:
one place for every test tier that starts a job of its own (tests/job, tests/glue_catalog, tests/stack)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STREAMING_JOB = ROOT / "glue_scripts" / "cdc_lake_job.py"
MAINTENANCE_JOB = ROOT / "glue_scripts" / "cdc_maintenance_job.py"


def write_lines(path: Path, records: list[dict], embed: bool) -> None:
    """JSON lines in the `files` format; key/value embedded as JSON objects or kept as strings."""
    with path.open("w") as f:
        for r in records:
            line = {k: r[k] for k in ("topic", "partition", "offset")}
            line["timestamp"] = int(r["timestamp"].timestamp() * 1000)
            for k in ("key", "value"):
                line[k] = json.loads(r[k]) if (embed and r[k] is not None) else r[k]
            f.write(json.dumps(line) + "\n")


def local_argv(work: Path, warehouse: Path, namespace: str, *source: str) -> list[str]:
    """A local run's arguments: the Hadoop catalog at `warehouse`, checkpoint and dead letters under
    `work`, 2 shuffle partitions; `source` chooses and configures the source (and anything else)."""
    return [
        *source,
        "--catalog_type", "hadoop", "--warehouse", str(warehouse), "--namespace", namespace,
        "--checkpoint_location", str(work / "checkpoint"), "--dead_letter_path", str(work / "dead"),
        "--shuffle_partitions", "2",
    ]  # fmt: skip


def run_job_script(
    argv: list[str], env: dict[str, str] | None = None, script: Path = STREAMING_JOB, timeout: float = 600
) -> subprocess.CompletedProcess:
    """One run of an entry script (the streaming job unless `script` names another), output captured."""
    return subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


def run_job(work: Path, warehouse: Path, namespace: str, *extra: str) -> subprocess.CompletedProcess:
    """The streaming job run once over the `files` source, reading work/in unless `extra` names another
    --files_path (the last one given wins)."""
    files = ["--source", "files", "--files_path", str(work / "in"), "--run_once", "true"]
    return run_job_script(local_argv(work, warehouse, namespace, *files, *extra))


def run_status(log: Path) -> subprocess.CompletedProcess:
    """status --once over a job log, as a user runs it."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "status"), "--once", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def status_rows(text: str) -> dict[str, list[str]]:
    """status's table rows by table: state, inserts, updates, deletes, dead, commits, batch."""
    rows = [line.split() for line in text.splitlines()]
    head = next(i for i, r in enumerate(rows) if r[:2] == ["table", "state"])
    end = next((i for i, r in enumerate(rows) if i > head and not r), len(rows))
    return {r[0]: r[1:8] for r in rows[head + 1 : end]}
