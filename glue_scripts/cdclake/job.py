"""The streaming job's life cycle, free of `awsglue`: the entry script passes in how to get a
SparkSession (Glue's or a local one) and this runs the stream until stopped (or once)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from . import faults
from .batch import BatchProcessor
from .maintenance import Cadence, StreamMaintainer
from .session import catalog_conf, local_session
from .settings import ArgumentError, Settings, build_settings, parse_argv
from .sources import open_stream

log = logging.getLogger("cdclake")


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stdout,
        force=True,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def run_stream(spark: SparkSession, settings: Settings, crash: faults.CrashPoint | None = None) -> None:
    """Start the streaming query and block until it ends (run_once: when caught up).

    `crash`: tests only (faults.py). Both readers plan a batch's offsets before calling
    `each_batch` and commit them after it returns, so these two points are the two sides of
    the Iceberg commit for the Spark Kafka source and the client reader alike."""
    processor = BatchProcessor(spark, settings)
    maintainer = StreamMaintainer(
        settings.maintenance, Cadence(settings.maintenance_every_batches, settings.maintenance_interval_minutes)
    )

    def each_batch(df: DataFrame, batch_id: int) -> None:
        if crash:
            crash.reached(faults.BEFORE_COMMIT, batch_id)
        report = processor.process(df, batch_id)
        if crash:
            crash.reached(faults.AFTER_COMMIT, batch_id)
        # Between this batch's MERGEs and the next batch's: maintenance never races our own commits.
        written = [t.table for t in report.tables if t.inserts or t.updates or t.deletes or t.truncated]
        maintainer.after_batch(df.sparkSession, written)

    if settings.source == "kafka" and settings.kafka_reader == "client":
        from .kafka_client import run_client_stream, stop_flag

        log.info("streaming from Kafka %s with the Kafka client reader", settings.kafka_bootstrap_servers)
        run_client_stream(spark, settings, each_batch, stop_flag())
        return

    writer = (
        open_stream(spark, settings)
        .writeStream.queryName("cdc-iceberg")
        .foreachBatch(each_batch)
        .option("checkpointLocation", settings.checkpoint_location)
    )
    if settings.run_once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.trigger_interval_seconds} seconds")
    query = writer.start()
    log.info(
        "streaming from %s into %s.%s (checkpoint %s, %s)",
        settings.source,
        settings.catalog_name,
        settings.namespace,
        settings.checkpoint_location,
        "run once" if settings.run_once else f"every {settings.trigger_interval_seconds}s",
    )
    query.awaitTermination()


def main(
    argv: list[str],
    session_factory: Callable[[Settings], SparkSession] | None = None,
    raw_args: dict[str, str] | None = None,
) -> int:
    """Parse arguments, build the session, run. Returns the process exit code."""
    configure_logging()
    try:
        settings = build_settings(raw_args if raw_args is not None else parse_argv(argv))
        crash = faults.from_env(os.environ)
    except (ArgumentError, ValueError) as e:
        log.error("invalid job arguments: %s", e)
        return 2
    if crash:
        log.warning("TEST fault injection armed: %s=%s (tests only; unset it to run normally)", faults.ENV, crash.point)
    spark = (session_factory or local_session)(settings)
    run_stream(spark, settings, crash)
    return 0


__all__ = ["catalog_conf", "main", "run_stream"]
