"""Loopback ports and child processes, for the tests that start servers of their own (a moto server,
a Kafka broker, a PostgreSQL) outside the local stack."""

from __future__ import annotations

import socket

from cdcbench.motoserver import stop_process
from cdcstack.plumbing import free_port

__all__ = ["free_port", "port_open", "stop_process"]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
