"""Both modes of the pipeline template: demo (the stack creates the VPC, the database and a client that
seeds it) and an existing network and database (ExistingVpcId and the ExistingDb* parameters), where
nothing of the demo source is created and every piece that reaches the database uses the given one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cfn_helpers import failed_assertions, resolve_variant, resources_of, walk
from project_rules import DEMO_SOURCE_TYPES

EXISTING = {
    "ExistingVpcId": "vpc-0a1b2c3d4e5f60718",
    "ExistingSubnetIds": "subnet-0a1b2c3d4e5f60718,subnet-0f1e2d3c4b5a69788",
    "ExistingSubnetAz": "eu-west-1a",
    "ExistingDbHost": "orders.cluster-abc.eu-west-1.rds.amazonaws.com",
    "ExistingDbSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:debezium-AbCdEf",
    "ExistingDbSecurityGroupId": "sg-0a1b2c3d4e5f60718",
}
# What only the demo mode may create: the lint rule's list (E9006).
DEMO_ONLY_TYPES = set(DEMO_SOURCE_TYPES)
VARIANTS = [
    pytest.param({}, id="demo-mysql"),
    pytest.param({"SourceEngine": "postgres"}, id="demo-postgres"),
    pytest.param(EXISTING, id="existing-mysql"),
    pytest.param(EXISTING | {"SourceEngine": "postgres", "ExistingDbPort": "6432"}, id="existing-postgres"),
]


def references(node: Any) -> set[str]:
    """Every resource or parameter name a Ref, GetAtt or Sub of this node refers to."""
    names: set[str] = set()
    for _, value in walk(node):
        if not isinstance(value, dict) or len(value) != 1:
            continue
        ((fn, arg),) = value.items()
        if fn == "Ref":
            names.add(arg)
        elif fn == "Fn::GetAtt":
            names.add(arg[0])
        elif fn == "Fn::Sub":
            text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
            names |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text) if m not in local}
    return names


@pytest.mark.parametrize("parameters", VARIANTS)
def test_every_variant_passes_its_rules_and_refers_only_to_what_it_creates(
    raw_template: dict[str, Any], parameters: dict[str, str]
) -> None:
    assert failed_assertions(raw_template, **parameters) == []
    variant = resolve_variant(raw_template, **parameters)
    known = set(variant["Resources"]) | set(variant["Parameters"]) | {
        "AWS::StackName", "AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::NoValue", "AWS::URLSuffix"
    }  # fmt: skip
    for name, body in {**variant["Resources"], **variant["Outputs"]}.items():
        missing = references(body) - known
        assert not missing, f"{name} refers to {missing}, which this variant does not create"
        depends = body.get("DependsOn", [])
        for target in [depends] if isinstance(depends, str) else depends:
            assert target in variant["Resources"], f"{name} depends on {target}, which this variant does not create"


def test_with_an_existing_network_and_database_nothing_of_the_demo_source_is_created(
    raw_template: dict[str, Any], template: dict[str, Any]
) -> None:
    for engine in ("mysql", "postgres"):
        variant = resolve_variant(raw_template, SourceEngine=engine, **EXISTING)
        created = {r["Type"] for r in variant["Resources"].values()}
        assert not created & DEMO_ONLY_TYPES, created & DEMO_ONLY_TYPES
        assert {"ClientInstanceId", "DatabaseMasterSecretArn"}.isdisjoint(variant["Outputs"])
    # ... which the demo mode does create.
    assert {r["Type"] for r in template["Resources"].values()} >= DEMO_ONLY_TYPES


def test_the_pipeline_runs_in_the_given_vpc_and_subnets(raw_template: dict[str, Any]) -> None:
    variant = resolve_variant(raw_template, **EXISTING)
    res = variant["Resources"]
    groups = resources_of(variant, "AWS::EC2::SecurityGroup")
    assert set(groups) == {
        "ConnectSecurityGroup",
        "GlueSecurityGroup",
        "MskSecurityGroup",
        "SchemaHistoryTopicSecurityGroup",
    }
    assert all(g["Properties"]["VpcId"] == {"Ref": "ExistingVpcId"} for g in groups.values())
    subnets = {"Ref": "ExistingSubnetIds"}
    assert res["MskCluster"]["Properties"]["VpcConfigs"][0]["SubnetIds"] == subnets
    assert res["Connector"]["Properties"]["KafkaCluster"]["ApacheKafkaCluster"]["Vpc"]["Subnets"] == subnets
    glue = res["GlueNetworkConnection"]["Properties"]["ConnectionInput"]["PhysicalConnectionRequirements"]
    assert glue["SubnetId"] == {"Fn::Select": [0, subnets]}
    assert glue["AvailabilityZone"] == {"Ref": "ExistingSubnetAz"}


@pytest.mark.parametrize(
    ("engine", "port", "expected_port"),
    [("mysql", "0", "3306"), ("postgres", "0", "5432"), ("mysql", "3307", {"Ref": "ExistingDbPort"})],
)
def test_the_connector_reads_the_existing_database_with_the_given_secret(
    raw_template: dict[str, Any], engine: str, port: str, expected_port: Any
) -> None:
    variant = resolve_variant(raw_template, SourceEngine=engine, ExistingDbPort=port, **EXISTING)
    (conn,) = resources_of(variant, "AWS::KafkaConnect::Connector").values()
    config = conn["Properties"]["ConnectorConfiguration"]
    assert config["database.hostname"] == {"Fn::Sub": ["${DbHost}", {"DbHost": {"Ref": "ExistingDbHost"}}]}
    assert config["database.port"] == {"Fn::Sub": ["${DbPort}", {"DbPort": expected_port}]}
    assert config["database.password"] == {
        "Fn::Sub": [
            "{{resolve:secretsmanager:${DbSecret}:SecretString:password}}",
            {"DbSecret": {"Ref": "ExistingDbSecretArn"}},
        ]
    }
    # The database's own security group gets one rule: that port from the connector's workers.
    ingress = variant["Resources"]["DatabaseFromConnect"]["Properties"]
    assert ingress["GroupId"] == {"Ref": "ExistingDbSecurityGroupId"}
    assert ingress["SourceSecurityGroupId"] == {"Ref": "ConnectSecurityGroup"}
    wanted = expected_port if isinstance(expected_port, dict) else int(expected_port)
    assert ingress["FromPort"] == ingress["ToPort"] == wanted
    egress = variant["Resources"]["ConnectToDatabase"]["Properties"]
    assert egress["DestinationSecurityGroupId"] == {"Ref": "ExistingDbSecurityGroupId"}
    assert egress["FromPort"] == wanted
    assert variant["Outputs"]["DatabaseEndpoint"]["Value"] == {"Ref": "ExistingDbHost"}


def test_the_connector_waits_for_the_seeding_client_in_demo_mode_only(
    raw_template: dict[str, Any], template: dict[str, Any]
) -> None:
    existing = resolve_variant(raw_template, **EXISTING)
    for variant in (template, existing):
        assert "SourceReady" in variant["Resources"]["Connector"]["DependsOn"]
    assert "ClientInstance" in references(template["Resources"]["SourceReady"])
    assert "ClientInstance" not in references(existing["Resources"]["SourceReady"])
    assert template["Resources"]["ClientInstance"]["CreationPolicy"]["ResourceSignal"]["Count"] == 1


@pytest.mark.parametrize("missing", sorted(k for k in EXISTING if k != "ExistingVpcId"))
def test_an_incomplete_existing_source_is_refused_naming_what_is_missing(
    raw_template: dict[str, Any], missing: str
) -> None:
    parameters = EXISTING | {missing: ""}
    (failure,) = failed_assertions(raw_template, **parameters)
    assert missing in failure


def test_existing_database_parameters_without_an_existing_vpc_are_refused(raw_template: dict[str, Any]) -> None:
    (failure,) = failed_assertions(raw_template, ExistingDbHost="db.example.com")
    assert "ExistingVpcId" in failure
    assert failed_assertions(raw_template) == []
