"""scripts/cdctools/connector_config.py: rendering the single connector template per environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "cloudformation" / "connector" / "debezium-mysql.json"
from cdctools import connector_config  # noqa: E402

LOCAL_VALUES = {
    "DB_HOST": "127.0.0.1",
    "DB_PORT": "3307",
    "DB_USER": "debezium",
    "DB_PASSWORD": "${file:/secrets/debezium.properties:password}",
    "DB_SERVER_ID": "184054",
    "DB_INCLUDE_LIST": "salesdb",
    "TOPIC_PREFIX": "salesdb",
    "TRANSACTION_METADATA": "false",
    "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:19092",
}


def test_the_template_renders_with_every_placeholder_filled() -> None:
    config = connector_config.render(TEMPLATE, LOCAL_VALUES)

    assert config["database.hostname"] == "127.0.0.1"
    assert config["schema.history.internal.kafka.topic"] == "salesdb.schema-history"
    # A TRUNCATE reaches the job (Debezium skips it by default, and the lake would keep the rows).
    assert config["skipped.operations"] == "none"
    assert not any("${" in v and not v.startswith("${file:") for v in config.values() if isinstance(v, str))
    assert not any(k.startswith("_") for k in config)


def test_a_config_provider_reference_passes_through_untouched() -> None:
    config = connector_config.render(TEMPLATE, LOCAL_VALUES)

    assert config["database.password"] == "${file:/secrets/debezium.properties:password}"


def test_a_missing_value_names_the_placeholder_and_the_setting(tmp_path: Path) -> None:
    values = {k: v for k, v in LOCAL_VALUES.items() if k != "TOPIC_PREFIX"}

    with pytest.raises(connector_config.UnfilledPlaceholderError) as err:
        connector_config.render(TEMPLATE, values)

    assert "${TOPIC_PREFIX}" in str(err.value)
    assert "topic.prefix" in str(err.value) and "schema.history.internal.kafka.topic" in str(err.value)


def test_an_empty_value_counts_as_missing(tmp_path: Path) -> None:
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"_note": "${IGNORED}", "a": "x-${A}-y", "n": 3}))

    assert connector_config.render(template, {"A": "1"}) == {"a": "x-1-y", "n": 3}
    with pytest.raises(connector_config.UnfilledPlaceholderError, match=r"\$\{A\}"):
        connector_config.render(template, {"A": ""})


def test_substituted_values_are_not_expanded_again(tmp_path: Path) -> None:
    template = tmp_path / "t.json"
    template.write_text(json.dumps({"a": "${A}", "b": "${B}"}))

    assert connector_config.render(template, {"A": "${B}", "B": "2"}) == {"a": "${B}", "b": "2"}


def test_the_command_line_takes_values_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in LOCAL_VALUES.items():
        monkeypatch.setenv(name, value)

    assert connector_config.main([str(TEMPLATE), "--env", "DB_PORT=3308"]) == 0
    assert json.loads(capsys.readouterr().out)["database.port"] == "3308"
    monkeypatch.delenv("DB_HOST")
    assert connector_config.main([str(TEMPLATE), "--env"]) == 1
    assert "${DB_HOST}" in capsys.readouterr().err


def test_the_avro_wire_format_replaces_only_the_converters_with_the_registrys() -> None:
    config = connector_config.render(TEMPLATE, LOCAL_VALUES)
    avro = connector_config.with_wire_format(config, "avro", {"AWS_REGION": "eu-west-1", "REGISTRY_NAME": "cdc"})

    converter = "com.amazonaws.services.schemaregistry.kafkaconnect.AWSKafkaAvroConverter"
    assert avro["key.converter"] == avro["value.converter"] == converter
    assert avro["value.converter.region"] == "eu-west-1" and avro["key.converter.registry.name"] == "cdc"
    assert avro["value.converter.schemaAutoRegistrationEnabled"] == "true"
    assert "value.converter.schemas.enable" not in avro  # JsonConverter's
    kept = {k: v for k, v in config.items() if not k.startswith(("key.converter", "value.converter"))}
    assert {k: avro[k] for k in kept} == kept
    assert connector_config.with_wire_format(config, "json", {}) == config


def test_an_unknown_wire_format_is_refused() -> None:
    with pytest.raises(ValueError, match="choose one of json, avro"):
        connector_config.with_wire_format({}, "protobuf", {})
