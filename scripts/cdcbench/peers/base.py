"""What every system of the peers' run offers the runner: install, start against the shared stack,
the process tree to measure, the lake table of each source table, its current state, compaction, stop.

The lake is one Hadoop-catalog warehouse (the benchmark's Spark session reads it as `glue_catalog`);
each system writes its own namespace there and changes its own source tables (`<system>_<name>`),
so one MariaDB, one Kafka and one Debezium connector serve all four, one system at a time."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..measure import RssSampler, process_tree

DATABASE = "salesdb"
TOPIC_PREFIX = "salesdb"  # the local connector's topic.prefix: topics salesdb.salesdb.<table>


@dataclass(frozen=True)
class Context:
    """What a system starts against."""

    kafka: str  # bootstrap servers
    mariadb_port: int
    debezium_password: str  # the MariaDB user `debezium` (binlog + SELECT grants) of the stack
    warehouse: Path
    work: Path  # the system's scratch folder


class System(ABC):
    name: str  # short, lower case: source tables are <name>_<table>, the lake namespace is <name>
    label: str  # for the tables
    reads_kafka = True  # reads Debezium's topics (Flink reads the binlog itself)

    def __init__(self) -> None:
        self.source_columns: dict[str, list[tuple[str, str]]] = {}  # table -> (column, MySQL type), at start
        self.proc: subprocess.Popen | None = None
        self.rss: RssSampler | None = None
        self.log_path: Path | None = None

    def install(self) -> None:  # noqa: B027 - systems that come with the project install nothing
        """Download what the system needs (idempotent); only the peers' run calls it."""

    @abstractmethod
    def start(self, ctx: Context, tables: list[str]) -> None:
        """Start writing the lake from the source tables' changes (tables: source table names)."""

    def lake_table(self, table: str) -> str:
        return f"glue_catalog.{self.name}.{DATABASE}_{table}"

    def current(self, spark: Any, table: str) -> Any:
        """The lake's current state of one source table (a DataFrame of the source's columns where
        the system has them)."""
        return fresh(spark, self.lake_table(table))

    def description(self) -> str:
        return ""

    def pid(self) -> int:
        """The root of the process tree whose CPU and memory are the system's."""
        if self.proc is None:
            raise RuntimeError(f"{self.name} is not running")
        return self.proc.pid

    def check(self) -> None:
        """Raise when the system died: a dead system would look like a slow one."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.label} exited with {self.proc.returncode}; log: {self.log_path}")

    def launch(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log_path = log
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env or os.environ.copy())
        self.rss = RssSampler(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None:
            return
        tree = process_tree(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in tree[1:]:  # a JVM or worker that outlived its parent
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.rss:
            self.rss.stop()
        self.proc = None


def jvm_options() -> list[str]:
    """The local JVM flags every system's JVM gets (cdclake.local.session.JVM_OPTIONS_ENV: the Spark JVMs of
    the job and the sample read it, so do the stack's Kafka JVMs); the test suite sets C1-only JIT and
    the serial collector, the benchmark leaves the JDK's defaults unless the caller sets it."""
    return shlex.split(os.environ.get("CDC_JVM_OPTIONS", ""))


def fresh(spark: Any, table: str) -> Any:
    """The table as last committed: the session's catalog caches a loaded table until it has not been
    used for 30 s, which a poll every second never lets happen."""
    spark.catalog.refreshTable(table)
    return spark.table(table)


R = TypeVar("R")

# What Iceberg says when it prunes a scan's requested columns against a table whose schema a commit
# changed after the read was analysed (a column turned optional, a decimal's scale changed).
# Spark 3.5 + Iceberg 1.7 (Iceberg refuses the older column types), and Spark 4's own check that a
# DataFrame's table is still the one it analysed.
_SCHEMA_MOVED = ("Cannot project", "Invalid projection", "INCOMPATIBLE_TABLE_CHANGE_AFTER_ANALYSIS")


def settled(read: Callable[[], R], attempts: int = 3) -> R:
    """`read()`, run again when a commit changed the table's schema between the read's analysis and
    its scan: the catalog's cache is off, so Iceberg reloads the table when it builds the scan and
    refuses the older column types (a system under test commits while the benchmark polls). `read`
    must build its DataFrames itself, so that a new attempt analyses the new schema. Any other error,
    and this one `attempts` times in a row, is raised."""
    from pyspark.errors import AnalysisException, IllegalArgumentException

    for _ in range(attempts - 1):
        try:
            return read()
        except (IllegalArgumentException, AnalysisException) as e:
            if not any(m in str(e) for m in _SCHEMA_MOVED):
                raise
    return read()
