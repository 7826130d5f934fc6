"""Maintenance killed -9 in the middle of a compaction and of a snapshot expiry (a Glue timeout, a
lost spot node, a stop from the console), then run again: the table is readable, holds exactly the
expected rows, and every file the killed runs left behind is removed by the orphan clean-up.

The kill lands at a known point, not by timing: the table lives in Iceberg's JDBC catalog on a
private PostgreSQL (test_maintenance_concurrency_jdbc.py), whose commit is an UPDATE of the table's
row; the test holds that row locked, so the maintenance process writes its new files and then waits
in its commit until the test kills it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from test_maintenance_concurrency_jdbc import _jdbc_jar, postgres  # noqa: F401 - the fixture

HERE = Path(__file__).resolve().parent
TABLE_NAME = "inventory_customers"


def conninfo(jdbc_url: str) -> str:
    host_port = jdbc_url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    return f"host={host} port={port} user=postgres dbname=postgres"


def metadata_location(url: str) -> str:
    with psycopg.connect(conninfo(url), autocommit=True) as c:
        return c.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_name = %s", (TABLE_NAME,)
        ).fetchone()[0]


@contextmanager
def commits_held(url: str) -> Iterator[None]:
    """The table's catalog row locked: an Iceberg commit of the table waits until released."""
    with psycopg.connect(conninfo(url)) as c:
        c.execute("SELECT 1 FROM iceberg_tables WHERE table_name = %s FOR UPDATE", (TABLE_NAME,))
        try:
            yield
        finally:
            c.rollback()


WAITING = "FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%%update%%iceberg_tables%%'"


def commit_waiting(url: str) -> bool:
    with psycopg.connect(conninfo(url), autocommit=True) as c:
        return c.execute(f"SELECT count(*) {WAITING}").fetchone()[0] > 0


def drop_dead_commits(url: str) -> None:
    """End the server side of a killed process's waiting commit. PostgreSQL notices a client gone
    only when it next writes to it, so the UPDATE would otherwise run, and commit, once the lock is
    released (as a Glue UpdateTable request already sent may still land): that case is a committed
    compaction, the one this test does not need."""
    with psycopg.connect(conninfo(url), autocommit=True) as c:
        c.execute(f"SELECT pg_terminate_backend(pid) {WAITING}")


def start(role: str, work: Path, url: str, jar: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HERE / "maintenance_kill_worker.py"), role, str(work), url, jar],
        stdout=open(work / f"{role}.log", "w"),
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def wait_until(check, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, f"exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)


def kill_in_its_commit(proc: subprocess.Popen, url: str, log: Path) -> None:
    wait_until(lambda: commit_waiting(url), proc, log)
    proc.kill()  # SIGKILL: no finally, no clean-up, as a Glue timeout or a lost node
    assert proc.wait(timeout=60) == -9
    drop_dead_commits(url)


def test_maintenance_killed_in_a_compaction_and_in_an_expiry_then_run_again_leaves_the_table_whole(
    postgres,  # noqa: F811 - the imported fixture
    tmp_path,
):
    jar = _jdbc_jar()
    assert jar is not None, "no PostgreSQL JDBC driver in .local/connect/plugins: run make setup"
    work = tmp_path / "work"
    work.mkdir()
    data = work / "warehouse" / "killed" / TABLE_NAME / "data"
    metadata = data.parent / "metadata"
    procs: list[subprocess.Popen] = []
    try:
        # 1. Three batches written, then maintenance starts with a compaction; killed in its commit.
        procs.append(p := start("compact", work, postgres, jar))
        wait_until(lambda: (work / "filled").exists(), p, work / "compact.log")
        before = metadata_location(postgres)
        files_before = set(data.glob("*.parquet"))
        with commits_held(postgres):
            (work / "go").touch()
            kill_in_its_commit(p, postgres, work / "compact.log")
        assert metadata_location(postgres) == before  # the compaction never committed...
        assert set(data.glob("*.parquet")) - files_before  # ...but had written its files

        # 2. A snapshot expiry (the next run of a schedule), killed in its commit too.
        metadata_before = set(metadata.iterdir())
        with commits_held(postgres):
            procs.append(p := start("expire", work, postgres, jar))
            kill_in_its_commit(p, postgres, work / "expire.log")
        assert metadata_location(postgres) == before
        assert set(metadata.iterdir()) - metadata_before  # the expiry's metadata, never committed

        # 3. Maintenance runs again, then the orphan clean-up.
        procs.append(p := start("recover", work, postgres, jar))
        assert p.wait(timeout=600) == 0, (work / "recover.log").read_text()[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    result = json.loads((work / "recover.json").read_text())
    print(f"after the kills: {result['maintenance']} | {result['orphans']} | {result['files']} files")
    assert not result["failed"], result
    assert result["state_error"] is None, result["state_error"]  # every key once, the expected values
    assert result["unreferenced"] == [], result["unreferenced"]  # nothing left behind
