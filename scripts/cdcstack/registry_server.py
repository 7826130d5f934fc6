"""The local stack's AWS Glue Schema Registry: moto's Glue API as a server on 127.0.0.1, whose
registries (schemas and their versions, ids included) outlive a restart.

    python registry_server.py PORT STATE_FILE

moto keeps its state in memory and gives every schema version a new random id. The Avro records
on the stack's topics name their schema version by that id, so a registry started again empty
would leave them undecodable: the registries are saved to STATE_FILE (a pickle of moto's own
objects, written only by this process) every two seconds when they changed and at SIGTERM, and
loaded back at start.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"  # the region the local converter and job name (cdcstack/registry.py)


def _backend() -> Any:
    from moto.glue.models import glue_backends

    return glue_backends[ACCOUNT][REGION]


def _state(backend: Any) -> bytes | None:
    try:
        return pickle.dumps((backend.registries, backend.num_schemas, backend.num_schema_versions))
    except RuntimeError:  # a request changed the registries meanwhile: the next tick saves them
        return None


def restore(path: Path) -> None:
    if path.is_file():
        backend = _backend()
        backend.registries, backend.num_schemas, backend.num_schema_versions = pickle.loads(path.read_bytes())


def save(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def main(port: int, path: Path) -> None:
    from moto.server import ThreadedMotoServer

    restore(path)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    print(f"schema registry (moto {REGION}) on 127.0.0.1:{port}, state in {path}", flush=True)
    backend = _backend()
    saved = _state(backend)
    while not stop.wait(2.0):
        data = _state(backend)
        if data is not None and data != saved:
            save(path, data)
            saved = data
    server.stop()
    data = _state(backend)
    if data is not None and data != saved:
        save(path, data)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
