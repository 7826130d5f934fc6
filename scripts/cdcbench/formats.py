"""a. Apply throughput per table format: the job (`--table_format iceberg|delta|hudi`, each with its
defaults: Iceberg merge-on-read, Delta and Hudi copy-on-write) on the same batches.

Delta and Hudi each make Spark's session catalog (`spark_catalog`) their own, with their own
extensions, so one session cannot hold both, and a process has one SparkContext. Each format
therefore runs in a child process of its own (`python -m cdcbench.formats WORK FORMAT`), Iceberg's
too so that the three rows are measured alike, one after another, on the same batches, which this
process writes to Parquet once (with the lake state each size must leave). The rows are same
machine, same batches, back to back: not the same process, and not in a rotating order (a child
applies every batch, in order, to its own table of the same initial rows).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import generator, tables
from .config import Config
from .report import Table, rate, ratio, secs

log = logging.getLogger("cdcbench")
FORMATS = ("iceberg", "delta", "hudi")


def run(spark: Any, cfg: Config, glue_scripts: Path, formats: tuple[str, ...] = FORMATS) -> list[Table]:
    work = cfg.work / "formats"
    manifest = _write_batches(spark, cfg, work)
    results: dict[str, dict[str, Any]] = {}
    for fmt in formats:
        started = time.monotonic()
        results[fmt] = run_worker(work, fmt, glue_scripts)
        log.info("formats: %s done in %.0f s", fmt, time.monotonic() - started)
    return [_table(cfg, results, n, manifest) for n in cfg.batch_sizes]


def run_worker(
    work: Path, fmt: str, glue_scripts: Path, tag: str = "", env: dict[str, str] | None = None
) -> dict[str, Any]:
    """`worker` in a child process on the format's runtime (hudi, or any format with `env`'s
    CDC_GLUE_VERSION=5.0: Glue 5.0's pyspark ahead of the venv's); its result."""
    from cdclake.local.session import runtime_env

    child = {**os.environ, **(env or {})}
    child["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[1]), str(glue_scripts)])
    child |= runtime_env(fmt, child)
    args = [sys.executable, "-m", "cdcbench.formats", str(work), fmt] + ([tag] if tag else [])
    out = subprocess.run(args, env=child, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"the {tag or fmt} worker failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads((work / f"result-{tag or fmt}.json").read_text())


# The header of timing_cells' cells, in their order.
TIMING_COLUMNS = ["s/batch (median)", "min-max s", "events/s", "CPU s/batch", "CPU s per million events", "Spark jobs"]


def timing_cells(ts: list[dict[str, Any]], n: int, median_s: float) -> list[str]:
    """A row's timing cells over measured batches `ts` of `n` events: s/batch, min-max, events/s,
    CPU s/batch, CPU s per million events, Spark jobs."""
    cpu = statistics.median(x["cpu_seconds"] for x in ts)
    return [
        secs(median_s),
        f"{min(x['seconds'] for x in ts):.2f}-{max(x['seconds'] for x in ts):.2f}",
        rate(n, median_s),
        secs(cpu),
        f"{cpu / n * 1e6:,.0f}",
        f"{statistics.median(x['spark_jobs'] for x in ts):.0f}",
    ]


def _write_batches(spark: Any, cfg: Config, work: Path) -> dict[str, Any]:
    """The batches of section a's plan (a warm-up batch, then the measured ones) as raw batches in
    Parquet, and the lake state after the last batch of each size (pickled ExpectedState)."""
    work.mkdir(parents=True, exist_ok=True)
    template = generator.Template()
    stream = generator.ChangeStream(cfg.table_rows)
    plan = [(min(cfg.batch_sizes), False)] + [(n, True) for n in cfg.batch_sizes for _ in range(cfg.batches_per_size)]
    batches = []
    for i, (n, measured) in enumerate(plan):
        path = work / f"b{i}"
        tables.raw_batch(spark, stream.batch(n), path, template)
        last_of_size = i == len(plan) - 1 or plan[i + 1][0] != n
        expected = None
        if measured and last_of_size:
            expected = str(work / f"expected-{i}.pickle")
            Path(expected).write_bytes(pickle.dumps(stream.expected))
        batches.append({"path": str(path), "size": n, "measured": measured, "expected": expected})
    manifest = {"table_rows": cfg.table_rows, "shuffle_partitions": cfg.shuffle_partitions, "batches": batches}
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _table(cfg: Config, results: dict[str, dict[str, Any]], n: int, manifest: dict[str, Any]) -> Table:
    t = Table(
        f"a. Apply throughput per table format, batches of {n:,} change events ({n // 10:,} tombstones more), "
        f"table of {cfg.table_rows:,} rows, 10 columns",
        ["table format", *TIMING_COLUMNS, "vs iceberg", "correct", "peak RSS MiB"],
    )  # fmt: skip
    med = {f: statistics.median(x["seconds"] for x in r["times"][str(n)]) for f, r in results.items()}
    for fmt, r in results.items():
        t.add(
            f"job, --table_format {fmt} ({r['write_mode']})",
            *timing_cells(r["times"][str(n)], n, med[fmt]),
            ratio(med["iceberg"], med[fmt]) if "iceberg" in med else "-",
            r["verdicts"].get(str(n), "n/a"),
            f"{r['peak_rss'] / (1 << 20):,.0f}",
        )
    t.notes.append(
        f"{len(results[next(iter(results))]['times'][str(n)])} measured batch(es) per format after one warm-up "
        "batch. Each format in a Spark session of its own, in a child process (Delta and Hudi each take Spark's "
        "session catalog, and a process has one SparkContext), the formats one after another on the same "
        "batches (Parquet, written once): same machine, same batches, back to back, not the same process nor a "
        "rotating order. CPU s = user+system time of the child's process tree (Python + JVM). Correctness is "
        "checked against the expected table state after the last batch of this size."
    )
    return t


# ------------------------------------------------------------------------- the child process
def _bulk_rows(spark: Any, table: str, rows: int, system_columns: frozenset[str], v2_writes: bool) -> None:
    """Keys 1..rows-1 at version 0 appended as the format appends (Hudi: INSERT by position, its
    `_hoodie_*` columns left to it), each column cast to the type the format stores it as."""
    lake = [f for f in spark.table(table).schema.fields if f.name not in system_columns]
    from pyspark.sql import functions as F

    data = tables.job_rows(range(1, rows), spark, table, [f.name for f in lake])
    data = data.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in lake])
    if v2_writes:
        data.writeTo(table).append()
    else:
        data.write.insertInto(table)


def worker(work: Path, fmt: str, tag: str = "") -> None:
    """Apply the manifest's batches with the job in `fmt`; `tag` names this run's table, warehouse
    and result file (default: the format), so that runs of one format on two runtimes stay apart."""
    tag = tag or fmt
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.lake.formats import table_format
    from cdclake.local.session import local_session

    from .checker import check_table
    from .measure import RssSampler, timed

    manifest = json.loads((work / "manifest.json").read_text())
    settings = tables.job_settings(
        work / f"warehouse-{tag}", f"bench_{fmt}", work, table_format=fmt,
        shuffle_partitions=str(manifest["shuffle_partitions"]),
    )  # fmt: skip
    rss = RssSampler()
    spark = local_session(settings, app_name=f"cdc-bench-{fmt}")
    spark.sparkContext.setLogLevel("ERROR")
    template = generator.Template()
    f = table_format(settings)
    (work / f"setup-{tag}").mkdir(exist_ok=True)
    # The job creates its table from one snapshot record (key 0); the other keys are appended.
    table = tables.create_job_table(spark, settings, 1, template, work / f"setup-{tag}")
    _bulk_rows(spark, table, manifest["table_rows"], f.system_columns, f.v2_writes)
    from cdclake.common.records import RAW_SCHEMA

    processor = BatchProcessor(spark, settings)
    times: dict[str, list[dict[str, Any]]] = {}
    verdicts: dict[str, str] = {}
    rss.mark()
    for i, b in enumerate(manifest["batches"], start=1):
        raw = spark.read.schema(RAW_SCHEMA).parquet(b["path"])
        t = timed(spark, lambda raw=raw, i=i: processor.process(raw, i))
        print(f"{fmt}: batch {i}, {b['size']} events: {t.seconds:.2f}s", file=sys.stderr, flush=True)
        if b["measured"]:
            times.setdefault(str(b["size"]), []).append(
                {"seconds": t.seconds, "cpu_seconds": t.cpu_seconds, "spark_jobs": t.spark_jobs}
            )
        if b["expected"]:
            expected = pickle.loads(Path(b["expected"]).read_bytes())
            verdicts[str(b["size"])] = check_table(spark, table, expected).summary()
    result = {"times": times, "verdicts": verdicts, "write_mode": _write_mode(fmt, settings), "peak_rss": rss.peak()}
    spark_version = spark.version
    spark.stop()
    rss.stop()
    result["spark"] = spark_version
    (work / f"result-{tag}.json").write_text(json.dumps(result))


def _write_mode(fmt: str, settings: Any) -> str:
    return "copy-on-write" if fmt != "iceberg" else str(settings.write_mode.value)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    os.environ.setdefault("CDC_SPARK_DRIVER_MEMORY", "4g")
    worker(Path(sys.argv[1]), sys.argv[2], *sys.argv[3:4])
