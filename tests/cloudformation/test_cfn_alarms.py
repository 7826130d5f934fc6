"""The stack's alarms: the streaming job out of retries, the stream behind the source, the maintenance
job failing, dead letters, a table that stopped following the source; the events and log lines they
count; and the optional SNS topic."""

from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from cdclake.common.report import FollowWatch
from cdclake.jobs.batch import BatchReport, TableReport
from cdclake.jobs.job import configure_logging
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
        logging.getLogger("cdclake.jobs.batch").info(report.line())
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


def job_log_lines(capsys: pytest.CaptureFixture[str], messages: list[tuple[int, str]]) -> list[str]:
    """The lines the job writes for these (level, message) pairs, in its own log format on stdout."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging()
        for level, message in messages:
            logging.getLogger("cdclake").log(level, message)
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    return capsys.readouterr().out.strip().splitlines()[-len(messages) :]


def phrase_matches(pattern: str, line: str) -> bool:
    """CloudWatch Logs' filter of one quoted phrase: the line contains it exactly (case sensitive)."""
    assert pattern.startswith('"') and pattern.endswith('"') and pattern.count('"') == 2, pattern
    return pattern.strip('"') in line


def test_dead_letters_and_a_stopped_table_are_counted_from_the_jobs_own_lines(
    template: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "incompatible schema change: table glue_catalog.cdc.salesdb_t column 'note' is string in the lake"
    stopped = TableReport("glue_catalog.cdc.salesdb_t", events=4, dead=4, dead_reasons={reason: 4}, seconds=0.2)
    watch = FollowWatch()
    assert [watch.note(stopped) for _ in range(3)] == [False, False, True]
    report = BatchReport(batch_id=9, records=5, changes=4, dead=4, dead_letter_folder="s3://lake/dl/batch=9-ab")
    report.tables = [stopped]
    dead_line, stopped_line, batch_line = job_log_lines(
        capsys, [(logging.WARNING, report.dead_letter_line()), (logging.ERROR, stopped.stopped_line()),
                 (logging.INFO, report.line())]
    )  # fmt: skip
    dead = metric_filter(template, "DeadLetterBatches")
    stop = metric_filter(template, "StoppedTables")
    for f in (dead, stop):
        assert f["LogGroupName"] == {"Ref": "GlueJobOutputLogGroup"}
        assert f["MetricTransformations"][0]["MetricValue"] == "1"
    # Each line is counted by its own filter only: one data point per batch with dead letters and
    # one per stopped table per batch, never two for one event.
    assert [phrase_matches(dead["FilterPattern"], x) for x in (dead_line, stopped_line, batch_line)] == [
        True, False, False
    ]  # fmt: skip
    assert [phrase_matches(stop["FilterPattern"], x) for x in (dead_line, stopped_line, batch_line)] == [
        False, True, False
    ]  # fmt: skip
    assert "salesdb_t" in stopped_line and reason in stopped_line
    assert "salesdb_t: 4 ev -> c/r 0 u 0 d 0 dead 4 STOPPED-FOLLOWING[" in batch_line
    # A batch in which the table's changes apply again ends the run of dead batches.
    assert not watch.note(TableReport("glue_catalog.cdc.salesdb_t", events=2, dead=1))
    assert not watch.note(TableReport("glue_catalog.cdc.salesdb_t", events=2, dead=2))


def test_a_table_set_aside_is_counted_by_the_stopped_table_filter_and_not_as_a_dead_letter_batch(
    template: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    why = "io.delta.exceptions.DeltaTableFeatureException: [DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT] ..."
    aside = TableReport("spark_catalog.cdc.salesdb_t", events=3, dead=3, set_aside=why, set_aside_since=9)
    aside.set_aside_folder = "s3://lake/dl/_set_aside/cdc.salesdb_t/since-9-ab/batch-9-ab"
    report = BatchReport(batch_id=9, records=3, changes=3, dead=3, set_aside=3, tables=[aside])
    error, batch_line = job_log_lines(capsys, [(logging.ERROR, aside.set_aside_line(9)), (logging.INFO, report.line())])
    stop, dead = metric_filter(template, "StoppedTables"), metric_filter(template, "DeadLetterBatches")
    assert [phrase_matches(stop["FilterPattern"], x) for x in (error, batch_line)] == [True, False]
    assert [phrase_matches(dead["FilterPattern"], x) for x in (error, batch_line)] == [False, False]
    assert "salesdb_t" in error and why in error and "scripts/replay --resume salesdb_t" in error
    assert "STOPPED-FOLLOWING[set aside since batch 9: io.delta.exceptions.DeltaTableFeatureException" in batch_line


@pytest.mark.parametrize(
    ("name", "metric"), [("DeadLetters", "DeadLetterBatches"), ("TableStoppedFollowing", "StoppedTables")]
)
def test_dead_letter_and_stopped_table_alarms_fire_on_any_count_and_say_the_fix(
    template: dict[str, Any], name: str, metric: str
) -> None:
    a = alarm(template, name)
    assert (a["MetricName"], a["Statistic"], a["Threshold"], a["ComparisonOperator"]) == (
        metric,
        "Sum",
        0,
        "GreaterThanThreshold",
    )
    assert a["TreatMissingData"] == "notBreaching"
    description = a["AlarmDescription"]["Fn::Sub"]
    assert "scripts/replay" in description and "Replaying dead letters" in description
    assert "${GlueJobOutputLogGroup}" in description


def test_the_lag_alarm_uses_the_threshold_parameter(template: dict[str, Any]) -> None:
    a = alarm(template, "StreamBehindSource")
    assert (a["MetricName"], a["Statistic"], a["EvaluationPeriods"]) == ("BehindSourceSeconds", "Maximum", 2)
    assert a["Threshold"] == {"Ref": "MaxBehindSourceSeconds"}
    assert a["TreatMissingData"] == "notBreaching"  # no batch, no figure (a stopped job is the other alarm)


def test_alarms_notify_the_sns_topic_only_when_one_is_given(
    raw_template: dict[str, Any], template: dict[str, Any]
) -> None:
    names = set(resources_of(template, "AWS::CloudWatch::Alarm"))
    assert names == {
        "StreamingJobOutOfRetries",
        "StreamBehindSource",
        "MaintenanceJobFailed",
        "DeadLetters",
        "TableStoppedFollowing",
    }
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


def log_group_names(template: dict[str, Any]) -> dict[str, str]:
    """Logical id -> the LogGroupName text of every stack log group (each branch of an If)."""
    out = {}
    for name, r in resources_of(template, "AWS::Logs::LogGroup").items():
        value = r["Properties"]["LogGroupName"]
        out[name] = value["Fn::Sub"] if isinstance(value, dict) and "Fn::Sub" in value else str(value)
    return out


def test_metric_filters_read_the_groups_the_jobs_arguments_name(template: dict[str, Any]) -> None:
    """Glue 5.0 writes to <--custom-logGroup-prefix>/output; a filter on any other group never sees a
    batch line and its alarm stays quiet whatever happens."""
    groups = log_group_names(template)
    job_args = template["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]
    output = f"{job_args['--custom-logGroup-prefix']['Fn::Sub']}/output"
    (lag,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::Logs::MetricFilter").values()
        if r["Properties"]["MetricTransformations"][0]["MetricName"] == "BehindSourceSeconds"
    ]
    assert groups[lag["LogGroupName"]["Ref"]] == output
    prefixes = {
        r["Properties"]["DefaultArguments"]["--custom-logGroup-prefix"]["Fn::Sub"]
        for r in resources_of(template, "AWS::Glue::Job").values()
    }
    for name, f in resources_of(template, "AWS::Logs::MetricFilter").items():
        group = groups[f["Properties"]["LogGroupName"]["Ref"]]
        if group.startswith("/aws-glue/"):
            assert group.rsplit("/", 1)[0] in prefixes, f"{name} reads {group}, which no job writes"


def test_no_job_runs_with_cloudwatch_encryption_that_would_rename_its_log_groups(template: dict[str, Any]) -> None:
    configs = resources_of(template, "AWS::Glue::SecurityConfiguration")
    for job_name, job in resources_of(template, "AWS::Glue::Job").items():
        ref = job["Properties"].get("SecurityConfiguration")
        if ref is None:
            continue
        encryption = configs[ref["Ref"]]["Properties"]["EncryptionConfiguration"]
        mode = (encryption.get("CloudWatchEncryption") or {}).get("CloudWatchEncryptionMode", "DISABLED")
        assert mode == "DISABLED", f"{job_name}: CloudWatch encryption moves its logs out of its log groups"


DOCS = ("README.md", *sorted(f"docs/{p.name}" for p in (Path(__file__).resolve().parents[2] / "docs").glob("*.md")))


def test_every_log_group_the_docs_name_is_one_the_stack_creates(template: dict[str, Any]) -> None:
    from cdcdeploy import templates

    created = {
        re.sub(r"\$\{AWS::StackName\}", "<stack>", n)
        for r in resources_of(template, "AWS::Logs::LogGroup").values()
        for n in _branches(r["Properties"]["LogGroupName"])
    }
    for doc in DOCS:
        text = (templates.ROOT / doc).read_text(encoding="utf-8")
        # `aws logs tail` exists only in AWS CLI v2; make setup-deploy installs v1.
        assert "aws logs tail" not in text, doc
        named = {
            re.sub(r"^(/[a-z-]+(?:/[a-z]+)?/)cdc-lake/", r"\1<stack>/", m.rstrip(".,`"))
            for m in re.findall(r"(?:/aws-glue|/msk-connect|/aws/events|/aws/lambda)/[A-Za-z0-9<>/._-]+", text)
        }
        named = {n.replace("debezium-<engine>", "debezium-mysql") for n in named}
        unknown = {n for n in named if n not in created and not any(c.startswith(n + "/") for c in created)}
        assert not unknown, f"{doc} names log groups the stack does not create: {sorted(unknown)}"


def _branches(value: Any) -> list[str]:
    if isinstance(value, dict) and "Fn::Sub" in value:
        return [value["Fn::Sub"]]
    if isinstance(value, dict) and "Fn::If" in value:
        return [b for branch in value["Fn::If"][1:] for b in _branches(branch)]
    return [str(value)]
