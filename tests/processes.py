"""Loopback ports and child processes, for the tests that start servers of their own (a moto server,
a Kafka broker, a PostgreSQL) outside the local stack."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; a race with another process stays possible)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop_process(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process is still there after `grace` seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
