"""moto as a server in a process of its own: the benchmark's schema registry, and the tests' tiers
whose real clients talk HTTP to AWS (tests/moto_process.py).

moto keeps its state in module globals: servers started in one process share it with each other
and with any `mock_aws`, and one user's `/moto-api/reset` empties another's. A process per server
keeps each user's account to itself."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

# moto's threaded server (the `moto_server` command's server dropped keep-alive connections the AWS
# SDK in a JVM reused), run in a child Python that exits when its parent is gone (a parent killed
# before its `finally` leaves no server behind).
_SERVE = (
    "import os, sys, time; from moto.server import ThreadedMotoServer; parent = os.getppid(); "
    "ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False).start()\n"
    "while os.getppid() == parent: time.sleep(1)\n"
    "os._exit(0)"
)


def stop_process(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process is still there after `grace` seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def moto_server_process(timeout: float = 60.0) -> Iterator[str]:
    """Start a moto server on a free loopback port, yield its endpoint once it answers, stop it after."""
    from cdcstack.plumbing import free_port

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # Its request log goes to a file: a pipe nobody reads fills up and stalls the server.
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen([sys.executable, "-c", _SERVE, str(port)], stdout=log, stderr=log, text=True)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"the moto server exited with {proc.returncode}: {log.read()[-2000:]}")
                try:
                    urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=2).close()
                    break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"the moto server on {endpoint} did not answer within {timeout:.0f} s"
                        ) from None
                    time.sleep(0.2)
            yield endpoint
        finally:
            stop_process(proc)
