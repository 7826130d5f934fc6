"""The streaming job's life cycle, free of `awsglue`: the entry script passes in how to get a
SparkSession (Glue's or a local one) and this runs the stream until stopped (or once)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ..common.logs import configure_logging
from ..common.metrics import LOCAL_STREAMING_JOB
from ..common.settings import ARGS, ArgumentError, Settings, Source, build_settings, parse_job_argv
from ..lake.deletes import marker_table
from ..lake.formats import table_format
from ..lake.maintenance import Cadence, StreamMaintainer
from ..local import faults
from ..local.session import local_session
from .batch import BatchProcessor
from .jdbc_source import run_polls
from .sources import data_loss_advice, open_stream, restart_after

log = logging.getLogger("cdclake")


def stream_maintainer(settings: Settings) -> StreamMaintainer | None:
    """The in-stream maintenance, between micro-batches, where the job is its tables' only writer; None
    for a format that refuses it (capabilities.Capability.STREAM_MAINTENANCE, with the reason)."""
    fmt = table_format(settings)
    if not fmt.maintains_in_stream:
        return None
    cadence = Cadence(settings.maintenance_every_batches, settings.maintenance_interval_minutes)
    return StreamMaintainer(settings.maintenance, cadence, fmt)


# A run-once run that ended with a table set aside (its batches committed, the table's changes in the
# dead letters): the exit code says so, the log names the table and why.
EXIT_SET_ASIDE = 3


def run_stream(
    spark: SparkSession,
    settings: Settings,
    crash: faults.CrashPoint | None = None,
    fault: faults.TableFault | None = None,
) -> dict[str, str]:
    """Start the streaming query and block until it ends (run_once: when caught up). Returns the
    tables set aside in the batches it ran, with why.

    `crash`, `fault`: tests only (faults.py). Spark writes a batch's offsets to the checkpoint's offset log
    before it calls `each_batch` and the batch to its commit log after `each_batch` returns, so
    these two points are the two sides of the Iceberg commit: a restart re-runs the batch from
    its logged offsets either way. The third (between two tables' commits) is the processor's."""
    resume = settings.lake_table(settings.resume_table) if settings.resume_table else None
    processor = BatchProcessor(spark, settings, fault=fault, resume=resume, crash=crash)
    if resume is not None:
        settings = _resume_input(processor, settings, resume)
        if settings is None:
            return {}
    maintainer = stream_maintainer(settings)

    in_batch = threading.Event()
    ran: list[int] = []  # the batches this run started, the last one last

    def each_batch(df: DataFrame, batch_id: int) -> None:
        in_batch.set()
        ran.append(batch_id)
        try:
            if crash:
                crash.reached(faults.BEFORE_COMMIT, batch_id)
            report = processor.process(df, batch_id)
            # Between this batch's MERGEs and the next batch's: maintenance never races our own commits.
            written = [t.table for t in report.tables if t.inserts or t.updates or t.deletes or t.truncated]
            if crash and written:  # after a commit: a batch of heartbeats alone commits nothing
                crash.reached(faults.AFTER_COMMIT, batch_id)
            # A batch with deletes wrote the table's delete markers too (deletes.py).
            written += [marker_table(t.table) for t in report.tables if t.deletes]
            if written and processor.read_point is not None:  # one commit per batch there too
                written.append(processor.read_point.table)
            if maintainer is not None:
                maintainer.after_batch(df.sparkSession, written)
        finally:
            in_batch.clear()

    _run_query(spark, settings, each_batch, in_batch, ran)
    if resume is not None:
        _finish_resume(processor, resume)
    return processor.set_aside_in_run


def _run_query(
    spark: SparkSession,
    settings: Settings,
    each_batch: Callable[[DataFrame, int], None],
    in_batch: threading.Event,
    ran: list[int],
) -> None:
    """Start the query and wait until it ends; start it again from its checkpoint after Spark 4.1.1's
    Kafka progress failure (sources.restart_after), so that it does not stop a running job."""
    restarted_at: int | None = None
    while True:
        query = _start_query(spark, settings, each_batch)
        log.info(
            "streaming from %s into %s.%s (checkpoint %s, %s)",
            settings.source,
            settings.catalog_name,
            settings.namespace,
            settings.checkpoint_location,
            "run once" if settings.run_once else f"every {settings.trigger_interval_seconds}s",
        )
        try:
            _until_stopped(query, in_batch)
            return
        except Exception as e:  # StreamingQueryException; its import path differs across pyspark versions
            last = ran[-1] if ran else None
            if not restart_after(_error_text(e), last, restarted_at):
                raise
            log.warning(
                "batch %d: the Kafka source failed to report the batch's progress after running it "
                "(Spark 4.1.1, SPARK-57438); starting the stream again from its checkpoint",
                last,
            )
            restarted_at = last


def _error_text(e: BaseException) -> str:
    """A stopped query's message with its JVM stack trace (where the failing class is named); PySpark
    keeps the trace on the captured exception and prints it only when told to."""
    return f"{e}\n{getattr(e, '_stackTrace', '') or ''}"


def _until_stopped(query: Any, in_batch: threading.Event) -> None:
    """Wait for the query to end. Poll rather than block, so that a SIGTERM stops the query between
    batches: the batch under way finishes and is committed first (a stop inside one would only make
    the restart re-run it)."""
    stop_requested = threading.Event()
    previous = _on_sigterm(stop_requested.set)
    try:
        while not _await(query, 1):
            if stop_requested.is_set() and not in_batch.is_set():
                log.info("SIGTERM: stopping the stream between batches")
                query.stop()
                query.awaitTermination()
                break
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _resume_input(processor: BatchProcessor, settings: Settings, table: str) -> Settings | None:
    """What a resume run reads: `--files_path`, else the folder the table's mark names; None (and a
    line saying so) when the table is not set aside."""
    mark = processor.store.mark(table)
    state = processor.tables.state(table)
    mark = mark or (state.set_aside if state is not None else None)
    if mark is None:
        log.info("table %s is not set aside: nothing to resume", table)
        return None
    files = settings.files_path or mark.folder
    log.info("resuming table %s (set aside in batch %d: %s) from %s", table, mark.batch_id, mark.reason, files)
    return replace(settings, files_path=files)


def _finish_resume(processor: BatchProcessor, table: str) -> None:
    """The table's mark removed, unless the replay set it aside again (then it stays, with its folder)."""
    if table in processor.set_aside_in_run:
        log.error("table %s is still set aside: %s", table, processor.set_aside_in_run[table])
        return
    processor.forget_mark(table)
    log.info("table %s resumed: its set-aside changes are applied and its mark removed; start the stream", table)


def _start_query(spark: SparkSession, settings: Settings, each_batch: Callable[[DataFrame, int], None]) -> Any:
    writer = (
        open_stream(spark, settings)
        .writeStream.queryName(LOCAL_STREAMING_JOB)  # Spark UI and logs only: the checkpoint is by path
        .foreachBatch(each_batch)
        .option("checkpointLocation", settings.checkpoint_location)
    )
    if settings.run_once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{settings.trigger_interval_seconds} seconds")
    return writer.start()


def _await(query: Any, seconds: int) -> bool:
    """query.awaitTermination, with one line saying what to do when Kafka lost unread records."""
    try:
        return query.awaitTermination(seconds)
    except Exception as e:  # StreamingQueryException; its import path differs across pyspark versions
        advice = data_loss_advice(str(e))
        if advice:
            log.error("the stream stopped: %s", advice)
        raise


def _on_sigterm(action: Callable[[], None]) -> Any:
    """Runs `action` on SIGTERM; returns the handler it replaced (None: only the main thread can
    install one, elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, lambda _sig, _frame: action())


def _run_polls(spark: SparkSession, settings: Settings, crash: faults.CrashPoint | None) -> dict[str, str]:
    """--source jdbc: the poll loop; a SIGTERM stops it between polls (the poll under way is committed)."""
    stop = threading.Event()
    previous = _on_sigterm(stop.set)
    try:
        return run_polls(spark, settings, crash, stop)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def check_input_exists(settings: Settings) -> None:
    """A local `--files_path` that does not exist is named before Spark starts (Spark's own
    error is a traceback); an S3 prefix is left to Spark, which can list it. None given: a resume
    run, which reads the folder the table's mark names."""
    path = settings.files_path
    if settings.source == Source.FILES and path and "://" not in path and not os.path.isdir(path):
        raise ArgumentError(f"--files_path {path} is not a directory: give the folder of the JSON-lines files")


def main(
    argv: list[str],
    session_factory: Callable[[Settings], SparkSession] | None = None,
    raw_args: dict[str, str] | None = None,
) -> int:
    """Parse arguments, build the session, run. Returns the process exit code."""
    configure_logging()
    try:
        settings = build_settings(raw_args if raw_args is not None else parse_job_argv(argv, ARGS))
        check_input_exists(settings)
        table_format(settings)  # refuses a table format version this runtime cannot write
        crash = faults.from_env(os.environ)
        fault = faults.table_fault_from_env(os.environ)
    except (ArgumentError, ValueError) as e:
        log.error("invalid job arguments: %s", e)
        return 2
    if crash:
        log.warning("TEST fault injection armed: %s=%s (tests only; unset it to run normally)", faults.ENV, crash.point)
    if fault:
        armed = f"{','.join(sorted(fault.tables))}@{fault.from_batch}"
        log.warning(
            "TEST fault injection armed: %s=%s (tests only; unset it to run normally)", faults.FAIL_TABLE_ENV, armed
        )
    spark = (session_factory or local_session)(settings)
    aside = (
        _run_polls(spark, settings, crash)
        if settings.source == Source.JDBC
        else run_stream(spark, settings, crash, fault)
    )
    if aside:
        for table, why in sorted(aside.items()):
            log.error("table %s was set aside in this run: %s", table, why)
        return EXIT_SET_ASIDE
    return 0


__all__ = ["configure_logging", "main", "run_stream"]
