"""What the template promises about table maintenance: a scheduled Glue 5.0 batch job beside the
streaming job, on the same catalog and warehouse, with only the permissions maintenance needs, and
the streaming job maintaining between batches."""

from __future__ import annotations

import re
from typing import Any

from cdclake.jobs.maintenance_job import JOB_ARGS
from cfn_helpers import resources_of
from test_cfn_template import GLUE_SPECIAL_ARGS, statements


def maintenance_job(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]["MaintenanceJob"]["Properties"]


def test_maintenance_job_is_a_batch_job_of_the_streaming_jobs_glue_version_running_the_maintenance_script(
    template: dict[str, Any],
) -> None:
    props = maintenance_job(template)
    assert props["GlueVersion"] == {"Ref": "GlueVersion"}
    assert props["Command"]["Name"] == "glueetl"
    assert props["Command"]["ScriptLocation"] == {"Fn::Sub": "s3://${ArtifactsBucket}/${MaintenanceScriptKey}"}
    assert props["ExecutionProperty"]["MaxConcurrentRuns"] == 1
    assert props["Timeout"] == {"Ref": "MaintenanceTimeoutMinutes"}
    assert props["SecurityConfiguration"] == {"Ref": "GlueSecurityConfiguration"}
    args = props["DefaultArguments"]
    # TableFormat (default iceberg) names Glue's format too: tests/cloudformation/test_cfn_table_format.py.
    assert args["--datalake-formats"] == args["--table_format"] == {"Ref": "TableFormat"}
    assert template["Parameters"]["TableFormat"]["Default"] == "iceberg"
    assert args["--extra-py-files"] == {"Fn::Sub": "s3://${ArtifactsBucket}/${CdclakeZipKey}"}
    assert args["--custom-logGroup-prefix"] == {"Fn::Sub": "/aws-glue/${AWS::StackName}/cdc-maintenance"}


def test_maintenance_job_maintains_the_streaming_jobs_tables(template: dict[str, Any]) -> None:
    """Same catalog name and type, warehouse and namespace: otherwise it maintains nothing."""
    mine = maintenance_job(template)["DefaultArguments"]
    stream = template["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]
    for arg in ("--catalog_type", "--catalog_name", "--warehouse", "--namespace"):
        assert mine[arg] == stream[arg], arg
    known = {f"--{a.name}" for a in JOB_ARGS}
    unknown = set(mine) - known - GLUE_SPECIAL_ARGS
    assert not unknown, f"arguments the maintenance job does not define: {sorted(unknown)}"
    assert not any(a.startswith(("--kafka", "--checkpoint", "--trigger")) for a in mine)


def test_maintenance_runs_on_a_schedule_and_in_the_streaming_job(template: dict[str, Any]) -> None:
    (trigger,) = resources_of(template, "AWS::Glue::Trigger").values()
    props = trigger["Properties"]
    assert props["Type"] == "SCHEDULED" and props["StartOnCreation"] is True
    assert props["Schedule"] == {"Ref": "MaintenanceSchedule"}
    assert props["Actions"] == [{"JobName": {"Ref": "MaintenanceJob"}}]
    schedule = template["Parameters"]["MaintenanceSchedule"]
    assert re.fullmatch(schedule["AllowedPattern"], schedule["Default"])
    stream = template["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]
    assert stream["--maintenance_interval_minutes"] == {"Ref": "StreamMaintenanceIntervalMinutes"}
    assert template["Outputs"]["MaintenanceJobName"]["Value"] == {"Ref": "MaintenanceJob"}


def test_maintenance_role_reaches_only_the_warehouse_and_the_catalog(template: dict[str, Any]) -> None:
    role = template["Resources"]["MaintenanceJobRole"]
    assert maintenance_job(template)["Role"] == {"Fn::GetAtt": ["MaintenanceJobRole", "Arn"]}
    stmts = [s for where, s in statements(template) if where.startswith("Resources.MaintenanceJobRole")]
    assert stmts and role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "glue.amazonaws.com"
    }
    actions = {a for s in stmts for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.startswith(("kafka", "ec2:", "secretsmanager")) for a in actions)
    assert not {"glue:CreateTable", "glue:DeleteTable"} & actions
    objects = next(s for s in stmts if s.get("Sid") == "LakeObjects")
    assert objects["Resource"] == [
        {"Fn::Sub": "${LakeBucket.Arn}/warehouse/*"},
        {"Fn::Sub": "${LakeBucket.Arn}/glue-temp/*"},
    ]
    assert "s3:DeleteObject" in objects["Action"]  # expiry and orphan removal delete files
