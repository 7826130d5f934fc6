"""A captured database that stays quiet while other databases of its server write, longer than the
server keeps its log, then a Kafka Connect restart (MSK Connect restarts workers when it patches
them): the connector's heartbeats (cloudformation/connector/*.json) keep its stored position inside
the log the server still has, so it resumes, and the lake still equals the source.

PostgreSQL: another database writes more WAL than max_slot_wal_keep_size lets the slot hold; only
the heartbeat row (heartbeat.action.query) lets the connector confirm a newer position (without it
the slot is lost). MariaDB: its connector's heartbeats, which locally need no purge test (below).

Each test has a stack of its own; the connector's heartbeat interval is set to one second over
Connect's REST API (the shipped 60 s would make the test minutes long). CDC_CAPTURE_FIXTURES=1
keeps the heartbeat messages as fixtures (tests/fixtures/debezium/*/heartbeat_*.json)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from cdc_events import FIXTURES
from conftest import private_stack
from stack_helpers import SQL, Stack, reconciled, run_script
from stack_types import raw_messages

pytestmark = pytest.mark.stack

HEARTBEAT_TOPIC = "salesdb-heartbeat.salesdb"


def beat_every_second(stack: Stack) -> None:
    """The running connector's config with heartbeat.interval.ms=1000, written back over REST."""
    from cdcstack.connect import http

    base = f"http://127.0.0.1:{stack.ports['connect']}/connectors"
    status, names = http("GET", base)
    assert status == 200 and len(names) == 1, names
    status, config = http("GET", f"{base}/{names[0]}/config")
    assert status == 200 and int(config["heartbeat.interval.ms"]) > 0, config  # shipped with heartbeats
    status, body = http("PUT", f"{base}/{names[0]}/config", {**config, "heartbeat.interval.ms": "1000"}, timeout=30)
    assert status in (200, 201), body


def restart_connect(stack: Stack) -> None:
    stack.cli("down", "connect")
    res = stack.cli("up", check=False)
    assert res.returncode == 0, f"the connector did not resume after the quiet period:\n{res.stdout}\n{res.stderr}"


def keep(name: str, message: dict[str, Any]) -> None:
    if os.environ.get("CDC_CAPTURE_FIXTURES") == "1":
        (FIXTURES / name).write_text(json.dumps(message, indent=1, ensure_ascii=False) + "\n")


def test_mariadb_connector_sends_heartbeats_while_its_database_is_quiet() -> None:
    # Locally the stored binlog position follows other databases' writes even without heartbeats:
    # MariaDB replaces its own events with dummy query events for a MySQL-protocol replica, which
    # Debezium records as schema changes with their position. MySQL (RDS) sends none, so there only
    # the heartbeats move it (docs/DEPLOY.md, "Heartbeats"); here: that they are sent, and how.
    with private_stack("cdc-quietm-", "mysql", SQL / "01_create_customer.sql") as s:
        beat_every_second(s)
        s.sql("CREATE DATABASE otherdb; CREATE TABLE otherdb.t (id INT PRIMARY KEY, v TEXT)")
        for i in range(3):
            s.sql(f"INSERT INTO otherdb.t VALUES ({i}, 'other database')")
            time.sleep(1)
        beats = raw_messages(s, HEARTBEAT_TOPIC, lambda ms: len(ms) >= 3)
        assert {b["key"]["payload"]["serverName"] for b in beats} == {"salesdb"}
        assert all(b["value"]["schema"]["name"] == "io.debezium.connector.common.Heartbeat" for b in beats)
        keep("mariadb/heartbeat_topic.json", beats[-1])


PG_WAL_KEEP_MB = 64
STEP_MB = 8  # WAL the other database writes between two looks at the slot


def slot_lag_mb(stack: Stack) -> float:
    """How far the connector's confirmed position is behind the server's WAL, in MB."""
    out = stack.sql(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) / 1048576.0"
        " FROM pg_replication_slots WHERE slot_name = 'salesdb_cdc'"
    )
    return float(out.strip().splitlines()[-1])


def follows_within(stack: Stack, mb: float, seconds: float = 90) -> float:
    """Waits until the slot's confirmed position is less than `mb` behind; the lag it reached. The
    heartbeat row is the only captured write: a connector without it never gets there."""
    deadline, lag = time.monotonic() + seconds, slot_lag_mb(stack)
    while lag >= mb and time.monotonic() < deadline:
        time.sleep(1)
        lag = slot_lag_mb(stack)
    return lag


def test_postgres_quiet_while_other_databases_fill_the_wal_keeps_its_slot_and_nothing_is_lost() -> None:
    with private_stack("cdc-quietp-", "postgres", SQL / "postgres" / "01_create_customer.sql") as s:
        res = run_script(s, "local-job", "start", "--source", "postgres")
        assert res.returncode == 0, res.stdout + res.stderr
        try:
            beat_every_second(s)
            reconciled(s, "--source", "postgres")
            # A short retention: the slot may hold 64 MB of WAL; the other database writes 160 MB, in
            # steps of 8 MB with a checkpoint each (a checkpoint is where a slot too far behind is lost).
            # After each step the confirmed position must come within half the retention: the bound
            # is the connector's, not the machine's speed (a loaded machine only waits longer).
            s.sql(f"ALTER SYSTEM SET max_slot_wal_keep_size = '{PG_WAL_KEEP_MB}MB'; SELECT pg_reload_conf()")
            s.cli("sql", "-D", "postgres", "-e", "CREATE DATABASE otherdb")
            other = ("sql", "-D", "otherdb", "-e")
            s.cli(*other, "CREATE TABLE t (id serial PRIMARY KEY, v text)")
            s.sql("UPDATE customer SET city = 'Last change before the quiet' WHERE cust_id = 3")
            rows = STEP_MB * 1024 * 1024 // 1000  # ~1 kB a row
            for step in range(160 // STEP_MB):
                s.cli(*other, f"INSERT INTO t (v) SELECT repeat(md5(g::text), 30) FROM generate_series(1, {rows}) g")
                s.cli(*other, "CHECKPOINT")
                lag = follows_within(s, PG_WAL_KEEP_MB / 2)
                assert lag < PG_WAL_KEEP_MB / 2, f"step {step}: the slot is {lag:.0f} MB behind the WAL"
            s.cli(*other, "CHECKPOINT")
            slot = s.sql("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'salesdb_cdc'").strip()
            assert slot.splitlines()[-1] in ("reserved", "extended"), slot  # not `lost`
            keep("postgres/heartbeat_topic.json", raw_messages(s, HEARTBEAT_TOPIC, lambda ms: len(ms) >= 2)[-1])
            rows = raw_messages(s, "salesdb.public.cdclake_heartbeat", lambda ms: any(_op(m) == "u" for m in ms))
            keep("postgres/heartbeat_table_u.json", next(m for m in rows if _op(m) == "u"))
            restart_connect(s)
            s.sql("UPDATE customer SET city = 'First change after the restart' WHERE cust_id = 4")
            out = reconciled(s, "--source", "postgres")
            assert "cdclake_heartbeat" not in out  # no lake table of it
            assert not list(Path(s.state, "lake").rglob("*cdclake_heartbeat*"))
        finally:
            run_script(s, "local-job", "stop")


def _op(message: dict[str, Any]) -> str | None:
    return ((message.get("value") or {}).get("payload") or {}).get("op")
