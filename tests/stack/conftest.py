"""Fixtures for the local pipeline stack tests: a real MariaDB, tansu broker and Kafka Connect.

One stack per test session, on free (non-default) ports with its own state directory, so the tests
never touch a stack a developer runs under .local/stack. It is torn down at the end, also on failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from stack_helpers import SQL, Stack, free_port


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    state = tmp_path_factory.mktemp("stack")
    ports = {"mariadb": free_port(), "kafka": free_port(), "connect": free_port()}
    env = {
        **os.environ,
        "CDC_STACK_DIR": str(state),
        "CDC_STACK_MARIADB_PORT": str(ports["mariadb"]),
        "CDC_STACK_KAFKA_PORT": str(ports["kafka"]),
        "CDC_STACK_CONNECT_PORT": str(ports["connect"]),
    }
    s = Stack(env, state, ports)
    try:
        # The customer rows exist before the connector registers: they arrive as a snapshot.
        s.cli("up", "--init-sql", str(SQL / "01_create_customer.sql"))
        yield s
    finally:
        s.cli("down", check=False)
