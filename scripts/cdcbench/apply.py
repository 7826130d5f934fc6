"""a. Apply throughput: the same Debezium batches through every method, side by side.

Methods, each on its own table that starts with the same rows:
* the job's BatchProcessor, merge-on-read and copy-on-write;
* the AWS sample's logic (baseline.py), merge-on-read;
* the upper bounds: a plain Iceberg append of the batch's rows already decoded (the write
  alone), and the job with its MERGE replaced by an append (decoding, ordering and all, but a
  changelog append instead of a row-level write);
* the job, merge-on-read, reading the same changes in the wire format avro (avrowire.py: framed
  for the AWS Glue Schema Registry, whose schema versions a moto server holds, as the tests run it).

Every batch is written to Parquet once (in each wire format a method reads) and read by every
method from there. Methods run in a
rotating order per batch so that a noisy neighbour hits all of them alike.
"""

from __future__ import annotations

import contextlib
import logging
import os
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdclake.jobs.batch import BatchProcessor, Writes
from pyspark.sql import DataFrame, SparkSession

from . import avrowire, generator, pipeline_cost, tables
from .baseline import BaselineProcessor
from .checker import Verdict, check_table
from .compare import import_module
from .config import Config
from .measure import JobTime, RssSampler, Timed, job_log, mib, timed
from .report import Table, rate, ratio, secs

log = logging.getLogger("cdcbench")

MOR, COW, BASE, APPEND, JOB_APPEND, AVRO, VECTORIZED = (
    "job, merge-on-read",
    "job, copy-on-write",
    "AWS sample (baseline), merge-on-read",
    "plain append of decoded rows",
    "job with an append instead of its MERGE",
    "job, merge-on-read, wire format avro",
    "job, merge-on-read, Iceberg's vectorized reads on",
)
VECTORIZATION = "spark.sql.iceberg.vectorization.enabled"  # off in the job (lake/formats/)


def _append_instead(table: str, changes: DataFrame, *_args: Any, **_kwargs: Any) -> None:
    """The job's keyed write (`Writes.keyed`, by default cdclake.lake.executor.merge_changes), whatever else
    it is passed (key and column lists, TOAST placeholder handling), as an append of the batch's
    newest changes."""
    changes.writeTo(table).append()


@dataclass
class Method:
    name: str
    table: str
    run: Callable[[DataFrame, DataFrame, int], Any]  # (raw batch, pre-decoded rows, batch id)
    checked: bool
    wire: str = "json"  # the wire format of the raw batch it reads
    times: dict[int, list[Timed]] = field(default_factory=dict)
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    jobs: dict[int, list[list[JobTime]]] = field(default_factory=dict)  # per measured batch
    objects: dict[int, list[int]] = field(default_factory=dict)  # lake objects written per measured batch


KEYS = {
    "mor": MOR,
    "cow": COW,
    "baseline": BASE,
    "append": APPEND,
    "job-append": JOB_APPEND,
    "avro": AVRO,
    "vectorized": VECTORIZED,
}


def _vectorized(process: Callable[[DataFrame, int], Any]) -> Callable[[DataFrame, DataFrame, int], Any]:
    """The job's batch with Iceberg's vectorized Parquet reads on for its duration only (a SQL conf,
    read when a scan is planned), so the other methods of the same session keep the job's setting."""

    def run(raw: DataFrame, _decoded: DataFrame, batch_id: int) -> Any:
        conf = raw.sparkSession.conf
        before = conf.get(VECTORIZATION, "true")
        conf.set(VECTORIZATION, "true")
        try:
            return process(raw, batch_id)
        finally:
            conf.set(VECTORIZATION, before)

    return run


def compare_name(rev: str) -> str:
    return f"job at {rev} (--compare), merge-on-read"


def _compared(spark: SparkSession, cfg: Config, job: Callable[..., tuple[str, Any]], avro: bool) -> list[Method]:
    """The other revision's own settings and processor, on tables created by this one (`job`); with
    `avro`, also on the same Avro records."""
    other = import_module(cfg.compare_package, "batch")
    other_settings = import_module(cfg.compare_package, "settings")
    out = []
    for namespace, wire in (("apply_cmp", None), ("apply_cmp_avro", "avro"))[: 2 if avro else 1]:
        table, _ = job(namespace, write_mode="merge-on-read")
        overrides = {"wire_format": wire} if wire else {}
        settings = tables.job_settings(
            cfg.work / "warehouse",
            namespace,
            cfg.work,
            build=other_settings.build_settings,
            shuffle_partitions=str(cfg.shuffle_partitions),
            **overrides,
        )
        cmp = other.BatchProcessor(spark, settings)
        name = compare_name(cfg.compare_rev) + (", wire format avro" if wire else "")
        run = lambda raw, _d, b, p=cmp: p.process(raw, b)  # noqa: E731
        out.append(Method(name, table, run, True, wire=wire or "json"))
    return out


def _methods(spark: SparkSession, cfg: Config, template: generator.Template, sample: DataFrame) -> list[Method]:
    w = cfg.work
    wanted = {KEYS[k] for k in cfg.methods if k in KEYS}
    out: list[Method] = []

    def job(namespace: str, writes: Writes | None = None, **overrides: str) -> tuple[str, BatchProcessor]:
        settings = tables.job_settings(
            w / "warehouse", namespace, w, shuffle_partitions=str(cfg.shuffle_partitions), **overrides
        )
        table = tables.create_job_table(spark, settings, cfg.table_rows, template, w)
        return table, BatchProcessor(spark, settings, writes)

    if MOR in wanted:
        table, mor = job("apply_mor", write_mode="merge-on-read")
        out.append(Method(MOR, table, lambda raw, _d, b: mor.process(raw, b), True))
    if VECTORIZED in wanted:
        table, vec = job("apply_vec", write_mode="merge-on-read")
        out.append(Method(VECTORIZED, table, _vectorized(vec.process), True))
    if AVRO in wanted:
        table, avro = job("apply_avro", write_mode="merge-on-read", wire_format="avro")
        out.append(Method(AVRO, table, lambda raw, _d, b: avro.process(raw, b), True, wire="avro"))
    if COW in wanted:
        table, cow = job("apply_cow", write_mode="copy-on-write")
        out.append(Method(COW, table, lambda raw, _d, b: cow.process(raw, b), True))
    if cfg.compare_package and cfg.compare_rev:
        out += _compared(spark, cfg, job, AVRO in wanted)
    if BASE in wanted:
        base_table = "glue_catalog.apply_base.customers"
        spark.sql("CREATE NAMESPACE IF NOT EXISTS glue_catalog.apply_base")
        tables.baseline_table(spark, base_table, cfg.table_rows, sample)
        base = BaselineProcessor(spark, base_table)
        out.append(Method(BASE, base_table, lambda raw, _d, b: base.process(raw, b), True))
    if wanted & {APPEND, JOB_APPEND}:
        append_table, appending = job("apply_append", Writes(keyed=_append_instead))
        if APPEND in wanted:
            out.append(Method(APPEND, append_table, lambda _r, dec, _b: dec.writeTo(append_table).append(), False))
        if JOB_APPEND in wanted:
            out.append(Method(JOB_APPEND, append_table, lambda raw, _d, b: appending.process(raw, b), False))
    return out


@contextlib.contextmanager
def _registry(wanted: bool) -> Iterator[str | None]:
    """The avro method's AWS Glue Schema Registry: a moto server, which the job's Glue client finds
    from its environment, as on AWS (Glue's endpoint, region and credentials)."""
    if not wanted:
        yield None
        return
    from .motoserver import moto_server_process

    env = {"AWS_DEFAULT_REGION": avrowire.REGION, "AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t"}
    with moto_server_process() as endpoint:
        env["AWS_ENDPOINT_URL_GLUE"] = endpoint
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield endpoint
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class _Batches:
    """Each batch's Kafka records in every wire format a method reads, written to Parquet once, and
    the bytes they take on the topic (keys and values, tombstones included) per batch size."""

    def __init__(self, spark: SparkSession, template: generator.Template, topic: avrowire.AvroTopic | None):
        self.spark, self.template, self.topic = spark, template, topic
        self.topic_bytes: dict[tuple[str, int], list[int]] = {}  # (wire, size) -> [changes, bytes]

    def write(self, changes: list[generator.Change], path: Path) -> dict[str, DataFrame]:
        wires = {"json": list(generator.records(changes, self.template))}
        if self.topic is not None:
            wires["avro"] = list(avrowire.avro_records(changes, self.template, self.topic))
        out = {}
        for wire, records in wires.items():
            acc = self.topic_bytes.setdefault((wire, len(changes)), [0, 0])
            acc[0] += len(changes)
            acc[1] += avrowire.topic_bytes(iter(records))[1]
            out[wire] = tables.raw_records(self.spark, records, path.with_name(f"{path.name}-{wire}"))
        return out

    def bytes_per_change(self, wire: str, n: int) -> float:
        changes, size = self.topic_bytes[(wire, n)]
        return size / changes

    def per_change(self, wire: str, n: int) -> str:
        return f"{self.bytes_per_change(wire, n):,.0f}"

    @staticmethod
    def drop(path: Path) -> None:
        for wire in ("json", "avro", "decoded"):
            tables.drop_batch(path.with_name(f"{path.name}-{wire}"))


def run(spark: SparkSession, cfg: Config, rss: RssSampler) -> list[Table]:
    with _registry("avro" in cfg.methods) as endpoint:
        template = generator.Template()
        topic = avrowire.register_template(avrowire.glue_client(endpoint), template) if endpoint else None
        return _run(spark, cfg, rss, template, _Batches(spark, template, topic))


def _run(spark: SparkSession, cfg: Config, rss: RssSampler, template: generator.Template, io: _Batches) -> list[Table]:
    stream = generator.ChangeStream(cfg.table_rows)
    batch_dir = cfg.work / "batches"
    batch_dir.mkdir(parents=True, exist_ok=True)
    rss.mark()
    warm = stream.batch(min(cfg.batch_sizes))
    warm_raws = io.write(warm, batch_dir / "warm")
    methods = _methods(spark, cfg, template, warm_raws["json"])
    batch_id = 1
    plan = [(cfg.batch_sizes[0], None)] + [(n, n) for n in cfg.batch_sizes for _ in range(cfg.batches_per_size)]
    for i, (n, measured) in enumerate(plan):
        changes = warm if i == 0 else stream.batch(n)
        path = batch_dir / f"b{i}"
        raws = warm_raws if i == 0 else io.write(changes, path)
        # Only the plain append reads the batch decoded beforehand (written once per batch, unmeasured).
        decoded = (
            tables.write_decoded(raws["json"], path.with_name(path.name + "-decoded"))
            if any(m.name == APPEND for m in methods)
            else raws["json"]
        )
        order = methods[i % len(methods) :] + methods[: i % len(methods)]
        for m in order:
            raw = raws[m.wire]
            before = lake_objects(cfg.work / "warehouse", m.table)
            with job_log(spark) as jobs:
                t = timed(spark, lambda m=m, raw=raw, decoded=decoded, b=batch_id: m.run(raw, decoded, b))
            log.info("apply %s, %d events: %.2fs (%d Spark jobs)", m.name, n, t.seconds, t.spark_jobs)
            if measured is not None:
                m.times.setdefault(n, []).append(t)
                m.jobs.setdefault(n, []).append(jobs)
                m.objects.setdefault(n, []).append(lake_objects(cfg.work / "warehouse", m.table) - before)
        batch_id += 1
        io.drop(path)
        last_of_size = i == len(plan) - 1 or plan[i + 1][0] != n
        if measured is not None and last_of_size:
            for m in methods:
                if m.checked:
                    m.verdicts[n] = check_table(spark, m.table, stream.expected)
    io.drop(batch_dir / "warm")
    peak = rss.peak()
    largest = max(cfg.batch_sizes)
    profiled = (MOR, BASE, AVRO, compare_name(cfg.compare_rev or ""))
    return (
        [_table(cfg, methods, n, peak, io) for n in cfg.batch_sizes]
        + [_where(m, largest) for m in methods if m.name in profiled]
        + _pipeline_cost(cfg, methods, io)
    )


def lake_objects(warehouse: Path, table: str) -> int:
    """The files under the table's namespace folder (the table and the job's own tables beside it), as
    objects on S3: without the local file system's checksum files and the Hadoop catalog's version
    hint (the Glue catalog keeps that pointer in its table entry)."""
    folder = warehouse / table.split(".")[-2]
    return sum(
        1 for f in folder.rglob("*") if f.is_file() and not f.name.endswith(".crc") and f.name != "version-hint.text"
    )


def _pipeline_cost(cfg: Config, methods: list[Method], io: _Batches) -> list[Table]:
    """The whole pipeline priced from the job's figures in each wire format measured (JSON: the job's
    merge-on-read method, Avro: its avro method)."""
    measured = [
        pipeline_cost.Measured(
            m.wire,
            n,
            _median(m.times[n], "cpu_seconds") / n * 1e6,
            io.bytes_per_change(m.wire, n),
            statistics.mean(m.objects[n]),
        )
        for m in methods
        if m.name in (MOR, AVRO)
        for n in cfg.batch_sizes
    ]
    return [pipeline_cost.table(measured)] if measured else []


def _site(name: str) -> str:
    """`collect at /abs/path/glue_scripts/cdclake/jobs/batch.py:177` -> `collect at cdclake/jobs/batch.py:177`."""
    head, _, where = name.partition(" at ")
    return f"{head} at {'/'.join(where.split('/')[-2:])}" if where else name


def _where(m: Method, n: int) -> Table:
    """Time per Spark job call site for one method's measured batches of size n (averaged)."""
    batches = m.jobs[n]
    sites: dict[str, list[float]] = {}
    for jobs in batches:
        for j in jobs:
            acc = sites.setdefault(_site(j.name), [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += j.seconds
            acc[2] += j.task_cpu_seconds
    k = len(batches)
    wall = statistics.mean(t.seconds for t in m.times[n])
    in_jobs = sum(v[1] for v in sites.values()) / k
    t = Table(
        f"a. Where the time goes: {m.name}, batches of {n:,} events (mean per batch)",
        ["Spark job call site", "jobs", "wall s", "task CPU s"],
    )
    for site, (count, secs_, cpu) in sites.items():
        t.add(site, f"{count / k:.0f}", secs(secs_ / k), secs(cpu / k))
    t.add("driver only: planning, Iceberg commits, catalog, Py4J", "-", secs(max(0.0, wall - in_jobs)), "-")
    t.notes.append(
        "Call sites are the Python lines that started the jobs (`sql at NativeMethodAccessorImpl` = a MERGE or "
        "CREATE/ALTER issued with spark.sql); several jobs per site are the stages adaptive execution runs as jobs."
    )
    return t


def _median(ts: list[Timed], attr: str) -> float:
    return statistics.median(getattr(t, attr) for t in ts)


def _table(cfg: Config, methods: list[Method], n: int, peak: int, io: _Batches) -> Table:
    by = {m.name: m for m in methods}
    med = {m.name: _median(m.times[n], "seconds") for m in methods}
    t = Table(
        f"a. Apply throughput, batches of {n:,} change events ({n // 10:,} tombstones more), "
        f"table of {cfg.table_rows:,} rows, 10 columns",
        [
            "method",
            "s/batch (median)",
            "min-max s",
            "events/s",
            "CPU s/batch",
            "CPU s per million events",
            "topic bytes/change",
            "Spark jobs",
            "vs append",
            "vs job-with-append",
            "vs baseline",
            "correct",
        ]
        + ([f"vs {cfg.compare_rev}"] if cfg.compare_rev else []),
    )
    other = compare_name(cfg.compare_rev or "")
    for m in methods:
        ts = m.times[n]
        v = m.verdicts.get(n)
        t.add(
            m.name,
            secs(med[m.name]),
            f"{min(x.seconds for x in ts):.2f}-{max(x.seconds for x in ts):.2f}",
            rate(n, med[m.name]),
            secs(_median(ts, "cpu_seconds")),
            f"{_median(ts, 'cpu_seconds') / n * 1e6:,.0f}",
            io.per_change(m.wire, n),
            f"{statistics.median(x.spark_jobs for x in ts):.0f}",
            ratio(med[APPEND], med[m.name]) if APPEND in med else "-",
            ratio(med[JOB_APPEND], med[m.name]) if JOB_APPEND in med else "-",
            ratio(med[BASE], med[m.name]) if BASE in med else "-",
            v.summary() if v else "n/a (appends changes)",
            *([ratio(med[other], med[m.name]) if other in med else "-"] if cfg.compare_rev else []),
        )
    runs = len(by[MOR].times[n])
    t.notes.append(
        f"{runs} measured batch(es) per method after one warm-up batch; ratios are throughput relative to the "
        f"column's method (>1 = faster). CPU s = user+system time of the driver process tree (Python + JVM). "
        f"Correctness is checked against the expected table state after the last batch of this size. "
        f"Topic bytes/change: the batch's keys and values as the wire format puts them on the topic (JSON: "
        f"JsonConverter's text with its inline schemas; avro: the Glue Schema Registry's framed records), "
        f"tombstones included, per change event. "
        f"Peak RSS of the process tree during section a: {mib(peak)}."
    )
    return t
