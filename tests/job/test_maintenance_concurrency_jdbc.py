"""Compaction in one process, streaming MERGEs in another, on one table: nothing lost, both progress.

This is the deployed situation (the scheduled maintenance job and the streaming job are separate
JVMs). It needs a catalog whose commit is atomic across processes. The Hadoop catalog is not: it
commits by checking that `v<N+1>.metadata.json` does not exist and renaming its file to that name,
under a lock that lives in one JVM, and a local rename replaces an existing file, so two processes
can both "commit" version N+1 and one commit silently disappears. Glue's catalog (on AWS) and
Iceberg's JDBC catalog compare-and-set the metadata pointer instead; here the JDBC catalog runs on a
private PostgreSQL server (Debian's binaries, the PostgreSQL JDBC driver of the Debezium PostgreSQL
plugin folder that scripts/setup-local resolves from pom.xml).
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from processes import free_port

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _postgres_bin() -> Path | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(d) / "postgres").exists() and (Path(d) / "initdb").exists():
            return Path(d)
    return None


def _jdbc_jar() -> str | None:
    local = Path(os.environ.get("CDC_LOCAL_DIR", ROOT / ".local"))
    jars = sorted(glob.glob(str(local / "connect" / "plugins" / "debezium-connector-postgres" / "postgresql-*.jar")))
    return jars[-1] if jars else None


@pytest.fixture
def postgres() -> Iterator[str]:
    """A throw-away PostgreSQL server on 127.0.0.1 (trust auth, nothing else listens): its JDBC URL."""
    bindir = _postgres_bin()
    assert bindir is not None, "PostgreSQL server binaries not installed: run make setup (scripts/setup-stack)"
    run_as = pwd.getpwnam("postgres") if os.geteuid() == 0 else None  # postgres refuses to run as root
    # Outside pytest's tmp dir: that one is private to its owner, and the server runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="cdc-maint-pg-"))
    root.chmod(0o755)
    data, sock = root / "pgdata", root / "pgsock"
    sock.mkdir()
    if run_as:
        shutil.chown(sock, run_as.pw_uid, run_as.pw_gid)

    def demote() -> None:
        if run_as:
            os.setgid(run_as.pw_gid)
            os.setuid(run_as.pw_uid)

    data.mkdir()
    if run_as:
        shutil.chown(data, run_as.pw_uid, run_as.pw_gid)
    init = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
    subprocess.run(init, check=True, capture_output=True, preexec_fn=demote, timeout=120)
    port = free_port()
    server = subprocess.Popen(
        [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
         "-c", f"unix_socket_directories={sock}", "-c", "fsync=off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=demote,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("PostgreSQL did not start") from None
                time.sleep(0.2)
        yield f"jdbc:postgresql://127.0.0.1:{port}/postgres"
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_compaction_in_another_process_beside_streaming_merges_loses_nothing(postgres, tmp_path):
    jar = _jdbc_jar()
    assert jar is not None, (
        "no PostgreSQL JDBC driver in .local/connect/plugins/debezium-connector-postgres: run make setup"
    )
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = {
        role: subprocess.Popen(
            [sys.executable, str(HERE / "maintenance_worker.py"), role, str(work), postgres, jar],
            stdout=open(work / f"{role}.log", "w"),  # noqa: SIM115 - closed with the process
            stderr=subprocess.STDOUT,
            env=env,
        )
        for role in ("stream", "maintain")
    }
    try:
        codes = {role: p.wait(timeout=840) for role, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    logs = {role: (work / f"{role}.log").read_text()[-3000:] for role in procs}
    assert codes == {"stream": 0, "maintain": 0}, logs
    s = json.loads((work / "stream.json").read_text())
    m = json.loads((work / "maintain.json").read_text())
    print(
        f"two processes: {s['batches']} streaming batches, {m['runs']} maintenance runs, {m['compactions']} "
        f"compactions committed, {s['merge_conflicts']} MERGE and {m['conflicts']} maintenance commit conflicts retried"
    )
    assert s["merge_conflicts"] >= 1  # the held MERGE lost to the other process's compaction, ran again
    assert m["compactions"] >= 2  # the one while the MERGE was held, and at least one on its own limits
    assert s["state_error"] is None, s["state_error"]  # cdc_workload.assert_rows: counts, then values
    assert s["actual"] == s["expected"]
    assert {"overwrite", "replace"} <= set(s["operations"])
