"""doctor against a moto server holding a deployed stack in each state it must diagnose:
healthy, tables missing, the job's run failed, dead letters present, an alarm in ALARM, and no stack.

moto has no MSK Connect API: the connector's describe call alone is answered by a botocore Stubber.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cdcdeploy import doctor
from moto.glue.models import glue_backends
from moto.moto_api import state_manager

REGION = "eu-west-1"
ACCOUNT = "123456789012"  # moto's
STACK = "cdc-lake"
JOB = f"{STACK}-cdc-iceberg"
DB = "cdc_lake"
LAKE = "cdc-lake-lakebucket-abc"
WORKGROUP = f"{STACK}-cdc-lake"
CONNECTOR = f"arn:aws:kafkaconnect:{REGION}:{ACCOUNT}:connector/{STACK}-debezium-mysql/0a1b2c3d"
PREFIX = f"/aws-glue/{STACK}/cdc-iceberg"
BATCH_LINE = (
    "2026-11-25 18:00:01 INFO cdclake.jobs.batch batch 7: 12 records (12 changes, 0 tombstones, 0 schema events, "
    "{dead} dead letters) | salesdb_customer: 12 ev -> c/r 2 u 9 d 1 3.2s | behind source 4.1 s | 6.0s"
)


class Session:
    """The boto3 session the doctor uses, with MSK Connect answered by a Stubber (moto lacks it)."""

    def __init__(self, connector: dict[str, Any]) -> None:
        self.real = boto3.Session(region_name=REGION)
        self.kafkaconnect = self.real.client("kafkaconnect")
        stub = Stubber(self.kafkaconnect)
        stub.add_response("describe_connector", connector, {"connectorArn": CONNECTOR})
        stub.activate()

    def client(self, name: str) -> Any:
        return self.kafkaconnect if name == "kafkaconnect" else self.real.client(name)


RUNNING = {"connectorArn": CONNECTOR, "connectorName": f"{STACK}-debezium-mysql", "connectorState": "RUNNING"}


@pytest.fixture
def stack(aws: str) -> Iterator[dict[str, Any]]:
    """A healthy deployment: the stack and its outputs, a running job that logged a clean batch, one lake
    table that Athena counts, no dead letters, alarms in OK."""
    outputs = {"JobName": JOB, "GlueDatabaseName": DB, "LakeBucketName": LAKE, "AthenaWorkGroupName": WORKGROUP,
               "DeadLetterPath": f"s3://{LAKE}/dead-letters/cdc-iceberg/", "ConnectorArn": CONNECTOR}  # fmt: skip
    template = {
        "Resources": {
            "Marker": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "/cdc-lake/marker", "Type": "String", "Value": "x"},
            }
        },
        "Outputs": {k: {"Value": v} for k, v in outputs.items()},
    }
    boto3.client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(template))
    glue = boto3.client("glue")
    glue.create_job(Name=JOB, Role="r", Command={"Name": "gluestreaming", "ScriptLocation": "s3://a/j.py"},
                    DefaultArguments={"--custom-logGroup-prefix": PREFIX})  # fmt: skip
    # A streaming run stays RUNNING (moto would move it on to SUCCEEDED as it is read).
    state_manager.set_transition(model_name="glue::job_run", transition={"progression": "manual", "times": 10**6})
    glue.start_job_run(JobName=JOB)
    glue.create_database(DatabaseInput={"Name": DB, "CreateTableDefaultPermissions": IAM_ONLY})
    glue.create_table(DatabaseName=DB, TableInput={"Name": "salesdb_customer"})
    boto3.client("s3").create_bucket(Bucket=LAKE, CreateBucketConfiguration={"LocationConstraint": REGION})
    log_line(BATCH_LINE.format(dead=0))
    cloudwatch = boto3.client("cloudwatch")
    for name in ("streaming-job-out-of-retries", "stream-behind-source", "dead-letters"):
        cloudwatch.put_metric_alarm(
            AlarmName=f"{STACK}-{name}", AlarmDescription=f"{name}: the fix for it", MetricName=name,
            Namespace=f"CdcLake/{STACK}", Statistic="Sum", Period=300, EvaluationPeriods=1, Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )  # fmt: skip
    boto3.client("athena").create_work_group(Name=WORKGROUP)
    athena_returns(aws, "30")
    yield outputs
    state_manager.unset_transition(model_name="glue::job_run")


# What a database gets where Lake Formation leaves access to IAM (the account's default settings).
IAM_ONLY = [{"Principal": {"DataLakePrincipalIdentifier": "IAM_ALLOWED_PRINCIPALS"}, "Permissions": ["ALL"]}]


def log_line(message: str) -> None:
    logs = boto3.client("logs")
    group = f"{PREFIX}/output"
    if not logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
        logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=group, logStreamName="driver")
    logs.put_log_events(logGroupName=group, logStreamName="driver",
                        logEvents=[{"timestamp": int(time.time() * 1000), "message": message}])  # fmt: skip


def athena_returns(endpoint: str, count: str) -> None:
    """The next Athena query's result (moto runs no query: its API takes the rows to return)."""
    body = {"account_id": ACCOUNT, "region": REGION, "results": [
        {"rows": [{"Data": [{"VarCharValue": "_col0"}]}, {"Data": [{"VarCharValue": count}]}],
         "column_info": [{"Name": "_col0", "Type": "bigint", "CatalogName": "hive", "SchemaName": "", "TableName": "",
                          "Label": "_col0", "Precision": 19, "Scale": 0, "Nullable": "UNKNOWN", "CaseSensitive": False}]}]}  # fmt: skip
    request = urllib.request.Request(f"{endpoint}/moto-api/static/athena/query-results",
                                     data=json.dumps(body).encode(), method="POST")  # fmt: skip
    urllib.request.urlopen(request, timeout=10).close()


def diagnose(connector: dict[str, Any] = RUNNING) -> dict[str, doctor.Result]:
    results = doctor.run(Session(connector), STACK, REGION, sleep=lambda _: None)
    return {r.check: r for r in results}


def failed(results: dict[str, doctor.Result]) -> list[str]:
    return [name for name, r in results.items() if not r.ok]


def test_a_healthy_deployment_passes_every_check_in_order(stack: dict[str, Any]) -> None:
    results = diagnose()
    assert list(results) == [
        "stack", "connector", "job", "batches", "tables", "lakeformation", "dead-letters", "alarms", "athena"
    ]  # fmt: skip
    assert failed(results) == [], [r.line() for r in results.values()]
    assert results["batches"].detail.endswith(
        "min ago: batch 7: 12 records (12 changes, 0 tombstones, 0 schema events, 0 dead letters), behind source 4.1 s"
    )
    assert results["athena"].detail == "rows: salesdb_customer 30"


def test_missing_lake_tables_are_diagnosed_with_where_to_look(stack: dict[str, Any]) -> None:
    boto3.client("glue").delete_table(DatabaseName=DB, Name="salesdb_customer")
    results = diagnose()
    assert failed(results) == ["tables", "athena"]
    assert "KafkaTopicPattern" in results["tables"].fix


def test_a_failed_job_run_is_diagnosed_with_its_error_log_and_the_restart(stack: dict[str, Any]) -> None:
    (run,) = glue_backends[ACCOUNT][REGION].jobs[JOB].job_runs
    run._status = "FAILED"  # what Glue reports after the run and its retries failed
    results = diagnose()
    assert failed(results) == ["job"]
    assert "batches" not in results  # a stopped job's last batch line says nothing about now
    assert "FAILED" in results["job"].detail
    assert results["job"].fix == (
        f"fix the cause ({PREFIX}/error), then aws glue start-job-run --job-name {JOB} (it resumes from its checkpoint)"
    )


def test_dead_letters_present_are_diagnosed_with_the_replay_command(stack: dict[str, Any]) -> None:
    s3 = boto3.client("s3")
    for batch in ("batch=3-0a1b2c3d4e5f", "batch=9-5f4e3d2c1b0a"):
        s3.put_object(Bucket=LAKE, Key=f"dead-letters/cdc-iceberg/{batch}/part-0.json", Body=b"{}")
    log_line(BATCH_LINE.format(dead=2))
    results = diagnose()
    assert failed(results) == ["batches", "dead-letters"]
    assert results["dead-letters"].detail.startswith("2 file(s) in 2 batch folder(s)")
    assert results["dead-letters"].fix.endswith(
        f"replay s3://{LAKE}/dead-letters/cdc-iceberg/batch=9-5f4e3d2c1b0a/ --region {REGION}"
    )


def test_an_alarm_in_alarm_is_named_with_its_description(stack: dict[str, Any]) -> None:
    boto3.client("cloudwatch").set_alarm_state(
        AlarmName=f"{STACK}-stream-behind-source", StateValue="ALARM", StateReason="threshold crossed"
    )
    results = diagnose()
    assert failed(results) == ["alarms"]
    assert results["alarms"].detail == f"in ALARM: {STACK}-stream-behind-source"
    assert results["alarms"].fix == f"{STACK}-stream-behind-source: stream-behind-source: the fix for it"


def test_a_failed_connector_is_diagnosed_with_its_error_and_log_group(stack: dict[str, Any]) -> None:
    state = RUNNING | {"connectorState": "FAILED", "stateDescription": {"code": "UnsupportedClassVersionError",
                                                                      "message": "class file version 61.0"}}  # fmt: skip
    results = diagnose(state)
    assert failed(results) == ["connector"]
    assert "FAILED: UnsupportedClassVersionError class file version 61.0" in results["connector"].detail
    assert f"/msk-connect/{STACK}/debezium-mysql" in results["connector"].fix


def test_no_stack_stops_after_the_first_check_and_main_exits_1(aws: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor.main([STACK, "--region", REGION]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"FAIL stack        no stack {STACK} in this account and region"
    assert out[-1] == "[doctor] 0/1 checks OK; failed: stack"


def test_a_running_job_without_a_batch_line_since_its_start_is_diagnosed(stack: dict[str, Any]) -> None:
    logs = boto3.client("logs")
    logs.delete_log_group(logGroupName=f"{PREFIX}/output")
    logs.create_log_group(logGroupName=f"{PREFIX}/output")
    results = diagnose()
    assert failed(results) == ["batches"]
    assert results["batches"].detail.startswith(f"no batch line in {PREFIX}/output since the run started")
    assert f"{PREFIX}/error" in results["batches"].fix


def test_a_database_lake_formation_governs_without_the_stacks_grants_is_diagnosed_with_the_parameter(
    stack: dict[str, Any],
) -> None:
    glue = boto3.client("glue")
    glue.update_database(Name=DB, DatabaseInput={"Name": DB, "CreateTableDefaultPermissions": []})
    results = diagnose()
    assert failed(results) == ["lakeformation"]
    assert "Lake Formation governs cdc_lake" in results["lakeformation"].detail
    assert "--parameter LakeFormationGrants=true" in results["lakeformation"].fix
    # With the stack's grants the same database passes.
    assert doctor.check_lake_formation(glue, DB, "true", STACK).ok
