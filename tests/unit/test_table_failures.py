"""Whether running a table's batch again can cure its failure (cdclake/common/failures.py), decided
on the texts the real components raise: tests/fixtures/failures/observed.json holds what Spark 3.5
with Iceberg 1.7.1 and Hudi 0.15.0 raised for statements they refuse (captured from a local session:
the exception's Python class, its Java cause chain, its text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdclake.common.failures import REPEATS, Failure, Kind, after_attempts, classify

OBSERVED = json.loads((Path(__file__).resolve().parents[1] / "fixtures/failures/observed.json").read_text())


@pytest.mark.parametrize("case", OBSERVED, ids=lambda c: f"{c['format']}-{c['case']}")
def test_a_statement_the_format_or_spark_refuses_is_permanent(case):
    failure = classify(case["names"], case["text"])
    assert failure.kind == Kind.PERMANENT
    assert "\n" not in failure.reason and len(failure.reason) <= 300


def test_the_reason_names_the_class_and_the_first_line_that_says_something():
    by_case = {(c["format"], c["case"]): c for c in OBSERVED}
    c = by_case[("iceberg", "alter_int_to_string")]  # Py4J's "An error occurred while calling o55.sql." first
    assert classify(c["names"], c["text"]).reason == (
        "org.apache.spark.SparkException: Unsupported table change: Cannot change column type: v: int -> string"
    )
    c = by_case[("hudi", "add_timestamp_ntz")]
    assert (
        classify(c["names"], c["text"]).reason == "UnsupportedOperationException: Not a supported type: timestamp_ntz"
    )


# Delta's refusal as issue 45 quotes it (make demo TABLE_FORMAT=delta, a DATETIME column added).
DELTA_FEATURE = (
    ["pyspark.errors.exceptions.captured.AnalysisException", "io.delta.exceptions.DeltaTableFeatureException"],
    "[DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT] Your table schema requires manually enablement of the following "
    "table feature(s): timestampNtz.",
)
# Commit conflicts (common/conflicts.py) and the AWS SDK's throttling, timeout and connection texts.
TRANSIENT = [
    (["py4j.protocol.Py4JJavaError", "org.apache.iceberg.exceptions.ValidationException"],
     "Cannot commit, missing data files: [s3://lake/warehouse/cdc.db/t/data/a.parquet]"),
    (["py4j.protocol.Py4JJavaError", "io.delta.exceptions.ConcurrentAppendException"],
     "Files were added to the root of the table by a concurrent update. Please try the operation again."),
    (["cdclake.common.conflicts.ConflictRetriesExhausted"], "MERGE into t: still conflicting after 8 attempt(s)"),
    (["py4j.protocol.Py4JJavaError", "software.amazon.awssdk.services.glue.model.ThrottlingException"],
     "Rate exceeded (Service: Glue, Status Code: 400, Request ID: 2f0c8f5e)"),
    (["py4j.protocol.Py4JJavaError"],
     "com.amazonaws.services.s3.model.AmazonS3Exception: Please reduce your request rate. (Service: Amazon S3; "
     "Status Code: 503; Error Code: SlowDown)"),
    (["py4j.protocol.Py4JJavaError", "software.amazon.awssdk.core.exception.SdkClientException",
      "java.net.SocketTimeoutException"], "Unable to execute HTTP request: Read timed out"),
    # An AnalysisException that wraps a catalog timeout is the timeout.
    (["pyspark.errors.exceptions.captured.AnalysisException", "java.net.SocketTimeoutException"],
     "org.apache.hadoop.hive.ql.metadata.HiveException: java.net.SocketTimeoutException: connect timed out"),
]  # fmt: skip


def test_delta_refusing_a_column_type_without_its_table_feature_is_permanent():
    assert classify(*DELTA_FEATURE).kind == Kind.PERMANENT


@pytest.mark.parametrize(("names", "text"), TRANSIENT)
def test_conflicts_throttling_timeouts_and_lost_connections_are_transient(names, text):
    assert classify(names, text).kind == Kind.TRANSIENT


def test_any_other_failure_is_unknown_until_it_repeats_on_the_same_batch():
    failure = classify(["builtins.RuntimeError"], "injected: the commit of t failed")
    assert failure == Failure(Kind.UNKNOWN, "RuntimeError: injected: the commit of t failed")
    assert after_attempts(failure, REPEATS - 1).kind == Kind.UNKNOWN
    assert after_attempts(failure, REPEATS) == Failure(
        Kind.PERMANENT,
        f"RuntimeError: injected: the commit of t failed (the same failure on {REPEATS} attempts of the batch)",
    )
    transient = classify(*TRANSIENT[0])
    assert after_attempts(transient, 10) == transient  # a transient failure never becomes permanent
