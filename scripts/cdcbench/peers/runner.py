"""`bench --peers`: the four systems on the same source changes, one at a time, on one local
stack (MariaDB -> Debezium on Kafka Connect -> Kafka); every number is measured on the system's own
process tree (MariaDB, Kafka and the Debezium worker are not counted; Flink reads the binlog itself,
so its source reading is counted).

Per system: its tables are created and the snapshot rows loaded before it starts; then the
workloads run in order (fixed rates, a burst, the DDL sequence), each waited on until the system
made its last change visible; then correctness (reconcile's exact comparison against the source),
files, and the read cost before and after compaction, all through the benchmark's one Spark reader."""

from __future__ import annotations

import logging
import signal
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import pipeline_cost
from ..measure import mib, table_files, tree_cpu
from ..report import Table
from .base import DATABASE, TOPIC_PREFIX, Context, System, fresh, settled
from .workload import Source, columns_of, create_sql

log = logging.getLogger("cdcbench")


@dataclass(frozen=True)
class PeerPlan:
    snapshot_rows: int
    rates: tuple[tuple[int, int], ...]  # (changes/s, tables)
    rate_seconds: int
    burst: int
    ddl_changes: int  # changes before and after each DDL step
    multi_rows: int = 200  # rows of each of the 20 tables before the start
    timeout: float = 600


def snapshot_name(plan: PeerPlan) -> str:
    return f"snapshot of {plan.snapshot_rows:,} rows"


def rate_name(rate: int, tables: int) -> str:
    return f"{rate:,}/s on {tables} table{'s' if tables > 1 else ''}"


def burst_name(plan: PeerPlan) -> str:
    return f"burst of {plan.burst:,} changes"


DDL_NAME = "DDL sequence"


def workloads(plan: PeerPlan) -> list[str]:
    """The row every system's run must give the cost table, in order."""
    return [snapshot_name(plan), *(rate_name(r, n) for r, n in plan.rates), burst_name(plan)] + (
        [DDL_NAME] if plan.ddl_changes else []
    )


def make_plan(quick: bool) -> PeerPlan:
    if quick:
        return PeerPlan(
            snapshot_rows=2_000, rates=((200, 1),), rate_seconds=10, burst=5_000, ddl_changes=100, timeout=240
        )
    return PeerPlan(
        snapshot_rows=200_000, rates=((200, 1), (1_000, 1), (200, 20), (1_000, 20)), rate_seconds=60, burst=100_000,
        ddl_changes=1_000,
    )  # fmt: skip


@dataclass
class Measured:
    workload: str
    changes: int
    seconds: float  # first source commit (or the system's start) -> last change visible
    cpu: float
    latencies: list[float] = field(default_factory=list)
    achieved: float = 0.0
    missing_probes: int = 0
    failed: str = ""  # the system stalled or died in this workload (its row says so)


@dataclass
class SystemResult:
    system: System
    runs: list[Measured] = field(default_factory=list)
    peak_rss: int = 0
    files: dict[str, int] = field(default_factory=dict)
    read_before: tuple[float, float] = (0.0, 0.0)
    read_after: tuple[float, float] = (0.0, 0.0)
    files_after: dict[str, int] = field(default_factory=dict)
    correctness: list[str] = field(default_factory=list)
    error: str = ""
    phases: dict[str, float] = field(default_factory=dict)  # phase -> wall seconds (where the run's time goes)

    def phase(self, name: str, since: float) -> float:
        """Book the wall time since `since` (time.monotonic()) to `name`; returns now."""
        now = time.monotonic()
        self.phases[name] = self.phases.get(name, 0.0) + now - since
        return now


def _wait(system: System, what: str, check: Callable[[], bool], timeout: float) -> float:
    from pyspark.errors import AnalysisException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(AnalysisException):
            if settled(check):
                return time.time()
        system.check()
        time.sleep(0.5)
    raise TimeoutError(f"{system.label}: timed out after {timeout:.0f}s waiting for {what}")


def _visible_at(spark: Any, table: str, ids: list[int]) -> dict[int, float]:
    """id -> epoch seconds of the commit of the snapshot that added the row's data file."""
    return settled(lambda: _commit_times(spark, table, ids))


def _commit_times(spark: Any, table: str, ids: list[int]) -> dict[int, float]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    wanted = spark.createDataFrame([(i,) for i in ids], T.StructType([T.StructField("pid", T.LongType())]))
    rows = fresh(spark, table).select(F.col("id").cast("long").alias("id"), F.col("_file").alias("file"))
    rows = rows.join(wanted.hint("broadcast"), F.col("id") == F.col("pid"))
    entries = spark.sql(
        f"SELECT data_file.file_path AS file, snapshot_id FROM {table}.entries WHERE data_file.content = 0"
    )
    snaps = spark.sql(f"SELECT snapshot_id, CAST(committed_at AS DOUBLE) AS at FROM {table}.snapshots")
    out: dict[int, float] = {}
    for r in rows.join(entries, "file").join(snaps, "snapshot_id").select("id", "at").collect():
        out[r["id"]] = min(out.get(r["id"], r["at"]), r["at"])  # the sink appends a row per change: the first
    return out


def _topics_hold(kafka: str, wanted: dict[str, int], timeout: float) -> None:
    """Wait until each table's change topic holds its rows (Debezium delivered them)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": kafka, "group.id": "bench-peers-probe", "log_level": 2})
    try:
        deadline = time.monotonic() + timeout
        for table, n in wanted.items():
            tp = TopicPartition(f"{TOPIC_PREFIX}.{DATABASE}.{table}", 0)
            while True:
                try:
                    if c.get_watermark_offsets(tp, timeout=5)[1] >= n:
                        break
                except Exception:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Debezium did not deliver {n} changes of {table} within {timeout:.0f}s")
                time.sleep(0.5)
    finally:
        c.close()


def _has(spark: Any, system: System, table: str, key: int) -> bool:
    return fresh(spark, system.lake_table(table)).where(f"id = {key}").limit(1).count() == 1


def _read_cost(spark: Any, system: System, table: str, key: int) -> tuple[float, float]:
    """Seconds of count(*) and of one key lookup over the current state (best of 2: the first run
    also loads the metadata)."""
    out = []
    for q in (
        lambda: system.current(spark, table).count(),
        lambda: system.current(spark, table).where(f"id = {key}").collect(),
    ):
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            q()
            best = min(best, time.perf_counter() - t0)
        out.append(best)
    return out[0], out[1]


def _compact(spark: Any, table: str) -> None:
    """Iceberg's own compaction (the Spark procedures a Glue/EMR maintenance job runs for any writer):
    rewrite every data file with its deletes applied, then drop what points at nothing."""
    catalog, ident = table.split(".", 1)
    spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => '{ident}', options => map("
        "'rewrite-all', 'true', 'delete-file-threshold', '1'))"
    )
    spark.sql(
        f"CALL {catalog}.system.rewrite_position_delete_files(table => '{ident}', options => map('rewrite-all', 'true'))"
    )


def _source_rows(conn, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {DATABASE}.{table}")
        names = [d[0] for d in cur.description]
        return names, [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def compare_current(spark: Any, system: System, conn, table: str, columns: list[str] | None = None):
    """reconcile.compare_rows between the source table and the system's current state (`columns`: a
    subset of the source's to compare, e.g. those every system stores in the source's representation)."""
    from cdctools.reconcile import compare_rows

    conn.commit()  # a fresh read view
    names, src = _source_rows(conn, table)
    keep = columns or names
    lake = settled(lambda: [r.asDict() for r in system.current(spark, table).collect()])
    return compare_rows(table, keep, ["id"], [{c: r[c] for c in keep} for r in src], lake)


def _correctness(spark: Any, system: System, conn, table: str, wait: float) -> str:
    """The exact comparison, repeated for up to `wait` seconds (the last commit may still be under way)."""
    deadline = time.monotonic() + wait
    while True:
        res = compare_current(spark, system, conn, table)
        if res.ok or time.monotonic() > deadline:
            return " ".join(res.report().split()[1:])
        time.sleep(2)


class Stopped(BaseException):
    """SIGTERM (`timeout`, `kill`): the system being measured keeps the rows it has (a BaseException,
    so that no library's `except Exception` on the way swallows it)."""


def _peak(system: System) -> str:
    return mib(system.rss.peak()) if system.rss else "-"


def _at_rate(
    spark: Any, system: System, src: Source, conn: Any, tables: list[str], rate: int, n: int, pid: int, plan: PeerPlan
) -> Measured:
    """One fixed-rate workload on `tables`: its CPU, and its probes' latencies until the last change is visible."""
    cpu0 = tree_cpu(pid)
    start = time.time()
    changes, achieved = src.at_rate(conn, rate, plan.rate_seconds, tables, seed=rate * 100 + n)
    probes = dict(src.probes)
    last_t, last_id = max(probes, key=lambda p: probes[p])
    done = _wait(
        system,
        f"the changes at {rate}/s",
        lambda lt=last_t, li=last_id: _has(spark, system, lt, li),
        plan.timeout,
    )
    m = Measured(rate_name(rate, n), changes, done - start, tree_cpu(pid) - cpu0, achieved=achieved)
    for t in tables:
        ids = [i for (pt, i) in probes if pt == t]
        if ids:
            seen = _visible_at(spark, system.lake_table(t), ids)
            m.latencies += [seen[i] - probes[(t, i)] for i in ids if i in seen]
            m.missing_probes += len([i for i in ids if i not in seen])
    return m


def _burst(spark: Any, system: System, src: Source, conn: Any, main: str, pid: int, plan: PeerPlan) -> Measured:
    """A burst of inserts into the main table, as fast as the source takes them, until the last is visible."""
    cpu0 = tree_cpu(pid)
    first, last = src.burst(conn, plan.burst, main, seed=7)
    done = _wait(system, "the burst", lambda: _has(spark, system, main, last), plan.timeout)
    return Measured(burst_name(plan), plan.burst, done - first, tree_cpu(pid) - cpu0)


def _ddl_sequence(
    spark: Any, system: System, src: Source, conn: Any, main: str, pid: int, plan: PeerPlan, res: SystemResult
) -> None:
    # on the main table, after its other workloads (a table created now would need a new Flink
    # job: Flink SQL declares its tables when it starts)
    cpu0 = tree_cpu(pid)
    first = time.time()
    last = src.ddl(conn, main, plan.ddl_changes, seed=11)
    try:
        done = _wait(system, "the DDL sequence", lambda: _has(spark, system, main, last), min(plan.timeout, 120))
        res.runs.append(Measured(DDL_NAME, plan.ddl_changes * 4, done - first, tree_cpu(pid) - cpu0))
    except (TimeoutError, RuntimeError) as e:  # a system that stalls or dies on DDL: say so, then compare
        why = " ".join(str(e).split())[:160]
        res.runs.append(Measured(DDL_NAME, plan.ddl_changes * 4, 0.0, tree_cpu(pid) - cpu0, failed=why))
        res.correctness.append(f"{DDL_NAME}: {why}")


def _files_reads_compaction(spark: Any, system: System, main: str, res: SystemResult) -> None:
    """The main table's files and read cost, before and after a compaction (best effort)."""
    lake = system.lake_table(main)
    try:
        with suppress(Exception):
            res.files = table_files(spark, lake)
            res.read_before = _read_cost(spark, system, main, 1000)
            _compact(spark, lake)
            res.files_after = table_files(spark, lake)
            res.read_after = _read_cost(spark, system, main, 1000)
    except Stopped as e:  # the workloads' rows and the peak are measured: keep them
        res.error = f"{type(e).__name__}: during the reads and compaction"


def _source_tables(conn: Any, system: System, main: str, multi: list[str], plan: PeerPlan) -> Source:
    """The system's source tables created and loaded with their snapshot rows."""
    src = Source([main, *multi])
    with conn.cursor() as cur:
        for t in [main, *multi]:
            cur.execute(create_sql(t))
    conn.commit()
    src.load(conn, main, plan.snapshot_rows)
    for t in multi:
        src.load(conn, t, plan.multi_rows)
    system.source_columns = {t: columns_of(conn, t) for t in [main, *multi]}
    return src


def run_system(
    spark: Any, system: System, ctx: Context, stack_connect: Callable[[], Any], plan: PeerPlan
) -> SystemResult:
    res = SystemResult(system)
    mark = time.monotonic()
    main = f"{system.name}_orders"
    multi = [f"{system.name}_m{i:02d}" for i in range(1, 21)] if any(n > 1 for _, n in plan.rates) else []
    conn = stack_connect()
    src = _source_tables(conn, system, main, multi, plan)
    mark = res.phase("source tables", mark)
    try:
        if system.reads_kafka:  # the snapshot rows in Kafka first: the systems start from the same topics
            wanted = {main: plan.snapshot_rows, **dict.fromkeys(multi, plan.multi_rows)}
            _topics_hold(ctx.kafka, wanted, plan.timeout)
            mark = res.phase("Debezium delivers the snapshot", mark)
        t0 = time.time()
        system.start(ctx, [main, *multi])
        pid = system.pid()
        mark = res.phase("start", mark)
        visible = _wait(
            system, "the snapshot rows", lambda: system.current(spark, main).count() == plan.snapshot_rows, plan.timeout
        )
        for t in multi:
            _wait(system, f"{t}'s rows", lambda t=t: system.current(spark, t).count() == plan.multi_rows, plan.timeout)
        res.runs.append(Measured(snapshot_name(plan), plan.snapshot_rows, visible - t0, tree_cpu(pid)))
        log.info("peers: %s snapshot %.1fs, peak RSS so far %s", system.name, visible - t0, _peak(system))
        mark = res.phase("snapshot", mark)
        for rate, n in plan.rates:
            m = _at_rate(spark, system, src, conn, [main] if n == 1 else multi, rate, n, pid, plan)
            res.runs.append(m)
            log.info("peers: %s %s done, peak RSS so far %s", system.name, m.workload, _peak(system))
            mark = res.phase(m.workload, mark)
        res.runs.append(_burst(spark, system, src, conn, main, pid, plan))
        log.info("peers: %s burst done, peak RSS so far %s", system.name, _peak(system))
        mark = res.phase("burst", mark)
        if plan.ddl_changes:
            _ddl_sequence(spark, system, src, conn, main, pid, plan, res)
            mark = res.phase("DDL sequence", mark)
        # only the main table's last change can still be in flight (a DDL step that timed out); the 20
        # tables' changes came before it, and a system that differs there keeps differing
        for t in [main, *multi]:
            res.correctness.append(f"{t}: " + _correctness(spark, system, conn, t, wait=5 if t == main else 0))
        mark = res.phase("correctness", mark)
    except (Exception, Stopped) as e:  # one system failing must not hide the others' rows
        log.exception("peers: %s failed", system.name)
        res.error = f"{type(e).__name__}: {e}"
    finally:
        res.peak_rss = system.rss.peak() if system.rss else 0  # also of a run that failed or was stopped
        system.stop()
        conn.close()
        mark = res.phase("stop", mark)
    log.info("peers: %s stopped, peak RSS %s", system.name, mib(res.peak_rss))
    if not res.error:
        _files_reads_compaction(spark, system, main, res)
        mark = res.phase("files, reads, compaction", mark)
    log.info(
        "peers: %s took %.0fs: %s", system.name, sum(res.phases.values()),
        ", ".join(f"{k} {v:.0f}s" for k, v in res.phases.items()),
    )  # fmt: skip
    return res


def missing_rows(results: list[SystemResult], plan: PeerPlan, names: tuple[str, ...]) -> list[str]:
    """One line per system asked for whose rows in the cost table are not all there, naming the system,
    the workloads and why (a workload the system stalled or died in has a row saying so; a missing
    row means the run broke off, e.g. the benchmark's reader failed): the run fails on these instead
    of printing a table with a hole in it."""
    by_name = {r.system.name: r for r in results}
    out = []
    for name in names:
        r = by_name.get(name)
        if r is None:
            out.append(f"{name}: not run")
            continue
        have = {m.workload for m in r.runs}
        if lost := [w for w in workloads(plan) if w not in have]:
            out.append(f"{r.system.label} ({name}): no row for {', '.join(lost)}; {r.error or 'no error recorded'}")
    return out


def tables(results: list[SystemResult], plan: PeerPlan, bytes_per_change: float = 0.0) -> list[Table]:
    base = next((r for r in results if r.system.name == "job" and r.runs), None)
    cost = Table(
        "peers. The same source changes through each system: cost and latency",
        [
            "system",
            "workload",
            "CPU-s per 1M changes vs job",
            "CPU-s per 1M changes",
            "events/s",
            "p50 s",
            "p95 s",
            "changes",
            "system CPU-s",
        ],
    )
    for r in results:
        if r.error and not r.runs:
            cost.add(r.system.label, "-", "-", "-", "-", "-", "-", "-", f"FAILED: {r.error[:200]}")
            continue
        for m in r.runs:
            if m.failed:
                cost.add(r.system.label, m.workload, "-", "-", "-", "-", "-", "-", f"failed: {m.failed}")
                continue
            per_m = m.cpu / m.changes * 1e6
            ref = next((b for b in base.runs if b.workload == m.workload and not b.failed), None) if base else None
            ratio = f"{per_m / (ref.cpu / ref.changes * 1e6):.2f}x" if ref and ref.cpu > 0 else "-"
            q = statistics.quantiles(m.latencies, n=100) if len(m.latencies) > 1 else None
            cost.add(
                r.system.label, m.workload, ratio, f"{per_m:,.0f}", f"{m.changes / m.seconds:,.0f}" if m.seconds > 0 else "-",
                f"{q[49]:.2f}" if q else "-", f"{q[94]:.2f}" if q else "-", f"{m.changes:,}", f"{m.cpu:.1f}",
            )  # fmt: skip
    cost.notes.append(
        "CPU-s: user + system CPU of the system's own process tree (Spark driver + JVM; the SQL client's JVM "
        "for Flink, which also reads the binlog; the sink's own Kafka Connect worker) from the workload's first "
        "change until its last change was visible; MariaDB, Kafka and the Debezium worker are not counted. "
        "The snapshot row counts from the system's start (JVM start-up included). Latency: source COMMIT -> "
        "commit of the Iceberg snapshot holding the inserted row (probes: the inserts of the fixed-rate mix)."
    )
    return [cost, _lake_table(results), aws_cost(results), *pipelines(results, bytes_per_change)]


def _lake_table(results: list[SystemResult]) -> Table:
    """What each system leaves in the lake: files, read cost before and after compaction, correctness."""
    lake = Table(
        "peers. What each system leaves in the lake: files, read cost, correctness",
        [
            "system",
            "peak RSS",
            "data files",
            "delete files",
            "count(*) s",
            "key lookup s",
            "after compaction: count(*) s",
            "key lookup s",
            "correct vs source",
        ],
    )
    for r in results:
        lake.add(
            r.system.label, mib(r.peak_rss), r.files.get("data_files", "-"), r.files.get("delete_files", "-"),
            f"{r.read_before[0]:.2f}", f"{r.read_before[1]:.2f}", f"{r.read_after[0]:.2f}", f"{r.read_after[1]:.2f}",
            " | ".join(r.correctness) or r.error or "-",
        )  # fmt: skip
    lake.notes.append(
        "Read cost: the benchmark's Spark session (Iceberg 1.7.1) reading each system's current state of its main "
        "table (the sink: through the dedup view), best of two runs; compaction: Iceberg's rewrite_data_files "
        "(every file, deletes applied) + rewrite_position_delete_files. Correctness: reconcile's exact "
        "comparison (compare_rows) of the source table with the current state after the last workload."
    )
    return lake


# Each system's AWS service: (name, $ per capacity-hour, vCPUs per unit); prices in pipeline_cost.
SERVICE = {
    "job": ("AWS Glue", pipeline_cost.GLUE_DPU_HOUR["5.0"], 4),
    "sample": ("AWS Glue", pipeline_cost.GLUE_DPU_HOUR["5.0"], 4),
    "sink": ("MSK Connect", pipeline_cost.CONNECT_MCU_HOUR, 1),
    "flink": ("Managed Service for Apache Flink", pipeline_cost.FLINK_KPU_HOUR, 1),
}
KIND = {"job": "glue", "sample": "glue", "sink": "sink", "flink": "flink"}
PRICED_WORKLOAD = "200/s on 1 table"


def pipelines(results: list[SystemResult], bytes_per_change: float) -> list[Table]:
    """Every system's whole pipeline per month, from its CPU at PRICED_WORKLOAD (none if not measured)."""
    peers = [
        pipeline_cost.Peer(r.system.label, KIND[r.system.name], m.cpu / m.changes * 1e6)
        for r in results
        for m in r.runs
        if m.workload == PRICED_WORKLOAD and not m.failed and m.changes
    ]
    return [pipeline_cost.peers_table(peers, bytes_per_change, PRICED_WORKLOAD)] if peers and bytes_per_change else []


def aws_cost(results: list[SystemResult]) -> Table:
    """Per million changes at full utilisation: the measured CPU-s as capacity-hours of the service each
    system runs on, and as Glue DPU-hours for all (the same CPU on the job's service)."""
    t = Table(
        "peers. On AWS, per million changes (from the measured CPU-s, full utilisation)",
        ["system", "workload", "service", "capacity-hours", "$ on its service", "Glue DPU-hours", "$ on Glue"],
    )
    _, glue_price, dpu_vcpus = SERVICE["job"]
    for r in results:
        service, price, vcpus = SERVICE[r.system.name]
        for m in r.runs:
            if m.failed or m.workload.startswith(("snapshot", "DDL")):
                continue
            cpu_h = m.cpu / m.changes * 1e6 / 3600
            t.add(
                r.system.label, m.workload, service, f"{cpu_h / vcpus:.3f}", f"{cpu_h / vcpus * price:.3f}",
                f"{cpu_h / dpu_vcpus:.3f}", f"{cpu_h / dpu_vcpus * glue_price:.3f}",
            )  # fmt: skip
    t.notes.append(
        "capacity-hours = CPU-s per 1M changes / 3600 / vCPUs per unit (Glue DPU 4, MSK Connect MCU 1, Flink KPU 1); "
        f"list prices us-east-1: Glue ${glue_price}/DPU-hour, MSK Connect ${pipeline_cost.CONNECT_MCU_HOUR}/MCU-hour, "
        f"Managed Flink ${pipeline_cost.FLINK_KPU_HOUR}/KPU-hour. "
        "A service's minimum capacity (Glue streaming 2 workers, one MCU, two KPUs with orchestration) is billed "
        "whatever the rate: docs/BENCHMARKS.md works out the monthly bill for a given rate."
    )
    return t


def context_for(stack: Any, work: Path, name: str, warehouse: Path) -> Context:
    pw = (stack.state / "secrets" / "debezium.properties").read_text()
    password = next(line.split("=", 1)[1] for line in pw.splitlines() if line.startswith("password="))
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    return Context(f"127.0.0.1:{stack.ports['kafka']}", stack.ports["mariadb"], password.strip(), warehouse, d)


SYSTEMS = ("job", "flink", "sink", "sample")


def run(
    spark: Any, quick: bool, work: Path, warehouse: Path, names: tuple[str, ...] = SYSTEMS
) -> tuple[list[Table], list[str]]:
    """`warehouse`: the one the Spark session's `glue_catalog` reads (every system writes there).
    Returns the tables and missing_rows' lines (the caller prints the tables, then fails on those)."""
    from ..endtoend import Stack
    from .aws_sample import AwsSample
    from .flink import FlinkCdc
    from .iceberg_sink import IcebergSink
    from .job import ProjectJob

    plan = make_plan(quick)
    every: dict[str, System] = {"job": ProjectJob(), "flink": FlinkCdc(), "sink": IcebergSink(), "sample": AwsSample()}
    systems = [every[n] for n in names]
    for s in systems:
        t0 = time.monotonic()
        s.install()
        log.info("peers: %s installed/checked in %.1fs", s.name, time.monotonic() - t0)
    work.mkdir(parents=True, exist_ok=True)

    # `timeout`/`kill` end the benchmark with SIGTERM: unwind, so that the finally below stops the
    # systems and the stack instead of leaving them running, and print what the system measured
    def stop(*_: Any) -> None:
        raise Stopped("stopped by SIGTERM (the workloads after the rows above did not run)")

    signal.signal(signal.SIGTERM, stop)
    stack = Stack(work)
    results: list[SystemResult] = []
    try:
        stack.up()
        for s in systems:
            results.append(run_system(spark, s, context_for(stack, work, s.name, warehouse), stack.connect, plan))
            if results[-1].error.startswith(Stopped.__name__):
                break
            # each system's rows as soon as it is done: a run cut short still shows what it measured
            print("\n" + tables(results, plan)[0].text(), flush=True)
        measured_job = any(r.system.name == "job" and r.runs for r in results)
        per_change = topic_bytes_per_change(stack, "job_orders") if measured_job else 0.0
    finally:
        for s in systems:
            s.stop()
        stack.down()
    if results and results[-1].error.startswith(Stopped.__name__):
        for t in tables(results, plan):
            print("\n" + t.text(), flush=True)
        sys.exit(143)
    return tables(results, plan, per_change), missing_rows(results, plan, names)


def topic_bytes_per_change(stack: Any, table: str) -> float:
    """Key plus value bytes per change on a table's change topic (JSON), tombstones' bytes included."""
    t = stack.topic_bytes(f"{TOPIC_PREFIX}.{DATABASE}.{table}")
    return t.size / (t.records - t.tombstones) if t.records > t.tombstones else 0.0
