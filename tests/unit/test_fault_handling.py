"""Fault handling decided without a cluster: Spark's Kafka source options on data loss and new
topics, the test-only crash hook's switch, and Iceberg's row-based reads."""

from __future__ import annotations

import logging

import pytest
from cdclake.common.settings import build_settings
from cdclake.jobs.sources import data_loss_advice, kafka_options, restart_after
from cdclake.lake.catalog import catalog_conf
from cdclake.lake.formats.iceberg import reads_vectorized
from cdclake.local import faults

MSK = {
    "kafka_bootstrap_servers": "b-1:9098",
    "kafka_topic_pattern": r"salesdb\..*",
    "warehouse": "/w",
    "checkpoint_location": "/c",
    "dead_letter_path": "/d",
}


def test_spark_kafka_source_fails_on_data_loss_instead_of_skipping_offsets():
    # Records removed by retention or a recreated topic must stop the query, not be skipped.
    opts = kafka_options(build_settings(MSK))
    assert opts["failOnDataLoss"] == "true"
    assert opts["startingOffsets"] == "earliest"  # only for a query without a checkpoint
    assert opts["maxOffsetsPerTrigger"] == "100000"  # the memory bound of a batch


def test_a_kafka_data_loss_stop_gets_advice_that_keeps_the_records_and_other_errors_get_none():
    spark_text = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: Partition lossdb.inventory.customers-0's "
        "offset was changed from 6 to 2, some data may have been missed. Some data may have been lost because "
        'they are not available in Kafka any more; ... set the source option "failOnDataLoss" to "false".'
    )
    advice = data_loss_advice(spark_text)

    assert advice is not None
    assert "--checkpoint_location" in advice and "--starting_offsets earliest" in advice
    assert "Do not set failOnDataLoss=false" in advice
    assert data_loss_advice("[STREAM_FAILED] Cannot commit, missing data files") is None


# As Spark 4.1.1 stopped the local job after re-running a batch on restart (its message, then the JVM
# stack trace PySpark keeps beside it).
KAFKA_METRICS_STOP = (
    "[STREAM_FAILED] Query [id = 7262, runId = 2dd0] terminated with exception: Cannot invoke "
    '"scala.collection.IterableOps.map(scala.Function1)" because the return value of "scala.Option.get()" '
    "is null SQLSTATE: XXKST\n"
    'java.lang.NullPointerException: Cannot invoke "scala.collection.IterableOps.map(scala.Function1)" '
    'because the return value of "scala.Option.get()" is null\n'
    "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics(KafkaMicroBatchStream.scala:520)\n"
    "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream.metrics(KafkaMicroBatchStream.scala:363)\n"
)


def test_spark_kafka_progress_failure_after_a_rerun_batch_restarts_the_stream_once_per_batch():
    assert restart_after(KAFKA_METRICS_STOP, batch=1, restarted_at=None)
    assert restart_after(KAFKA_METRICS_STOP, batch=5, restarted_at=1)  # a later batch: progress was made
    # The same batch failing again after a restart would loop: the job stops instead.
    assert not restart_after(KAFKA_METRICS_STOP, batch=1, restarted_at=1)
    assert not restart_after(KAFKA_METRICS_STOP, batch=None, restarted_at=None)  # before any batch ran


def test_other_stream_failures_stop_the_job_without_a_restart():
    assert not restart_after("[STREAM_FAILED] Cannot commit, missing data files", batch=3, restarted_at=None)
    other_npe = "java.lang.NullPointerException\n\tat org.apache.spark.sql.execution.MergeRowsExec.metrics"
    assert not restart_after(other_npe, batch=3, restarted_at=None)


def test_spark_kafka_source_sees_a_new_tables_topic_within_seconds_not_minutes():
    opts = kafka_options(build_settings(MSK))
    assert opts["subscribePattern"] == r"salesdb\..*"
    assert int(opts["kafka.metadata.max.age.ms"]) <= 30_000


def test_the_crash_hook_is_off_unless_its_variable_names_a_point():
    assert faults.from_env({}) is None
    assert faults.from_env({faults.ENV: "after-iceberg-commit"}) == faults.CrashPoint("after-iceberg-commit")
    assert faults.from_env({faults.ENV: "before-iceberg-commit@1"}) == faults.CrashPoint("before-iceberg-commit", 1)
    assert faults.from_env({faults.ENV: "between-table-commits"}) == faults.CrashPoint("between-table-commits")
    for wrong in ("after-commit", "after-iceberg-commit@", "after-iceberg-commit@x", "after-iceberg-commit@-1"):
        with pytest.raises(ValueError, match="after-iceberg-commit, between-table-commits, optionally @<batch id>"):
            faults.from_env({faults.ENV: wrong})


def test_the_table_fault_is_off_unless_its_variable_names_lake_tables_and_a_malformed_value_is_an_error():
    assert faults.table_fault_from_env({}) is None
    assert faults.table_fault_from_env({faults.FAIL_TABLE_ENV: " "}) is None
    fault = faults.table_fault_from_env({faults.FAIL_TABLE_ENV: "salesdb_orders, salesdb_customer"})
    assert fault == faults.TableFault(frozenset({"salesdb_orders", "salesdb_customer"}))
    assert fault.hits("glue_catalog.cdc.salesdb_orders", 0) and not fault.hits("glue_catalog.cdc.salesdb_items", 0)
    later = faults.table_fault_from_env({faults.FAIL_TABLE_ENV: "salesdb_orders@2"})
    assert later == faults.TableFault(frozenset({"salesdb_orders"}), 2)
    assert not later.hits("cdc.salesdb_orders", 1) and later.hits("cdc.salesdb_orders", 2)
    wrongs = ("cdc.salesdb_orders", "Salesdb_Orders", "salesdb_orders,", "a,,b", "salesdb orders", "salesdb-orders")
    for wrong in (*wrongs, "salesdb_orders@", "salesdb_orders@x", "salesdb_orders@-1", "@1"):
        with pytest.raises(ValueError, match="not a list of lake table names; use <table>"):
            faults.table_fault_from_env({faults.FAIL_TABLE_ENV: wrong})


def test_a_malformed_table_fault_stops_the_job_before_spark_starts_with_exit_code_2(monkeypatch, capsys, tmp_path):
    from cdclake.jobs import job

    monkeypatch.setenv(faults.FAIL_TABLE_ENV, "cdc.salesdb_orders")
    started = []
    argv = [
        "--source",
        "files",
        "--files_path",
        str(tmp_path),
        "--catalog_type",
        "hadoop",
        "--warehouse",
        str(tmp_path),
    ]
    argv += ["--checkpoint_location", str(tmp_path / "c"), "--dead_letter_path", str(tmp_path / "d")]
    # job.main sets up logging on the captured stdout, which closes after the test: the root handlers
    # are put back, or a later flush of them (the crash hook's) writes to a closed file.
    monkeypatch.setattr(logging.root, "handlers", list(logging.root.handlers))
    assert job.main(argv, session_factory=lambda s: started.append(s)) == 2
    assert started == []
    assert "CDC_TEST_FAIL_TABLE='cdc.salesdb_orders' is not a list of lake table names" in capsys.readouterr().out


def test_a_resume_run_without_files_path_is_not_refused_for_a_missing_folder(tmp_path):
    # It reads the folder the table's mark names (docs/OPERATIONS.md, "A table set aside", the local command).
    from cdclake.jobs.job import check_input_exists

    raw = {"source": "files", "run_once": "true", "resume_table": "salesdb_customer", "catalog_type": "hadoop"}
    raw |= {"warehouse": str(tmp_path), "checkpoint_location": str(tmp_path / "c"), "dead_letter_path": str(tmp_path)}
    check_input_exists(build_settings(raw))


def test_the_crash_hook_with_a_batch_id_passes_the_other_batches(monkeypatch):
    kills = []
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: kills.append(sig))
    crash = faults.CrashPoint(faults.BEFORE_COMMIT, 1)
    crash.reached(faults.BEFORE_COMMIT, 0)
    crash.reached(faults.AFTER_COMMIT, 1)
    assert kills == []
    crash.reached(faults.BEFORE_COMMIT, 1)
    assert kills == [faults.signal.SIGKILL]


def test_iceberg_reads_are_vectorized_on_glue_6_and_locally_and_only_glue_5_turns_them_off():
    # Iceberg 1.7.1's vectorized Parquet reader (Glue 5.0) corrupted the JVM heap under the stack's burst
    # test; Iceberg 1.11.0's (Glue 6.0, this venv) passes it, so the job keeps Iceberg's default there.
    for catalog_type in ("glue", "hadoop"):
        conf = catalog_conf(build_settings({**MSK, "catalog_type": catalog_type}))
        assert "spark.sql.iceberg.vectorization.enabled" not in conf
    assert not reads_vectorized("3.5.4")


def test_batches_keep_spark_35_null_semantics_on_spark_4_for_every_format():
    # Under Spark 4's default ANSI mode a record whose text does not convert failed its whole batch
    # (tests/job: the decoder's dead letters, the envelope split) instead of becoming a dead letter.
    for table_format in ("iceberg", "delta", "hudi"):
        conf = catalog_conf(build_settings({**MSK, "table_format": table_format}))
        assert conf["spark.sql.ansi.enabled"] == "false", table_format
