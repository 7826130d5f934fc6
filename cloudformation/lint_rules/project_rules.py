"""cfn-lint rules for mistakes cfn-lint's schemas accept but AWS punishes at run time.

Loaded with `cfn-lint --append-rules cloudformation/lint_rules` (make lint-cfn). IDs E90xx/W90xx are
the range cfn-lint leaves to custom rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from xml.etree import ElementTree

from cfnlint.rules import CloudFormationLintRule, RuleMatch
from cfnlint.template import Template

GLUE_COMMANDS = ("glueetl", "gluestreaming", "pythonshell", "glueray")
# Arguments that only a streaming job has (glue_scripts/cdclake/common/settings.py).
STREAMING_ARGS = ("--checkpoint_location", "--kafka_bootstrap_servers", "--trigger_interval_seconds")
GLUE_VERSION = "6.0"  # Spark 4.1.1, Python 3.13: what the job and its tests target (the default)
# Versions a GlueVersion parameter may offer: 6.0, and 5.0 for Hudi (template rule HudiNeedsGlue50).
GLUE_VERSIONS = ("6.0", "5.0")
SEVEN_DAYS_MINUTES = 7 * 24 * 60


Values = dict[str, Any] | None  # parameter values that replace the defaults (None: the defaults)


def _default(cfn: Template, name: str, params: Values = None) -> Any:
    if params and name in params:
        return params[name]
    param = cfn.template.get("Parameters", {}).get(name)
    return None if param is None else param.get("Default")


def _condition(cfn: Template, cond: Any, params: Values = None) -> bool | None:
    """A condition evaluated with the parameters' defaults, or `params` where given (Equals, Not,
    And, Or, Condition)."""
    if isinstance(cond, str):
        cond = cfn.template.get("Conditions", {}).get(cond)
    if not isinstance(cond, dict) or len(cond) != 1:
        return None
    ((fn, args),) = cond.items()
    if fn == "Condition":
        return _condition(cfn, args, params)
    if fn == "Fn::Equals" and isinstance(args, list) and len(args) == 2:
        a, b = (_resolve(cfn, x, params) for x in args)
        return None if a is None or b is None else str(a) == str(b)
    parts = [_condition(cfn, x, params) for x in args] if isinstance(args, list) else []
    if None in parts or not parts:
        return None
    if fn == "Fn::Not":
        return not parts[0]
    if fn == "Fn::And":
        return all(parts)
    if fn == "Fn::Or":
        return any(parts)
    return None


def _resolve(cfn: Template, value: Any, params: Values = None) -> Any:
    """A literal, a parameter's Default (Ref, or ${Name} in a Sub string), or the branch of an If
    chosen by the defaults: the template as deployed without overrides (or with `params`). None when
    not knowable."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return _default(cfn, value["Ref"], params)
    if isinstance(value, dict) and set(value) == {"Fn::If"} and len(value["Fn::If"]) == 3:
        name, when_true, when_false = value["Fn::If"]
        chosen = _condition(cfn, name, params)
        return None if chosen is None else _resolve(cfn, when_true if chosen else when_false, params)
    if isinstance(value, dict) and set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
        names = re.findall(r"\$\{([^}!]+)\}", value["Fn::Sub"])
        defaults = {n: _default(cfn, n, params) for n in names}
        if any(v is None for v in defaults.values()):
            return None
        return re.sub(r"\$\{([^}!]+)\}", lambda m: str(defaults[m.group(1)]), value["Fn::Sub"])
    return None if isinstance(value, dict | list) else value


def _resources(cfn: Template, *types: str) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, resource, its Properties or {}) of every resource of these types (all types when none)."""
    for name, res in cfn.get_resources(list(types)).items():
        yield name, res, res.get("Properties") or {}


def _command(cfn: Template, props: dict[str, Any]) -> Any:
    """A Glue job's Command.Name, resolved against the parameters' defaults."""
    return _resolve(cfn, (props.get("Command") or {}).get("Name"))


def _is_streaming(props: dict[str, Any]) -> bool:
    args = props.get("DefaultArguments") or {}
    return isinstance(args, dict) and any(a in args for a in STREAMING_ARGS)


class GlueJobCommand(CloudFormationLintRule):
    id = "E9001"
    shortdesc = "Glue job Command.Name matches the kind of job"
    description = (
        "Command.Name must be one of glueetl/gluestreaming/pythonshell/glueray; a streaming job "
        "(checkpoint or Kafka arguments) must be gluestreaming, and gluestreaming needs those arguments"
    )
    source_url = "https://docs.aws.amazon.com/glue/latest/dg/aws-glue-api-jobs-job.html"
    tags: ClassVar[list[str]] = ["resources", "glue"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        matches = []
        for name, _, props in _resources(cfn, "AWS::Glue::Job"):
            command = _command(cfn, props)
            path = ["Resources", name, "Properties", "Command", "Name"]
            if command is None:
                continue
            if command not in GLUE_COMMANDS:
                matches.append(RuleMatch(path, f"{name}: unknown Glue Command.Name {command!r}"))
            elif _is_streaming(props) and command != "gluestreaming":
                matches.append(
                    RuleMatch(path, f"{name}: a streaming job must use Command.Name gluestreaming, not {command}")
                )
            elif command == "gluestreaming" and not _is_streaming(props):
                matches.append(
                    RuleMatch(path, f"{name}: gluestreaming job without {'/'.join(STREAMING_ARGS)} arguments")
                )
        return matches


class GlueJobVersion(CloudFormationLintRule):
    id = "E9002"
    shortdesc = f"Glue jobs run Glue {GLUE_VERSION}"
    description = (
        f"GlueVersion must be {GLUE_VERSION} by default (the runtime the job and its tests target); a "
        f"GlueVersion parameter offers only {GLUE_VERSIONS}"
    )
    source_url = "https://docs.aws.amazon.com/glue/latest/dg/release-notes.html"
    tags: ClassVar[list[str]] = ["resources", "glue"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        matches = []
        for name, _, props in _resources(cfn, "AWS::Glue::Job"):
            path = ["Resources", name, "Properties", "GlueVersion"]
            version = _resolve(cfn, props.get("GlueVersion"))
            if str(version) != GLUE_VERSION:
                matches.append(RuleMatch(path, f"{name}: GlueVersion must be {GLUE_VERSION!r}, got {version!r}"))
            ref = props.get("GlueVersion")
            if isinstance(ref, dict) and set(ref) == {"Ref"}:
                allowed = cfn.template.get("Parameters", {}).get(ref["Ref"], {}).get("AllowedValues")
                others = sorted({str(v) for v in allowed or [None]} - set(GLUE_VERSIONS))
                if others:
                    matches.append(
                        RuleMatch(path, f"{name}: parameter {ref['Ref']} may offer only {GLUE_VERSIONS}, not {others}")
                    )
        return matches


class GlueStreamingTimeout(CloudFormationLintRule):
    id = "E9003"
    shortdesc = "Streaming Glue jobs have no Timeout under 7 days, and a MaintenanceWindow"
    description = (
        "A gluestreaming job whose Timeout is below 7 days stops and is not restarted; "
        "without a MaintenanceWindow Glue may restart it at any time"
    )
    source_url = "https://docs.aws.amazon.com/glue/latest/dg/add-job-streaming.html"
    tags: ClassVar[list[str]] = ["resources", "glue"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        matches = []
        for name, _, props in _resources(cfn, "AWS::Glue::Job"):
            if _command(cfn, props) != "gluestreaming":
                continue
            timeout = _resolve(cfn, props.get("Timeout"))
            minutes = int(timeout) if str(timeout).isdigit() else None
            if "Timeout" in props and (minutes is None or minutes < SEVEN_DAYS_MINUTES):
                matches.append(
                    RuleMatch(
                        ["Resources", name, "Properties", "Timeout"],
                        f"{name}: streaming job Timeout {timeout!r} is under {SEVEN_DAYS_MINUTES} minutes "
                        "(7 days): the job would stop and not restart. Leave Timeout out.",
                    )
                )
            if "MaintenanceWindow" not in props:
                matches.append(
                    RuleMatch(["Resources", name, "Properties"], f"{name}: streaming job without MaintenanceWindow")
                )
        return matches


def expected_family(engine: str, version: str) -> str | None:
    """DB parameter-group family of an RDS engine version (mysql 8.0.40 -> mysql8.0)."""
    parts = str(version).split(".")
    if engine == "mysql" and len(parts) >= 2:
        return f"mysql{parts[0]}.{parts[1]}"
    if engine == "mariadb" and len(parts) >= 2:
        return f"mariadb{parts[0]}.{parts[1]}"
    if engine == "postgres" and parts[0].isdigit():
        major = int(parts[0])
        return f"postgres{major}" if major >= 10 else f"postgres{parts[0]}.{parts[1]}"
    return None


class DbParameterGroupFamily(CloudFormationLintRule):
    id = "E9004"
    shortdesc = "DB parameter-group Family matches the engine version of its instances"
    description = (
        "An RDS instance whose parameter group has another family fails at create time; "
        "the family is derived from Engine and EngineVersion (mysql 8.0.x -> mysql8.0)"
    )
    source_url = "https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/USER_WorkingWithParamGroups.html"
    tags: ClassVar[list[str]] = ["resources", "rds"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        matches = []
        groups = cfn.get_resources(["AWS::RDS::DBParameterGroup"])
        for name, _, props in _resources(cfn, "AWS::RDS::DBInstance"):
            ref = props.get("DBParameterGroupName")
            if isinstance(ref, dict) and "Fn::If" in ref:  # the group of the engine the defaults select
                chosen = _condition(cfn, ref["Fn::If"][0])
                ref = None if chosen is None else ref["Fn::If"][1 if chosen else 2]
            if not (isinstance(ref, dict) and ref.get("Ref") in groups):
                continue
            group_name = ref["Ref"]
            engine = _resolve(cfn, props.get("Engine"))
            version = _resolve(cfn, props.get("EngineVersion"))
            family = _resolve(cfn, (groups[group_name].get("Properties") or {}).get("Family"))
            if engine is None or version is None or family is None:
                continue
            expected = expected_family(str(engine).lower(), str(version))
            if expected and str(family) != expected:
                matches.append(
                    RuleMatch(
                        ["Resources", group_name, "Properties", "Family"],
                        f"{group_name}: Family {family!r} does not match {name} ({engine} {version}): "
                        f"expected {expected!r}",
                    )
                )
        return matches


POM = Path(__file__).resolve().parents[2] / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
EXTRA_JARS_PROFILE = "glue-extra-jars"
AVRO_JARS_PROFILE = "glue-avro-jars"
GLUE5_AVRO_JARS_PROFILE = "glue5-avro-jars"


def _pom_properties(root: ElementTree.Element) -> dict[str, str]:
    """pom.xml's <properties>, name -> value."""
    return {el.tag.split("}", 1)[-1]: (el.text or "").strip() for el in root.find("m:properties", _NS) or []}


def manifest_jar_names(pom: Path = POM, profile: str = EXTRA_JARS_PROFILE) -> list[str]:
    """File names (artifactId-version[-classifier].jar) of the direct dependencies of one pom.xml profile,
    ${property} versions filled from <properties>."""
    root = ElementTree.parse(pom).getroot()
    props = _pom_properties(root)
    names = []
    for prof in root.findall("m:profiles/m:profile", _NS):
        if prof.findtext("m:id", namespaces=_NS) != profile:
            continue
        for dep in prof.findall("m:dependencies/m:dependency", _NS):
            version = re.sub(r"\$\{([^}]+)\}", lambda m: props[m.group(1)], dep.findtext("m:version", "", _NS))
            classifier = dep.findtext("m:classifier", "", _NS)
            artifact = dep.findtext("m:artifactId", "", _NS)
            names.append(f"{artifact}-{version}{'-' + classifier if classifier else ''}.jar")
    return names


def _uses_msk_iam(args: dict[str, Any]) -> bool:
    """A job reading Kafka with MSK IAM: --source kafka (the default) and --kafka_auth iam (the default)."""
    if "--kafka_bootstrap_servers" not in args:
        return False
    return str(args.get("--source", "kafka")) == "kafka" and str(args.get("--kafka_auth", "iam")) == "iam"


def _extra_jars_texts(value: Any) -> list[str | None]:
    """The --extra-jars value's `Fn::Sub` text, or each branch's of an `Fn::If` (one per Glue version)."""
    if isinstance(value, dict) and "Fn::If" in value:
        return [t for branch in value["Fn::If"][1:] for t in _extra_jars_texts(branch)]
    text = value.get("Fn::Sub") if isinstance(value, dict) else value
    return [text if isinstance(text, str) else None]


class GlueExtraJarsMatchManifest(CloudFormationLintRule):
    id = "E9005"
    shortdesc = "A Glue job reading MSK with IAM ships exactly the manifest's extra jars"
    description = (
        "--extra-jars of a job with --kafka_auth iam must name, through parameters whose AllowedPattern "
        "pins the file name, exactly the jars of pom.xml's glue-extra-jars profile (the MSK IAM client) and "
        "glue-avro-jars profile (spark-avro); an Fn::If on the Glue version may ship glue5-avro-jars instead "
        "in its other branch"
    )
    source_url = "https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-glue-arguments.html"
    tags: ClassVar[list[str]] = ["resources", "glue"]

    def _shipped(self, text: str, params: dict[str, Any], names: list[str]) -> list[str]:
        """The manifest jar each URI of `text` pins through its key parameter's AllowedPattern."""
        shipped = []
        for uri in text.split(","):
            refs = [r for r in re.findall(r"\$\{([^}!.]+)\}", uri) if r in params]
            pattern = params[refs[-1]].get("AllowedPattern") if refs else None
            shipped.append(
                next(
                    (j for j in names if pattern and re.fullmatch(pattern, f"glue-jars/0123456789ab/{j}")), "(unpinned)"
                )
            )
        return shipped

    def match(self, cfn: Template) -> list[RuleMatch]:
        matches = []
        # the MSK IAM client, and spark-avro for the wire format avro (Glue 6.0's, or Glue 5.0's)
        iam = manifest_jar_names()
        choices = [sorted(iam + manifest_jar_names(profile=p)) for p in (AVRO_JARS_PROFILE, GLUE5_AVRO_JARS_PROFILE)]
        wanted = choices[0]
        params = cfn.template.get("Parameters", {})
        for name, _, props in _resources(cfn, "AWS::Glue::Job"):
            args = props.get("DefaultArguments") or {}
            if not isinstance(args, dict) or not _uses_msk_iam(args):
                continue
            path = ["Resources", name, "Properties", "DefaultArguments"]
            if "--extra-jars" not in args or None in _extra_jars_texts(args["--extra-jars"]):
                matches.append(
                    RuleMatch(path, f"{name}: reads MSK with IAM but has no --extra-jars ({', '.join(wanted)})")
                )
                continue
            found = [
                sorted(self._shipped(t, params, choices[0] + choices[1]))
                for t in _extra_jars_texts(args["--extra-jars"])
            ]
            if any(f not in choices for f in found) or wanted not in found:
                matches.append(
                    RuleMatch(
                        [*path, "--extra-jars"],
                        f"{name}: --extra-jars must name exactly {', '.join(wanted)} (pom.xml profile "
                        f"{EXTRA_JARS_PROFILE}, {AVRO_JARS_PROFILE}; {GLUE5_AVRO_JARS_PROFILE} in a GlueVersion 5.0 "
                        "branch), each through a key parameter whose AllowedPattern pins that file",
                    )
                )
        return matches


# ---------------------------------------------------------------- both modes of the source
EXISTING_VPC_PARAM = "ExistingVpcId"
SAMPLE_VPC = "vpc-0123456789abcdef0"
# Resource types that only the demo source needs: with an existing network and database none may exist.
DEMO_SOURCE_TYPES = (
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EC2::InternetGateway",
    "AWS::EC2::VPCGatewayAttachment",
    "AWS::EC2::NatGateway",
    "AWS::EC2::EIP",
    "AWS::EC2::RouteTable",
    "AWS::EC2::Route",
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::FlowLog",
    "AWS::EC2::Instance",
    "AWS::EC2::LaunchTemplate",
    "AWS::RDS::DBInstance",
    "AWS::RDS::DBSubnetGroup",
    "AWS::RDS::DBParameterGroup",
    "AWS::SecretsManager::Secret",  # the demo database's login; an existing one comes as ExistingDbSecretArn
)


class ExistingNetworkCreatesNoDemoSource(CloudFormationLintRule):
    id = "E9006"
    shortdesc = "With ExistingVpcId set, no VPC, subnet, gateway, database, its secret or client is created"
    description = (
        f"Every {', '.join(t.split('::')[-1] for t in DEMO_SOURCE_TYPES)} resource must carry a Condition "
        f"that is false when {EXISTING_VPC_PARAM} is set, and every security group must then be in that VPC"
    )
    source_url = "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/conditions-section-structure.html"
    tags: ClassVar[list[str]] = ["resources", "conditions"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        if EXISTING_VPC_PARAM not in cfn.template.get("Parameters", {}):
            return []
        existing = {EXISTING_VPC_PARAM: SAMPLE_VPC}
        matches = []
        for name, res, _ in _resources(cfn, *DEMO_SOURCE_TYPES):
            cond = res.get("Condition")
            if cond is None or _condition(cfn, cond, existing) is not False:
                matches.append(
                    RuleMatch(
                        ["Resources", name],
                        f"{name} ({res['Type']}) would be created with {EXISTING_VPC_PARAM} set: give it a "
                        "Condition that is false then (CreateDemoSource)",
                    )
                )
        for name, res, props in _resources(cfn, "AWS::EC2::SecurityGroup"):
            if res.get("Condition") is not None and _condition(cfn, res["Condition"], existing) is False:
                continue
            vpc = _resolve(cfn, props.get("VpcId"), existing)
            if vpc != SAMPLE_VPC:
                matches.append(
                    RuleMatch(
                        ["Resources", name, "Properties", "VpcId"],
                        f"{name}: with {EXISTING_VPC_PARAM} set its VpcId must be {EXISTING_VPC_PARAM}",
                    )
                )
        return matches


SAMPLE_TABLE = "customer"


def _connector_topics(cfn: Template, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(connector, a change topic it writes) for the connectors that exist with `params`:
    <topic.prefix>.<database.include.list or schema.include.list>.<table>."""
    out = []
    for name, res, props in _resources(cfn, "AWS::KafkaConnect::Connector"):
        if res.get("Condition") is not None and _condition(cfn, res["Condition"], params) is not True:
            continue
        config = props.get("ConnectorConfiguration") or {}
        prefix = _resolve(cfn, config.get("topic.prefix"), params)
        second = _resolve(cfn, config.get("schema.include.list") or config.get("database.include.list"), params)
        if isinstance(prefix, str) and isinstance(second, str) and "," not in second:
            out.append((name, f"{prefix}.{second}.{SAMPLE_TABLE}"))
    return out


class JobTopicPatternMatchesConnector(CloudFormationLintRule):
    id = "E9007"
    shortdesc = "The streaming job's topic pattern matches the topics its connector writes, for every engine"
    description = (
        "For each allowed SourceEngine (and the defaults otherwise), --kafka_topic_pattern must match "
        "<topic.prefix>.<database or schema>.<table> of the connector that exists then: a pattern that "
        "matches nothing leaves the job reading nothing, without an error"
    )
    source_url = "https://spark.apache.org/docs/3.5.4/structured-streaming-kafka-integration.html"
    tags: ClassVar[list[str]] = ["resources", "glue", "kafkaconnect"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        engines = (cfn.template.get("Parameters", {}).get("SourceEngine") or {}).get("AllowedValues") or [None]
        matches = []
        for name, _, props in _resources(cfn, "AWS::Glue::Job"):
            args = props.get("DefaultArguments") or {}
            if not isinstance(args, dict) or "--kafka_topic_pattern" not in args:
                continue
            for engine in engines:
                params = {"SourceEngine": engine} if engine else {}
                pattern = _resolve(cfn, args["--kafka_topic_pattern"], params)
                if not isinstance(pattern, str):
                    continue
                for connector, topic in _connector_topics(cfn, params):
                    if not re.fullmatch(pattern, topic):
                        matches.append(
                            RuleMatch(
                                ["Resources", name, "Properties", "DefaultArguments", "--kafka_topic_pattern"],
                                f"{name}: --kafka_topic_pattern {pattern!r} does not match {topic!r}, a topic "
                                f"{connector} writes" + (f" with SourceEngine={engine}" if engine else ""),
                            )
                        )
        return matches


# ---------------------------------------------------------------- first-deploy failures
def _custom_resource_functions(cfn: Template) -> set[str]:
    """Lambda functions that back a custom resource (its ServiceToken is their Arn)."""
    out = set()
    for _, res, props in _resources(cfn):
        if not str(res["Type"]).startswith(("Custom::", "AWS::CloudFormation::CustomResource")):
            continue
        token = props.get("ServiceToken")
        if isinstance(token, dict) and "Fn::GetAtt" in token:
            target = token["Fn::GetAtt"]
            out.add(target[0] if isinstance(target, list) else str(target).split(".", 1)[0])
    return out


class CustomResourceFunctionReservesNoConcurrency(CloudFormationLintRule):
    id = "E9008"
    shortdesc = "A custom resource's Lambda function reserves no concurrency"
    description = (
        "Lambda keeps 100 executions of the account's quota unreserved; new and sandbox accounts have a "
        "quota of 10 or 50, so any ReservedConcurrentExecutions fails CreateFunction and rolls the stack back"
    )
    source_url = "https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html"
    tags: ClassVar[list[str]] = ["resources", "lambda"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        reserving = {
            name
            for name, _, props in _resources(cfn, "AWS::Lambda::Function")
            if "ReservedConcurrentExecutions" in props
        }
        return [
            RuleMatch(
                ["Resources", name, "Properties", "ReservedConcurrentExecutions"],
                f"{name} backs a custom resource and sets ReservedConcurrentExecutions: on an account whose "
                "concurrency quota is under 100 plus the reservation CreateFunction fails and the stack rolls "
                "back. Leave it out.",
            )
            for name in sorted(_custom_resource_functions(cfn) & reserving)
        ]


def _major(version: str) -> int | None:
    m = re.match(r"(\d+)", str(version))
    return int(m.group(1)) if m else None


def _possible_values(cfn: Template, value: Any) -> list[Any]:
    """Every value a property can take: a literal, or each AllowedValue (else the Default) of a Ref'd parameter."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        param = cfn.template.get("Parameters", {}).get(value["Ref"]) or {}
        return list(param.get("AllowedValues") or [param.get("Default")])
    return [value] if not isinstance(value, dict | list) else []


class ConnectVersionLoadsThePlugin(CloudFormationLintRule):
    id = "E9009"
    shortdesc = "MSK Connect runs a Kafka Connect whose Java loads the shipped Debezium plugin"
    description = (
        "Debezium 3.x is built for Java 17 and Kafka Connect 3.1+; MSK Connect 2.7.1 runs Java 11, where the "
        "plugin fails with UnsupportedClassVersionError. Every KafkaConnectVersion a connector can be "
        "deployed with (each AllowedValue of its parameter) must be 3.x or newer while pom.xml ships Debezium 3+. "
        "The Java 11 build (DebeziumBuild=java11, Debezium 2.7 from the profiles' own properties, which this rule "
        "does not read) is the fallback for 3.7.x workers found on Java 11, not a way onto 2.7.1"
    )
    source_url = "https://docs.aws.amazon.com/msk/latest/developerguide/msk-connect-workers.html"
    tags: ClassVar[list[str]] = ["resources", "kafkaconnect"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        pom = _pom_properties(ElementTree.parse(POM).getroot())
        debezium = max((_major(v) or 0) for k, v in pom.items() if k.startswith("debezium"))
        if debezium < 3:
            return []
        matches = []
        for name, _, props in _resources(cfn, "AWS::KafkaConnect::Connector"):
            for version in _possible_values(cfn, props.get("KafkaConnectVersion")):
                major = _major(version)
                if major is not None and major < 3:
                    matches.append(
                        RuleMatch(
                            ["Resources", name, "Properties", "KafkaConnectVersion"],
                            f"{name}: KafkaConnectVersion may be {version!r} (Java 11), where the Debezium "
                            f"{debezium}.x plugin of pom.xml cannot load: allow 3.7.x only",
                        )
                    )
        return matches


def _strings(node: Any) -> Iterator[str]:
    """Every string inside a property value (literals and the texts of intrinsic functions)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


class MySqlClientUsesTls(CloudFormationLintRule):
    id = "E9010"
    shortdesc = "The client bootstrap's MySQL connections use TLS (caching_sha2_password)"
    description = (
        "RDS for MySQL 8.4's default authentication plugin is caching_sha2_password, whose full authentication "
        "sends the password only over TLS (or with the server's RSA key): a `mysql` call of the client's "
        "bootstrap without --ssl fails to log in as the master user"
    )
    source_url = "https://dev.mysql.com/doc/refman/8.4/en/caching-sha2-pluggable-authentication.html"
    tags: ClassVar[list[str]] = ["resources", "ec2", "rds"]

    def match(self, cfn: Template) -> list[RuleMatch]:
        matches = []
        for name, _, props in _resources(cfn, "AWS::EC2::Instance"):
            for text in _strings(props.get("UserData")):
                for line in re.sub(r"\\\n\s*", " ", text).splitlines():  # continued lines joined
                    call = re.search(r"(?:^|[\s;(|])mysql\s", line)
                    if call and not line.lstrip().startswith("#") and "--ssl" not in line:
                        matches.append(
                            RuleMatch(
                                ["Resources", name, "Properties", "UserData"],
                                f"{name}: `{line.strip()[:80]}` connects without --ssl; MySQL 8.4's "
                                "caching_sha2_password logs in over TLS only: add --ssl",
                            )
                        )
        return matches


__all__ = [
    "ConnectVersionLoadsThePlugin",
    "CustomResourceFunctionReservesNoConcurrency",
    "DbParameterGroupFamily",
    "ExistingNetworkCreatesNoDemoSource",
    "GlueExtraJarsMatchManifest",
    "GlueJobCommand",
    "GlueJobVersion",
    "GlueStreamingTimeout",
    "JobTopicPatternMatchesConnector",
    "MySqlClientUsesTls",
]
