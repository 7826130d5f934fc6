"""One lake API over every table format of the registry, for behaviour tests written once and run on
each format (tests/job/test_every_format.py, the `format_lake` fixture of tests/job/conftest.py).

The registry's default format writes in the suite's own Spark session (tests/conftest.py). Every
other format writes in a long-lived Spark session of its own in a subprocess (a process has one
SparkContext, and a format may run on another Glue version's pyspark: local/session.runtime_env),
started once per xdist worker and driven by commands, one JSON line each way:

    python format_lakes.py FORMAT WORKDIR

Both sides run the same `Lakes.handle`, so a test reads the same answers in every format: rows as
Spark writes them as JSON (decimals as numbers, times as ISO text, nulls left out), without the
columns a format adds to every table (Format.system_columns).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent


# Hudi services a lake of a few rows does not need, off in the servers' sessions only (the job keeps
# Hudi's defaults): the metadata table (a second, merge-on-read table written on every commit), the
# embedded timeline server, timeline-server markers and the bloom index. None changes what a table
# holds or its timeline; together they cut Hudi's corpus run from ~114 s to ~83 s.
TEST_ONLY_CONF = {
    "hoodie.metadata.enable": "false",
    "hoodie.embed.timeline.server": "false",
    "hoodie.write.markers.type": "DIRECT",
    "hoodie.index.type": "SIMPLE",
}


def quoted(column: str) -> str:
    """A column name for Spark SQL: in backticks, a backtick in it doubled."""
    return "`" + column.replace("`", "``") + "`"


class Lakes:
    """The lakes of one format in one Spark session, each a namespace and a BatchProcessor of its own."""

    def __init__(self, spark: Any, table_format: str, work: Path, warehouse: Path) -> None:
        from cdclake.lake.formats import format_of

        self.spark, self.table_format, self.work, self.warehouse = spark, table_format, work, warehouse
        self.fmt = format_of(table_format)
        self.lakes: dict[int, Any] = {}
        self._n = itertools.count()

    def handle(self, command: dict[str, Any]) -> Any:
        """What one command (`{"cmd": name, ...arguments}`) answers, as JSON-ready values."""
        args = dict(command)
        return getattr(self, f"do_{args.pop('cmd')}")(**args)

    def do_open(self, overrides: dict[str, str]) -> dict[str, Any]:
        from cdclake.common.settings import build_settings
        from cdclake.jobs.batch import BatchProcessor

        n = next(self._n)
        folder = self.work / f"lake{n}"
        args = {
            "table_format": self.table_format,
            "source": "files",
            "files_path": str(folder / "in"),
            "catalog_type": "hadoop",
            "warehouse": str(self.warehouse),
            "namespace": f"{self.table_format}{os.getpid()}n{n}",
            "checkpoint_location": str(folder / "ckpt"),
            "dead_letter_path": str(folder / "dead"),
            "shuffle_partitions": "2",
            **overrides,
        }
        settings = build_settings(args)
        state = SimpleNamespace(settings=settings, fault=MergeFault(self.fmt), logs=[])
        state.processor = BatchProcessor(self.spark, settings, writes=state.fault.writes)
        self.lakes[n] = state
        return {"lake": n, "tables": f"{settings.catalog_name}.{settings.namespace}"}

    def do_apply(self, lake: int, records: list[dict[str, Any]], batch_id: int) -> dict[str, Any]:
        from cdclake.common.records import RAW_SCHEMA

        for r in records:  # a Kafka timestamp crosses the pipe as its ISO text
            r["timestamp"] = datetime.fromisoformat(r["timestamp"])
        df = self.spark.createDataFrame([tuple(r[c] for c in RAW_SCHEMA.names) for r in records], RAW_SCHEMA)
        state = self.lakes[lake]
        state.logs = []
        with LogLines(state.logs):
            return dataclasses.asdict(state.processor.process(df, batch_id))

    def do_logs(self, lake: int) -> list[str]:
        """The job's log lines (`LEVEL message`, WARNING and above) of the lake's latest `apply`, a
        failed one too."""
        return self.lakes[lake].logs

    def do_fail_merges(self, lake: int, times: int, tables: list[str] | None = None) -> None:
        """The lake's next `times` MERGEs (of `tables`, lake names; else of any table) fail inside
        their Spark job, after they started, as a lost executor or a storage error fails one."""
        self.lakes[lake].fault.arm(times, tables)

    def do_merges(self, lake: int) -> list[list[Any]]:
        """Each MERGE since the last call: [lake table, thread, whether it was made to fail]."""
        return self.lakes[lake].fault.take_calls()

    def do_restart(self, lake: int) -> None:
        """A new run of the job on the lake: a new BatchProcessor, nothing cached from earlier batches."""
        from cdclake.jobs.batch import BatchProcessor

        state = self.lakes[lake]
        state.processor = BatchProcessor(self.spark, state.settings, writes=state.fault.writes)

    def do_sql(self, lake: int, name: str, statements: list[str]) -> None:
        """Statements on the lake's table `name` (`{table}` in them), as another writer would run them."""
        for statement in statements:
            self.spark.sql(statement.format(table=self._table(lake, name)))

    def do_maintain(self, lake: int, name: str, policy: dict[str, Any], force: bool = False) -> dict[str, Any]:
        """One maintenance run of the table by the format's frame (lake/maintenance.maintain_table)."""
        from cdclake.common.maintenance_policy import MaintenancePolicy
        from cdclake.lake.formats import table_format
        from cdclake.lake.maintenance import maintain_table

        table = self._table(lake, name)
        fmt = table_format(self.lakes[lake].settings)
        report = maintain_table(self.spark, table, MaintenancePolicy(**policy), fmt, force=force)
        self.spark.catalog.refreshTable(table)
        return {
            "line": report.line(),
            "failed": report.failed,
            "actions": [a.value for a in report.plan.actions],
            "before": dataclasses.asdict(report.before),
            "after": dataclasses.asdict(report.after) if report.after else None,
        }

    def _table(self, lake: int, name: str) -> str:
        s = self.lakes[lake].settings
        return f"{s.catalog_name}.{s.namespace}.{name}"

    def _columns(self, lake: int, name: str) -> tuple[Any, list[str]]:
        df = self.spark.table(self._table(lake, name))
        return df, [c for c in df.columns if c not in self.fmt.system_columns]

    def do_rows(self, lake: int, name: str) -> list[dict[str, Any]]:
        df, columns = self._columns(lake, name)
        return [json.loads(j) for j in df.select(*[quoted(c) for c in columns]).toJSON().collect()]

    def do_texts(self, lake: int, name: str, columns: list[str]) -> list[list[str | None]]:
        """`columns` of every row as Spark casts them to text: exact where JSON is not (a decimal of
        more digits than a double holds, NaN, a timestamp whatever its type)."""
        df = self.spark.table(self._table(lake, name))
        return [list(r) for r in df.selectExpr(*[f"CAST(`{c}` AS STRING)" for c in columns]).collect()]

    def do_schema(self, lake: int, name: str) -> list[list[str]]:
        df, columns = self._columns(lake, name)
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        return [[c, types[c]] for c in columns]

    def do_exists(self, lake: int, name: str) -> bool:
        return bool(self.spark.catalog.tableExists(self._table(lake, name)))

    def do_properties(self, lake: int, name: str) -> dict[str, str]:
        rows = self.spark.sql(f"SHOW TBLPROPERTIES {self._table(lake, name)}").collect()
        return {r["key"]: r["value"] for r in rows}

    def do_dead_letters(self, lake: int) -> list[dict[str, Any]]:
        folder = Path(self.lakes[lake].settings.dead_letter_path)
        files = sorted(folder.glob("batch=*/*.json"))
        return [json.loads(line) for f in files for line in f.read_text().splitlines() if line.strip()]

    # Inspections for a format's own extras (tests/job/test_delta_lake.py, test_hudi.py): what a
    # table holds beyond its rows, and the format's own SQL, in the lakes' session.
    def do_paths(self, lake: int) -> dict[str, str]:
        s = self.lakes[lake].settings
        return {"warehouse": str(self.warehouse), "namespace": s.namespace, "dead": s.dead_letter_path}

    def do_tables(self, lake: int) -> list[str]:
        s = self.lakes[lake].settings
        rows = self.spark.sql(f"SHOW TABLES IN {s.catalog_name}.{s.namespace}").collect()
        return sorted(r["tableName"] for r in rows if not r["isTemporary"])

    def _read_back(self, lake: int, name: str, sql: dict[str, str]) -> dict[str, Any]:
        df, columns = self._columns(lake, name)
        table = self._table(lake, name)
        extra = {k: self.do_query(text.replace("{table}", table)) for k, text in sql.items()}
        detail = {r["col_name"]: r["data_type"] for r in self.spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()}
        fields = {f.name: f for f in df.schema.fields}
        return {
            "schema": [[c, fields[c].dataType.simpleString(), fields[c].nullable] for c in columns],
            "meta": [c for c in df.columns if c in self.fmt.system_columns],
            "rows": self.do_rows(lake, name),
            "properties": self.do_properties(lake, name),
            "provider": detail.get("Provider"),
            **extra,
        }

    def do_read_back(self, lake: int, names: list[str], sql: dict[str, str]) -> dict[str, Any]:
        """Each table's schema ([name, type, nullable]), rows, properties and provider, the format's
        own columns apart, and the rows of each statement of `sql` ({table} is the table's name).
        Side by side: one at a time, each table's small Spark jobs wait on the driver."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=4) as pool:
            return dict(zip(names, pool.map(lambda n: self._read_back(lake, n, sql), names), strict=True))

    def do_set_conf(self, values: dict[str, str | None]) -> dict[str, str | None]:
        """Sets (None: unsets) the session's settings; returns their previous values to put back."""
        previous = {k: self.spark.conf.get(k, None) for k in values}
        for k, v in values.items():
            if v is None:
                self.spark.conf.unset(k)
            else:
                self.spark.conf.set(k, v)
        return previous

    def do_lake_conf(self, lake: int) -> dict[str, str | None]:
        """The session settings the lake's job settings give otherwise than the session's own (the
        format's session_conf: e.g. Hudi's inline cleaning follows --maintenance_retain_last_snapshots),
        set for the session; returns the previous values (do_set_conf puts them back). A static one
        (extensions, catalog, warehouse: fixed at the session's start) Spark refuses to set: left as is."""
        wanted = self.fmt.session_conf(self.lakes[lake].settings)
        previous = {}
        for k, v in wanted.items():
            if self.spark.conf.get(k, None) != v:
                try:
                    previous |= self.do_set_conf({k: v})
                except Exception:  # Spark's refusal of a static setting
                    continue
        return previous

    def do_query(self, sql: str) -> list[dict[str, Any]]:
        """The statement's rows as Spark writes them as JSON (nulls left out)."""
        return [json.loads(j) for j in self.spark.sql(sql).toJSON().collect()]

    def do_query_apart(self, sql: str) -> list[dict[str, Any]]:
        """do_query in a new session of the same SparkContext (its own settings and table cache): for a
        statement after which its session no longer reads other tables (Hudi 0.15's incremental query,
        docs/OPERATIONS.md), while this session serves the next test."""
        return [json.loads(j) for j in self.spark.newSession().sql(sql).toJSON().collect()]

    def do_read_path(self, path: str, options: dict[str, str]) -> list[dict[str, Any]]:
        """A table read by its location with reader options, the format's own columns left out."""
        df = self.spark.read.format(self.table_format).options(**options).load(path)
        columns = [quoted(c) for c in df.columns if c not in self.fmt.system_columns]
        return [json.loads(j) for j in df.select(*columns).toJSON().collect()]

    def do_maintenance_job(self, lake: int, raw: dict[str, str]) -> dict[str, Any]:
        """The maintenance job over the lake's namespace in this session: its exit code, its lines (one
        per table and one for the run) and its seconds."""
        import logging
        import time

        from cdclake.jobs.maintenance_job import build_job_settings, run_maintenance

        s = self.lakes[lake].settings
        where = {"table_format": self.table_format, "catalog_type": "hadoop", "warehouse": str(self.warehouse)}
        lines: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
        log = logging.getLogger("cdclake")
        log.addHandler(handler)
        level = log.level
        log.setLevel(logging.INFO)  # the job's one line per table
        t0 = time.monotonic()
        try:
            code = run_maintenance(self.spark, build_job_settings(where | {"namespace": s.namespace} | raw))
        finally:
            log.removeHandler(handler)
            log.setLevel(level)
        seconds = round(time.monotonic() - t0, 1)
        return {"exit": code, "lines": [x for x in lines if x.startswith("maintenance ")], "seconds": seconds}

    def do_reader(self, lake: int, name: str) -> dict[str, Any]:
        """A downstream reader of the table now (lake_reads.reader_at)."""
        import lake_reads

        return lake_reads.reader_at(self.spark, self._table(lake, name))

    def do_feed_after(self, lake: int, name: str, reader: dict[str, Any]) -> dict[str, Any]:
        import lake_reads

        return lake_reads.feed_after(self.spark, self._table(lake, name), reader)

    def do_feed_since(self, lake: int, name: str, mark: int) -> list[dict[str, Any]]:
        import lake_reads

        return lake_reads.feed_since(self.spark, self._table(lake, name), mark)


class MergeFault:
    """The format's MERGEs (executor.format_writes), each made to fail while armed (`arm`), and a
    record of every MERGE call, for fault tests that run alike in the suite's process and a server."""

    def __init__(self, fmt: Any) -> None:
        from cdclake.lake.executor import format_writes

        self.merges = format_writes(fmt)
        self.writes = dataclasses.replace(self.merges, keyed=self.keyed)
        self.left, self.tables, self.calls = 0, None, []
        self.lock = threading.Lock()  # tables are written side by side (--table_concurrency)

    def arm(self, times: int, tables: list[str] | None) -> None:
        self.left, self.tables = times, set(tables) if tables else None

    def take_calls(self) -> list[list[Any]]:
        calls, self.calls = self.calls, []
        return calls

    def keyed(self, table: str, changes: Any, *args: Any, **kwargs: Any) -> None:
        from pyspark.sql import functions as F

        with self.lock:
            fail = self.left > 0 and (self.tables is None or table.rsplit(".", 1)[-1] in self.tables)
            if fail:
                self.left -= 1
            self.calls.append([table, threading.current_thread().name, fail])
        if fail:  # the MERGE's source rows raise when the MERGE computes them (typed: Hudi refuses a null type)
            error = F.raise_error(F.lit(f"injected: the MERGE into {table} failed")).cast("string")
            changes = changes.withColumn("_cdc_op", error)
        self.merges.keyed(table, changes, *args, **kwargs)


class LogLines(logging.Handler):
    """Collects the job's log lines (logger `cdclake`, WARNING and above) while in a `with`."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")

    def __enter__(self) -> LogLines:
        logging.getLogger("cdclake").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("cdclake").removeHandler(self)


class InProcess:
    """The default format's lakes in the suite's session; each command and answer goes through JSON
    as a subprocess's would, so a test cannot tell the two apart."""

    def __init__(self, spark: Any, table_format: str, work: Path, warehouse: Path) -> None:
        self.lakes = Lakes(spark, table_format, work, warehouse)

    def call(self, command: dict[str, Any]) -> Any:
        sent = json.loads(json.dumps(command, default=str))
        return json.loads(json.dumps(self.lakes.handle(sent), default=str))

    def stop(self) -> None:
        """The suite's session is the suite's to stop."""


class Server:
    """A subprocess with one Spark session of `table_format`, answering commands (`main`)."""

    def __init__(self, table_format: str, work: Path) -> None:
        from cdclake.local.session import runtime_env

        work.mkdir(parents=True, exist_ok=True)
        self.log = (work / "server.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "format_lakes.py"), table_format, str(work)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=work,  # Spark's and Derby's leftovers, if any, stay there
            env=dict(os.environ) | runtime_env(table_format),
        )
        self.work = work

    def call(self, command: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command, default=str) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the lake server stopped: {self.tail()}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the lake server failed {command['cmd']}: {answer['error']}")
        return answer["value"]

    def tail(self) -> str:
        self.log.flush()
        return (self.work / "server.log").read_text()[-6000:]

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # end of commands: the server stops its session and exits
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class FormatLake:
    """A fresh lake (namespace, dead-letter folder, BatchProcessor) of one format, with the reads of
    tests/job/conftest.Lake that every format answers alike."""

    def __init__(self, session: InProcess | Server, table_format: str, **overrides: str) -> None:
        from cdclake.lake.formats import format_of

        self.session, self.table_format, self.format = session, table_format, format_of(table_format)
        opened = session.call({"cmd": "open", "overrides": overrides})
        self.lake, self.tables = opened["lake"], opened["tables"]
        self._batch = itertools.count()

    def _call(self, cmd: str, **args: Any) -> Any:
        return self.session.call({"cmd": cmd, "lake": self.lake, **args})

    def apply(self, records: list[dict[str, Any]], batch_id: int | None = None) -> SimpleNamespace:
        """The batch's report (common/report.BatchReport) with its tables' reports, as attributes."""
        n = next(self._batch) if batch_id is None else batch_id
        report = self._call("apply", records=records, batch_id=n)
        return SimpleNamespace(**report | {"tables": [SimpleNamespace(**t) for t in report["tables"]]})

    def table(self, name: str = "inventory_customers") -> str:
        return f"{self.tables}.{name}"

    def rows(self, name: str = "inventory_customers", order: tuple[str, ...] = ("id",)) -> list[dict[str, Any]]:
        return sorted(self._call("rows", name=name), key=lambda r: tuple(r.get(c) for c in order))

    def ids(self, name: str = "inventory_customers") -> list[int]:
        return [r["id"] for r in self.rows(name)]

    def by_id(self, name: str = "inventory_customers") -> dict[int, dict[str, Any]]:
        """Rows by id; fails if an id is stored more than once (a dict would hide the second copy)."""
        rows = self.rows(name)
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), f"{name}: ids stored more than once: {ids}"
        return {r["id"]: r for r in rows}

    def first_names(self, name: str = "inventory_customers") -> dict[int, str]:
        return {i: r.get("first_name") for i, r in self.by_id(name).items()}

    def schema(self, name: str = "inventory_customers") -> dict[str, str]:
        """Column -> Spark type, in the table's order, the format's own columns left out."""
        return dict(self._call("schema", name=name))

    def exists(self, name: str = "inventory_customers") -> bool:
        return self._call("exists", name=name)

    def properties(self, name: str = "inventory_customers") -> dict[str, str]:
        return self._call("properties", name=name)

    def dead_letters(self) -> list[dict[str, Any]]:
        return self._call("dead_letters")

    def texts(self, *columns: str, name: str = "inventory_customers") -> dict[Any, dict[str, str | None]]:
        """Row id -> {column: the value as Spark's text} (Lakes.do_texts)."""
        rows = self._call("texts", name=name, columns=["id", *columns])
        return {int(r[0]): dict(zip(columns, r[1:], strict=True)) for r in rows}

    def logs(self) -> list[str]:
        return self._call("logs")

    def fail_merges(self, times: int = 1, tables: list[str] | None = None) -> None:
        self._call("fail_merges", times=times, tables=tables)

    def merges(self) -> list[list[Any]]:
        return self._call("merges")

    def restart(self) -> None:
        self._call("restart")

    def sql(self, *statements: str, name: str = "inventory_customers") -> None:
        self._call("sql", name=name, statements=list(statements))

    def maintain(self, policy: dict[str, Any], name: str = "inventory_customers", force: bool = False) -> Any:
        return SimpleNamespace(**self._call("maintain", name=name, policy=policy, force=force))

    # A format's own extras (the Lakes inspections of the same names).
    def paths(self) -> dict[str, str]:
        """The lake's warehouse folder, namespace and dead-letter folder in the session's process."""
        return self._call("paths")

    def tables_now(self) -> list[str]:
        return self._call("tables")

    def read_back(self, names: list[str], **sql: str) -> dict[str, Any]:
        """Each table as Lakes.do_read_back reads it; `sql`: more statements' rows, by key."""
        return self._call("read_back", names=names, sql=sql)

    def set_conf(self, values: dict[str, str | None]) -> dict[str, str | None]:
        return self.session.call({"cmd": "set_conf", "values": values})

    def lake_conf(self) -> dict[str, str | None]:
        """The session takes the lake's own session settings; returns the previous ones (set_conf)."""
        return self._call("lake_conf")

    def query(self, sql: str) -> list[dict[str, Any]]:
        """The statement's rows (Lakes.do_query)."""
        return self.session.call({"cmd": "query", "sql": sql})

    def query_apart(self, sql: str) -> list[dict[str, Any]]:
        return self.session.call({"cmd": "query_apart", "sql": sql})

    def read_path(self, path: str, **options: str) -> list[dict[str, Any]]:
        return self.session.call({"cmd": "read_path", "path": path, "options": options})

    def maintenance_job(self, **raw: str) -> dict[str, Any]:
        """The maintenance job over the lake's namespace with these arguments (Lakes.do_maintenance_job)."""
        return self._call("maintenance_job", raw=raw)

    def reader(self, name: str = "inventory_customers") -> dict[str, Any]:
        return self._call("reader", name=name)

    def feed_after(self, reader: dict[str, Any], name: str = "inventory_customers") -> dict[str, Any]:
        return self._call("feed_after", name=name, reader=reader)

    def feed_since(self, mark: int, name: str = "inventory_customers") -> list[dict[str, Any]]:
        return self._call("feed_since", name=name, mark=mark)


def error_text(trace: str) -> str:
    """A trace without its Java frames: the chain of exceptions, each with its message (a failure
    inside a Spark job is several `Caused by:` deep, under hundreds of frames)."""
    lines = [x for x in trace.splitlines() if not x.startswith(("\tat ", "\t... "))]
    return "\n".join(lines)[-8000:]


def answer(out: TextIO, value: Any = None, error: str | None = None) -> None:
    out.write(json.dumps({"error": error} if error is not None else {"value": value}, default=str) + "\n")
    out.flush()


def main(table_format: str, work: Path) -> None:
    """The server: answers each command line read from stdin on the original stdout, until stdin
    ends. Anything else written to stdout (Spark, the job's prints) goes to stderr instead."""
    import traceback

    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    from cdclake.common.settings import build_settings
    from cdclake.local.session import local_session

    settings = build_settings(
        {
            "table_format": table_format,
            "source": "files",
            "files_path": "unused",
            "catalog_type": "hadoop",
            "warehouse": str(work / "warehouse"),
            "checkpoint_location": "unused",
            "dead_letter_path": "unused",
            "shuffle_partitions": "2",
        }
    )
    spark = local_session(settings, app_name=f"cdc-{table_format}-lakes", master="local[2]")
    for k, v in TEST_ONLY_CONF.items():
        spark.conf.set(k, v)  # a format's services a lake of a few rows does not need
    lakes = Lakes(spark, table_format, work, work / "warehouse")
    for line in sys.stdin:
        try:
            answer(out, lakes.handle(json.loads(line)))
        except Exception:  # the test that sent it reads the trace; the session serves the next one
            answer(out, error=error_text(traceback.format_exc()))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
