"""The project's cfn-lint rules catch what cfn-lint's schemas let through, and pass our template."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from cdcdeploy import templates
from cfnlint.api import lint as cfn_lint

RULES_DIR = str(templates.CFN_DIR / "lint_rules")

JOB = """
  Job:
    Type: AWS::Glue::Job
    Properties:
      Role: arn:aws:iam::123456789012:role/glue
      GlueVersion: "{version}"
      Command:
        Name: {command}
        ScriptLocation: s3://bucket/job.py
{extra}
      DefaultArguments:
{args}
"""
STREAMING_ARGS = "        --checkpoint_location: s3://bucket/checkpoints/\n"
DB = """
  Params:
    Type: AWS::RDS::DBParameterGroup
    Properties:
      Description: p
      Family: {family}
  Db:
    Type: AWS::RDS::DBInstance
    Properties:
      Engine: mysql
      EngineVersion: !Ref Version
      DBInstanceClass: db.t4g.micro
      AllocatedStorage: "20"
      DBParameterGroupName: !Ref Params
"""


def run_lint(text: str) -> list[str]:
    # The same configuration as `cfn-lint --append-rules cloudformation/lint_rules` (make lint-cfn).
    config = {"append_rules": [RULES_DIR], "regions": ["eu-west-1"]}
    return [f"{m.rule.id} {m.message}" for m in cfn_lint(text, config=config)]  # type: ignore[arg-type]


def lint(resources: str, parameters: str = "") -> list[str]:
    text = f'AWSTemplateFormatVersion: "2010-09-09"\n{parameters}Resources:{resources}'
    return [m for m in run_lint(text) if m.startswith("E90")]


def job(command: str = "gluestreaming", version: str = "6.0", extra: str = "", args: str = STREAMING_ARGS) -> str:
    return JOB.format(command=command, version=version, extra=extra, args=args or "        --x: y\n")


def test_streaming_job_with_gluestreaming_glue_5_and_no_timeout_passes() -> None:
    assert lint(job(extra="      MaintenanceWindow: Sun:03")) == []


def test_streaming_job_declared_as_glueetl_is_an_error() -> None:
    (err,) = lint(job(command="glueetl"))
    assert err.startswith("E9001") and "must use Command.Name gluestreaming" in err


def test_gluestreaming_without_streaming_arguments_is_an_error() -> None:
    errors = lint(job(args="        --source: files\n", extra="      MaintenanceWindow: Sun:03"))
    assert [e[:5] for e in errors] == ["E9001"]


def test_batch_job_as_glueetl_passes() -> None:
    assert lint(job(command="glueetl", args="        --source: files\n")) == []


def test_unknown_command_name_is_an_error() -> None:
    assert any("unknown Glue Command.Name 'gluestream'" in e for e in lint(job(command="gluestream")))


def test_glue_version_other_than_6_is_an_error() -> None:
    errors = lint(job(version="5.0", extra="      MaintenanceWindow: Sun:03"))
    assert errors == ["E9002 Job: GlueVersion must be '6.0', got '5.0'"]


def test_glue_version_parameter_defaults_to_6_and_offers_only_6_and_5() -> None:
    window = "      MaintenanceWindow: Sun:03"
    param = 'Parameters:\n  GlueVersion:\n    Type: String\n    Default: "{d}"\n    AllowedValues: [{a}]\n'
    versioned = job(extra=window).replace('GlueVersion: "6.0"', "GlueVersion: !Ref GlueVersion")
    assert lint(versioned, param.format(d="6.0", a='"6.0", "5.0"')) == []
    assert lint(versioned, param.format(d="5.0", a='"6.0", "5.0"')) == [
        "E9002 Job: GlueVersion must be '6.0', got '5.0'"
    ]
    assert lint(versioned, param.format(d="6.0", a='"6.0", "4.0"')) == [
        "E9002 Job: parameter GlueVersion may offer only ('6.0', '5.0'), not ['4.0']"
    ]


@pytest.mark.parametrize("timeout", ["60", "2880"])
def test_streaming_timeout_under_seven_days_is_an_error(timeout: str) -> None:
    errors = lint(job(extra=f"      Timeout: {timeout}\n      MaintenanceWindow: Sun:03"))
    assert len(errors) == 1 and errors[0].startswith("E9003") and "would stop and not restart" in errors[0]


def test_streaming_job_without_maintenance_window_is_an_error() -> None:
    assert [e[:5] for e in lint(job())] == ["E9003"]


def test_parameter_group_family_must_match_the_engine_version() -> None:
    params = 'Parameters:\n  Version:\n    Type: String\n    Default: "8.0.40"\n'
    assert lint(DB.format(family="mysql8.0"), params) == []
    (err,) = lint(DB.format(family="mysql5.7"), params)
    assert err.startswith("E9004") and "expected 'mysql8.0'" in err


def test_rendered_pipeline_template_passes_every_rule(built_dir: Path) -> None:
    assert run_lint((built_dir / "cdc-pipeline.yaml").read_text(encoding="utf-8")) == []


# ---------------------------------------------------------------- E9005: the job's extra jars = the manifest's
IAM_ARGS = (
    STREAMING_ARGS + "        --kafka_bootstrap_servers: b:9098\n        --kafka_auth: iam\n"
    '        --extra-jars: !Sub "s3://bucket/${JarKey}"\n'
)
JAR_PARAM = "Parameters:\n  JarKey:\n    Type: String\n    AllowedPattern: {pattern}\n"


def iam_job(args: str = IAM_ARGS) -> str:
    return job(extra="      MaintenanceWindow: Sun:03", args=args)


def test_manifest_names_the_msk_iam_jar_at_the_pinned_version() -> None:
    from cdctools import pinned_jars as runtime
    from project_rules import manifest_jar_names

    assert manifest_jar_names() == [f"aws-msk-iam-auth-{runtime.versions()['aws-msk-iam-auth']}.jar"]


def test_msk_iam_job_with_the_manifests_jar_passes_and_another_version_fails() -> None:
    from cdctools import pinned_jars as runtime

    version = runtime.versions()["aws-msk-iam-auth"].replace(".", r"\.")
    pinned = JAR_PARAM.format(pattern=f'"^glue-jars/[0-9a-f]{{12}}/aws-msk-iam-auth-{version}\\\\.jar$"')
    assert lint(iam_job(), pinned) == []
    other = JAR_PARAM.format(pattern='"^glue-jars/[0-9a-f]{12}/aws-msk-iam-auth-1\\\\.1\\\\.9\\\\.jar$"')
    (err,) = lint(iam_job(), other)
    assert err.startswith("E9005") and "aws-msk-iam-auth-" in err and "glue-extra-jars" in err


def test_msk_iam_job_without_extra_jars_fails_and_a_non_iam_job_needs_none() -> None:
    no_jars = IAM_ARGS.replace('        --extra-jars: !Sub "s3://bucket/${JarKey}"\n', "")
    (err,) = lint(iam_job(no_jars))
    assert err.startswith("E9005") and "no --extra-jars" in err
    assert lint(iam_job(no_jars.replace("--kafka_auth: iam", "--kafka_auth: none"))) == []


# ---------------------------------------------------------------- E9006, E9007: both modes, both engines
def lint_template(template: dict[str, Any]) -> list[str]:
    return [m for m in run_lint(templates.dump_template(template)) if m.startswith("E90")]


def test_a_demo_resource_left_without_its_condition_is_an_error(raw_template: dict[str, Any]) -> None:
    broken = copy.deepcopy(raw_template)
    del broken["Resources"]["NatGateway"]["Condition"]
    del broken["Resources"]["Database"]["Condition"]
    errors = lint_template(broken)
    assert sorted(e.split(" (")[0] for e in errors if e.startswith("E9006")) == ["E9006 Database", "E9006 NatGateway"]


def test_a_security_group_outside_the_existing_vpc_is_an_error(raw_template: dict[str, Any]) -> None:
    broken = copy.deepcopy(raw_template)
    broken["Resources"]["GlueSecurityGroup"]["Properties"]["VpcId"] = {"Ref": "Vpc"}
    (err,) = [e for e in lint_template(broken) if e.startswith("E9006")]
    assert "GlueSecurityGroup: with ExistingVpcId set its VpcId must be ExistingVpcId" in err


def test_a_topic_pattern_that_misses_one_engines_topics_is_an_error(raw_template: dict[str, Any]) -> None:
    broken = copy.deepcopy(raw_template)
    # The pattern of the MySQL topics for both engines: the PostgreSQL connector writes salesdb.public.*
    broken["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]["--kafka_topic_pattern"] = {
        "Fn::Sub": "${TopicPrefix}\\.${SourceDatabase}\\..*"
    }
    (err,) = [e for e in lint_template(broken) if e.startswith("E9007")]
    assert "'salesdb.public.customer', a topic PgConnector writes with SourceEngine=postgres" in err


# ---------------------------------------------------------------- E9008, E9009: a first deploy that rolls back
def test_a_custom_resource_function_reserving_concurrency_or_a_java_11_connect_is_an_error(
    raw_template: dict[str, Any],
) -> None:
    # Both old forms in one template: one lint run of the whole template (seconds) for both rules.
    broken = copy.deepcopy(raw_template)
    broken["Resources"]["BootstrapBrokersFunction"]["Properties"]["ReservedConcurrentExecutions"] = 2
    broken["Parameters"]["KafkaConnectVersion"]["AllowedValues"] = ["3.7.x", "2.7.1"]
    errors = lint_template(broken)
    (reserved,) = [e for e in errors if e.startswith("E9008")]
    assert "BootstrapBrokersFunction backs a custom resource and sets ReservedConcurrentExecutions" in reserved
    java11 = [e for e in errors if e.startswith("E9009")]
    # Both connectors (MySQL and PostgreSQL) could be deployed on 2.7.1.
    assert sorted(e.split(":")[0] for e in java11) == ["E9009 Connector", "E9009 PgConnector"]
    assert all("'2.7.1' (Java 11)" in e for e in java11)


# ---------------------------------------------------------------- E9010: MySQL 8.4's caching_sha2_password
def test_a_client_bootstrap_mysql_call_without_tls_is_an_error(raw_template: dict[str, Any]) -> None:
    assert not [e for e in lint_template(raw_template) if e.startswith("E9010")]
    broken = copy.deepcopy(raw_template)
    user_data = broken["Resources"]["ClientInstance"]["Properties"]["UserData"]["Fn::If"][2]["Fn::Base64"]["Fn::Sub"]
    assert '--user="$admin_user" --ssl --batch' in user_data[0]
    user_data[0] = user_data[0].replace(" --ssl --batch", " --batch")
    (err,) = [e for e in lint_template(broken) if e.startswith("E9010")]
    assert "ClientInstance" in err and "connects without --ssl" in err


def test_msk_iam_job_may_ship_glue_5s_spark_avro_in_a_glue_version_branch_but_not_in_both() -> None:
    from cdctools import pinned_jars as runtime

    def pin(name: str) -> str:
        return '"^glue-jars/[0-9a-f]{12}/' + name.replace(".", "\\\\.") + '$"'

    (iam,), (avro6,), (avro5,) = (runtime.jars(p) for p in ("glue-extra-jars", "glue-avro-jars", "glue5-avro-jars"))
    params = "Parameters:\n" + "".join(
        f"  {key}:\n    Type: String\n    AllowedPattern: {pin(jar.name)}\n"
        for key, jar in (("Iam", iam), ("Avro", avro6), ("Avro5", avro5))
    )

    def branches(five: str, six: str) -> str:
        return (
            STREAMING_ARGS + "        --kafka_bootstrap_servers: b:9098\n        --kafka_auth: iam\n"
            "        --extra-jars: !If\n          - IsGlue50\n"
            f'          - !Sub "s3://b/${{Iam}},s3://b/${{{five}}}"\n          - !Sub "s3://b/${{Iam}},s3://b/${{{six}}}"\n'
        )

    assert lint(iam_job(branches("Avro5", "Avro")), params) == []
    (err,) = lint(iam_job(branches("Avro5", "Avro5")), params)  # Glue 6.0 would load Spark 3.5's jar
    assert err.startswith("E9005") and "glue5-avro-jars in a GlueVersion 5.0 branch" in err
