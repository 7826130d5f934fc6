"""Flink SQL: the `mysql-cdc` source (snapshot, then the binlog) -> Iceberg's Flink sink in upsert
mode, format v2 (what Amazon Managed Service for Apache Flink users run).

Run by Flink's SQL client in embedded mode (`-f` a script, `execution.target: local`: a MiniCluster
in the client's JVM), on the jars of the Flink distribution and of pom.xml's peer-flink profile
(install.py): no PyFlink and no cluster to start. One checkpoint per second: Iceberg's Flink sink
commits once per checkpoint, so that is its commit interval (the job's trigger is 1 s too).

Flink SQL's source table has a fixed schema, declared here from the source table's columns when the
job starts; the runner's DDL workload shows what that means for later ALTER TABLEs."""

from __future__ import annotations

import os
import re

from . import install
from .base import DATABASE, Context, System, jvm_options

# MySQL column types -> Flink SQL types (what the benchmark's tables use)
_TYPES = [
    (r"^int(\(\d+\))?$", "INT"),
    (r"^bigint(\(\d+\))?$", "BIGINT"),
    (r"^(varchar|char)\(\d+\)$", "STRING"),
    (r"^decimal\((\d+),(\d+)\)$", r"DECIMAL(\1, \2)"),
    (r"^datetime\((\d)\)$", r"TIMESTAMP(\1)"),
]
HEAP = "2g"
CHUNK = 100_000  # scan.incremental.snapshot.chunk.size: ~5x faster snapshots than the default 8096 here


def flink_type(mysql_type: str) -> str:
    t = mysql_type.lower().replace(" ", "")
    for pattern, repl in _TYPES:
        if re.match(pattern, t):
            return re.sub(pattern, repl, t)
    raise ValueError(f"no Flink SQL type for MySQL type {mysql_type!r} in the benchmark's mapping")


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def script(ctx: Context, tables: dict[str, list[tuple[str, str]]], key: str, namespace: str) -> str:
    """The SQL client's script: one mysql-cdc source for all tables (a regex; the planner shares it,
    so one binlog reader) and one upsert INSERT per table in a statement set."""
    names = sorted(tables)
    first = tables[names[0]]
    # every benchmark table has the same columns; the source table is declared once
    cols = ",\n  ".join(f"`{c}` {flink_type(t)}" for c, t in first)
    src = f"""CREATE TABLE src (
  `_table` STRING METADATA FROM 'table_name' VIRTUAL,
  {cols},
  PRIMARY KEY (`{key}`) NOT ENFORCED
) WITH (
  'connector' = 'mysql-cdc', 'hostname' = '127.0.0.1', 'port' = '{ctx.mariadb_port}',
  'username' = 'debezium', 'password' = {quote(ctx.debezium_password)},
  'database-name' = '{DATABASE}', 'table-name' = {quote("(" + "|".join(re.escape(n) for n in names) + ")")},
  'server-id' = '5400-5409', 'server-time-zone' = 'UTC',
  'scan.incremental.snapshot.chunk.size' = '{CHUNK}'
);
CREATE CATALOG lake WITH ('type' = 'iceberg', 'catalog-type' = 'hadoop', 'warehouse' = {quote(ctx.warehouse.as_uri())});
CREATE DATABASE IF NOT EXISTS lake.`{namespace}`;
"""
    sinks, inserts = [], []
    plain = ", ".join(f"`{c}`" for c, _ in first)
    for n in names:
        sinks.append(
            f"CREATE TABLE IF NOT EXISTS lake.`{namespace}`.`{DATABASE}_{n}` (\n  {cols},\n"
            f"  PRIMARY KEY (`{key}`) NOT ENFORCED\n) WITH ('format-version' = '2', 'write.upsert.enabled' = 'true');"
        )
        inserts.append(
            f"INSERT INTO lake.`{namespace}`.`{DATABASE}_{n}` SELECT {plain} FROM src WHERE `_table` = {quote(n)};"
        )
    # the SQL client's own statement-set syntax (its files are split at each `;`)
    return src + "\n".join(sinks) + "\nBEGIN STATEMENT SET;\n" + "\n".join(inserts) + "\nEND;\n"


CONFIG = """execution:
  target: local
  runtime-mode: streaming
  checkpointing:
    interval: 1s
parallelism:
  default: 1
table:
  dml-sync: true
rest:
  port: 0
taskmanager:
  memory:
    process:
      size: 1g
"""

# What Flink's own scripts pass on Java 17 (its config's env.java.opts.all): Kryo serialises the
# Iceberg writer's results (ByteBuffers in its column bounds) at every checkpoint.
JAVA17_OPENS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in (
        "java.lang", "java.lang.reflect", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks",
    )
] + ["--add-exports=java.base/sun.net.util=ALL-UNNAMED", "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED"]  # fmt: skip

# Warnings and errors of the MiniCluster (a job that fails and restarts says why here), and each
# checkpoint Iceberg's committer completes.
LOG4J = """rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} - %m%n
logger.restart.name = org.apache.flink.runtime.executiongraph.ExecutionGraph
logger.restart.level = INFO
"""


class FlinkCdc(System):
    name = "flink"
    label = "Flink SQL mysql-cdc -> Iceberg upsert (v2)"
    reads_kafka = False

    def __init__(self, key: str = "id") -> None:
        super().__init__()
        self.key = key
        self.flink: install.FlinkInstall | None = None

    def install(self) -> None:
        self.flink = install.install_flink()

    def start(self, ctx: Context, tables: list[str]) -> None:
        if self.flink is None:
            self.install()
        assert self.flink is not None
        conf = ctx.work / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "config.yaml").write_text(CONFIG)
        (conf / "log4j.properties").write_text(LOG4J)
        sql = ctx.work / "pipeline.sql"
        sql.write_text(script(ctx, {t: self.source_columns[t] for t in tables}, self.key, self.name))
        # 2 GiB: mysql-cdc holds a snapshot chunk (up to CHUNK rows) in memory while it reconciles it with
        # the binlog, beside 21 Iceberg writers (the job's driver peaks above 5 GiB in the same run).
        cmd = [
            "java", f"-Xmx{HEAP}", *jvm_options(), "-XX:+ExitOnOutOfMemoryError", f"-Dlog4j.configurationFile={conf / 'log4j.properties'}",
            *JAVA17_OPENS,
            "-cp", self.flink.classpath(), "org.apache.flink.table.client.SqlClient", "embedded", "-f", str(sql),
        ]  # fmt: skip
        self.launch(cmd, ctx.work / "flink.log", {**os.environ, "FLINK_CONF_DIR": str(conf)})

    def description(self) -> str:
        return (
            f"Flink {install.runtime.versions()['flink']} SQL client (embedded MiniCluster, parallelism 1, "
            f"checkpoint 1 s), mysql-cdc {install.runtime.versions()['flink-cdc']} "
            f"(chunk size {CHUNK:,}), Iceberg {install.runtime.versions()['iceberg']} Flink sink, upsert, v2"
        )

    def check(self) -> None:
        super().check()
        if self.log_path and self.log_path.exists():
            text = self.log_path.read_text(errors="replace")
            if "[ERROR]" in text:
                raise RuntimeError(f"the Flink SQL client reported an error: {_first_error(text)} ({self.log_path})")


def _first_error(text: str) -> str:
    clean = re.sub(r"\x1b\[[0-9;]*m", "", text)
    i = clean.find("[ERROR]")
    return " ".join(clean[i : i + 600].split())
