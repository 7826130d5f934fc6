"""Fixtures for the local pipeline stack tests: a real MariaDB, Apache Kafka broker and Kafka Connect.

One stack per test session, on free (non-default) ports with its own state directory, so the tests
never touch a stack a developer runs under .local/stack. It is torn down at the end, also on failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pipeline_job import job_running, start_job
from processes import free_port
from stack_helpers import SQL, Stack, run_script, short_dir


@pytest.fixture
def stack_dir() -> Iterator[Path]:
    """A state directory for a second, independent stack in one test."""
    state = short_dir("cdc-other-")
    yield state / "stack"
    shutil.rmtree(state, ignore_errors=True)


@contextmanager
def private_stack(
    prefix: str, source: str, init_sql: Path, wire_format: str = "json", transactions: str = "ignore"
) -> Iterator[Stack]:
    """A stack on free ports with its own state directory, `source` as the database, `wire_format`
    on the topics and `transactions` as CDC_STACK_TRANSACTIONS (keep: the connector's transaction
    metadata on, the job with --transactions keep), whatever the developer's shell selects; torn down
    and removed at the end, also on failure."""
    state = short_dir(prefix)
    db_port = "mariadb" if source == "mysql" else "postgres"
    ports = {db_port: free_port(), "kafka": free_port(), "connect": free_port(), "registry": free_port()}
    env = {
        **os.environ,
        "CDC_STACK_DIR": str(state),
        "CDC_STACK_SOURCE": source,
        "CDC_STACK_FORMAT": wire_format,
        "CDC_STACK_TRANSACTIONS": transactions,
        "CDC_STACK_REGISTRY_PORT": str(ports["registry"]),
        f"CDC_STACK_{db_port.upper()}_PORT": str(ports[db_port]),
        "CDC_STACK_KAFKA_PORT": str(ports["kafka"]),
        "CDC_STACK_KAFKA_CONTROLLER_PORT": str(free_port()),
        "CDC_STACK_CONNECT_PORT": str(ports["connect"]),
    }
    s = Stack(env, state, ports)
    try:
        s.cli("up", "--init-sql", str(init_sql))
        yield s
    finally:
        s.cli("down", check=False)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    # The customer rows exist before the connector registers: they arrive as a snapshot.
    with private_stack("cdc-stack-", "mysql", SQL / "01_create_customer.sql") as s:
        yield s


@pytest.fixture(scope="session")
def pg_stack() -> Iterator[Stack]:
    """The same stack with PostgreSQL as the source (local-stack --source postgres), with the
    wire format avro: PostgreSQL's end-to-end tests in Avro, MariaDB's in JSON (test_pipeline_end_to_end.py)
    and Avro (test_pipeline_failures.py). CDC_CAPTURE_FIXTURES=1 runs it in JSON: its tests then keep
    the connector's JSON messages as fixtures (the Avro ones: tests/stack/capture_avro_fixtures.py).
    With transaction metadata on and the job keeping whole transactions (CDC_STACK_TRANSACTIONS=keep),
    as MariaDB's test_pipeline_failures.py: both engines' read point under a crash."""
    wire_format = "json" if os.environ.get("CDC_CAPTURE_FIXTURES") == "1" else "avro"
    init = SQL / "postgres" / "01_create_customer.sql"
    with private_stack("cdc-pgstack-", "postgres", init, wire_format, transactions="keep") as s:
        yield s


@pytest.fixture(scope="module")
def job(request: pytest.FixtureRequest) -> Iterator[Stack]:
    """A stack of its own plus the job on it, one per test module that asks for it (those modules
    change the schema and data a lot; two modules run in two workers side by side), in the module's
    WIRE_FORMAT (default json) and TRANSACTIONS (CDC_STACK_TRANSACTIONS, default ignore)."""
    wire_format = getattr(request.module, "WIRE_FORMAT", "json")
    transactions = getattr(request.module, "TRANSACTIONS", "ignore")
    with private_stack("cdc-pipeline-", "mysql", SQL / "01_create_customer.sql", wire_format, transactions) as s:
        try:
            start_job(s)
            yield s
        finally:
            run_script(s, "local-job", "stop")


@pytest.fixture
def job_is_running(job: Stack) -> None:
    """Each test starts with the job running, whatever the test before it left (a failed crash test
    leaves it stopped): one failure does not cascade into the tests after it."""
    if not job_running(job):
        start_job(job)
