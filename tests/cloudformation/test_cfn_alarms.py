"""The stack's alarms: the streaming job out of retries, the stream behind the source, the maintenance
job failing, dead letters, a table that stopped following the source; the events and log lines they
count (failed runs from Glue's events; lag, dead letters and stopped tables from the job's own EMF
metrics); the dashboard over those metrics; and the optional SNS topic."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cdclake.common import metrics
from cdclake.common.report import BatchReport, FollowWatch, TableReport
from cfn_helpers import resolve_variant, resources_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "debezium"


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


EMITTED = {**metrics.TABLE_METRICS, **metrics.BATCH_METRICS, **metrics.MAINTENANCE_METRICS}
# The dimensions each metric is emitted with (metrics.py): the job's figures per batch by Job alone.
DIMENSIONS = {n: [metrics.JOB] if n in metrics.BATCH_METRICS else [metrics.JOB, metrics.TABLE] for n in EMITTED}
JOB_ALARMS = {"StreamBehindSource": "BehindSourceSeconds", "DeadLetters": "BatchDeadLetters",
              "TableStoppedFollowing": "StoppedTables"}  # fmt: skip


def dashboard_text(template: dict[str, Any]) -> str:
    """The dashboard's body as the variant deploys it, its Fn::Sub variables put in (their own ${...} kept)."""
    (dash,) = resources_of(template, "AWS::CloudWatch::Dashboard").values()
    text, variables = dash["Properties"]["DashboardBody"]["Fn::Sub"]
    for name, value in variables.items():
        text = text.replace(f"${{{name}}}", value["Fn::Sub"] if isinstance(value, dict) else value)
    return text


def dashboard_metrics(template: dict[str, Any]) -> list[tuple[str, list[str], str]]:
    """(metric, dimension names, job reference) of every metric the dashboard's widgets draw: plain
    metric arrays and SEARCH expressions over the jobs' schema."""
    body = json.loads(dashboard_text(template))
    out = []
    for w in body["widgets"]:
        for m in w["properties"].get("metrics", []):
            if isinstance(m[0], dict):
                expr = m[0]["expression"]
                schema = re.fullmatch(
                    r"SEARCH\('\{(\w+),([\w,]+)\} MetricName=\"(\w+)\" Job=\"\$\{(\w+)\}\"', '\w+', \d+\)", expr
                )
                assert schema, expr
                namespace, dims, name, job = schema.groups()
                out.append((name, dims.split(","), job))
            else:
                namespace, name, *rest = [x for x in m if not isinstance(x, dict)]
                out.append((name, rest[0::2], rest[1].strip("${}")))
            assert namespace == metrics.NAMESPACE
    return out


def test_every_metric_the_dashboard_and_the_alarms_name_is_one_the_jobs_emit_and_every_one_is_shown(
    template: dict[str, Any],
) -> None:
    drawn = dashboard_metrics(template)
    for name, dims, job in drawn:
        assert name in EMITTED, f"the dashboard draws {name}, which no job emits"
        assert dims == DIMENSIONS[name], (name, dims)
        assert job == ("MaintenanceJob" if name in metrics.MAINTENANCE_METRICS else "CdcJob"), name
    assert {n for n, _, _ in drawn} == set(EMITTED), "a metric the jobs emit is missing from the dashboard"
    for name, metric in JOB_ALARMS.items():
        a = alarm(template, name)
        assert (a["Namespace"], a["MetricName"]) == (metrics.NAMESPACE, metric)
        assert a["Dimensions"] == [{"Name": metrics.JOB, "Value": {"Ref": "CdcJob"}}] and DIMENSIONS[metric] == [
            metrics.JOB
        ]


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_the_dashboards_alarm_widget_shows_every_alarm_of_the_variant(
    raw_template: dict[str, Any], engine: str
) -> None:
    variant = resolve_variant(raw_template, SourceEngine=engine)
    json.loads(dashboard_text(variant))  # valid JSON in either variant
    shown = set(re.findall(r"\$\{(\w+)\.Arn\}", dashboard_text(variant)))
    assert shown == set(resources_of(variant, "AWS::CloudWatch::Alarm"))
    assert ("ReplicationSlotLag" in shown) == (engine == "postgres")


def breaches(template: dict[str, Any], name: str, lines: list[dict[str, Any]]) -> bool:
    """Whether the alarm's metric, as the job emits it for these lines, crosses its threshold (one period)."""
    a = alarm(template, name)
    values = [x[a["MetricName"]] for x in lines if a["MetricName"] in x and metrics.TABLE not in x]
    if not values:
        return False  # no data point: TreatMissingData notBreaching
    value = sum(values) if a["Statistic"] == "Sum" else max(values)
    threshold = a["Threshold"] if isinstance(a["Threshold"], int | float) else 900  # MaxBehindSourceSeconds' default
    assert a["ComparisonOperator"] == "GreaterThanThreshold"
    return value > threshold


def test_dead_letters_and_a_stopped_table_breach_their_alarms_as_the_job_reports_them(template: dict[str, Any]) -> None:
    reason = "incompatible schema change: table glue_catalog.cdc.salesdb_t column 'note' is string in the lake"
    stopped = TableReport("glue_catalog.cdc.salesdb_t", events=4, dead=4, dead_reasons={reason: 4}, seconds=0.2)
    watch = FollowWatch()
    runs = []
    for batch_id in range(3):
        watch.note(stopped)
        runs.append(metrics.batch_metrics("j", BatchReport(batch_id, records=4, dead=4, tables=[stopped]), [], 0))
    assert [breaches(template, "DeadLetters", r) for r in runs] == [True, True, True]
    assert [breaches(template, "TableStoppedFollowing", r) for r in runs] == [False, False, True]
    clean = metrics.batch_metrics(
        "j", BatchReport(3, records=2, tables=[TableReport("c.n.t", events=2, inserts=2)]), [], 0
    )
    assert not breaches(template, "DeadLetters", clean) and not breaches(template, "TableStoppedFollowing", clean)
    for a in JOB_ALARMS:
        assert alarm(template, a)["TreatMissingData"] == "notBreaching"


def test_a_table_set_aside_breaches_the_stopped_alarm_every_batch_until_resumed_and_is_no_dead_letter_batch(
    template: dict[str, Any],
) -> None:
    why = "io.delta.exceptions.DeltaTableFeatureException: [DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT] ..."
    aside = TableReport("spark_catalog.cdc.salesdb_t", events=3, dead=3, set_aside=why, set_aside_since=9)
    now = metrics.batch_metrics("j", BatchReport(9, records=3, dead=3, set_aside=3, tables=[aside]), [], 0)
    assert breaches(template, "TableStoppedFollowing", now) and not breaches(template, "DeadLetters", now)
    # Later batches without a change of it: still stopped, from its mark; after the resume, not.
    quiet = BatchReport(10, records=1, tables=[TableReport("spark_catalog.cdc.other", events=1, inserts=1)])
    assert breaches(template, "TableStoppedFollowing", metrics.batch_metrics("j", quiet, [aside.table], 0))
    assert not breaches(template, "TableStoppedFollowing", metrics.batch_metrics("j", quiet, [], 0))


def test_the_lag_alarm_uses_the_threshold_parameter(template: dict[str, Any]) -> None:
    a = alarm(template, "StreamBehindSource")
    assert (a["MetricName"], a["Statistic"], a["EvaluationPeriods"]) == ("BehindSourceSeconds", "Maximum", 2)
    assert a["Threshold"] == {"Ref": "MaxBehindSourceSeconds"}
    assert a["TreatMissingData"] == "notBreaching"  # no batch, no figure (a stopped job is the other alarm)
    behind = BatchReport(7, records=9, changes=7, behind_seconds=1234.56, seconds=6.1)
    assert breaches(template, "StreamBehindSource", metrics.batch_metrics("j", behind, [], 0))
    behind.behind_seconds = None  # nothing but tombstones: no lag figure, no data point
    assert not breaches(template, "StreamBehindSource", metrics.batch_metrics("j", behind, [], 0))


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
        "TableNotEqualToSource",
    }
    assert all("AlarmActions" not in alarm(template, n) for n in names)
    topic = "arn:aws:sns:eu-west-1:123456789012:cdc-alerts"
    notified = resolve_variant(raw_template, AlarmTopicArn=topic)
    for n in names:
        assert alarm(notified, n)["AlarmActions"] == [{"Ref": "AlarmTopicArn"}]
        namespace = alarm(notified, n)["Namespace"]
        # The job's own metrics (EMF, dimension Job) or the stack's counts of failed runs.
        assert namespace == (metrics.NAMESPACE if n in JOB_ALARMS else {"Fn::Sub": "CdcLake/${AWS::StackName}"})
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
    # The job's stdout (its lines and its EMF metrics) goes to <prefix>/output, a group of the stack.
    assert f"{job_args['--custom-logGroup-prefix']['Fn::Sub']}/output" in groups.values()
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


def test_a_postgres_numeric_the_connector_cannot_send_breaches_an_alarm_from_its_error_line(
    raw_template: dict[str, Any],
) -> None:
    # The line Kafka Connect logged when the connector met numeric 'NaN' (the local stack, Debezium
    # 3.6.3; tests/stack/test_postgres_pipeline.py checks it on every run): it sent the column as null.
    line = (FIXTURES / "postgres" / "connect_numeric_special_value.log").read_text()
    pg = resolve_variant(raw_template, SourceEngine="postgres")
    f = metric_filter(pg, "NumericValuesNotSent")
    assert f["LogGroupName"] == {"Ref": "ConnectLogGroup"}
    phrase = re.fullmatch(r'"([^"]+)"', f["FilterPattern"])
    assert phrase and phrase.group(1) in line.splitlines()[0]  # a quoted term: that exact text
    a = alarm(pg, "NumericValuesNotSent")
    assert (a["MetricName"], a["Statistic"], a["Threshold"], a["ComparisonOperator"]) == (
        "NumericValuesNotSent", "Sum", 0, "GreaterThanThreshold"
    )  # fmt: skip
    assert "Store a finite value or NULL at the source" in a["AlarmDescription"]["Fn::Sub"]
    mysql = resolve_variant(raw_template)
    assert "NumericValuesNotSent" not in mysql["Resources"]  # MySQL's decimals have no NaN


def test_a_table_the_job_says_no_longer_equals_its_source_breaches_an_alarm_from_that_error_line(
    template: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    from cdclake.events.source_ddl import postgres_statement
    from cdclake.lake import lake_tables

    # The job's own ERROR for an ALTER COLUMN ... TYPE ... USING (tests/job/test_postgres_ddl.py).
    row = {"schema_name": "public", "table_name": "t", "changes": json.dumps([["using", "price", "numeric(10,2)"]])}
    lake_tables._not_followed(postgres_statement(json.dumps(row)), 42)
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    f = metric_filter(template, "TablesNotEqualToSource")
    assert f["LogGroupName"] == {"Ref": "GlueJobOutputLogGroup"}  # where the job's lines go (stdout)
    phrase = re.fullmatch(r'"([^"]+)"', f["FilterPattern"])
    assert phrase and phrase.group(1) in line
    a = alarm(template, "TableNotEqualToSource")
    assert (a["MetricName"], a["Statistic"], a["Threshold"]) == ("TablesNotEqualToSource", "Sum", 0)
    assert "take a new Debezium snapshot" in a["AlarmDescription"]["Fn::Sub"]


def test_a_partition_statement_the_job_cannot_follow_is_counted_by_the_same_alarm(template: dict[str, Any]) -> None:
    from cdclake.common.lake_contract import TableState
    from cdclake.events.partition_ddl import partition_steps
    from cdclake.lake.table_plan import Memory, Note, Policies, TableDDL, plan_table
    from pyspark.sql import types as T

    # The planner's ERROR for a TRUNCATE PARTITION of a HASH partitioned table (tests/job/test_source_ddl.py).
    create = "CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2"
    steps = [
        (5, partition_steps(create, "db")[0]),
        (9, partition_steps("ALTER TABLE t TRUNCATE PARTITION p0", "db")[0]),
    ]
    state = TableState([("id", T.IntegerType())], ["id"])
    plan = plan_table(state, [], TableDDL(partitions=steps), Policies(), Memory(), table="glue_catalog.cdc.db_t")
    (line,) = [s.message for s in plan.steps if isinstance(s, Note)]
    phrase = re.fullmatch(r'"([^"]+)"', metric_filter(template, "TablesNotEqualToSource")["FilterPattern"])
    assert phrase and phrase.group(1) in line and "glue_catalog.cdc.db_t" in line
