"""What a first deployment on a new account needs from the template: demo subnets in zones the user
can choose, a demo database that the seed files fill, and one list of the VPC endpoints the Glue
subnet needs, the same in the template, the docs and deploy."""

from __future__ import annotations

import re
from typing import Any

from cdcdeploy import network, templates
from cfn_helpers import EXISTING_NETWORK as EXISTING
from cfn_helpers import failed_assertions, resolve_variant, resources_of

ROOT = templates.ROOT


def subnet_zones(template: dict[str, Any]) -> dict[str, Any]:
    return {name: r["Properties"]["AvailabilityZone"] for name, r in resources_of(template, "AWS::EC2::Subnet").items()}


def test_demo_subnets_take_the_regions_first_two_zones_unless_demo_zones_are_given(
    raw_template: dict[str, Any], template: dict[str, Any]
) -> None:
    default = subnet_zones(template)
    assert default["PrivateSubnetA"] == {"Fn::Select": [0, {"Fn::GetAZs": ""}]}
    assert default["PublicSubnetB"] == {"Fn::Select": [1, {"Fn::GetAZs": ""}]}
    chosen = subnet_zones(resolve_variant(raw_template, DemoAvailabilityZones="us-east-1b,us-east-1c"))
    for name, zone in chosen.items():
        index = 0 if name.endswith("A") else 1
        assert zone == {"Fn::Select": [index, {"Ref": "DemoAvailabilityZones"}]}, name
    assert failed_assertions(raw_template, DemoAvailabilityZones="us-east-1b,us-east-1c") == []


def test_demo_zones_with_your_own_network_are_refused(raw_template: dict[str, Any]) -> None:
    assert failed_assertions(raw_template, **EXISTING) == []
    (failure,) = failed_assertions(raw_template, **EXISTING, DemoAvailabilityZones="eu-west-1a,eu-west-1b")
    assert failure.startswith("DemoAvailabilityZones places the demo subnets")


def test_demo_mode_refuses_a_source_database_that_the_seed_files_do_not_create(raw_template: dict[str, Any]) -> None:
    (failure,) = failed_assertions(raw_template, SourceDatabase="orders")
    assert "SourceDatabase must stay salesdb" in failure
    # Your own database may have any name.
    assert failed_assertions(raw_template, **EXISTING, SourceDatabase="orders") == []
    # The name the rule insists on is the one the seed files create and fill.
    rule = raw_template["Rules"]["DemoSourceIsSalesdb"]["Assertions"][0]["Assert"]["Fn::Equals"]
    seeded = rule[1]
    assert f"CREATE DATABASE IF NOT EXISTS {seeded};" in (ROOT / "sql" / "01_create_customer.sql").read_text()
    assert f"SET ROLE {seeded}_owner;" in (ROOT / "sql" / "postgres" / "01_create_customer.sql").read_text()


def test_mysql_demo_connector_is_never_on_a_java_11_connect(raw_template: dict[str, Any]) -> None:
    assert raw_template["Parameters"]["KafkaConnectVersion"]["AllowedValues"] == ["3.7.x"]
    assert "ReservedConcurrentExecutions" not in raw_template["Resources"]["BootstrapBrokersFunction"]["Properties"]


def endpoint_services(text: str) -> set[str]:
    """The endpoint service names a text spells com.amazonaws.<region>.<service>, or .<service> after one."""
    text = re.sub(r"\s+", " ", text)
    full = set(re.findall(r"com\.amazonaws\.<region>\.([a-z0-9-]+)", text))
    continued = set(
        re.findall(r"com\.amazonaws\.<region>\.[a-z0-9-]+,((?: \.[a-z0-9-]+,?)*(?: and \.[a-z0-9-]+)?)", text)
    )
    for run in continued:
        full |= set(re.findall(r"\.([a-z0-9-]+)", run))
    return full


def test_the_glue_subnet_endpoints_are_one_list_in_template_docs_and_preflight(raw_template: dict[str, Any]) -> None:
    wanted = set(network.GATEWAY_ENDPOINTS) | set(network.INTERFACE_ENDPOINTS)
    description = raw_template["Parameters"]["ExistingSubnetIds"]["Description"]
    assert endpoint_services(description) == wanted, description
    deploy_md = (ROOT / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    (row,) = [line for line in deploy_md.splitlines() if line.startswith("| `ExistingSubnetIds` |")]
    if "(below)" in row:  # the cell is too long for the table: it is the list item under it
        (row,) = re.findall(r"^- `ExistingSubnetIds`, .*?(?=^- |^$)", deploy_md, re.M | re.S)
    assert endpoint_services(row) == wanted, row


def test_aurora_mysql_binlog_settings_are_documented_in_the_cluster_parameter_group() -> None:
    deploy_md = re.sub(r"\s+", " ", (ROOT / "docs" / "DEPLOY.md").read_text(encoding="utf-8"))
    assert re.search(
        r"on Aurora MySQL these are cluster settings: set them in the DB cluster parameter group", deploy_md
    )
