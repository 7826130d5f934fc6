"""WireFormat: avro (default), the AWS Glue Schema Registry, or json. The connector's converter settings
come from cloudformation/connector/wire-format-avro.json (the file the local stack uses too), the stack
creates the registry, IAM grants exactly the registry calls the converter and the job make, and the job
decodes with --wire_format and spark-avro."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdcdeploy import templates
from cfn_helpers import resolve_variant, resources_of

AVRO = json.loads((templates.CFN_DIR / "connector" / "wire-format-avro.json").read_text())
CONVERTER = "com.amazonaws.services.schemaregistry.kafkaconnect.AWSKafkaAvroConverter"


def _connector(template: dict[str, Any], engine: str, wire_format: str) -> dict[str, Any]:
    variant = resolve_variant(template, SourceEngine=engine, WireFormat=wire_format)
    (conn,) = resources_of(variant, "AWS::KafkaConnect::Connector").values()
    return conn["Properties"]["ConnectorConfiguration"]


def _role_statements(variant: dict[str, Any], role: str) -> list[dict[str, Any]]:
    policies = variant["Resources"][role]["Properties"]["Policies"]
    return [s for p in policies for s in p["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_avro_replaces_the_json_converters_with_the_registrys_and_keeps_every_other_setting(raw_template, engine):
    json_config, avro_config = _connector(raw_template, engine, "json"), _connector(raw_template, engine, "avro")
    assert json_config["value.converter"] == "org.apache.kafka.connect.json.JsonConverter"
    assert avro_config["key.converter"] == avro_config["value.converter"] == CONVERTER
    assert "value.converter.schemas.enable" not in avro_config
    assert avro_config["value.converter.compatibility"] == "NONE"  # key and value: versions of one schema
    assert avro_config["key.converter.registry.name"] == {
        "Fn::Sub": [
            "${RegistryName}",
            {
                "RegistryName": {
                    "Fn::Select": [1, {"Fn::Split": ["registry/", {"Fn::GetAtt": ["SchemaRegistry", "Arn"]}]}]
                }
            },
        ]
    }
    assert {k for k in AVRO if not k.startswith("_")} <= set(avro_config)
    assert not [k for k in json_config if "registry" in k or "adjustment" in k]
    others = {k: v for k, v in json_config.items() if not k.startswith(("key.converter", "value.converter"))}
    assert {k: avro_config[k] for k in others} == others


def test_the_registry_exists_only_with_avro(raw_template):
    assert "SchemaRegistry" not in resolve_variant(raw_template, WireFormat="json")["Resources"]
    registry = resolve_variant(raw_template, WireFormat="avro")["Resources"]["SchemaRegistry"]
    assert registry["Type"] == "AWS::Glue::Registry"


def _registry_actions(statements: list[dict[str, Any]]) -> list[str]:
    listed = [a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]
    return sorted(a for a in listed if a.startswith("glue:") and "Schema" in a)


def test_iam_grants_the_registry_calls_only_with_avro_and_only_in_the_stacks_registry(raw_template):
    json_variant, avro_variant = (
        resolve_variant(raw_template, WireFormat="json"),
        resolve_variant(raw_template, WireFormat="avro"),
    )
    assert _registry_actions(_role_statements(json_variant, "ConnectRole")) == []
    assert _registry_actions(_role_statements(json_variant, "GlueJobRole")) == []
    connect = _role_statements(avro_variant, "ConnectRole")
    assert _registry_actions(connect) == [
        "glue:CreateSchema", "glue:GetSchemaByDefinition", "glue:GetSchemaVersion", "glue:PutSchemaVersionMetadata",
        "glue:RegisterSchemaVersion",
    ]  # fmt: skip
    (write,) = [s for s in connect if s.get("Sid") == "SchemaRegistryWrite"]
    assert all("${AWS::StackName}-debezium" in r["Fn::Sub"] for r in write["Resource"])
    assert _registry_actions(_role_statements(avro_variant, "GlueJobRole")) == ["glue:GetSchemaVersion"]


def test_the_job_reads_the_stacks_wire_format_with_its_glue_versions_spark_avro_shipped(template, raw_template):
    args = template["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]
    assert args["--wire_format"] == {"Ref": "WireFormat"}
    assert "${GlueAvroJarKey}" in args["--extra-jars"]["Fn::Sub"]  # Glue 6.0's Spark 4.1 build
    glue5 = resolve_variant(raw_template, GlueVersion="5.0", TableFormat="hudi", WireFormat="avro")
    jars = glue5["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]["--extra-jars"]["Fn::Sub"]
    assert "${GlueAvro5JarKey}" in jars and "${GlueAvroJarKey}" not in jars  # Spark 3.5's, for Hudi on 5.0
    assert template["Parameters"]["WireFormat"]["Default"] == "avro"
