"""Checks of your own network and database before deploy creates anything (ExistingVpcId mode).

Each check reads with the deploying credentials what the stack will rely on and, when it is not so,
returns a Problem saying what is wrong and how to fix it; deploy prints them all and exits 2.
The template's Rules catch missing parameters; these catch parameters that name the wrong things.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from cdcdeploy import network

SECRET_KEYS = ("username", "password")  # what the connector's dynamic references resolve


@dataclass(frozen=True)
class Problem:
    what: str
    fix: str

    def line(self) -> str:
        return f"{self.what}\n    fix: {self.fix}"


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def check_subnets(ec2: Any, vpc_id: str, subnet_ids: list[str], subnet_az: str) -> tuple[list[Problem], list[dict]]:
    """The VPC and subnets exist, belong together, span two zones, and the first is in subnet_az.
    Returns the problems and the subnets found in the VPC, the first (Glue) subnet first when it is."""
    try:
        ec2.describe_vpcs(VpcIds=[vpc_id])
    except ClientError as exc:
        if "NotFound" not in _error_code(exc):
            raise
        return [Problem(f"ExistingVpcId={vpc_id}: no such VPC in this account and region",
                        "pass the id of the VPC your database is in (aws ec2 describe-vpcs)")], []  # fmt: skip
    found = {
        s["SubnetId"]: s for s in ec2.describe_subnets(Filters=[{"Name": "subnet-id", "Values": subnet_ids}])["Subnets"]
    }
    problems = []
    missing = [s for s in subnet_ids if s not in found]
    if missing:
        problems.append(Problem(f"ExistingSubnetIds: {', '.join(missing)} not found in this account and region",
                                "pass subnets of ExistingVpcId (aws ec2 describe-subnets --filters Name=vpc-id,Values=<vpc>)"))  # fmt: skip
    elsewhere = [s for s, d in found.items() if d["VpcId"] != vpc_id]
    if elsewhere:
        problems.append(Problem(f"ExistingSubnetIds: {', '.join(elsewhere)} belong to another VPC than {vpc_id}",
                                "pass subnets of ExistingVpcId only"))  # fmt: skip
    zones = {d["AvailabilityZone"] for d in found.values()}
    if len(subnet_ids) < 2 or (not missing and len(zones) < 2):
        problems.append(Problem("ExistingSubnetIds: MSK Serverless needs two or more subnets in different Availability Zones",
                                "add a subnet of another zone"))  # fmt: skip
    first = found.get(subnet_ids[0]) if subnet_ids else None
    if first and first["AvailabilityZone"] != subnet_az:
        problems.append(Problem(
            f"ExistingSubnetAz={subnet_az or '(empty)'}, but the first subnet {first['SubnetId']} (the Glue job's) is in "
            f"{first['AvailabilityZone']}",
            f"pass --parameter ExistingSubnetAz={first['AvailabilityZone']}"))  # fmt: skip
    return problems, [found[s] for s in subnet_ids if s in found and found[s]["VpcId"] == vpc_id]


def route_table_of(ec2: Any, subnet: dict) -> dict | None:
    """The subnet's route table: its explicit association, else the VPC's main table."""
    tables = ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet["SubnetId"]]}])
    if tables["RouteTables"]:
        return tables["RouteTables"][0]
    main = ec2.describe_route_tables(
        Filters=[{"Name": "vpc-id", "Values": [subnet["VpcId"]]}, {"Name": "association.main", "Values": ["true"]}]
    )["RouteTables"]
    return main[0] if main else None


# A default route through one of these leaves the VPC (a NAT gateway, a transit gateway, a firewall or
# NAT appliance's network interface or instance); an internet gateway does not, for the interfaces of
# Glue, Lambda and MSK Connect have no public address. A Gateway Load Balancer endpoint (vpce-, e.g.
# AWS Network Firewall's) is a GatewayId.
EGRESS_TARGETS = ("NatGatewayId", "TransitGatewayId", "NetworkInterfaceId", "InstanceId")


def egress_route(table: dict | None) -> str | None:
    """The target of the route table's active default route that leaves the VPC, if any."""
    for r in (table or {}).get("Routes", []):
        if r.get("DestinationCidrBlock") != "0.0.0.0/0" or r.get("State", "active") != "active":
            continue
        for key in EGRESS_TARGETS:
            if r.get(key):
                return str(r[key])
        if str(r.get("GatewayId", "")).startswith("vpce-"):
            return str(r["GatewayId"])
    return None


def check_connector_subnets(ec2: Any, subnets: list[dict], region: str, wire_format: str) -> list[Problem]:
    """The connector runs in every subnet. With the wire format avro its converter calls the AWS Glue
    Schema Registry (the glue API): each subnet needs a route out of the VPC or the glue interface endpoint."""
    if wire_format != "avro":
        return []
    name = network.service_name(region, "glue")
    vpcs = {s["VpcId"] for s in subnets}
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": sorted(vpcs)}])["VpcEndpoints"]
    if any(e["ServiceName"] == name and e.get("VpcEndpointType") == "Interface" for e in endpoints):
        return []
    lacking = [s["SubnetId"] for s in subnets if egress_route(route_table_of(ec2, s)) is None]
    if not lacking:
        return []
    return [Problem(
        f"WireFormat=avro: the connector runs in every subnet, and {', '.join(lacking)} has no route out of the VPC "
        f"(NAT gateway, transit gateway, network interface) and the VPC no {name} interface endpoint: the Avro "
        "converter cannot reach the AWS Glue Schema Registry",
        f"create the endpoint (aws ec2 create-vpc-endpoint --vpc-endpoint-type Interface --private-dns-enabled "
        f"--vpc-id {subnets[0]['VpcId']} --service-name {name} ...), add such a route, or pass --assume-egress "
        "when they reach it in a way this check cannot see (a proxy)")]  # fmt: skip


def check_glue_subnet_reaches_aws(ec2: Any, subnet: dict, region: str) -> list[Problem]:
    """The Glue subnet reaches S3 (gateway endpoint on its route table, or a route out of the VPC) and,
    without such a route, every interface endpoint of network.INTERFACE_ENDPOINTS exists in the VPC.
    The schema-history topic function runs there too and replies to CloudFormation through S3: without
    that route its resource would wait an hour for a reply."""
    table = route_table_of(ec2, subnet)
    has_nat = egress_route(table) is not None
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [subnet["VpcId"]]}])["VpcEndpoints"]
    live = [e for e in endpoints if str(e.get("State", "available")).lower() == "available"]
    problems = []
    subnet_id = subnet["SubnetId"]
    for service in network.GATEWAY_ENDPOINTS:
        name = network.service_name(region, service)
        on_table = any(
            e["ServiceName"] == name and e.get("VpcEndpointType", "Gateway") == "Gateway"
            and table is not None and table["RouteTableId"] in e.get("RouteTableIds", [])
            for e in live
        )  # fmt: skip
        if not on_table and not has_nat:
            problems.append(Problem(
                f"the Glue subnet {subnet_id} has no route to S3 (the Glue job and the schema-history topic "
                f"function's reply to CloudFormation need it): no {name} gateway endpoint on its route table "
                f"{(table or {}).get('RouteTableId', '(none)')} and no route out of the VPC (NAT gateway, transit "
                "gateway, network interface)",
                f"aws ec2 create-vpc-endpoint --vpc-id {subnet['VpcId']} --service-name {name} "
                f"--route-table-ids {(table or {}).get('RouteTableId', '<route table>')}"))  # fmt: skip
    if has_nat:
        return problems
    have = {e["ServiceName"] for e in live if e.get("VpcEndpointType") == "Interface"}
    missing = [
        network.service_name(region, s)
        for s in network.INTERFACE_ENDPOINTS
        if network.service_name(region, s) not in have
    ]
    if missing:
        problems.append(Problem(
            f"the Glue subnet {subnet_id} has no route out of the VPC (NAT gateway, transit gateway, network "
            f"interface) and the VPC lacks the interface endpoints "
            f"{', '.join(missing)}",
            "add a NAT gateway route to its route table, or create each endpoint: aws ec2 create-vpc-endpoint "
            f"--vpc-endpoint-type Interface --private-dns-enabled --vpc-id {subnet['VpcId']} --subnet-ids {subnet_id} "
            "--security-group-ids <group allowing 443 from the VPC> --service-name <name>"))  # fmt: skip
    return problems


def check_secret(secrets: Any, arn: str) -> list[Problem]:
    try:
        value = secrets.get_secret_value(SecretId=arn)
    except ClientError as exc:
        return [Problem(f"ExistingDbSecretArn: cannot read {arn} ({_error_code(exc)})",
                        "pass the ARN of an existing secret; the deploying principal needs "
                        "secretsmanager:GetSecretValue on it (and kms:Decrypt on its key)")]  # fmt: skip
    try:
        doc = json.loads(value.get("SecretString") or "")
    except ValueError:
        doc = None
    missing = [k for k in SECRET_KEYS if not (isinstance(doc, dict) and doc.get(k))]
    if missing:
        return [Problem(f"ExistingDbSecretArn: the secret has no {' or '.join(missing)} (it must be JSON "
                        '{"username": ..., "password": ...} of the Debezium user)',
                        f"aws secretsmanager put-secret-value --secret-id {arn} "
                        "--secret-string '{\"username\":\"debezium\",\"password\":\"<password>\"}'")]  # fmt: skip
    return []


def check_security_group(ec2: Any, group_id: str, vpc_id: str) -> list[Problem]:
    try:
        (group,) = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    except ClientError as exc:
        if "NotFound" not in _error_code(exc):
            raise
        return [Problem(f"ExistingDbSecurityGroupId={group_id}: no such security group",
                        "pass the security group of your database (aws rds describe-db-instances "
                        "--query 'DBInstances[].VpcSecurityGroups')")]  # fmt: skip
    if group["VpcId"] != vpc_id:
        return [Problem(f"ExistingDbSecurityGroupId={group_id} is in {group['VpcId']}, not ExistingVpcId={vpc_id}",
                        "pass the database's security group in ExistingVpcId")]  # fmt: skip
    return []


def existing_network(values: dict[str, str]) -> bool:
    return bool(values.get("ExistingVpcId"))


def run(session: Any, values: dict[str, str], region: str, assume_egress: bool = False) -> list[Problem]:
    """Every check for these parameter values (own-network mode only; demo mode has nothing to check).
    assume_egress: the subnets reach AWS in a way these checks cannot see; their routes are not judged."""
    if not existing_network(values):
        return []
    ec2 = session.client("ec2")
    vpc = values["ExistingVpcId"]
    subnets = [s.strip() for s in values.get("ExistingSubnetIds", "").split(",") if s.strip()]
    problems, found = check_subnets(ec2, vpc, subnets, values.get("ExistingSubnetAz", ""))
    if found and not assume_egress:
        if found[0]["SubnetId"] == subnets[0]:
            problems += check_glue_subnet_reaches_aws(ec2, found[0], region)
        problems += check_connector_subnets(ec2, found, region, values.get("WireFormat", "json"))
    if values.get("ExistingDbSecretArn"):
        problems += check_secret(session.client("secretsmanager"), values["ExistingDbSecretArn"])
    if values.get("ExistingDbSecurityGroupId"):
        problems += check_security_group(ec2, values["ExistingDbSecurityGroupId"], vpc)
    return problems
