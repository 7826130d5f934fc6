"""Operating the local stack: idempotent start, clear errors, restarts without losing events."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from processes import free_port
from stack_helpers import CLI, CUSTOMER_TOPIC, Event, Stack, by_key

pytestmark = pytest.mark.stack


def _created_once(events: list[Event], ids: range) -> bool:
    return all(len([e for e in by_key(events, cust_id=i) if e.op == "c"]) >= 1 for i in ids)


def _separate_stack_env(state: Path, **ports: int) -> dict[str, str]:
    """An environment for a second, independent stack (own state dir and ports)."""
    env = {
        **os.environ,
        "CDC_STACK_DIR": str(state),
        "CDC_STACK_MARIADB_PORT": str(ports.get("mariadb") or free_port()),
        "CDC_STACK_KAFKA_PORT": str(ports.get("kafka") or free_port()),
        "CDC_STACK_KAFKA_CONTROLLER_PORT": str(free_port()),
        "CDC_STACK_CONNECT_PORT": str(ports.get("connect") or free_port()),
        "CDC_STACK_TIMEOUT": "30",
    }
    return env


def test_up_again_leaves_running_components_alone_and_status_reports_them(stack: Stack) -> None:
    pids = stack.pids()
    res = stack.cli("up")

    assert stack.pids() == pids
    for component in ("mariadb", "kafka", "connect"):
        assert f"{component}: already running (pid {pids[component]}" in res.stdout
    status = stack.cli("status")
    for component, port in stack.ports.items():
        if component == "registry" and stack.env.get("CDC_STACK_FORMAT", "json") != "avro":
            continue  # the schema registry runs only for --format avro
        line = next(x for x in status.stdout.splitlines() if x.startswith(component))
        assert str(pids[component]) in line and str(port) in line and " ok: " in line
    assert "RUNNING" in status.stdout


def test_a_taken_port_is_reported_with_the_variable_that_moves_it(stack_dir: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        env = _separate_stack_env(stack_dir, kafka=taken)
        res = subprocess.run([str(CLI), "up"], env=env, capture_output=True, text=True, timeout=60)

    assert res.returncode == 1
    assert f"port {taken}" in res.stderr and "already in use" in res.stderr
    assert "CDC_STACK_KAFKA_PORT" in res.stderr
    # Ports are checked before anything starts: nothing was left running.
    assert not list((stack_dir / "run").glob("*.json"))


def test_a_component_that_fails_to_start_shows_the_end_of_its_log(stack_dir: Path) -> None:
    # A data directory without the system tables: mariadbd starts and aborts at once.
    (stack_dir / "mariadb" / "data" / "mysql").mkdir(parents=True)
    env = _separate_stack_env(stack_dir)
    res = subprocess.run([str(CLI), "up"], env=env, capture_output=True, text=True, timeout=120)

    assert res.returncode == 1
    assert "mariadb exited with code" in res.stderr
    assert "privilege tables" in res.stderr  # mariadbd's own words, from its log
    assert not list((stack_dir / "run").glob("*.json"))


def test_binlog_format_other_than_row_stops_up_with_what_to_set(stack: Stack) -> None:
    stack.sql("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        res = stack.cli("up", check=False)
    finally:
        stack.sql("SET GLOBAL binlog_format = 'ROW'")

    assert res.returncode == 1
    assert "not configured for CDC" in res.stderr
    assert "binlog_format is STATEMENT" in res.stderr and "binlog_format=ROW" in res.stderr


def test_kafka_connect_restart_resumes_without_losing_or_repeating_events(stack: Stack) -> None:
    stack.insert_customer(201)
    stack.events(CUSTOMER_TOPIC, lambda ev: _created_once(ev, range(201, 202)))

    stack.cli("down", "connect")
    stack.insert_customer(202)  # written while nobody reads the binlog
    stack.insert_customer(203)
    stack.cli("up")
    stack.insert_customer(204)

    events = stack.events(CUSTOMER_TOPIC, lambda ev: _created_once(ev, range(201, 205)))
    for cust_id in range(201, 205):
        assert [e.op for e in by_key(events, cust_id=cust_id)] == ["c"], cust_id


def test_mariadb_restart_resumes_without_losing_or_repeating_events(stack: Stack) -> None:
    stack.insert_customer(301)
    stack.events(CUSTOMER_TOPIC, lambda ev: _created_once(ev, range(301, 302)))

    stack.cli("down", "mariadb")
    res = stack.cli("up")
    assert "mariadb: starting" in res.stdout
    stack.insert_customer(302)

    events = stack.events(CUSTOMER_TOPIC, lambda ev: _created_once(ev, range(301, 303)))
    for cust_id in (301, 302):
        assert [e.op for e in by_key(events, cust_id=cust_id)] == ["c"], cust_id
    # The data written before the restart is still there (own data directory, clean shutdown).
    assert stack.sql("SELECT COUNT(*) FROM customer WHERE cust_id IN (301, 302)").strip().endswith("2")


def _committed(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_a_broker_restart_keeps_topics_records_and_committed_offsets(stack: Stack) -> None:
    stack.insert_customer(501)
    before = stack.events(CUSTOMER_TOPIC, lambda ev: _created_once(ev, range(501, 502)))
    group = f"restart-check-{os.getpid()}"
    _commit(stack.bootstrap, group, CUSTOMER_TOPIC, before[-1].offset + 1)
    pids = stack.pids()

    stack.cli("down", "kafka")
    assert "kafka" not in stack.pids() and stack.pids()["connect"] == pids["connect"]  # Connect stays up
    stack.insert_customer(502)  # Debezium reads it while the broker is away and sends it when it is back
    res = stack.cli("up")
    assert "kafka: starting" in res.stdout and "formatting" not in res.stdout  # the same log directory
    assert "connector: registered" not in res.stdout  # its config survived in _connect-configs
    assert stack.pids()["connect"] == pids["connect"]
    stack.insert_customer(503)

    events = stack.events(CUSTOMER_TOPIC, lambda ev: _created_once(ev, range(501, 504)))
    # Every record from before the restart is still there, at its offset: no topic was recreated,
    # nothing was snapshotted again.
    assert [(e.offset, e.key, e.op) for e in events[: len(before)]] == [(e.offset, e.key, e.op) for e in before]
    for cust_id in (501, 503):
        assert [e.op for e in by_key(events, cust_id=cust_id)] == ["c"], cust_id
    # The insert written while the broker was away may arrive twice (the producer retries a send
    # whose acknowledgement was lost: Connect is at-least-once); a repeat is the same binlog event,
    # which the job's position guard absorbs.
    resent = by_key(events, cust_id=502)
    assert {e.op for e in resent} == {"c"}
    assert (
        len({(e.payload["source"]["file"], e.payload["source"]["pos"], e.payload["source"]["row"]) for e in resent})
        == 1
    )
    assert _committed(stack.bootstrap, group, CUSTOMER_TOPIC) == before[-1].offset + 1
