"""What the rendered pipeline template promises: IAM-only Kafka, encryption, no public access,
least privilege, a streaming job that keeps running, an SSM-only client and no plaintext secrets."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cdclake.common.settings import ARGS
from cfn_helpers import condition_holds, parameter_values, resolve_variant, resources_of, walk

# Glue's own job parameters (hyphenated or Glue-reserved); everything else must be a job argument.
GLUE_SPECIAL_ARGS = {
    "--job-language",
    "--extra-py-files",
    "--datalake-formats",
    "--enable-metrics",
    "--custom-logGroup-prefix",
    "--extra-jars",
    "--TempDir",
}
# Glue 4.0 logging arguments that Glue 5.0 ignores, and the session-catalog flag the jobs do not need.
NOT_FOR_GLUE_5 = {"--enable-continuous-cloudwatch-log", "--continuous-log-logGroup", "--enable-glue-datacatalog"}
SEVEN_DAYS_MINUTES = 7 * 24 * 60


def statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every IAM/resource policy statement in the template, with where it is."""
    out = []
    for path, node in walk(template):
        if isinstance(node, dict) and "Statement" in node and isinstance(node["Statement"], list):
            out += [(".".join(map(str, path)), s) for s in node["Statement"]]
    return out


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def user_data(template: dict[str, Any]) -> str:
    script, _variables = template["Resources"]["ClientInstance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
    return script


def job(template: dict[str, Any]) -> dict[str, Any]:
    """The streaming job (the maintenance job has its own tests: test_cfn_maintenance.py)."""
    assert set(resources_of(template, "AWS::Glue::Job")) == {"CdcJob", "MaintenanceJob"}
    return template["Resources"]["CdcJob"]["Properties"]


# ---------------------------------------------------------------- Kafka
def test_msk_serverless_accepts_only_iam_clients(template: dict[str, Any]) -> None:
    (cluster,) = resources_of(template, "AWS::MSK::ServerlessCluster").values()
    assert cluster["Properties"]["ClientAuthentication"] == {"Sasl": {"Iam": {"Enabled": True}}}


def test_connector_and_job_talk_to_msk_with_iam_over_tls(template: dict[str, Any]) -> None:
    (conn,) = resources_of(template, "AWS::KafkaConnect::Connector").values()
    props = conn["Properties"]
    assert props["KafkaClusterClientAuthentication"] == {"AuthenticationType": "IAM"}
    assert props["KafkaClusterEncryptionInTransit"] == {"EncryptionType": "TLS"}
    config = props["ConnectorConfiguration"]
    for client in ("producer", "consumer"):
        assert config[f"schema.history.internal.{client}.security.protocol"] == "SASL_SSL"
        assert config[f"schema.history.internal.{client}.sasl.mechanism"] == "AWS_MSK_IAM"
    assert job(template)["DefaultArguments"]["--kafka_auth"] == "iam"


def test_bootstrap_brokers_come_from_the_custom_resource(template: dict[str, Any]) -> None:
    iam_brokers = {"Fn::GetAtt": ["BootstrapBrokers", "BootstrapBrokerStringSaslIam"]}
    (conn,) = resources_of(template, "AWS::KafkaConnect::Connector").values()
    assert conn["Properties"]["KafkaCluster"]["ApacheKafkaCluster"]["BootstrapServers"] == iam_brokers
    assert job(template)["DefaultArguments"]["--kafka_bootstrap_servers"] == iam_brokers
    custom = template["Resources"]["BootstrapBrokers"]
    assert custom["Properties"]["ClusterArn"] == {"Fn::GetAtt": ["MskCluster", "Arn"]}
    fn = template["Resources"]["BootstrapBrokersFunction"]["Properties"]
    assert fn["Handler"] == "index.handler" and fn["Code"] == "lambda/bootstrap-brokers.zip"


# ---------------------------------------------------------------- encryption
def test_every_bucket_is_encrypted_private_and_tls_only(
    template: dict[str, Any], bootstrap_template: dict[str, Any]
) -> None:
    for tpl in (template, bootstrap_template):
        buckets = resources_of(tpl, "AWS::S3::Bucket")
        policies = {p["Properties"]["Bucket"]["Ref"]: p for p in resources_of(tpl, "AWS::S3::BucketPolicy").values()}
        assert buckets
        for name, bucket in buckets.items():
            props = bucket["Properties"]
            (rule,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("aws:kms", "AES256"), name
            assert props["PublicAccessBlockConfiguration"] == {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }, name
            deny = [
                s
                for s in policies[name]["Properties"]["PolicyDocument"]["Statement"]
                if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            ]
            assert deny and deny[0]["Principal"] == "*" and deny[0]["Action"] == "s3:*", name


def test_data_at_rest_is_encrypted_everywhere_else(template: dict[str, Any]) -> None:
    key = {"Fn::GetAtt": ["PipelineKey", "Arn"]}
    db = template["Resources"]["Database"]["Properties"]
    assert db["StorageEncrypted"] is True and db["KmsKeyId"] == {"Ref": "PipelineKey"}
    for name, group in resources_of(template, "AWS::Logs::LogGroup").items():
        assert group["Properties"]["KmsKeyId"] == key, name
        assert "RetentionInDays" in group["Properties"], name
    for name, secret in resources_of(template, "AWS::SecretsManager::Secret").items():
        assert secret["Properties"]["KmsKeyId"] == {"Ref": "PipelineKey"}, name
    lt = template["Resources"]["ClientLaunchTemplate"]["Properties"]["LaunchTemplateData"]
    assert all(m["Ebs"]["Encrypted"] is True for m in lt["BlockDeviceMappings"])
    (sec,) = resources_of(template, "AWS::Glue::SecurityConfiguration").values()
    enc = sec["Properties"]["EncryptionConfiguration"]
    assert enc["S3Encryptions"][0]["S3EncryptionMode"] == "SSE-KMS"
    # Logs are encrypted by their groups' KmsKeyId (above), not by the security configuration, which
    # would move the job's logs to groups Glue names (test_cfn_alarms.py).
    assert "CloudWatchEncryption" not in enc
    assert enc["JobBookmarksEncryption"]["JobBookmarksEncryptionMode"] == "CSE-KMS"
    assert job(template)["SecurityConfiguration"] == {"Ref": "GlueSecurityConfiguration"}
    (wg,) = resources_of(template, "AWS::Athena::WorkGroup").values()
    cfg = wg["Properties"]["WorkGroupConfiguration"]
    assert cfg["EnforceWorkGroupConfiguration"] is True
    assert cfg["ResultConfiguration"]["EncryptionConfiguration"]["EncryptionOption"] == "SSE_KMS"
    assert template["Resources"]["PipelineKey"]["Properties"]["EnableKeyRotation"] is True


def test_database_requires_tls_and_debezium_uses_it(template: dict[str, Any]) -> None:
    params = template["Resources"]["DbParameterGroup"]["Properties"]["Parameters"]
    assert params["require_secure_transport"] == "1"
    (conn,) = resources_of(template, "AWS::KafkaConnect::Connector").values()
    assert conn["Properties"]["ConnectorConfiguration"]["database.ssl.mode"] == "required"


# ---------------------------------------------------------------- no public access
def test_nothing_is_reachable_from_the_internet(template: dict[str, Any]) -> None:
    assert template["Resources"]["Database"]["Properties"]["PubliclyAccessible"] is False
    for name, subnet in resources_of(template, "AWS::EC2::Subnet").items():
        assert subnet["Properties"].get("MapPublicIpOnLaunch", False) is False, name
    for path, node in walk(template):
        if isinstance(node, dict) and ("CidrIp" in node or "CidrIpv6" in node):
            is_ingress = "SecurityGroupIngress" in path or (
                len(path) >= 2 and template["Resources"][path[1]]["Type"] == "AWS::EC2::SecurityGroupIngress"
            )
            assert not is_ingress, f"CIDR ingress at {path}"
    for name, sg in resources_of(template, "AWS::EC2::SecurityGroup").items():
        assert "SecurityGroupIngress" not in sg["Properties"], name


def test_security_groups_open_only_the_ports_each_component_needs(template: dict[str, Any]) -> None:
    ingress = {
        (
            r["Properties"]["GroupId"]["Ref"],
            r["Properties"]["FromPort"],
            r["Properties"]["SourceSecurityGroupId"]["Ref"],
        )
        for r in resources_of(template, "AWS::EC2::SecurityGroupIngress").values()
    }
    assert ingress == {
        ("DatabaseSecurityGroup", 3306, "ConnectSecurityGroup"),
        ("DatabaseSecurityGroup", 3306, "ClientSecurityGroup"),
        ("MskSecurityGroup", 9098, "ConnectSecurityGroup"),
        ("MskSecurityGroup", 9098, "GlueSecurityGroup"),
        ("MskSecurityGroup", 9098, "SchemaHistoryTopicSecurityGroup"),  # the custom resource making the topic
        ("GlueSecurityGroup", 0, "GlueSecurityGroup"),  # Glue's required self-reference
    }
    self_rule = template["Resources"]["GlueSelfIngress"]["Properties"]
    assert (self_rule["IpProtocol"], self_rule["ToPort"]) == ("tcp", 65535)


def test_s3_traffic_uses_the_gateway_endpoint(template: dict[str, Any]) -> None:
    (ep,) = resources_of(template, "AWS::EC2::VPCEndpoint").values()
    assert ep["Properties"]["VpcEndpointType"] == "Gateway"
    assert {"Ref": "PrivateRouteTable"} in ep["Properties"]["RouteTableIds"]


def test_network_spans_two_availability_zones(template: dict[str, Any]) -> None:
    azs = {str(s["Properties"]["AvailabilityZone"]) for s in resources_of(template, "AWS::EC2::Subnet").values()}
    assert len(azs) == 2
    assert resources_of(template, "AWS::EC2::NatGateway") and resources_of(template, "AWS::EC2::InternetGateway")


# ---------------------------------------------------------------- least privilege
def test_no_policy_allows_every_action_on_every_resource(
    template: dict[str, Any], bootstrap_template: dict[str, Any]
) -> None:
    for tpl in (template, bootstrap_template):
        for where, s in statements(tpl):
            if s.get("Effect") != "Allow":
                continue
            actions = as_list(s.get("Action", []))
            assert "*" not in actions, f"Action * at {where}"
            if "*" in as_list(s.get("Resource", [])):
                # Only a KMS key policy ("*" = this key) or actions AWS offers no resource ARN for
                # (glue:GetSchemaVersion by version id: the call names no registry, so a registry-scoped
                # statement denies it; awslabs/aws-glue-schema-registry issue 68).
                assert where.endswith("KeyPolicy") or all(
                    a.startswith(("ec2:Describe", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"))
                    or a in ("cloudwatch:PutMetricData", "glue:GetSchemaVersion")
                    for a in actions
                ), f"{actions} on * at {where}"


def test_kafka_permissions_are_scoped_to_the_cluster_its_topics_and_groups(template: dict[str, Any]) -> None:
    found = 0
    for where, s in statements(template):
        kafka = [a for a in as_list(s.get("Action", [])) if a.startswith("kafka-cluster:")]
        if not kafka:
            continue
        found += 1
        for res in as_list(s["Resource"]):
            text = str(res)
            assert res == {"Fn::GetAtt": ["MskCluster", "Arn"]} or re.search(
                r":kafka:\$\{AWS::Region\}:\$\{AWS::AccountId\}:(topic|group)/\$\{Name\}/\$\{Uuid\}/", text
            ), f"unscoped kafka resource {res} at {where}"
            assert not text.endswith("/${Uuid}/*") or any(a.endswith("Group") for a in kafka), where
    assert found >= 4


def test_roles_are_assumed_only_by_their_service(template: dict[str, Any]) -> None:
    expected = {
        "ConnectRole": "kafkaconnect.amazonaws.com",
        "GlueJobRole": "glue.amazonaws.com",
        "ClientRole": "ec2.amazonaws.com",
        "BootstrapBrokersRole": "lambda.amazonaws.com",
        "SchemaHistoryTopicRole": "lambda.amazonaws.com",
        "MaintenanceJobRole": "glue.amazonaws.com",
    }
    for role, service in expected.items():
        (stmt,) = template["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert stmt["Principal"] == {"Service": service}, role


# ---------------------------------------------------------------- Glue streaming job
def test_streaming_job_runs_glue_6_by_default_and_is_never_timed_out(template: dict[str, Any]) -> None:
    props = job(template)
    assert props["GlueVersion"] == {"Ref": "GlueVersion"}
    assert template["Parameters"]["GlueVersion"]["Default"] == "6.0"
    assert props["Command"]["Name"] == "gluestreaming"
    assert props["Command"]["ScriptLocation"] == {"Fn::Sub": "s3://${ArtifactsBucket}/${GlueScriptKey}"}
    assert "Timeout" not in props or int(props["Timeout"]) >= SEVEN_DAYS_MINUTES
    assert props["MaintenanceWindow"] == {"Ref": "GlueMaintenanceWindow"}
    assert props["MaxRetries"] == {"Ref": "GlueMaxRetries"}
    assert props["ExecutionProperty"]["MaxConcurrentRuns"] == 1
    (conn,) = resources_of(template, "AWS::Glue::Connection").values()
    assert conn["Properties"]["ConnectionInput"]["ConnectionType"] == "NETWORK"
    assert props["Connections"]["Connections"] == [{"Ref": "GlueNetworkConnection"}]


def test_job_gets_iceberg_metrics_logs_and_the_cdclake_package(template: dict[str, Any]) -> None:
    args = job(template)["DefaultArguments"]
    # TableFormat (default iceberg) names Glue's format too: tests/cloudformation/test_cfn_table_format.py.
    assert args["--datalake-formats"] == args["--table_format"] == {"Ref": "TableFormat"}
    assert template["Parameters"]["TableFormat"]["Default"] == "iceberg"
    assert args["--enable-metrics"] == "true"
    assert args["--extra-py-files"] == {"Fn::Sub": "s3://${ArtifactsBucket}/${CdclakeZipKey}"}
    assert args["--checkpoint_location"] == {"Fn::Sub": "s3://${LakeBucket}/checkpoints/${CheckpointName}/"}
    assert template["Parameters"]["CheckpointName"]["Default"] == "cdc-iceberg"
    assert args["--dead_letter_path"] == {"Fn::Sub": "s3://${LakeBucket}/dead-letters/cdc-iceberg/"}
    assert args["--warehouse"] == {"Fn::Sub": "s3://${LakeBucket}/warehouse"}
    assert (args["--source"], args["--catalog_type"], args["--catalog_name"]) == ("kafka", "glue", "glue_catalog")
    assert args["--namespace"] == {"Ref": "GlueDatabase"}


def test_an_updated_stack_keeps_the_streaming_jobs_name_logs_checkpoint_and_folders(
    raw_template: dict[str, Any],
) -> None:
    """The job runs glue_scripts/cdc_lake_job.py for every table format, but what a deployed stack holds
    keeps the name cdc-iceberg: a new Glue job name or log group name replaces the resource on update,
    and a new checkpoint, dead-letter or raw-zone folder leaves the stream's position and files behind."""
    variant = resolve_variant(raw_template, RawZoneEnabled="true")
    props = job(variant)
    args, outputs = props["DefaultArguments"], variant["Outputs"]
    assert props["Command"]["ScriptLocation"] == {"Fn::Sub": "s3://${ArtifactsBucket}/${GlueScriptKey}"}
    assert props["Name"] == {"Fn::Sub": "${AWS::StackName}-cdc-iceberg"}
    assert args["--custom-logGroup-prefix"] == {"Fn::Sub": "/aws-glue/${AWS::StackName}/cdc-iceberg"}
    checkpoint = {"Fn::Sub": "s3://${LakeBucket}/checkpoints/${CheckpointName}/"}
    assert args["--checkpoint_location"] == outputs["CheckpointLocation"]["Value"] == checkpoint
    assert variant["Parameters"]["CheckpointName"]["Default"] == "cdc-iceberg"
    dead_letters = {"Fn::Sub": "s3://${LakeBucket}/dead-letters/cdc-iceberg/"}
    assert args["--dead_letter_path"] == outputs["DeadLetterPath"]["Value"] == dead_letters
    raw_zone = {"Fn::Sub": "s3://${LakeBucket}/raw/cdc-iceberg/"}
    assert args["--raw_zone_path"] == outputs["RawZonePath"]["Value"] == raw_zone


def glue_jobs(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in resources_of(template, "AWS::Glue::Job").items()}


def test_each_glue_job_logs_into_the_stacks_encrypted_expiring_output_and_error_groups(
    template: dict[str, Any],
) -> None:
    """Glue 5.0 writes to <--custom-logGroup-prefix>/output and /error; both must be stack log groups
    (KMS key, retention), or Glue creates them unencrypted and kept forever."""
    groups = {
        r["Properties"]["LogGroupName"]["Fn::Sub"]: r["Properties"]
        for r in resources_of(template, "AWS::Logs::LogGroup").values()
        if isinstance(r["Properties"]["LogGroupName"], dict)
    }
    jobs = glue_jobs(template)
    assert set(jobs) == {"CdcJob", "MaintenanceJob"}
    prefixes = set()
    for name, props in jobs.items():
        args = props["DefaultArguments"]
        assert not NOT_FOR_GLUE_5 & set(args), name
        prefix = args["--custom-logGroup-prefix"]["Fn::Sub"]
        prefixes.add(prefix)
        for suffix in ("output", "error"):
            group = groups.get(f"{prefix}/{suffix}")
            assert group is not None, f"{name}: no log group {prefix}/{suffix}"
            assert group["KmsKeyId"] == {"Fn::GetAtt": ["PipelineKey", "Arn"]}
            assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert len(prefixes) == 2  # one pair per job


def test_streaming_job_ships_the_manifests_msk_iam_jar_with_extra_jars(template: dict[str, Any]) -> None:
    from cdctools import pinned_jars as runtime

    args = job(template)["DefaultArguments"]
    assert args["--kafka_auth"] == "iam"
    assert args["--extra-jars"] == {
        "Fn::Sub": "s3://${ArtifactsBucket}/${GlueExtraJarKey},s3://${ArtifactsBucket}/${GlueAvroJarKey}"
    }
    for key, profile in (("GlueAvroJarKey", "glue-avro-jars"), ("GlueAvro5JarKey", "glue5-avro-jars")):
        (avro,) = runtime.jars(profile)
        assert re.fullmatch(template["Parameters"][key]["AllowedPattern"], f"glue-jars/0123456789ab/{avro.name}")
    (jar,) = runtime.jars("glue-extra-jars")
    pattern = template["Parameters"]["GlueExtraJarKey"]["AllowedPattern"]
    assert re.fullmatch(pattern, f"glue-jars/0123456789ab/{jar.name}")
    assert not re.fullmatch(pattern, "glue-jars/0123456789ab/aws-msk-iam-auth-2.2.0.jar")
    # Not the -all jar: it carries a second AWS SDK next to Glue's.
    assert not re.fullmatch(pattern, f"glue-jars/0123456789ab/{jar.stem}-all.jar")
    reads = next(
        s
        for w, s in statements(template)
        if w.startswith("Resources.GlueJobRole") and s.get("Sid") == "ReadJobArtifacts"
    )
    assert {"Fn::Sub": "arn:${AWS::Partition}:s3:::${ArtifactsBucket}/${GlueExtraJarKey}"} in reads["Resource"]
    # The maintenance job reads no Kafka: no extra jar.
    assert "--extra-jars" not in template["Resources"]["MaintenanceJob"]["Properties"]["DefaultArguments"]


def test_glue_roles_reach_only_the_lake_database_of_the_catalog(template: dict[str, Any]) -> None:
    """Without --enable-glue-datacatalog no job touches database `default`, and no role is granted it."""
    for role in ("GlueJobRole", "MaintenanceJobRole"):
        catalog = next(
            s for w, s in statements(template) if w.startswith(f"Resources.{role}") and s.get("Sid") == "Catalog"
        )
        databases = [r["Fn::Sub"] for r in catalog["Resource"] if ":database/" in r["Fn::Sub"]]
        assert databases == ["arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:database/${GlueDatabaseName}"]


def test_maintenance_workers_are_batch_worker_types(template: dict[str, Any]) -> None:
    allowed = template["Parameters"]["MaintenanceWorkerType"]["AllowedValues"]
    assert "G.025X" not in allowed  # Glue accepts G.025X for streaming jobs only
    assert template["Parameters"]["MaintenanceWorkerType"]["Default"] in allowed
    assert "G.025X" in template["Parameters"]["GlueWorkerType"]["AllowedValues"]  # the streaming job may


def test_every_job_argument_exists_in_the_settings_table(template: dict[str, Any]) -> None:
    known = {f"--{a.name}" for a in ARGS}
    passed = set(job(template)["DefaultArguments"])
    unknown = passed - known - GLUE_SPECIAL_ARGS
    assert not unknown, f"arguments the job does not define: {sorted(unknown)}"
    required = {
        "--source", "--kafka_bootstrap_servers", "--kafka_topic_pattern", "--kafka_auth", "--catalog_type",
        "--catalog_name", "--warehouse", "--namespace", "--checkpoint_location", "--dead_letter_path",
        "--trigger_interval_seconds", "--write_mode", "--max_offsets_per_trigger",
    }  # fmt: skip
    assert required <= passed


def test_tunable_job_arguments_are_stack_parameters(template: dict[str, Any]) -> None:
    args = job(template)["DefaultArguments"]
    for arg, param in {
        "--trigger_interval_seconds": "TriggerIntervalSeconds",
        "--write_mode": "WriteMode",
        "--max_offsets_per_trigger": "MaxOffsetsPerTrigger",
        "--starting_offsets": "StartingOffsets",
        "--transactions": "SourceTransactions",
    }.items():
        assert args[arg] == {"Ref": param}
        assert param in template["Parameters"]
    # The topic pattern: the parameter when set, else derived from the connector's names
    # (test_cfn_topic_pattern.py).
    assert args["--kafka_topic_pattern"] == {"Fn::Sub": "${TopicPrefix}(\\.${SourceDatabase}\\..*|\\.transaction)?"}
    assert template["Parameters"]["KafkaTopicPattern"]["Default"] == ""


# ---------------------------------------------------------------- source database
def test_binlog_is_row_based_full_image_with_backups_on(template: dict[str, Any]) -> None:
    group = template["Resources"]["DbParameterGroup"]["Properties"]
    assert group["Family"] == {"Fn::Sub": "mysql${DbEngineVersion}"}  # mysql8.4 by default (lint rule E9004)
    assert group["Parameters"]["binlog_format"] == "ROW"
    assert group["Parameters"]["binlog_row_image"] == "FULL"
    db = template["Resources"]["Database"]["Properties"]
    assert db["Engine"] == "mysql" and template["Parameters"]["DbEngineVersion"]["Default"] == "8.4"
    assert db["BackupRetentionPeriod"] >= 1
    script = user_data(template)
    assert "mysql.rds_set_configuration('binlog retention hours', ${BinlogRetentionHours})" in script


def test_debezium_user_is_created_with_only_the_privileges_it_needs(template: dict[str, Any]) -> None:
    script = user_data(template)
    grants = [line for line in script.splitlines() if line.strip().startswith("GRANT")]
    privileges = [p.strip() for g in grants for p in g.strip().removeprefix("GRANT ").split(" ON ")[0].split(",")]
    # Debezium's five, plus LOCK TABLES: RDS has no global read lock, so the snapshot locks tables.
    assert sorted(privileges) == sorted(
        ["SELECT", "RELOAD", "SHOW DATABASES", "REPLICATION SLAVE", "REPLICATION CLIENT", "LOCK TABLES"]
    )
    assert all(" ON *.* TO '$dbz_user'@'%';" in g for g in grants)
    # The connector starts only once that user exists: the instance signals, the connector waits.
    assert template["Resources"]["ClientInstance"]["CreationPolicy"]["ResourceSignal"]["Count"] == 1
    # (through SourceReady, whose value names the instance in demo mode: test_cfn_existing_source.py)
    assert "SourceReady" in template["Resources"]["Connector"]["DependsOn"]
    assert "${ClientInstance}" in template["Resources"]["SourceReady"]["Properties"]["Value"]["Fn::Sub"]


# ---------------------------------------------------------------- client instance
def test_client_instance_is_reachable_through_ssm_only(template: dict[str, Any]) -> None:
    inst = template["Resources"]["ClientInstance"]["Properties"]
    assert "KeyName" not in inst and "NetworkInterfaces" not in inst
    assert inst["SubnetId"] == {"Ref": "PrivateSubnetA"}
    assert inst["SecurityGroupIds"] == [{"Ref": "ClientSecurityGroup"}]
    for name, rule in resources_of(template, "AWS::EC2::SecurityGroupIngress").items():
        assert rule["Properties"]["GroupId"] != {"Ref": "ClientSecurityGroup"}, name
    for _, node in walk(template):
        if isinstance(node, dict) and "FromPort" in node:
            assert not (node["FromPort"] <= 22 <= node["ToPort"] and node["FromPort"] != 0), "port 22 is open"
    role = template["Resources"]["ClientRole"]["Properties"]
    assert {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"} in role[
        "ManagedPolicyArns"
    ]
    meta = template["Resources"]["ClientLaunchTemplate"]["Properties"]["LaunchTemplateData"]["MetadataOptions"]
    assert meta["HttpTokens"] == "required"


def test_client_loads_the_seed_sql_from_the_artifacts_bucket(template: dict[str, Any]) -> None:
    script = user_data(template)
    assert "s3://${ArtifactsBucket}/${SeedSqlPrefix}/" in script
    assert "<<<'${SeedFileList}'" in script and 'sql < "/opt/cdc/sql/$name"' in script
    variables = template["Resources"]["ClientInstance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"][1]
    assert variables == {"SeedFileList": {"Fn::Join": [",", {"Ref": "SeedSqlFiles"}]}}
    assert template["Parameters"]["SeedSqlFiles"]["Default"] == "01_create_customer.sql"
    assert script.rstrip().splitlines()[-1].strip() == "signal 0"


def test_client_user_data_is_valid_bash(template: dict[str, Any], tmp_path: Path) -> None:
    # Fill every ${...} the way CloudFormation would, then let bash parse (not run) the script.
    script = re.sub(r"\$\{[A-Za-z0-9:.]+\}", "x", user_data(template))
    path = tmp_path / "user-data.sh"
    path.write_text(script, encoding="utf-8")
    subprocess.run(["bash", "-n", str(path)], check=True)


# ---------------------------------------------------------------- secrets
def test_no_secret_is_a_parameter_or_a_literal(template: dict[str, Any]) -> None:
    for name, param in template["Parameters"].items():
        assert not re.search("password", name, re.I), name
        if re.search("secret", name, re.I):  # only the ARN of a secret (an existing database's)
            assert param["AllowedPattern"].startswith("^(arn:aws[a-z-]*:secretsmanager:"), name
    db = template["Resources"]["Database"]["Properties"]
    assert db["ManageMasterUserPassword"] is True and "MasterUserPassword" not in db
    (secret,) = resources_of(template, "AWS::SecretsManager::Secret").values()
    assert "SecretString" not in secret["Properties"]
    assert secret["Properties"]["GenerateSecretString"]["GenerateStringKey"] == "password"
    for path, value in walk(template):
        if path and isinstance(path[-1], str) and re.search("password", path[-1], re.I) and isinstance(value, str):
            pytest.fail(f"literal password at {path}")


def test_connector_reads_its_credentials_through_a_dynamic_reference(template: dict[str, Any]) -> None:
    (conn,) = resources_of(template, "AWS::KafkaConnect::Connector").values()
    config = conn["Properties"]["ConnectorConfiguration"]
    for key, field in (("database.password", "password"), ("database.user", "username")):
        assert config[key] == {
            "Fn::Sub": [
                f"{{{{resolve:secretsmanager:${{DbSecret}}:SecretString:{field}}}}}",
                {"DbSecret": {"Ref": "DebeziumSecret"}},
            ]
        }


# ---------------------------------------------------------------- Athena, outputs, suppressions
def test_athena_named_queries_come_from_the_sql_files(template: dict[str, Any]) -> None:
    from cdcdeploy.templates import ATHENA_SQL_DIR

    files = sorted(ATHENA_SQL_DIR.glob("*.sql"))
    queries = resources_of(template, "AWS::Athena::NamedQuery")
    assert len(files) >= 4 and len(queries) == len(files)
    bodies = [q["Properties"]["QueryString"]["Fn::Sub"][0] for q in queries.values()]
    for f in files:
        assert f.read_text(encoding="utf-8").strip() + "\n" in bodies, f.name
    assert any('$snapshots"' in b for b in bodies) and any('$history"' in b for b in bodies)
    for q in queries.values():
        assert q["Properties"]["WorkGroup"] == {"Ref": "AthenaWorkGroup"}
        assert q["Properties"]["Database"] == {"Ref": "GlueDatabase"}
        text, variables = q["Properties"]["QueryString"]["Fn::Sub"]
        names = set(re.findall(r"\$\{([^}!]+)\}", text))
        assert names <= set(template["Parameters"]) | set(variables), names


def test_outputs_name_everything_an_operator_needs(template: dict[str, Any]) -> None:
    assert {
        "JobName", "LakeBucketName", "ArtifactsBucketName", "AthenaResultsBucketName", "GlueDatabaseName",
        "AthenaWorkGroupName", "ConnectorArn", "MskClusterArn", "ClientInstanceId", "DatabaseMasterSecretArn",
        "DebeziumSecretArn",
    } <= set(template["Outputs"])  # fmt: skip


def test_every_checkov_suppression_says_why(template: dict[str, Any], bootstrap_template: dict[str, Any]) -> None:
    skips = [
        (name, skip)
        for tpl in (template, bootstrap_template)
        for name, res in tpl["Resources"].items()
        for skip in res.get("Metadata", {}).get("checkov", {}).get("skip", [])
    ]
    assert skips
    for name, skip in skips:
        assert re.fullmatch(r"CKV2?_AWS_\d+", skip["id"]), name
        assert len(skip.get("comment", "")) >= 30, f"{name} {skip['id']} needs a real justification"


# ---------------------------------------------------------------- MySQL version, saved queries per engine
def _rule_holds(template: dict[str, Any], rule: dict[str, Any], **parameters: str) -> bool:
    """A template Rule evaluated as CloudFormation would for these parameter values (defaults otherwise):
    True when its condition is false or every assertion holds."""
    values = parameter_values(template, **parameters)
    if "RuleCondition" in rule and not condition_holds(template, rule["RuleCondition"], values):
        return True
    return all(condition_holds(template, a["Assert"], values) for a in rule["Assertions"])


def test_mysql_defaults_to_8_4_and_8_0_needs_an_explicit_lifecycle_choice(raw_template: dict[str, Any]) -> None:
    rule = raw_template["Rules"]["MySql80NeedsLifecycleSupport"]
    version = raw_template["Parameters"]["DbEngineVersion"]
    assert version["Default"] == "8.4" and set(version["AllowedValues"]) == {"8.4", "8.0"}
    assert _rule_holds(raw_template, rule)  # the defaults deploy
    assert not _rule_holds(raw_template, rule, DbEngineVersion="8.0")
    for choice in ("open-source-rds-extended-support", "open-source-rds-extended-support-disabled"):
        assert _rule_holds(raw_template, rule, DbEngineVersion="8.0", DbEngineLifecycleSupport=choice)
    assert _rule_holds(raw_template, rule, SourceEngine="postgres", DbEngineVersion="8.0")
    # The choice reaches the instance, and the parameter group follows the version.
    pinned = resolve_variant(
        raw_template, DbEngineVersion="8.0", DbEngineLifecycleSupport="open-source-rds-extended-support"
    )
    db = pinned["Resources"]["Database"]["Properties"]
    assert db["EngineLifecycleSupport"] == {"Ref": "DbEngineLifecycleSupport"}
    assert "EngineLifecycleSupport" not in resolve_variant(raw_template)["Resources"]["Database"]["Properties"]
    family = raw_template["Resources"]["DbParameterGroup"]["Properties"]["Family"]
    assert family == {"Fn::Sub": "mysql${DbEngineVersion}"}


def test_hudi_deploys_only_on_glue_5_with_either_wire_format(raw_template: dict[str, Any]) -> None:
    """Athena reads Hudi 0.14/0.15 tables (Glue 5.0's Hudi), not those of Glue 6.0's Hudi 1.1.1; a 5.0
    job ships Spark 3.5's spark-avro (GlueAvro5JarKey), so Avro works there too."""
    version = raw_template["Parameters"]["GlueVersion"]
    assert version["Default"] == "6.0" and set(version["AllowedValues"]) == {"6.0", "5.0"}
    hudi = raw_template["Rules"]["HudiNeedsGlue50"]
    assert _rule_holds(raw_template, hudi)  # the defaults deploy
    assert _rule_holds(raw_template, hudi, TableFormat="delta")
    assert not _rule_holds(raw_template, hudi, TableFormat="hudi")
    assert _rule_holds(raw_template, hudi, TableFormat="hudi", GlueVersion="5.0")
    assert set(raw_template["Rules"]) & {"Glue50ReadsJsonOnly"} == set()
    # Both jobs run the chosen version.
    for name in ("CdcJob", "MaintenanceJob"):
        assert raw_template["Resources"][name]["Properties"]["GlueVersion"] == {"Ref": "GlueVersion"}


def test_debezium_user_grants_exist_in_mysql_8_4(template: dict[str, Any]) -> None:
    """REPLICATION SLAVE / REPLICATION CLIENT are still static privileges in 8.4 (CLIENT covers SHOW
    BINARY LOG STATUS); the removed 8.4 statements and privileges must not appear."""
    script = user_data(template)
    grants = re.findall(r"^\s*GRANT (.+?) ON \*\.\* TO", script, re.M)
    granted = {p.strip() for g in grants for p in g.split(",")}
    assert granted == {"SELECT", "RELOAD", "SHOW DATABASES", "REPLICATION SLAVE", "REPLICATION CLIENT", "LOCK TABLES"}
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    for gone in ("SHOW MASTER STATUS", "mysql_native_password", "SUPER"):
        assert gone not in code, gone


@pytest.mark.parametrize(("engine", "extra", "table"), [("mysql", {}, "salesdb_customer"), ("postgres", {}, "public_customer")])  # fmt: skip
def test_saved_queries_name_the_lake_table_the_job_writes_for_each_engine(
    raw_template: dict[str, Any], engine: str, extra: dict[str, str], table: str
) -> None:
    from cdclake.common.settings import Settings

    variant = resolve_variant(raw_template, SourceEngine=engine, **extra)
    values = {n: str(p.get("Default")) for n, p in raw_template["Parameters"].items()} | extra
    first = "salesdb" if engine == "mysql" else values["PgSchema"]  # Debezium's database, or the schema
    expected = Settings(namespace=values["GlueDatabaseName"]).table_identifier(first, "customer").split(".", 1)[1]
    assert expected == f"cdc_lake.{table}"
    for name, q in resources_of(variant, "AWS::Athena::NamedQuery").items():
        text, variables = q["Properties"]["QueryString"]["Fn::Sub"]
        scope = values | {k: values[v["Ref"]] for k, v in variables.items()}
        sql = re.sub(r"\$\{([^}!]+)\}", lambda m, scope=scope: scope[m.group(1)], text)
        assert f'"cdc_lake"."{table}' in sql, name


def test_the_job_reads_the_mysql_schema_change_topic_locally_and_on_aws(template: dict[str, Any]) -> None:
    """Column renames and dropped tables come from the DDL on the connector's `topic.prefix` topic
    (`include.schema.changes`): the job's topic pattern must match it, and the Glue role may read it."""

    from cdcstack import sources
    from cdctools import local_job

    connector = json.loads(
        (Path(__file__).resolve().parents[2] / "cloudformation" / "connector" / "debezium-mysql.json").read_text()
    )
    assert connector["include.schema.changes"] == "true"
    derived = job(template)["DefaultArguments"]["--kafka_topic_pattern"]["Fn::Sub"]
    default = derived.replace("${TopicPrefix}", "salesdb").replace("${SourceDatabase}", "salesdb")
    local = local_job.topic_pattern(sources.stack_config("mysql"))
    assert default == local
    for topic in ("salesdb", "salesdb.salesdb.customer", "salesdb.transaction"):
        assert re.fullmatch(default, topic), topic
    for topic in ("salesdb.schema-history", "salesdb-heartbeat.salesdb", "salesdbx"):
        assert not re.fullmatch(default, topic), topic
    statement = next(
        st
        for st in template["Resources"]["GlueJobRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        if st.get("Sid") == "KafkaChangeTopics"
    )
    arns = [r["Fn::Sub"][0] for r in statement["Resource"]]
    assert any(a.endswith("/${TopicPrefix}") for a in arns) and any(a.endswith("/${TopicPrefix}.*") for a in arns)


def test_lake_formation_grants_both_job_roles_only_when_asked(raw_template: dict[str, Any]) -> None:
    assert not resources_of(resolve_variant(raw_template), "AWS::LakeFormation::PrincipalPermissions")
    granted = resources_of(
        resolve_variant(raw_template, LakeFormationGrants="true"), "AWS::LakeFormation::PrincipalPermissions"
    )
    by_role: dict[str, dict[str, set[str]]] = {}
    for r in granted.values():
        props = r["Properties"]
        role = props["Principal"]["DataLakePrincipalIdentifier"]["Fn::GetAtt"][0]
        (kind,) = props["Resource"]
        by_role.setdefault(role, {})[kind] = set(props["Permissions"])
        assert props["PermissionsWithGrantOption"] == []
        target = props["Resource"][kind]
        assert target.get("Name", target.get("DatabaseName")) == {"Ref": "GlueDatabase"}
        if kind == "Table":
            assert target["TableWildcard"] == {}  # the tables the jobs create later too
    assert set(by_role) == {"GlueJobRole", "MaintenanceJobRole"}
    for grants in by_role.values():
        assert grants["Database"] == {"DESCRIBE", "CREATE_TABLE", "ALTER"}
        assert grants["Table"] == {"SELECT", "INSERT", "DELETE", "DESCRIBE", "ALTER", "DROP"}


def test_the_connector_role_grants_both_internal_topic_prefixes_aws_names(template: dict[str, Any]) -> None:
    # AWS's MSK Connect pages name __amazon_msk_connect_* (the default offset storage topic) and
    # __msk_connect_* (the configs, status and offsets topics of "State management").
    policy = template["Resources"]["ConnectRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    by_sid = {s["Sid"]: [r["Fn::Sub"][0] for r in s["Resource"] if "Fn::Sub" in r] for s in policy["Statement"]}
    for prefix in ("__amazon_msk_connect_*", "__msk_connect_*"):
        assert any(a.endswith(f":topic/${{Name}}/${{Uuid}}/{prefix}") for a in by_sid["Topics"]), prefix
        assert any(a.endswith(f":group/${{Name}}/${{Uuid}}/{prefix}") for a in by_sid["Groups"]), prefix


def test_deploys_cost_table_has_a_row_for_every_billed_resource_of_the_template(template: dict[str, Any]) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "DEPLOY.md").read_text()
    table = text.split("## Cost", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    billed = {
        "AWS::MSK::ServerlessCluster": ["MSK Serverless cluster", "MSK Serverless partitions"],
        "AWS::KafkaConnect::Connector": ["MSK Connect"],
        "AWS::EC2::NatGateway": ["NAT gateway + its public IPv4"],
        "AWS::KMS::Key": ["KMS key, 2 secrets"],
    }
    jobs = {"gluestreaming": "Glue streaming job", "glueetl": "Glue maintenance job"}
    for r in template["Resources"].values():
        names = billed.get(r["Type"], [])
        if r["Type"] == "AWS::Glue::Job":
            names = [jobs[r["Properties"]["Command"]["Name"]]]
        for name in names:
            assert name in rows, f"{r['Type']}: no row {name!r} in DEPLOY.md's cost table ({rows})"
