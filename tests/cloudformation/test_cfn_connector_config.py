"""The MSK connector's configuration comes from cloudformation/connector/debezium-mysql.json, whole (the
WireFormat json variant; with avro, test_cfn_wire_format checks that only the converters change)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cdcdeploy import templates
from cfn_helpers import resolve_variant, resources_of, sub_parts, walk

SOURCE = templates.CFN_DIR / "connector" / "debezium-mysql.json"


def connector_config(template: dict[str, Any]) -> dict[str, Any]:
    (conn,) = resources_of(template, "AWS::KafkaConnect::Connector").values()
    return conn["Properties"]["ConnectorConfiguration"]


@pytest.fixture(scope="module")
def json_template(raw_template: dict[str, Any]) -> dict[str, Any]:
    return resolve_variant(raw_template, WireFormat="json")


def test_every_key_of_the_source_file_reaches_the_connector(json_template: dict[str, Any]) -> None:
    config = connector_config(json_template)
    keys = templates.source_keys(SOURCE)
    assert len(keys) >= 20
    assert [k for k in keys if k not in config] == []


def test_constant_settings_arrive_unchanged_and_placeholders_become_stack_references(
    json_template: dict[str, Any],
) -> None:
    raw = json.loads(SOURCE.read_text(encoding="utf-8"))
    config = connector_config(json_template)
    names = set(json_template["Parameters"]) | set(json_template["Resources"]) | {"AWS::StackName", "AWS::Region"}
    for key, value in raw.items():
        if key.startswith("_"):
            continue
        if "${" not in value:
            assert config[key] == value, key
            continue
        sub, variables = sub_parts(config[key])
        # Every CloudFormation reference left in the value names a parameter or resource of the stack,
        # or a variable of the Sub whose value does.
        for ref in re.findall(r"\$\{([^}]+)\}", sub):
            if ref in variables and isinstance(variables[ref], str):
                continue  # a value chosen by a condition (resolved in this variant)
            if ref in variables:
                refs = [v for _, v in walk(variables[ref]) if isinstance(v, str)]
                assert any(r.split(".")[0] in names for r in refs), f"{key}: ${{{ref}}} = {variables[ref]}"
                continue
            assert ref.split(".")[0] in names, f"{key}: ${{{ref}}}"
        assert not templates.PLACEHOLDER.search(sub), f"{key} still has a source placeholder"


def test_source_settings_are_not_copied_into_the_template_by_hand() -> None:
    text = templates.SOURCE_TEMPLATE.read_text(encoding="utf-8")
    for key in templates.source_keys(SOURCE):
        if key == "connector.class":  # the placeholder line of the unrendered template names it
            continue
        assert f"{key}:" not in text, f"{key} is written in cdc-pipeline.yaml; it belongs in {SOURCE.name}"


def test_msk_only_settings_cannot_override_the_source_file(tmp_path: Path) -> None:
    src = tmp_path / "connector.json"
    src.write_text(json.dumps({"_comment": "x", "a": "1", "topic.prefix": "${TOPIC_PREFIX}"}), encoding="utf-8")
    resource = {
        "Metadata": {"Render": {"Source": src.name, "Values": {"TOPIC_PREFIX": "t"}, "MskOnly": {"a": "2"}}},
    }
    with pytest.raises(templates.RenderError, match="must not override"):
        templates.render_connector_configuration(resource, tmp_path)


def test_a_placeholder_without_a_value_fails_the_build(tmp_path: Path) -> None:
    src = tmp_path / "connector.json"
    src.write_text(json.dumps({"database.hostname": "${DB_HOST}"}), encoding="utf-8")
    resource = {"Metadata": {"Render": {"Source": src.name, "Values": {}}}}
    with pytest.raises(ValueError, match="DB_HOST"):
        templates.render_connector_configuration(resource, tmp_path)


def test_rendering_uses_the_shared_connector_config_module_when_present(tmp_path: Path) -> None:
    from cdctools import connector_config

    values = {"DB_HOST": "h", "DB_PORT": "3306", "DB_USER": "u", "DB_PASSWORD": "p", "DB_SERVER_ID": "1",
              "DB_INCLUDE_LIST": "d", "TOPIC_PREFIX": "t", "KAFKA_BOOTSTRAP_SERVERS": "b:9098",
              "TRANSACTION_METADATA": "false"}  # fmt: skip
    assert templates.render_connector(SOURCE, values) == connector_config.render(SOURCE, values)
    assert templates.render_connector(SOURCE, values) == templates._render_fallback(SOURCE, values)


def test_worker_configuration_is_the_properties_file_named_by_its_hash(template: dict[str, Any]) -> None:
    (worker,) = resources_of(template, "AWS::KafkaConnect::WorkerConfiguration").values()
    props = worker["Properties"]
    source = (templates.CFN_DIR / "connector" / "msk-worker.properties").read_text()
    content = base64.b64decode(props["PropertiesFileContent"]).decode()
    # Every setting of the file, in order, and nothing else: its comments and blank lines are left out.
    settings = [line for line in source.splitlines() if line.strip() and not line.startswith("#")]
    assert content.splitlines() == settings
    assert props["Name"]["Fn::Sub"] == "${AWS::StackName}-worker-" + templates.worker_hash_of_file()
    lines = dict(line.split("=", 1) for line in content.splitlines())
    assert lines["key.converter"] == lines["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    assert lines["key.converter.schemas.enable"] == lines["value.converter.schemas.enable"] == "true"


def test_a_comment_edit_leaves_the_worker_configuration_and_its_name_unchanged(tmp_path: Path) -> None:
    source = (templates.CFN_DIR / "connector" / "msk-worker.properties").read_bytes()
    commented = b"# an operator's note\n\n" + source.replace(b"\n# ", b"\n#   reworded: ", 1) + b"\n   \n"
    assert templates.worker_properties(commented) == templates.worker_properties(source)
    edited = tmp_path / "msk-worker.properties"
    edited.write_bytes(commented)
    assert templates.worker_hash_of_file(edited) == templates.worker_hash_of_file()
    # A changed setting is a new configuration with a new name.
    edited.write_bytes(source + b"offset.flush.interval.ms=20000\n")
    assert templates.worker_hash_of_file(edited) != templates.worker_hash_of_file()


def test_the_connector_may_still_create_and_describe_its_schema_history_topic(template: dict[str, Any]) -> None:
    # The stack makes <prefix>.schema-history first (test_cfn_schema_history_topic.py); Debezium checks
    # that it exists and reads its settings, and creates it itself when it is gone.
    config = connector_config(template)
    assert config["schema.history.internal.kafka.topic"] == {"Fn::Sub": "${TopicPrefix}.schema-history"}
    topics = template["Resources"]["ConnectRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"][1]
    assert {"kafka-cluster:CreateTopic", "kafka-cluster:DescribeTopicDynamicConfiguration"} <= set(topics["Action"])
    assert any(str(r).endswith("/${TopicPrefix}.*'}") or "${TopicPrefix}.*" in str(r) for r in topics["Resource"])


def test_connect_role_may_use_debeziums_schema_history_consumer_group(template: dict[str, Any]) -> None:
    # Debezium 3.1 (HistorizedRelationalDatabaseConnectorConfig) names it <topic.prefix>-schemahistory.
    statements = template["Resources"]["ConnectRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    (groups,) = [s for s in statements if s["Sid"] == "Groups"]
    arns = [r["Fn::Sub"][0] for r in groups["Resource"]]
    assert any(a.endswith("group/${Name}/${Uuid}/${TopicPrefix}-schemahistory") for a in arns)
    assert any(a.endswith("group/${Name}/${Uuid}/__amazon_msk_connect_*") for a in arns)
