"""One moto server per test module (started once, emptied between tests) and offline credentials."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

ROOT = Path(__file__).resolve().parents[2]

REGION = "eu-west-1"


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Credentials that reach only the moto server, which starts each test empty."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION,
                       "AWS_ENDPOINT_URL": moto_endpoint}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    reset = urllib.request.Request(f"{moto_endpoint}/moto-api/reset", data=b"", method="POST")
    urllib.request.urlopen(reset, timeout=10).close()
    yield moto_endpoint
