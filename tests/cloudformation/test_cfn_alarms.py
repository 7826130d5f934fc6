"""The stack's alarms: the streaming job out of retries, the stream behind the source, the maintenance
job failing; the events and log lines they count; and the optional SNS topic."""

from __future__ import annotations

import json
import logging
import re
import shlex
from typing import Any

import pytest
from cdclake.batch import BatchReport, TableReport
from cdclake.job import configure_logging
from cfn_helpers import resolve_variant, resources_of


def alarm(template: dict[str, Any], name: str) -> dict[str, Any]:
    return template["Resources"][name]["Properties"]


def metric_filter(template: dict[str, Any], metric: str) -> dict[str, Any]:
    (found,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::Logs::MetricFilter").values()
        if r["Properties"]["MetricTransformations"][0]["MetricName"] == metric
    ]
    return found


def test_failed_runs_of_both_jobs_are_recorded_from_glues_state_change_events(template: dict[str, Any]) -> None:
    (rule,) = resources_of(template, "AWS::Events::Rule").values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.glue"] and pattern["detail-type"] == ["Glue Job State Change"]
    assert pattern["detail"]["jobName"] == [{"Ref": "CdcJob"}, {"Ref": "MaintenanceJob"}]
    assert set(pattern["detail"]["state"]) == {"FAILED", "TIMEOUT", "ERROR"}  # a manual stop is no failure
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"]["Fn::Sub"].endswith(":log-group:${JobEventsLogGroup}")
    # EventBridge may write there: the log group's resource policy says so, for that group only.
    policy = json.loads(
        re.sub(
            r"\$\{[^}]+\}",
            "x",
            template["Resources"]["JobEventsLogGroupPolicy"]["Properties"]["PolicyDocument"]["Fn::Sub"],
        )
    )
    (statement,) = policy["Statement"]
    assert "events.amazonaws.com" in statement["Principal"]["Service"]
    assert statement["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert rule["DependsOn"] == "JobEventsLogGroupPolicy"
    group = template["Resources"]["JobEventsLogGroup"]["Properties"]
    assert group["KmsKeyId"] == {"Fn::GetAtt": ["PipelineKey", "Arn"]} and group["RetentionInDays"] == {
        "Ref": "LogRetentionDays"
    }


@pytest.mark.parametrize(
    ("metric", "job"), [("StreamingJobFailedRuns", "CdcJob"), ("MaintenanceJobFailedRuns", "MaintenanceJob")]
)
def test_failed_runs_are_counted_per_job(template: dict[str, Any], metric: str, job: str) -> None:
    f = metric_filter(template, metric)
    assert f["LogGroupName"] == {"Ref": "JobEventsLogGroup"}
    assert f["FilterPattern"] == {"Fn::Sub": f'{{ $.detail.jobName = "${{{job}}}" }}'}


def test_the_streaming_job_alarms_when_more_runs_failed_than_glue_retries(template: dict[str, Any]) -> None:
    a = alarm(template, "StreamingJobOutOfRetries")
    assert (a["MetricName"], a["Statistic"], a["Period"]) == ("StreamingJobFailedRuns", "Sum", 3600)
    # MaxRetries + 1 failed runs: the first run and every retry.
    assert a["Threshold"] == {"Ref": "GlueMaxRetries"} and a["ComparisonOperator"] == "GreaterThanThreshold"
    assert template["Resources"]["CdcJob"]["Properties"]["MaxRetries"] == {"Ref": "GlueMaxRetries"}
    assert a["TreatMissingData"] == "notBreaching"  # no event: nothing failed


def test_the_maintenance_job_alarms_on_any_failed_run(template: dict[str, Any]) -> None:
    a = alarm(template, "MaintenanceJobFailed")
    assert (a["MetricName"], a["Statistic"], a["Threshold"], a["ComparisonOperator"]) == (
        "MaintenanceJobFailedRuns", "Sum", 0, "GreaterThanThreshold"
    )  # fmt: skip
    assert template["Resources"]["MaintenanceJob"]["Properties"]["MaxRetries"] == 0


def space_delimited_fields(pattern: str, line: str) -> dict[str, str] | None:
    """CloudWatch Logs' space-delimited filter of the form [..., name="literal", name, ...]: the
    named fields of the line's last tokens, or None when a literal does not match."""
    fields = [f.strip() for f in pattern.strip("[]").split(",")]
    assert fields[0] == "...", "only a leading ellipsis is modelled here"
    fields = fields[1:]
    tokens = shlex.split(line, posix=True)  # quoted strings are one field, as in CloudWatch
    if len(tokens) < len(fields):
        return None
    out = {}
    for spec, token in zip(fields, tokens[-len(fields) :], strict=True):
        name, _, literal = spec.partition("=")
        if literal and token != literal.strip('"'):
            return None
        out[name] = token
    return out


def test_the_lag_metric_reads_the_behind_source_seconds_of_the_jobs_batch_line(
    template: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    f = metric_filter(template, "BehindSourceSeconds")
    assert f["LogGroupName"] == {"Ref": "GlueJobOutputLogGroup"}  # stdout of the job: its log lines
    transform = f["MetricTransformations"][0]
    report = BatchReport(batch_id=7, records=9, changes=7, behind_seconds=1234.56, seconds=6.1)
    report.tables = [
        TableReport(table="glue_catalog.cdc.salesdb_customer", events=7, schema="added status", seconds=3.2)
    ]
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging()  # the job's own log format, on stdout
        logging.getLogger("cdclake.batch").info(report.line())
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    fields = space_delimited_fields(f["FilterPattern"], line)
    assert fields is not None, line
    assert float(fields[transform["MetricValue"].lstrip("$")]) == pytest.approx(1234.6)
    # A batch without a source timestamp (nothing but tombstones) writes no lag figure: no data point.
    report.behind_seconds = None
    assert space_delimited_fields(f["FilterPattern"], report.line()) is None


def test_the_lag_alarm_uses_the_threshold_parameter(template: dict[str, Any]) -> None:
    a = alarm(template, "StreamBehindSource")
    assert (a["MetricName"], a["Statistic"], a["EvaluationPeriods"]) == ("BehindSourceSeconds", "Maximum", 2)
    assert a["Threshold"] == {"Ref": "MaxBehindSourceSeconds"}
    assert a["TreatMissingData"] == "notBreaching"  # no batch, no figure (a stopped job is the other alarm)


def test_alarms_notify_the_sns_topic_only_when_one_is_given(
    raw_template: dict[str, Any], template: dict[str, Any]
) -> None:
    names = set(resources_of(template, "AWS::CloudWatch::Alarm"))
    assert names == {"StreamingJobOutOfRetries", "StreamBehindSource", "MaintenanceJobFailed"}
    assert all("AlarmActions" not in alarm(template, n) for n in names)
    topic = "arn:aws:sns:eu-west-1:123456789012:cdc-alerts"
    notified = resolve_variant(raw_template, AlarmTopicArn=topic)
    for n in names:
        assert alarm(notified, n)["AlarmActions"] == [{"Ref": "AlarmTopicArn"}]
        namespace = alarm(notified, n)["Namespace"]
        assert namespace == {"Fn::Sub": "CdcLake/${AWS::StackName}"}
    for f in resources_of(template, "AWS::Logs::MetricFilter").values():
        assert f["Properties"]["MetricTransformations"][0]["MetricNamespace"] == {
            "Fn::Sub": "CdcLake/${AWS::StackName}"
        }
