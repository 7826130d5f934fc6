"""Fixtures for the CloudFormation tests: the rendered template, and offline AWS credentials."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import HTTPServer
from pathlib import Path
from typing import Any

import pytest
from cdcdeploy import build, templates
from cfn_helpers import Replies, resolve_variant

REGION = "eu-west-1"


@pytest.fixture(scope="session")
def built_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build") / "cloudformation"
    build.build_templates(out)
    return out


@pytest.fixture(scope="session")
def raw_template(built_dir: Path) -> dict[str, Any]:
    """The rendered pipeline template (long-form intrinsics, plain YAML), every variant in it."""
    return templates.load_template(built_dir / "cdc-pipeline.yaml")


@pytest.fixture(scope="session")
def template(raw_template: dict[str, Any]) -> dict[str, Any]:
    """The rendered pipeline template as deployed with its defaults (SourceEngine=mysql)."""
    return resolve_variant(raw_template)


@pytest.fixture(scope="session")
def pg_template(raw_template: dict[str, Any]) -> dict[str, Any]:
    """The same template deployed with SourceEngine=postgres."""
    return resolve_variant(raw_template, SourceEngine="postgres")


@pytest.fixture(scope="session")
def bootstrap_template(built_dir: Path) -> dict[str, Any]:
    return templates.load_template(built_dir / "bootstrap.yaml")


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials so that nothing can reach a real account."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)


# ---------------------------------------------------------------- CloudFormation's reply URL
@pytest.fixture
def response_url() -> Iterator[str]:
    Replies.received = []
    server = HTTPServer(("127.0.0.1", 0), Replies)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/signed-reply"
    server.shutdown()
    server.server_close()
