"""moto as a server in a process of its own, for the tiers whose real clients talk HTTP to AWS.

moto keeps its state in module globals: servers started in the test process share it with each other
and with any `mock_aws`, and one tier's `/moto-api/reset` empties another's. A process per server
keeps each tier's account to itself, whatever xdist puts in the same worker."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from processes import free_port, stop_process

# The same threaded server the in-process tiers use (the `moto_server` command's server dropped
# keep-alive connections the AWS SDK in the job's JVM reused), run in a child Python.
SERVE = (
    "import sys, threading; from moto.server import ThreadedMotoServer; "
    "ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False).start(); "
    "threading.Event().wait()"
)


@contextmanager
def moto_server_process(timeout: float = 60.0) -> Iterator[str]:
    """Start a moto server on a free loopback port, yield its endpoint once it answers, stop it after."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    # Its request log goes to a file: a pipe nobody reads fills up and stalls the server.
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen([sys.executable, "-c", SERVE, str(port)], stdout=log, stderr=log, text=True)
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
