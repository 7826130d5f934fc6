"""The Glue job script running locally in streaming mode against the local stack's broker.

    local-job start [-- EXTRA JOB ARGS]   start it in the background (idempotent)
    local-job stop                        SIGTERM: finish the current batch, then exit
    local-job kill                        SIGKILL, as a crash would (for recovery drills)
    local-job resume TABLE                resume a lake table set aside: stop the job, replay
                                                  the table's set-aside changes once, in the foreground
    local-job status | logs [-n N] [-f] | command
    (--source postgres, or CDC_STACK_SOURCE=postgres: read the PostgreSQL source's topics;
    start/resume/command --table-format delta|hudi: the lake tables' format, the job's --table_format)

It is the same `glue_scripts/cdc_lake_job.py` the Glue job runs, reading the broker through
Spark's Kafka source as on Glue (spark-sql-kafka from .local/jars/spark), without MSK IAM
(`--kafka_auth none`). State lives next to the stack's: $CDC_STACK_DIR/lake/{warehouse,checkpoints,
dead-letters}; the checkpoint is Spark's (offsets/, commits/, sources/). With Delta or Hudi the
tables live in Spark's session catalog, in memory locally: a job started again in a new process does
not find the tables the one before created, so start such a lake afresh.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

# The job's own account of which Glue runtime (and so which local pyspark) a table format runs on.
from cdclake.lake.formats import DEFAULT, format_of, names
from cdclake.local.session import GLUE_VERSION_ENV, runtime_env
from cdcstack import commands, plumbing, registry, sources

from cdctools import cli

COMPONENT = plumbing.JOB
NAMESPACE = "cdc"
# Where the job's Spark session keeps a persistent session catalog (cdclake.local.session.SESSION_METASTORE_ENV).
SESSION_METASTORE_ENV = "CDC_SESSION_METASTORE"
# The job's --table_format values, from the formats' registry (cdclake.lake.formats); DEFAULT the default.
TABLE_FORMATS = tuple(names())
SCRIPT = plumbing.ROOT / "glue_scripts" / "cdc_lake_job.py"


@dataclass(frozen=True)
class LakePaths:
    warehouse: Path
    checkpoints: Path
    dead_letters: Path

    @classmethod
    def of(cls, s: plumbing.StackConfig) -> LakePaths:
        root = s.path("lake")
        return cls(root / "warehouse", root / "checkpoints" / "cdc-job", root / "dead-letters")


def topic_pattern(s: plumbing.StackConfig) -> str:
    """The job's --kafka_topic_pattern, the source engine's JOB_TOPIC_PATTERN: the change topics
    <prefix>.<database>.<table> for MySQL, plus the connector's
    schema-change topic <prefix> (its DDL carries column renames and dropped tables; the template's
    KafkaTopicPattern default is the same regex), and <prefix>.<schema>.<table> for PostgreSQL (no
    DDL in its events; its heartbeat topic stays outside)."""
    return s.engine.JOB_TOPIC_PATTERN


# The demo's tables and the modification column sql/query_capture.sql (sql/postgres/) gives them.
QUERY_TABLES = ("customer", "orders")
QUERY_COLUMN = "cdc_modified_at"
CAPTURES = ("log", "query")


def query_arguments(s: plumbing.StackConfig) -> list[str]:
    """--source jdbc on the stack's database: the Debezium user (SELECT is all it needs) and its
    password file; hard deletes found by a key reconciliation every 5 polls."""
    port = s.ports[s.engine.COMPONENT]
    url = (
        f"jdbc:mysql://127.0.0.1:{port}/"
        if s.source == "mysql"
        else f"jdbc:postgresql://127.0.0.1:{port}/{plumbing.DATABASE}"
    )
    tables = ",".join(f"{s.engine.TOPIC_NAMESPACE}.{t}:{QUERY_COLUMN}" for t in QUERY_TABLES)
    return [
        "--source", "jdbc",
        "--jdbc_url", url,
        "--jdbc_user", "debezium",
        "--jdbc_password", f"file:{s.engine.secret_file(s)}",
        "--jdbc_tables", tables,
        "--jdbc_reconcile_every_polls", "5",
    ]  # fmt: skip


def job_command(
    s: plumbing.StackConfig, extra: list[str], table_format: str = DEFAULT, capture: str = "log"
) -> list[str]:
    """The local job's command line; `table_format` is its --table_format (the local session loads
    that format's jars: cdclake.local.session.local_jars); `capture` query: --source jdbc on the
    stack's database instead of the broker's topics."""
    trigger = os.environ.get("CDC_JOB_TRIGGER_SECONDS", "1")
    source = (
        query_arguments(s)
        if capture == "query"
        else [
            "--source", "kafka",
            "--kafka_auth", "none",
            "--kafka_bootstrap_servers", f"127.0.0.1:{s.ports['kafka']}",
            "--kafka_topic_pattern", topic_pattern(s),
        ]
    )  # fmt: skip
    return [
        str(s.local / "venv" / "bin" / "python"),
        str(SCRIPT),
        *source,
        *lake_arguments(s, table_format, LakePaths.of(s).checkpoints),
        "--trigger_interval_seconds", trigger,
        # keep: the connector emits transaction metadata (CDC_STACK_TRANSACTIONS); the job applies whole transactions
        "--transactions", s.transactions,
        *extra,
    ]  # fmt: skip


def lake_arguments(s: plumbing.StackConfig, table_format: str, checkpoint: Path) -> list[str]:
    """The job's arguments that say where the lake is and how it is written: the stream's and a resume run's."""
    p = LakePaths.of(s)
    return [
        "--catalog_type", "hadoop",
        "--warehouse", str(p.warehouse),
        "--namespace", NAMESPACE,
        "--checkpoint_location", str(checkpoint),
        "--dead_letter_path", str(p.dead_letters),
        "--shuffle_partitions", "2",
        # the stack's wire format; with avro the job reads JSON records on the same topics too
        "--wire_format", s.wire_format,
        "--table_format", table_format,
    ]  # fmt: skip


def resume_command(s: plumbing.StackConfig, table: str, table_format: str, stamp: str) -> list[str]:
    """The resume run of a table set aside (docs/OPERATIONS.md, "A table set aside"): once over the folder its mark
    names (under the stream's --dead_letter_path), with a checkpoint of its own per run, so that a
    second resume of the same folder (after one that failed again) reads every file again."""
    checkpoint = LakePaths.of(s).checkpoints.parent / f"resume-{table}-{stamp}"
    return [
        str(s.local / "venv" / "bin" / "python"),
        str(SCRIPT),
        "--source", "files",
        "--run_once", "true",
        "--resume_table", table,
        *lake_arguments(s, table_format, checkpoint),
    ]  # fmt: skip


def job_env(s: plumbing.StackConfig, table_format: str) -> dict[str, str] | None:
    """The job's environment beyond ours: the schema registry's (avro) and the session catalog's (Delta, Hudi)."""
    # The schema registry stand-in, found by the job's boto3 client as on AWS: from its environment.
    env = {**os.environ, **registry.client_env(s)} if s.wire_format == "avro" else None
    if format_of(table_format).session_catalog:
        env = {**(env or os.environ), **session_catalog_env(s)}
    try:  # Glue 5.0's pyspark for hudi, or for any format with CDC_GLUE_VERSION=5.0 (the upgrade drill)
        runtime = runtime_env(table_format, env or os.environ)
    except RuntimeError as exc:
        raise plumbing.StackError(str(exc)) from None
    return {**(env or os.environ), **runtime} if runtime else env


def session_catalog_env(s: plumbing.StackConfig) -> dict[str, str]:
    """Delta's and Hudi's catalog (Spark's session catalog) kept in the stack's state folder, as Glue's
    Data Catalog keeps it on AWS: a job started again (stop/start, a crash drill) finds the tables the
    one before created. Spark's in-memory catalog would forget them with the process."""
    return {SESSION_METASTORE_ENV: str(s.path("metastore"))}


def start(s: plumbing.StackConfig, extra: list[str], table_format: str = DEFAULT, capture: str = "log") -> int:
    rec = plumbing.live_record(s, COMPONENT)
    if rec is not None:
        plumbing.say(f"job: already running (pid {rec.pid})")
        return 0
    if capture == "log" and not plumbing.tcp_open(s.ports["kafka"]):
        raise plumbing.StackError(
            f"the broker is not listening on 127.0.0.1:{s.ports['kafka']}: start the stack first (local-stack up)"
        )
    for d in (s.path("logs"), s.path("run")):
        d.mkdir(parents=True, exist_ok=True)
    env_python = s.local / "venv" / "bin" / "python"
    if not env_python.exists():
        raise plumbing.StackError(f"no virtualenv at {env_python}: run make setup")
    command = job_command(s, extra, table_format, capture)
    proc = plumbing.launch(s, COMPONENT, command, port=0, env=job_env(s, table_format))
    t0 = time.monotonic()
    # Healthy once the streaming query runs (Spark start-up takes 5-15 s on this kind of machine).
    while time.monotonic() - t0 < s.timeout:
        if proc.poll() is not None:
            s.record(COMPONENT).unlink(missing_ok=True)
            raise plumbing.StackError(
                f"the job exited with code {proc.returncode}; last lines of {s.log(COMPONENT)}:\n"
                + plumbing.log_tail(s, COMPONENT)
            )
        if ("streaming from kafka into" if capture == "log" else "polling ") in _run_log(s):
            plumbing.say(f"job: streaming (pid {proc.pid}, started in {time.monotonic() - t0:.1f}s)")
            return 0
        time.sleep(0.3)
    raise plumbing.StackError(
        f"the job did not start streaming within {s.timeout:.0f}s:\n{plumbing.log_tail(s, COMPONENT)}"
    )


def resume(s: plumbing.StackConfig, table: str, table_format: str = DEFAULT) -> int:
    """Stop the streaming job (it keeps its marks in memory), run the table's resume run in the
    foreground; its exit code: 0 resumed, 3 set aside again (the log says why)."""
    plumbing.stop(s, COMPONENT)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    plumbing.say(f"job: resuming table {table} ({table_format}); the streaming job stays stopped until started")
    code = subprocess.run(
        resume_command(s, table, table_format, stamp), env=job_env(s, table_format), cwd=s.state
    ).returncode
    if code == 0:
        plumbing.say(f"job: table {table} resumed (or was not set aside); start the job: local-job start")
    else:
        plumbing.say(f"job: the resume run of {table} exited {code} (3: set aside again, the log above says why)")
    return code


def _run_log(s: plumbing.StackConfig) -> str:
    """The job's log since its latest start."""
    try:
        text = s.log(COMPONENT).read_text(errors="replace")
    except OSError:
        return ""
    return text.rsplit(f"local-stack starts {COMPONENT}", 1)[-1]


def kill(s: plumbing.StackConfig) -> int:
    rec = plumbing.live_record(s, COMPONENT)
    if rec is None:
        plumbing.say("job: not running")
        return 0
    with suppress(ProcessLookupError):
        os.kill(rec.pid, signal.SIGKILL)
    while rec.alive():
        time.sleep(0.05)
    s.record(COMPONENT).unlink(missing_ok=True)
    plumbing.say(f"job: killed pid {rec.pid} (SIGKILL)")
    return 0


def status(s: plumbing.StackConfig) -> int:
    rec = plumbing.live_record(s, COMPONENT)
    if rec is None:
        print("job        stopped")
        return 3
    batches = [line for line in _run_log(s).splitlines() if " batch " in line]
    last = batches[-1].split(" INFO cdclake: ", 1)[-1] if batches else "no batch yet"
    print(f"job        running  pid {rec.pid:<7}  last: {last}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(prog="local-job", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--source",
        choices=sorted(sources.ENGINES),
        help="whose topics the job reads: mysql (default) or postgres; default $CDC_STACK_SOURCE",
    )
    formats = argparse.ArgumentParser(add_help=False)
    formats.add_argument(
        "--table-format",
        choices=TABLE_FORMATS,
        default=DEFAULT.value,
        help=f"the lake tables' format (default {DEFAULT})",
    )
    st = sub.add_parser("start", parents=[common, formats], help="start the job in the background")
    st.add_argument(
        "--glue-version",
        choices=("5.0", "6.0"),
        help="the Glue runtime to run on (default: 6.0, hudi 5.0); 5.0 with iceberg starts a lake as a stack "
        "deployed on Glue 5.0 did, to continue it on 6.0 (docs/DEPLOY.md, 'Glue versions')",
    )
    st.add_argument("extra", nargs=argparse.REMAINDER, help="more job arguments, after --")
    res = sub.add_parser("resume", parents=[common, formats], help="resume a lake table set aside")
    res.add_argument("table", help="the lake table's name, e.g. salesdb_customer")
    sub.add_parser("stop", parents=[common], help="SIGTERM; the job finishes its current batch")
    sub.add_parser("kill", parents=[common], help="SIGKILL, like a crash")
    sub.add_parser("status", parents=[common])
    sub.add_parser("command", parents=[common, formats], help="print the job's command line")
    logs = sub.add_parser("logs", parents=[common])
    logs.add_argument("-n", "--lines", type=int, default=40)
    logs.add_argument("-f", "--follow", action="store_true")
    args = parser.parse_args(argv)
    try:
        s = sources.stack_config(args.source)
        if args.command == "start":
            extra = [a for a in args.extra if a != "--"]
            if args.glue_version:
                os.environ[GLUE_VERSION_ENV] = args.glue_version
            return start(s, extra, args.table_format)
        if args.command == "resume":
            return resume(s, args.table, args.table_format)
        if args.command == "stop":
            plumbing.stop(s, COMPONENT)
            return 0
        if args.command == "kill":
            return kill(s)
        if args.command == "status":
            return status(s)
        if args.command == "command":
            print(" ".join(job_command(s, [], args.table_format)))
            return 0
        return commands.cmd_logs(s, COMPONENT, args.lines, args.follow)
    except plumbing.StackError as exc:
        print(f"[job] ERROR: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
