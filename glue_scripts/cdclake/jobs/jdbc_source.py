"""--source jdbc: query-based capture. Each poll reads, per table, the rows whose modification column
moved past the table's high-water mark (events/query_capture.py decides what to read and how a row
becomes a Debezium event), hands them as one raw batch to the same BatchProcessor the Kafka and files
sources feed (planner, executor, schema evolution, dead letters), and only then moves the marks.

The mark lives in the lake: a table's largest `_cdc_seq` (a row's modification value in
microseconds), committed by the MERGE that wrote the row. It is read from the lake when the job
starts and kept in memory after each committed poll, so a crash at any point restarts from what the
lake holds: nothing is skipped, and rows read again change nothing (no newer than the lake's copy).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.lake_contract import CDC_SEQ
from ..common.query_tables import engine_of, parse_capture_tables, parse_soft_delete
from ..common.records import RAW_COLUMNS
from ..common.settings import ArgumentError, Settings
from ..common.sqltext import quote
from ..events import query_capture as qc
from ..local import faults
from .batch import BatchProcessor

log = logging.getLogger("cdclake")

_DRIVERS = {qc.Engine.MYSQL: "com.mysql.cj.jdbc.Driver", qc.Engine.POSTGRES: "org.postgresql.Driver"}


def resolve_password(spec: str, environ: dict[str, str] | None = None) -> str:
    """--jdbc_password: `secretsmanager:<id>`, `env:<variable>` or `file:<path>`; empty: no password."""
    scheme, _, ref = spec.partition(":")
    env = os.environ if environ is None else environ
    if not spec:
        return ""
    if scheme == "env":
        if ref not in env:
            raise ArgumentError(f"--jdbc_password env:{ref}: the variable is not set")
        return env[ref]
    if scheme == "file":
        lines = Path(ref).read_text(encoding="utf-8").splitlines()
        found = [line.split("=", 1)[1].strip() for line in lines if line.strip().startswith("password=")]
        return found[0] if found else "\n".join(lines).strip()
    if scheme == "secretsmanager":
        import boto3  # on Glue only: locally the password comes from env: or file:

        secret = boto3.client("secretsmanager").get_secret_value(SecretId=ref)["SecretString"]
        try:
            return str(json.loads(secret)["password"])
        except (ValueError, KeyError, TypeError):
            return secret
    raise ArgumentError(f"--jdbc_password must start with secretsmanager:, env: or file:, got {scheme!r}")


@dataclass
class TableRead:
    """One table's part of a poll: its events and the highest position read (None: no rows)."""

    events: DataFrame | None
    top: int | None


class JdbcSource:
    """Spark's JDBC reader on the source, in UTC."""

    def __init__(self, spark: SparkSession, s: Settings) -> None:
        self.spark, self.engine = spark, engine_of(s.jdbc_url)
        self.options = {
            "url": s.jdbc_url,
            "driver": _DRIVERS[self.engine],
            "sessionInitStatement": qc.session_init(self.engine),
        }
        if s.jdbc_user:
            self.options["user"] = s.jdbc_user
        password = resolve_password(s.jdbc_password)
        if password:
            self.options["password"] = password
        # PostgreSQL's `source.db` (the connector's database): the URL's path.
        self.database = s.jdbc_url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]

    def read(self, sql: str) -> DataFrame:
        return self.spark.read.format("jdbc").options(**self.options).option("query", sql).load()

    def columns(self, t: qc.CaptureTable) -> list[qc.SourceColumn]:
        rows = self.read(qc.catalog_query(self.engine, t)).collect()
        return qc.read_columns([r.asDict() for r in rows])


def _json(columns: list[Column], names: list[str]) -> Column:
    return F.to_json(
        F.struct(*[c.alias(n) for c, n in zip(columns, names, strict=True)]), {"ignoreNullFields": "false"}
    )


def _compact(*parts: str | Column) -> Column:
    return F.concat(*[F.lit(p) if isinstance(p, str) else p for p in parts])


class Events:
    """A table's poll rows (and reconciliation keys) as raw records of the Debezium envelope."""

    def __init__(self, source: JdbcSource, t: qc.CaptureTable, columns: list[qc.SourceColumn], soft: Any) -> None:
        fields = [qc.column_field(source.engine, c) for c in columns]
        self.t, self.columns, self.fields = t, columns, fields
        self.names = [c.name for c in columns]
        self.keys = sorted((c for c in columns if c.key_position is not None), key=lambda c: c.key_position or 0)
        self.value_schema = qc.value_schema(t, [f[0] for f in fields])
        key_fields = [f[0] for f, c in zip(fields, columns, strict=True) if c.key_position is not None]
        self.key_schema = qc.key_schema(t, sorted(key_fields, key=lambda f: self._key_position(f["field"])))
        self.source = qc.source_block(source.engine, t, source.database)
        self.soft = soft if soft is not None and soft.column in self.names else None

    def _key_position(self, name: str) -> int:
        return next(c.key_position or 0 for c in self.keys if c.name == name)

    def value_columns(self) -> list[Column]:
        """The polled row's columns (c0..cN) in their event form."""
        return [F.col(f"c{i}").cast(cast) if cast else F.col(f"c{i}") for i, (_, _, cast) in enumerate(self.fields)]

    def records(self, rows: DataFrame, seq: Column, deleted: Column, image: Column, key: Column) -> DataFrame:
        """Raw records: `image` (the row's JSON) as `after`, or as `before` of a delete where `deleted`."""
        value = _compact(
            '{"schema":',
            self.value_schema,
            ',"payload":{"before":',
            F.when(deleted, image).otherwise(F.lit("null")),
            ',"after":',
            F.when(deleted, F.lit("null")).otherwise(image),
            "," + '"source":' + self.source + ',"ts_ms":',
            (seq / 1000).cast("long").cast("string"),
            '},"op":',
            F.when(deleted, F.lit('"d"')).otherwise(F.lit('"u"')),
            ',"ts_ms":',
            F.lit(str(int(time.time() * 1000))),
            "}}",
        )
        return rows.select(
            F.lit(f"{qc.TOPIC_PREFIX}.{self.t.namespace}.{self.t.table}").alias("topic"),
            F.lit(0).alias("partition"),
            seq.cast("long").alias("offset"),
            F.current_timestamp().alias("timestamp"),
            _compact('{"schema":', self.key_schema, ',"payload":', key, "}").alias("key"),
            value.alias("value"),
        ).select(*RAW_COLUMNS)

    def polled(self, rows: DataFrame) -> DataFrame:
        cols = self.value_columns()
        by_name = dict(zip(self.names, cols, strict=True))
        deleted = F.lit(False)
        if self.soft is not None:
            deleted = F.coalesce(by_name[self.soft.column].cast("string") == F.lit(self.soft.value), F.lit(False))
        image = _json(cols, self.names)
        key = _json([by_name[c.name] for c in self.keys], [c.name for c in self.keys])
        return self.records(rows, F.col(qc.SEQ_ALIAS), deleted, image, key)


class QueryCapture:
    """The poll loop: reads every table past its mark, applies the poll as one batch, moves the marks."""

    def __init__(self, spark: SparkSession, settings: Settings, processor: BatchProcessor) -> None:
        self.spark, self.settings, self.processor = spark, settings, processor
        self.source = JdbcSource(spark, settings)
        self.tables = parse_capture_tables(settings.jdbc_tables)
        self.soft = parse_soft_delete(settings.jdbc_soft_delete)
        self.marks: dict[qc.CaptureTable, int | None] = {t: self.lake_mark(t) for t in self.tables}
        self.polls = 0
        self._held: list[DataFrame] = []  # this poll's materialized reads, released after its batch
        self.refused: dict[str, str] = {}  # `<db>.<table>` -> why, of the last poll that read it

    def lake_mark(self, t: qc.CaptureTable) -> int | None:
        """The table's high-water mark as its lake rows hold it (None: no lake table or rows yet)."""
        ident = self.settings.table_identifier(t.namespace, t.table)
        if not self.spark.catalog.tableExists(ident):
            return None
        top = self.spark.table(ident).agg(F.max(CDC_SEQ)).first()[0]
        return None if top is None else int(top)

    def events(self, t: qc.CaptureTable) -> tuple[Events, list[qc.SourceColumn]]:
        columns = self.source.columns(t)
        qc.check_capturable(self.source.engine, t, columns)
        return Events(self.source, t, columns, self.soft), columns

    def _rows(self, t: qc.CaptureTable, columns: list[qc.SourceColumn], poll: qc.Poll) -> tuple[DataFrame, int, int]:
        """A poll's rows, materialized (the batch reads them several times and the source keeps
        changing), their count and highest position."""
        rows = self._hold(self.source.read(qc.poll_query(self.source.engine, t, columns, poll)))
        stats = rows.agg(F.count(F.lit(1)).alias("n"), F.max(qc.SEQ_ALIAS).alias("top")).first()
        return rows, int(stats["n"]), -1 if stats["top"] is None else int(stats["top"])

    def read_table(self, t: qc.CaptureTable) -> TableRead:
        """The table's rows past its mark; a full poll completed at its last position. A table the
        poll cannot read (no such table yet, no modification column, ...) is left out of this poll
        with an ERROR naming the fix, and read again by the next: the other tables go on."""
        name = f"{t.namespace}.{t.table}"
        try:
            ev, columns = self.events(t)
        except qc.CaptureRefused as e:
            if self.refused.get(name) != str(e):  # once per reason, not every poll
                log.log(logging.WARNING if isinstance(e, qc.TableMissing) else logging.ERROR, "query capture: %s", e)
            self.refused[name] = str(e)
            return TableRead(None, None)
        if self.refused.pop(name, None) is not None:
            log.info("query capture: table %s is read from now on", name)
        return self._read_rows(t, ev, columns)

    def _read_rows(self, t: qc.CaptureTable, ev: Events, columns: list[qc.SourceColumn]) -> TableRead:
        s, mark = self.settings, self.marks[t]
        limit = s.jdbc_max_rows_per_poll
        rows, n, top = self._rows(t, columns, qc.Poll(mark, s.jdbc_lag_seconds, limit))
        if n >= limit and top == mark:  # more rows at the mark than the limit: read past it
            rows, n, top = self._rows(t, columns, qc.Poll(mark, s.jdbc_lag_seconds, limit, strict=True))
        if not n or (mark is not None and top <= mark):
            # Only rows at the mark, all read when the mark was reached (the lag covers the source's
            # transactions): no batch, no empty commit per poll.
            return TableRead(None, None)
        if n >= limit:  # the limit may have cut the rows at `top`: read them whole
            rest = self.source.read(
                qc.poll_query(self.source.engine, t, columns, qc.Poll(None, s.jdbc_lag_seconds, 0, at=top))
            )
            rows = self._hold(rows.where(F.col(qc.SEQ_ALIAS) < top).unionByName(rest))
        return TableRead(ev.polled(rows), top)

    def _hold(self, df: DataFrame) -> DataFrame:
        """`df` read once and kept on the executors until the poll's batch is applied."""
        held = df.localCheckpoint(eager=True)
        self._held.append(held)
        return held

    def _release(self) -> None:
        for df in self._held:
            df.unpersist()
        self._held.clear()

    def poll(self, batch_id: int, crash: faults.CrashPoint | None = None) -> int:
        """One poll: every table's new rows applied as one batch, then the marks moved. Returns the
        number of tables whose mark moved (or that had deletes to apply)."""
        try:
            return self._poll(batch_id, crash)
        finally:
            self._release()

    def _poll(self, batch_id: int, crash: faults.CrashPoint | None) -> int:
        reads = {t: self.read_table(t) for t in self.tables}
        self.polls += 1
        frames = [r.events for r in reads.values() if r.events is not None]
        reconcile = self.settings.jdbc_reconcile_every_polls
        if reconcile and self.polls % reconcile == 0:
            frames += [f for f in (self.hard_deletes(t) for t in self.tables) if f is not None]
        if not frames:
            return 0
        self.processor.process(reduce(DataFrame.unionByName, frames), batch_id)
        if crash:
            crash.reached(faults.AFTER_COMMIT, batch_id)
        for t, r in reads.items():
            if r.top is not None:
                self.marks[t] = max(r.top, self.marks[t] or r.top)
        return len(frames)

    def hard_deletes(self, t: qc.CaptureTable) -> DataFrame | None:
        """Deletes for the lake rows whose key is missing at the source (--jdbc_reconcile_every_polls),
        each one microsecond after the row's own position: a later insert of the key is newer."""
        ident = self.settings.table_identifier(t.namespace, t.table)
        if not self.spark.catalog.tableExists(ident):
            return None
        ev, _ = self.events(t)
        keys = [c.name for c in ev.keys]
        q = self.source.engine
        sql = f"SELECT {', '.join(qc.quote_identifier(q, k) for k in keys)} FROM {qc.qualified(q, t)}"
        source_keys = self.source.read(sql)
        lake = self.spark.table(ident).select(*[F.col(quote(k)) for k in keys], F.col(CDC_SEQ))
        gone = self._hold(lake.join(source_keys, on=keys, how="left_anti"))
        if gone.isEmpty():
            return None
        log.info("reconciliation: %d rows of %s are missing at the source: deleting them", gone.count(), ident)
        key = _json([F.col(quote(k)) for k in keys], keys)
        return ev.records(gone, F.col(CDC_SEQ) + 1, F.lit(True), key, key)


def run_polls(
    spark: SparkSession,
    settings: Settings,
    crash: faults.CrashPoint | None = None,
    stop: threading.Event | None = None,
    processor: BatchProcessor | None = None,
) -> dict[str, str]:
    """Poll until stopped, every --trigger_interval_seconds; with --run_once until a poll finds nothing
    new. Returns the tables set aside in the run, with why."""
    processor = processor or BatchProcessor(spark, settings)
    capture = QueryCapture(spark, settings, processor)
    stop = stop or threading.Event()
    log.info(
        "polling %d tables of %s (%s) into %s.%s",
        len(capture.tables),
        capture.source.engine,
        settings.jdbc_url,
        settings.catalog_name,
        settings.namespace,
    )
    last = 0
    while not stop.is_set():
        batch_id = max(int(time.time() * 1000), last + 1)  # unique across runs: the dead letters' folders
        last = batch_id
        found = capture.poll(batch_id, crash)
        if settings.run_once and not found:
            break
        if not settings.run_once:
            stop.wait(settings.trigger_interval_seconds)
    # A run-once run that could not read a table ends with the set-aside exit code, naming why.
    unread = {name: f"query capture could not read it: {why}" for name, why in capture.refused.items()}
    return {**processor.set_aside_in_run, **unread}
