"""cloudformation/connector/debezium-postgres.json: the one PostgreSQL connector configuration, rendered
for the local stack exactly as for MSK Connect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "cloudformation" / "connector" / "debezium-postgres.json"

from cdcstack import connect, postgres, sources  # noqa: E402
from cdctools import connector_config  # noqa: E402

VALUES = {
    "DB_HOST": "127.0.0.1",
    "DB_PORT": "15432",
    "DB_USER": "debezium",
    "DB_PASSWORD": "${file:/secrets/debezium-postgres.properties:password}",
    "DB_NAME": "salesdb",
    "SCHEMA_INCLUDE_LIST": "public",
    "TOPIC_PREFIX": "salesdb",
    "TRANSACTION_METADATA": "false",
    "SLOT_NAME": "salesdb_cdc",
    "PUBLICATION_NAME": "dbz_publication",
}


def test_the_postgres_template_renders_the_settings_the_pipeline_relies_on() -> None:
    config = connector_config.render(TEMPLATE, VALUES)

    assert config["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert config["plugin.name"] == "pgoutput"
    assert config["publication.autocreate.mode"] == "filtered"
    assert config["slot.name"] == "salesdb_cdc" and config["publication.name"] == "dbz_publication"
    # What the job decodes: exact decimals, schemas in every message, a tombstone after a delete.
    assert config["decimal.handling.mode"] == "precise"
    assert config["key.converter.schemas.enable"] == config["value.converter.schemas.enable"] == "true"
    assert config["tombstones.on.delete"] == "true"
    # A TRUNCATE reaches the job (Debezium skips it by default, and the lake would keep the rows).
    assert config["skipped.operations"] == "none"
    # The heartbeat topic must stay outside the job's topic pattern <prefix>.<schema>.<table>.
    assert config["topic.heartbeat.prefix"] == "salesdb-heartbeat"
    assert config["database.password"] == VALUES["DB_PASSWORD"]
    assert not any(k.startswith("_") for k in config)


def test_every_placeholder_is_named_when_missing() -> None:
    template = json.loads(TEMPLATE.read_text())
    assert connector_config.placeholders(template) == set(VALUES)
    with pytest.raises(connector_config.UnfilledPlaceholderError, match=r"\$\{SLOT_NAME\}"):
        connector_config.render(TEMPLATE, {k: v for k, v in VALUES.items() if k != "SLOT_NAME"})


def test_the_local_stack_registers_the_template_plus_only_topic_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CDC_STACK_DIR", str(tmp_path))
    s = sources.stack_config("postgres")
    config = postgres.connector_config(s, 15432, 19092)
    rendered = connector_config.render(TEMPLATE, {**VALUES, "DB_PASSWORD": config["database.password"]})

    # The template's settings (its transaction topic's creation group included) and the default group's.
    assert config == {**rendered, **connect.topic_creation(s)}
    assert config["database.password"] == f"${{file:{tmp_path / 'secrets' / 'debezium-postgres.properties'}:password}}"
    assert s.connector == "salesdb-pg-cdc" and s.components == ("postgres", "kafka", "connect")


def test_the_debezium_password_reaches_postgres_only_as_a_scram_verifier() -> None:
    verifier = postgres.scram_verifier("secret-pw", salt=b"0123456789abcdef")
    assert verifier.startswith("SCRAM-SHA-256$4096:") and "secret-pw" not in verifier
    # The same password and salt always give the same verifier (RFC 7677 derivation, no randomness).
    assert verifier == postgres.scram_verifier("secret-pw", salt=b"0123456789abcdef")


def test_the_publication_publishes_truncate_in_both_environments() -> None:
    """Both places create the publication without a publish option, so PostgreSQL's default
    (insert, update, delete, truncate) applies and a TRUNCATE reaches the connector."""
    sources = {
        "local": (ROOT / "scripts" / "cdcstack" / "postgres.py").read_text(),
        "cloudformation": (ROOT / "cloudformation" / "cdc-pipeline.yaml").read_text(),
    }
    for where, text in sources.items():
        creates = [line for line in text.splitlines() if "CREATE PUBLICATION" in line]
        assert creates, where
        for line in creates:
            assert "publish" not in line.lower().replace("create publication", ""), (where, line)
            assert "WITH" not in line.upper().split("CREATE PUBLICATION", 1)[1], (where, line)
