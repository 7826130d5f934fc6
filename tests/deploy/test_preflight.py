"""deploy's preflight checks of your own network and database, against a moto server: each
wrong parameter is named with its fix, and the deploy stops with exit 2 before anything exists."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from cdcdeploy import deploy, network, preflight

REGION = "eu-west-1"


def build_network(nat: bool = False, endpoints: tuple[str, ...] = ()) -> dict[str, str]:
    """A VPC with two private subnets in two zones, a route table on the first, optionally a NAT route
    or these VPC endpoints, a database security group and a Debezium secret: your own network."""
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.1.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]["SubnetId"]
    b = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.2.0/24", AvailabilityZone=f"{REGION}b")["Subnet"]["SubnetId"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=table, SubnetId=a)
    if nat:
        public = ec2.create_subnet(VpcId=vpc, CidrBlock="10.9.3.0/24", AvailabilityZone=f"{REGION}a")["Subnet"]
        eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
        gw = ec2.create_nat_gateway(SubnetId=public["SubnetId"], AllocationId=eip)["NatGateway"]["NatGatewayId"]
        ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=gw)
    for service in endpoints:
        kind = "Gateway" if service in network.GATEWAY_ENDPOINTS else "Interface"
        extra: dict[str, Any] = {"RouteTableIds": [table]} if kind == "Gateway" else {"SubnetIds": [a]}
        ec2.create_vpc_endpoint(
            VpcId=vpc, ServiceName=network.service_name(REGION, service), VpcEndpointType=kind, **extra
        )
    sg = ec2.create_security_group(GroupName="db", Description="database", VpcId=vpc)["GroupId"]
    secret = boto3.client("secretsmanager", region_name=REGION).create_secret(
        Name=f"debezium-{vpc}", SecretString=json.dumps({"username": "debezium", "password": "pw"})
    )["ARN"]
    return {
        "ExistingVpcId": vpc,
        "ExistingSubnetIds": f"{a},{b}",
        "ExistingSubnetAz": f"{REGION}a",
        "ExistingDbHost": "orders.example.internal",
        "ExistingDbSecretArn": secret,
        "ExistingDbSecurityGroupId": sg,
    }


ALL_ENDPOINTS = network.GATEWAY_ENDPOINTS + network.INTERFACE_ENDPOINTS


def problems(values: dict[str, str]) -> list[preflight.Problem]:
    return preflight.run(boto3.Session(region_name=REGION), values, REGION)


def test_a_network_with_every_endpoint_or_a_nat_gateway_passes(aws: str) -> None:
    assert problems(build_network(endpoints=ALL_ENDPOINTS)) == []
    assert problems(build_network(nat=True)) == []


def test_demo_mode_has_nothing_to_check(aws: str) -> None:
    assert problems({"ExistingVpcId": ""}) == []


def test_a_wrong_availability_zone_names_the_subnets_zone(aws: str) -> None:
    values = build_network(nat=True) | {"ExistingSubnetAz": f"{REGION}b"}
    (p,) = problems(values)
    assert "the first subnet" in p.what and p.fix == f"pass --parameter ExistingSubnetAz={REGION}a"


def test_subnets_of_another_vpc_or_of_one_zone_are_refused(aws: str) -> None:
    mine, other = build_network(nat=True), build_network(nat=True)
    values = mine | {
        "ExistingSubnetIds": f"{mine['ExistingSubnetIds'].split(',')[0]},{other['ExistingSubnetIds'].split(',')[1]}"
    }
    assert any("belong to another VPC" in p.what for p in problems(values))
    one_zone = mine | {"ExistingSubnetIds": mine["ExistingSubnetIds"].split(",")[0]}
    assert any("two or more subnets in different Availability Zones" in p.what for p in problems(one_zone))
    missing = mine | {"ExistingVpcId": "vpc-0123456789abcdef0"}
    (p,) = [p for p in problems(missing) if "no such VPC" in p.what]
    assert p.fix.startswith("pass the id of the VPC")


@pytest.mark.parametrize("left_out", ["s3", "kms"])
def test_without_nat_a_missing_endpoint_is_named_with_the_command_that_creates_it(aws: str, left_out: str) -> None:
    values = build_network(endpoints=tuple(e for e in ALL_ENDPOINTS if e != left_out))
    (p,) = problems(values)
    assert network.service_name(REGION, left_out) in p.what
    assert "aws ec2 create-vpc-endpoint" in p.fix


def route_out(values: dict[str, str], kind: str, subnet: int = 0) -> None:
    """A default route out of the VPC through a transit gateway or a (firewall appliance's) network
    interface, on a new route table of the subnet at that index."""
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc, subnet_id = values["ExistingVpcId"], values["ExistingSubnetIds"].split(",")[subnet]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    for old in ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}])[
        "RouteTables"
    ]:
        for a in old["Associations"]:
            ec2.disassociate_route_table(AssociationId=a["RouteTableAssociationId"])
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet_id)
    if kind == "tgw":
        tgw = ec2.create_transit_gateway(Description="to the inspection VPC")["TransitGateway"]["TransitGatewayId"]
        ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", TransitGatewayId=tgw)
    else:
        eni = ec2.create_network_interface(SubnetId=subnet_id)["NetworkInterface"]["NetworkInterfaceId"]
        ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NetworkInterfaceId=eni)


@pytest.mark.parametrize("kind", ["tgw", "eni"])
def test_a_transit_gateway_or_network_interface_route_counts_as_a_way_out(aws: str, kind: str) -> None:
    values = build_network()
    assert problems(values)  # no route out, no endpoint
    route_out(values, kind)
    assert problems(values) == []


def test_with_avro_every_connector_subnet_needs_a_way_to_the_schema_registry(aws: str) -> None:
    values = build_network(nat=True) | {"WireFormat": "avro"}
    second = values["ExistingSubnetIds"].split(",")[1]
    (p,) = problems(values)  # the NAT route is on the first subnet's table only
    assert f"{second} has no route out of the VPC" in p.what and "--assume-egress" in p.fix
    assert network.service_name(REGION, "glue") in p.fix
    route_out(values, "tgw", subnet=1)
    assert problems(values) == []
    assert problems(values | {"WireFormat": "json"}) == []  # the JSON converter calls no AWS API


def test_assume_egress_leaves_routes_unjudged_and_deploy_says_so(aws: str, capsys: pytest.CaptureFixture[str]) -> None:
    values = build_network() | {"WireFormat": "avro"}
    assert problems(values)
    assert preflight.run(boto3.Session(region_name=REGION), values, REGION, assume_egress=True) == []
    wrong_zone = values | {"ExistingSubnetAz": f"{REGION}c"}  # what it can judge it still checks
    (p,) = preflight.run(boto3.Session(region_name=REGION), wrong_zone, REGION, assume_egress=True)
    assert "ExistingSubnetAz" in p.what
    params = [f"{k}={v}" for k, v in wrong_zone.items()]
    assert not deploy.run_preflight(boto3.Session(region_name=REGION), params, REGION, assume_egress=True)
    assert "--assume-egress: the subnets' routes to AWS are not checked" in capsys.readouterr().err


def test_an_unreadable_secret_or_one_without_a_password_is_refused(aws: str) -> None:
    values = build_network(nat=True)
    gone = values | {"ExistingDbSecretArn": values["ExistingDbSecretArn"].replace("debezium-", "nothing-")}
    (p,) = problems(gone)
    assert "cannot read" in p.what and "secretsmanager:GetSecretValue" in p.fix
    boto3.client("secretsmanager", region_name=REGION).put_secret_value(
        SecretId=values["ExistingDbSecretArn"], SecretString=json.dumps({"username": "debezium"})
    )
    (p,) = problems(values)
    assert "the secret has no password" in p.what and "put-secret-value" in p.fix


def test_a_database_security_group_that_is_missing_or_elsewhere_is_refused(aws: str) -> None:
    values = build_network(nat=True)
    (p,) = problems(values | {"ExistingDbSecurityGroupId": "sg-0123456789abcdef0"})
    assert "no such security group" in p.what
    other = build_network(nat=True)["ExistingDbSecurityGroupId"]
    (p,) = problems(values | {"ExistingDbSecurityGroupId": other})
    assert f"not ExistingVpcId={values['ExistingVpcId']}" in p.what


def test_deploy_stops_with_exit_2_and_every_fix_before_building_or_creating_anything(
    aws: str, capsys: pytest.CaptureFixture[str]
) -> None:
    values = build_network(endpoints=("glue",)) | {"ExistingSubnetAz": f"{REGION}c"}
    args = ["--region", REGION, "--stack-name", "orders"]
    for key, value in values.items():
        args += ["--parameter", f"{key}={value}"]
    assert deploy.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("[deploy] preflight:") == 3  # zone, S3 route, interface endpoints
    assert f"fix: pass --parameter ExistingSubnetAz={REGION}a" in err
    assert "3 preflight check(s) failed: nothing was created or changed" in err
    cfn = boto3.client("cloudformation", region_name=REGION)
    assert cfn.describe_stacks()["Stacks"] == []  # not even the bootstrap stack
