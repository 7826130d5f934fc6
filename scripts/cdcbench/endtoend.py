"""c. End to end on the local stack: MariaDB -> Debezium (Kafka Connect) -> Apache Kafka -> the job
(Spark's Kafka source, trigger 1 s) -> Iceberg.

A private stack (temporary state directory, free ports) and a private job run, so nothing a
developer or another test runs is touched. Changes are written to `salesdb.bench_orders` with
PyMySQL over MariaDB's socket:

* latency: at a fixed rate, one transaction every 20 ms (70% updates, 20% inserts, 10% deletes of
  rows that existed before). Every inserted row is a probe: its source commit is the wall time
  after COMMIT returned; it became visible in the lake when the Iceberg snapshot that added its
  data file was committed (`entries.snapshot_id` -> `snapshots.committed_at`, millisecond
  precision; a reader loading the table after that instant sees the row). Probes are never
  updated later, so the file a probe is found in is the one that first held it. This is more
  precise than the table's own `_cdc_source_ts` (the binlog timestamp, 1 s resolution on MySQL)
  and `_cdc_ingested_at` (when the MERGE started, not when it committed).
* sustained throughput: a burst of inserts as fast as MariaDB takes them; events/s from the
  first source commit until the snapshot holding the last row was committed.
* CPU, per rate and for the burst: CPU seconds of the job's process tree (Python driver and JVM),
  and apart from it of each of the stack's components (MariaDB, Kafka, Connect, the registry with
  avro), from the first change until the last probe (the burst's last row) was found in the lake.
* bytes per change on the topic: key plus value bytes of every record of the table's topic.

`--wire-formats json,avro` runs it once per wire format: with avro the stack's connector writes
with the AWS Glue Schema Registry converter against the local registry and the job runs with
`--wire_format avro` (docs/LOCAL_STACK.md, "Wire format avro"). `--transactions keep` runs the
connector with its transaction metadata and the job with `--transactions keep`, reading the
transaction topic: a transaction a batch reads in part waits for the next batch.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cdcstack.plumbing import free_port
from pyspark.sql import SparkSession

from .config import Config
from .measure import RssSampler, cpu_spent, cpu_split_cells, mib, process_tree, trees_cpu
from .peers.workload import ORDERS_COLUMNS, TICK, paced_ticks
from .report import Table

log = logging.getLogger("cdcbench")
ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "e2e"  # json's; e2e_avro for avro, so that both runs write into one warehouse
DDL = f"""CREATE DATABASE IF NOT EXISTS salesdb;
CREATE TABLE IF NOT EXISTS salesdb.bench_orders ({ORDERS_COLUMNS}
) ENGINE = InnoDB;
"""
INSERT = (
    "INSERT INTO bench_orders (id, customer_id, status, amount, qty, weight_g, note, version, created_at, updated_at) "
    "VALUES (%s, %s, 'NEW', %s, %s, %s, %s, 0, NOW(6), NOW(6))"
)
LATENCY_COLUMNS = ["target changes/s", "achieved changes/s", "probes", "p50 s", "p95 s", "max s", "not seen"]
UPDATE = "UPDATE bench_orders SET status = 'PAID', version = version + 1, note = %s, updated_at = NOW(6) WHERE id = %s"
DELETE = "DELETE FROM bench_orders WHERE id = %s"


def _row(i: int) -> tuple:
    return (i, i % 9973, (i * 37 % 1_000_000) / 100, i % 7 + 1, i % 1000 * 13, f"order {i}")


@dataclass
class RateResult:
    target: int
    achieved: float
    probes: int
    latencies: list[float]  # seconds, one per probe
    missing: int
    changes: int
    cpu: dict[str, float]  # CPU seconds per process tree: "job" and the stack's components


class TopicBytes(NamedTuple):
    records: int
    size: int
    tombstones: int


class Stack:
    def __init__(self, work: Path, wire_format: str = "json", transactions: str = "ignore") -> None:
        # Unix socket paths are limited to 107 bytes: a short directory under /tmp.
        self.state = Path(tempfile.mkdtemp(prefix="cdcb-"))
        self.wire_format = wire_format
        self.ports = {"mariadb": free_port(), "kafka": free_port(), "connect": free_port(), "registry": free_port()}
        self.env = {
            **os.environ,
            "CDC_STACK_DIR": str(self.state),
            "CDC_STACK_SOURCE": "mysql",
            "CDC_STACK_MARIADB_PORT": str(self.ports["mariadb"]),
            "CDC_STACK_KAFKA_PORT": str(self.ports["kafka"]),
            "CDC_STACK_KAFKA_CONTROLLER_PORT": str(free_port()),
            "CDC_STACK_CONNECT_PORT": str(self.ports["connect"]),
            "CDC_STACK_FORMAT": wire_format,
            "CDC_STACK_REGISTRY_PORT": str(self.ports["registry"]),
            "CDC_STACK_TRANSACTIONS": transactions,
        }
        self.transactions = transactions
        self.init_sql = work / "e2e-init.sql"
        self.init_sql.write_text(DDL)

    def cli(self, *args: str) -> None:
        res = subprocess.run(
            [str(Path(sys.executable).parent / "local-stack"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if res.returncode != 0:
            raise RuntimeError(f"local-stack {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}")

    def up(self) -> None:
        self.cli("up", "--init-sql", str(self.init_sql))

    def down(self) -> None:
        with suppress(Exception):
            self.cli("down")
        shutil.rmtree(self.state, ignore_errors=True)

    def connect(self):  # -> pymysql.Connection
        import pymysql

        sys_user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        return pymysql.connect(
            unix_socket=str(self.state / "mariadb" / "mariadb.sock"),
            user=sys_user,
            database="salesdb",
            autocommit=False,
        )

    def topic_bytes(self, topic: str) -> TopicBytes:
        """Records, key plus value bytes and tombstones of the topic, read to its end offsets."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": f"127.0.0.1:{self.ports['kafka']}", "group.id": "bench-bytes",
                      "enable.auto.commit": False})  # fmt: skip
        try:
            parts = c.list_topics(topic, timeout=10).topics[topic].partitions
            ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
            c.assign([TopicPartition(topic, p, 0) for p in parts])
            records = size = tombstones = 0
            while records < sum(ends.values()):
                for m in c.consume(10_000, timeout=5):
                    if m.error() is None:
                        records += 1
                        tombstones += m.value() is None
                        size += len(m.key() or b"") + len(m.value() or b"")
            return TopicBytes(records, size, tombstones)
        finally:
            c.close()

    def component_pids(self) -> dict[str, int]:
        """The running components' process ids by name (mariadb, kafka, connect, registry)."""
        out = {}
        for f in (self.state / "run").glob("*.json"):
            with suppress(OSError, KeyError, ValueError):
                out[f.stem] = int(json.loads(f.read_text())["pid"])
        return out

    def component_rss(self) -> dict[str, int]:
        out = {}
        for name, pid in self.component_pids().items():
            with suppress(OSError, IndexError, ValueError):
                out[name] = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return out


class Job:
    """The Glue job script run locally against the stack, exactly as docs/LOCAL_STACK.md shows."""

    def __init__(self, stack: Stack, work: Path, warehouse: Path) -> None:
        self.dir = work / "e2e-job"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.warehouse = warehouse
        self.namespace = NAMESPACE if stack.wire_format == "json" else f"{NAMESPACE}_{stack.wire_format}"
        self.table = f"glue_catalog.{self.namespace}.salesdb_bench_orders"
        self.transactions = stack.transactions
        self.args = [
            str(ROOT / ".local" / "venv" / "bin" / "python"),
            str(ROOT / "glue_scripts" / "cdc_lake_job.py"),
            "--source", "kafka", "--kafka_auth", "none",
            "--kafka_bootstrap_servers", f"127.0.0.1:{stack.ports['kafka']}",
            "--kafka_topic_pattern", r"salesdb\.(salesdb\..*|transaction)",
            "--transactions", stack.transactions,
            "--catalog_type", "hadoop", "--warehouse", str(self.warehouse), "--namespace", self.namespace,
            "--checkpoint_location", str(self.dir / "checkpoint"), "--dead_letter_path", str(self.dir / "dead"),
            "--trigger_interval_seconds", "1",
            "--wire_format", stack.wire_format,
        ]  # fmt: skip
        # the registry of the wire format avro, found by the job's boto3 client from its environment
        self.env = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
                    "AWS_ENDPOINT_URL_GLUE": f"http://127.0.0.1:{stack.ports['registry']}"}  # fmt: skip
        self.log_path = self.dir / "job.log"
        self.proc: subprocess.Popen | None = None
        self.rss: RssSampler | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "CDC_SPARK_DRIVER_MEMORY")}
        env |= self.env
        self.proc = subprocess.Popen(self.args, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT, env=env)  # noqa: SIM115
        self.rss = RssSampler(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None:
            return
        tree = process_tree(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)  # finishes the current batch, then exits
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pid in tree[1:]:  # its JVM, should it outlive the Python driver
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.rss:
            self.rss.stop()

    def cpu(self, stack: Stack) -> dict[str, float]:
        """CPU seconds so far of the job's process tree and, apart from it, of each stack component's."""
        return trees_cpu({"job": self.proc.pid} if self.proc else {}) | trees_cpu(stack.component_pids())

    def check(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"the job exited with {self.proc.returncode}: {self.log_path}")
        dead = [line for f in (self.dir / "dead").glob("*/*.json") for line in f.read_text().splitlines()]
        if dead:
            raise RuntimeError(f"the job dead-lettered {len(dead)} record(s), e.g. {json.loads(dead[0])['reason']}")

    def display(self) -> str:
        """The command line with paths and the port as placeholders."""
        out = []
        for a in self.args[1:]:
            a = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", a)
            out.append(
                f"<{Path(a).name}>" if a.startswith("/") and not a.endswith(".py") else a.replace(str(ROOT) + "/", "")
            )
        return " ".join(out)

    def batches(self) -> list[tuple[int, float]]:
        """(records, seconds) of every batch the job logged."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            m = re.search(r"batch \d+: (\d+) records .*\| ([\d.]+)s$", line)
            if m:
                out.append((int(m.group(1)), float(m.group(2))))
        return out


def _wait(what: str, check: Callable[[], bool], timeout: float, job: Job) -> None:
    """Poll `check` (the lake table may not exist yet); fail early when the job died or
    dead-lettered records, which would otherwise look like a slow pipeline."""
    from pyspark.errors import AnalysisException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(AnalysisException):
            if check():
                return
        job.check()
        time.sleep(1)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def _visible_at(spark: SparkSession, table: str, ids: list[int]) -> dict[int, float]:
    """id -> epoch seconds at which the snapshot that added the row's data file was committed."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    wanted = spark.createDataFrame([(i,) for i in ids], T.StructType([T.StructField("pid", T.IntegerType())]))
    rows = (
        spark.table(table)
        .select("id", F.col("_file").alias("file"))
        .join(wanted.hint("broadcast"), F.col("id") == F.col("pid"))
    )
    entries = spark.sql(
        f"SELECT data_file.file_path AS file, snapshot_id FROM {table}.entries WHERE data_file.content = 0"
    )
    snaps = spark.sql(f"SELECT snapshot_id, CAST(committed_at AS DOUBLE) AS at FROM {table}.snapshots")
    joined = rows.join(entries, "file").join(snaps, "snapshot_id").select("id", "at").collect()
    return {r["id"]: r["at"] for r in joined}


def _drive(
    stack: Stack, rate: int, seconds: int, next_id: int, live: list[int]
) -> tuple[dict[int, float], int, float, int]:
    """Changes at `rate` per second for `seconds`; returns probe commit times, changes, achieved rate, next id."""
    rng = random.Random(rate)
    conn = stack.connect()
    probes: dict[int, float] = {}
    changes = 0
    start = time.monotonic()
    try:
        with conn.cursor() as cur:
            for tick, n in paced_ticks(rate, seconds):
                inserted = []
                for _ in range(n):
                    r = rng.random()
                    if r < 0.7:
                        cur.execute(UPDATE, (f"tick {tick}", live[rng.randrange(len(live))]))
                    elif r < 0.9:
                        cur.execute(INSERT, _row(next_id))
                        inserted.append(next_id)
                        next_id += 1
                    else:
                        i = rng.randrange(len(live))
                        live[i], live[-1] = live[-1], live[i]
                        cur.execute(DELETE, (live.pop(),))
                conn.commit()
                committed = time.time()
                for i in inserted:
                    probes[i] = committed
                changes += n
    finally:
        conn.close()
    return probes, changes, changes / (time.monotonic() - start), next_id


@dataclass
class BurstResult:
    """The sustained run: a burst of inserts, as fast as the source takes them."""

    first_commit: float
    source_done: float
    visible: float
    cpu: dict[str, float]
    batches: list[tuple[int, float]]
    topic_records: int
    topic_size: int
    component_rss: dict[str, int]


def _load_initial_rows(spark: SparkSession, stack: Stack, job: Job, cfg: Config) -> None:
    t0 = time.monotonic()
    stack.up()
    log.info("e2e: stack up in %.0fs", time.monotonic() - t0)
    conn = stack.connect()
    with conn.cursor() as cur:
        for start in range(1, cfg.e2e_rows + 1, 5000):
            cur.executemany(INSERT, [_row(i) for i in range(start, min(start + 5000, cfg.e2e_rows + 1))])
            conn.commit()
    conn.close()
    job.start()
    _wait(
        "the initial rows in the lake",
        lambda: spark.table(job.table).count() == cfg.e2e_rows,
        timeout=600,
        job=job,
    )
    log.info("e2e: job caught up with %d initial rows", cfg.e2e_rows)


def _measure_rates(spark: SparkSession, stack: Stack, job: Job, cfg: Config) -> tuple[list[RateResult], int]:
    """Each rate of cfg.e2e_rates for cfg.e2e_seconds: the probes' latencies; and the next free id."""
    results: list[RateResult] = []
    live = list(range(1, cfg.e2e_rows + 1))
    next_id = 10_000_000
    for rate in cfg.e2e_rates:
        cpu_before = job.cpu(stack)
        probes, changes, achieved, next_id = _drive(stack, rate, cfg.e2e_seconds, next_id, live)
        last = max(probes)
        with suppress(TimeoutError):
            _wait(
                f"the probes at {rate}/s",
                lambda last=last: spark.table(job.table).where(f"id = {last}").count() == 1,
                180,
                job,
            )
        cpu = cpu_spent(cpu_before, job.cpu(stack))
        seen = _visible_at(spark, job.table, list(probes))
        lat = sorted(seen[i] - probes[i] for i in probes if i in seen)
        results.append(RateResult(rate, achieved, len(probes), lat, len(probes) - len(seen), changes, cpu))
        log.info("e2e: %d/s: p50 %.2fs", rate, statistics.median(lat) if lat else -1)
    return results, next_id


def _burst(spark: SparkSession, stack: Stack, job: Job, cfg: Config, next_id: int) -> BurstResult:
    batches_before = len(job.batches())
    conn = stack.connect()
    burst_ids = list(range(next_id, next_id + cfg.e2e_burst))
    first_commit = time.time()
    cpu_before = job.cpu(stack)
    with conn.cursor() as cur:
        for k in range(0, len(burst_ids), 2000):
            cur.executemany(INSERT, [_row(i) for i in burst_ids[k : k + 2000]])
            conn.commit()
    source_done = time.time()
    conn.close()
    _wait(
        "the burst in the lake",
        lambda: spark.table(job.table).where(f"id = {burst_ids[-1]}").count() == 1,
        900,
        job,
    )
    burst_cpu = cpu_spent(cpu_before, job.cpu(stack))
    visible = _visible_at(spark, job.table, [burst_ids[-1]])[burst_ids[-1]]
    batches = job.batches()[batches_before:]
    topic_records, topic_size, _ = stack.topic_bytes("salesdb.salesdb.bench_orders")
    return BurstResult(
        first_commit, source_done, visible, burst_cpu, batches, topic_records, topic_size, stack.component_rss()
    )


def _latency_table(results: list[RateResult], cfg: Config, wire_format: str, job: Job) -> Table:
    lat_t = Table(
        f"c. End to end on the local stack, wire format {wire_format}, transactions {job.transactions}: "
        "source commit -> visible in the lake "
        "(trigger interval 1 s)",
        [*LATENCY_COLUMNS, "job CPU-s", "job CPU-s per million", "stack CPU-s"],
    )
    for r in results:
        q = statistics.quantiles(r.latencies, n=100) if len(r.latencies) > 1 else [float("nan")] * 99
        lat_t.add(
            r.target,
            f"{r.achieved:,.0f}",
            r.probes,
            f"{q[49]:.2f}",
            f"{q[94]:.2f}",
            f"{max(r.latencies, default=float('nan')):.2f}",
            r.missing,
            *cpu_split_cells(r.cpu, r.changes),
        )
    lat_t.notes.append(
        f"{cfg.e2e_seconds} s per rate on a table of {cfg.e2e_rows:,} rows; 70% updates, 20% inserts (the probes), 10% deletes, "
        f"one transaction per {TICK * 1000:.0f} ms. CPU: seconds of each process tree (the job's Python driver and "
        "JVM; each stack component's) from the rate's first change until its last probe was found in the lake, "
        f"so a job that falls behind is charged its catch-up; per million: over the rate's changes. Job: {job.display()}."
    )
    return lat_t


def _throughput_table(b: BurstResult, cfg: Config, wire_format: str, job: Job) -> Table:
    span = b.visible - b.first_commit
    thr = Table(
        f"c. Sustained end-to-end throughput, wire format {wire_format}, transactions {job.transactions} "
        "(burst of inserts)",
        [
            "rows",
            "source insert s",
            "first commit -> last visible s",
            "events/s end to end",
            "job CPU-s",
            "job CPU-s per million",
            "stack CPU-s",
            "job batches",
            "mean batch s",
            "job peak RSS",
            "topic bytes per change",
        ],
    )
    thr.add(
        f"{cfg.e2e_burst:,}",
        f"{b.source_done - b.first_commit:.1f}",
        f"{span:.1f}",
        f"{cfg.e2e_burst / span:,.0f}",
        *cpu_split_cells(b.cpu, cfg.e2e_burst),
        len(b.batches),
        f"{statistics.mean(s for _, s in b.batches):.2f}" if b.batches else "-",
        mib(job.rss.peak() if job.rss else 0),
        f"{b.topic_size / max(b.topic_records, 1):,.0f}",
    )
    thr.notes.append(
        "CPU: the job's process tree (Python driver and JVM) and, apart, each stack component's, from the burst's "
        f"first commit until its last row was found. Topic bytes: key plus value of all {b.topic_records:,} records of the table's topic (snapshot, rates "
        "and burst, tombstones included). "
        "Peak RSS is the job's driver process tree (Python + JVM, default 2 GB heap) over the whole end-to-end run; "
        "stack components at the end: " + ", ".join(f"{k} {mib(v)}" for k, v in sorted(b.component_rss.items())) + "."
    )
    return thr


def run(spark: SparkSession, cfg: Config, wire_format: str = "json") -> list[Table]:
    work = cfg.work / f"e2e-{wire_format}"
    work.mkdir(parents=True, exist_ok=True)
    stack = Stack(work, wire_format, cfg.e2e_transactions)
    job = Job(stack, work, cfg.work / "warehouse")
    try:
        _load_initial_rows(spark, stack, job, cfg)
        results, next_id = _measure_rates(spark, stack, job, cfg)
        burst = _burst(spark, stack, job, cfg, next_id)
    finally:
        job.stop()
        stack.down()
    return [_latency_table(results, cfg, wire_format, job), _throughput_table(burst, cfg, wire_format, job)]
