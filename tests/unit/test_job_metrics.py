"""The jobs' figures as CloudWatch embedded-metric-format lines (cdclake/common/metrics.py): what a
batch report becomes, and that every line is an EMF object CloudWatch accepts (the specification's
rules: the dimensions and every declared metric are top-level members, metric values are numbers,
at most 100 metrics and 30 dimensions per directive)."""

from __future__ import annotations

import io

from cdclake.common.metrics import (
    BATCH_METRICS,
    MAINTENANCE_METRICS,
    NAMESPACE,
    TABLE_METRICS,
    batch_metrics,
    emit,
    job_name,
    maintenance_metrics,
    parse,
)
from cdclake.common.report import BatchReport, FollowWatch, TableReport

NOW = 1_790_000_000_000


def valid_emf(obj: dict) -> list[str]:
    """What makes CloudWatch Logs drop the object's metrics, per the EMF specification."""
    problems = []
    aws = obj.get("_aws", {})
    if not isinstance(aws.get("Timestamp"), int):
        problems.append("Timestamp is not epoch milliseconds")
    for directive in aws.get("CloudWatchMetrics", []):
        if not directive.get("Namespace"):
            problems.append("no namespace")
        for dims in directive["Dimensions"]:
            if len(dims) > 30 or any(not isinstance(obj.get(d), str) for d in dims):
                problems.append(f"dimension set {dims} not all top-level strings")
        if len(directive["Metrics"]) > 100:
            problems.append("more than 100 metrics")
        for m in directive["Metrics"]:
            if not isinstance(obj.get(m["Name"]), int | float) or isinstance(obj.get(m["Name"]), bool):
                problems.append(f"metric {m['Name']} has no numeric value")
    return problems


def a_batch() -> BatchReport:
    """A batch as batch.py reports one: a table applied, one with a dead letter, one set aside now."""
    r = BatchReport(7, records=14, changes=12, tombstones=2, dead=5, behind_seconds=3.25, seconds=4.5)
    r.tables = [
        TableReport("glue_catalog.cdc.salesdb_customer", events=6, inserts=3, updates=2, deletes=1, seconds=1.2),
        TableReport("glue_catalog.cdc.salesdb_orders", events=2, inserts=1, dead=1, seconds=0.8),
        TableReport("glue_catalog.cdc.salesdb_items", events=3, dead=3, set_aside="AnalysisException: x"),
    ]
    r.tables[2].set_aside_since = 7
    r.set_aside = 3  # of the 5 dead letters: the items table's, in its own folder
    return r


def by_table(lines: list[dict]) -> dict[str, dict]:
    return {x["Table"]: x for x in lines if "Table" in x}


def test_each_table_of_a_batch_gets_its_changes_by_operation_dead_letters_commit_and_state():
    lines = batch_metrics("stack-cdc-iceberg", a_batch(), [], NOW)
    t = by_table(lines)
    assert set(t) == {"salesdb_customer", "salesdb_orders", "salesdb_items"}
    c = t["salesdb_customer"]
    assert (c["Inserts"], c["Updates"], c["Deletes"], c["DeadLetters"], c["Commits"], c["Stopped"]) == (
        3,
        2,
        1,
        0,
        1,
        0,
    )
    assert c["Job"] == "stack-cdc-iceberg" and c["Batch"] == 7 and c["ApplySeconds"] == 1.2
    assert (t["salesdb_orders"]["DeadLetters"], t["salesdb_orders"]["Commits"]) == (1, 1)
    items = t["salesdb_items"]
    assert (items["Stopped"], items["Commits"], items["DeadLetters"]) == (1, 0, 3)
    for line in lines:
        assert valid_emf(line) == [], line


def test_the_batch_line_carries_records_dead_letters_lag_seconds_and_stopped_tables_without_a_table():
    batch = batch_metrics("j", a_batch(), [], NOW)[-1]
    assert "Table" not in batch
    assert batch["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Job"]]
    got = {k: batch.get(k) for k in BATCH_METRICS}
    assert got == {
        "Records": 14,
        "BatchDeadLetters": 2,
        "StoppedTables": 1,
        "NotEqualTables": 0,
        "BatchSeconds": 4.5,
        "BehindSourceSeconds": 3.25,
        "HeldRecords": None,
        "TransactionsAppliedOpen": None,
    }
    assert "HeldRecords" not in batch and "TransactionsAppliedOpen" not in batch  # transactions ignored


def test_a_batch_that_keeps_transactions_reports_its_held_records_and_transactions_applied_open():
    report = a_batch()
    report.held_records, report.held_open, report.released_open = 40, 2, 1
    batch = batch_metrics("j", report, [], NOW)[-1]
    assert (batch["HeldRecords"], batch["TransactionsAppliedOpen"]) == (40, 1)
    assert valid_emf(batch) == []
    assert "held 40 records (2 open transactions) | 1 transactions applied open" in report.line()


def test_a_table_set_aside_earlier_reports_stopped_in_every_batch_even_without_changes():
    report = a_batch()
    lines = batch_metrics("j", report, ["glue_catalog.cdc.salesdb_items", "glue_catalog.cdc.salesdb_gone"], NOW)
    t = by_table(lines)
    assert t["salesdb_gone"]["Stopped"] == 1 and t["salesdb_gone"]["Inserts"] == 0
    assert t["salesdb_items"]["DeadLetters"] == 3  # its own line, not a second one
    assert len([x for x in lines if x.get("Table") == "salesdb_items"]) == 1
    assert lines[-1]["StoppedTables"] == 2


def test_a_table_whose_every_change_is_dead_lettered_batch_after_batch_turns_stopped():
    watch = FollowWatch()
    states = []
    for batch_id in range(3):
        tr = TableReport("glue_catalog.cdc.salesdb_orders", events=2, dead=2)
        watch.note(tr)
        report = BatchReport(batch_id, records=2, dead=2, tables=[tr])
        states.append(by_table(batch_metrics("j", report, [], NOW))["salesdb_orders"]["Stopped"])
    assert states == [0, 0, 1]


def test_a_batch_without_a_source_timestamp_declares_no_lag_metric():
    report = BatchReport(0, records=1, dead=1)
    (line,) = batch_metrics("j", report, [], NOW)
    names = [m["Name"] for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    assert "BehindSourceSeconds" not in names and "BehindSourceSeconds" not in line
    assert valid_emf(line) == []


def test_maintenance_figures_of_a_table_and_of_a_table_whose_maintenance_raised():
    ok = maintenance_metrics("stack-cdc-maintenance", "glue_catalog.cdc.salesdb_customer", (4, 1), False, 12.5, NOW)
    assert {k: ok[k] for k in MAINTENANCE_METRICS} == {
        "DataFiles": 4, "DeleteFiles": 1, "MaintenanceFailed": 0, "MaintenanceSeconds": 12.5,
    }  # fmt: skip
    raised = maintenance_metrics("stack-cdc-maintenance", "glue_catalog.cdc.t", None, True, 0.1, NOW)
    assert raised["MaintenanceFailed"] == 1 and "DataFiles" not in raised
    assert valid_emf(ok) == [] and valid_emf(raised) == []


def test_emitted_lines_are_one_json_object_each_that_parse_reads_back():
    out = io.StringIO()
    lines = batch_metrics("j", a_batch(), [], NOW)
    emit(lines, out)
    text = out.getvalue().splitlines()
    assert len(text) == len(lines) and [parse(x) for x in text] == lines
    assert parse("2026-01-01 00:00:00 INFO cdclake: batch 1: ...") is None
    assert parse('{"_aws": broken') is None


def test_every_metric_is_declared_in_the_one_namespace_with_the_job_dimension():
    for line in [
        *batch_metrics("j", a_batch(), ["glue_catalog.cdc.x"], NOW),
        maintenance_metrics("j", "t", (1, 0), False, 1, NOW),
    ]:
        (directive,) = line["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == NAMESPACE and directive["Dimensions"][0][0] == "Job"
        declared = {m["Name"] for m in directive["Metrics"]}
        assert declared <= set(TABLE_METRICS) | set(BATCH_METRICS) | set(MAINTENANCE_METRICS)


def test_the_job_dimension_is_glues_job_name_else_the_local_default():
    assert job_name({"JOB_NAME": "cdc-lake-cdc-iceberg"}, "cdc-lake") == "cdc-lake-cdc-iceberg"
    assert job_name({}, "cdc-lake") == "cdc-lake"
