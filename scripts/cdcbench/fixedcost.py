"""a. A small batch's fixed cost: batches of 100 changes through the job and through the job at a
pinned baseline commit, in the same process, on the same batches, in alternating order.

A batch of a handful of changes costs what Spark and Iceberg do per batch whatever its size
(planning, Spark jobs, the commit), so a change that adds a Spark action or a catalog call to
every batch shows here first. The row says REGRESSION when this tree is more than `SLOWER` slower
than the pinned commit (median wall time per batch, and median CPU time: both, so that a noisy
neighbour slowing one batch does not raise the flag alone).
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from cdclake.jobs.batch import BatchProcessor
from pyspark.sql import SparkSession

from . import generator, tables
from .checker import check_table
from .compare import extract, import_module
from .config import Config
from .measure import Timed, timed
from .report import Table, ratio, secs

log = logging.getLogger("cdcbench")

# The job's batch code before the small-batch work (main at 2026-11-25 18:10 UTC). Move it forward
# only to a commit measured in docs/BENCHMARKS.md, so that the ratio keeps meaning "vs that".
PINNED = "fe5ec51"
CHANGES = 100
SLOWER = 1.25  # flag at 25% slower: one-batch medians on a shared machine scatter by ~10-15%


@dataclass
class _Side:
    name: str
    table: str
    processor: object
    times: list[Timed] = field(default_factory=list)


def _median(ts: list[Timed], attr: str) -> float:
    return statistics.median(getattr(t, attr) for t in ts)


def verdict(this: list[Timed], pinned: list[Timed], slower: float = SLOWER) -> str:
    """REGRESSION when this tree's median wall and CPU per batch are both more than `slower` times
    the pinned commit's; else ok."""
    wall = _median(this, "seconds") / _median(pinned, "seconds")
    cpu = _median(this, "cpu_seconds") / _median(pinned, "cpu_seconds")
    if wall > slower and cpu > slower:
        return f"REGRESSION: {wall:.2f}x the wall time, {cpu:.2f}x the CPU of {PINNED}"
    return "ok"


def _sides(spark: SparkSession, cfg: Config, template: generator.Template, work: Path) -> list[_Side]:
    w = cfg.work

    def settings(namespace: str, build=None) -> object:
        extra = {"build": build} if build else {}
        return tables.job_settings(
            w / "warehouse", namespace, w, shuffle_partitions=str(cfg.shuffle_partitions), **extra
        )

    this = settings("fixed_this")
    this_table = tables.create_job_table(spark, this, cfg.fixed_rows, template, w)
    short, package = extract(PINNED, work)
    other = import_module(package, "batch")
    other_settings = import_module(package, "settings")
    pinned_table = tables.create_job_table(spark, settings("fixed_pinned"), cfg.fixed_rows, template, w)
    pinned = other.BatchProcessor(spark, settings("fixed_pinned", other_settings.build_settings))
    return [
        _Side("job (this tree), merge-on-read", this_table, BatchProcessor(spark, this)),
        _Side(f"job at {short} (pinned baseline), merge-on-read", pinned_table, pinned),
    ]


def run(spark: SparkSession, cfg: Config) -> list[Table]:
    template = generator.Template()
    stream = generator.ChangeStream(cfg.fixed_rows)
    sides = _sides(spark, cfg, template, cfg.work / "pinned")
    batch_dir = cfg.work / "fixed-batches"
    batch_dir.mkdir(parents=True, exist_ok=True)
    total = cfg.fixed_warmup + cfg.fixed_batches
    for i in range(total):
        path = batch_dir / f"b{i}"
        raw = tables.raw_batch(spark, stream.batch(CHANGES), path, template)
        for s in sides if i % 2 == 0 else sides[::-1]:
            t = timed(spark, lambda s=s, raw=raw, b=i + 1: s.processor.process(raw, b))  # type: ignore[attr-defined]
            log.info("fixed cost %s, %d changes: %.2fs (%d Spark jobs)", s.name, CHANGES, t.seconds, t.spark_jobs)
            if i >= cfg.fixed_warmup:
                s.times.append(t)
        tables.drop_batch(path)
    this, pinned = sides
    t = Table(
        f"a. Fixed cost: batches of {CHANGES} changes on a table of {cfg.fixed_rows:,} rows "
        f"(regression check against {PINNED})",
        ["method", "s/batch (median)", "CPU s/batch", "Spark jobs", f"vs {PINNED}", "correct", "check"],
    )
    for s in sides:
        t.add(
            s.name,
            secs(_median(s.times, "seconds")),
            secs(_median(s.times, "cpu_seconds")),
            f"{statistics.median(x.spark_jobs for x in s.times):.0f}",
            ratio(_median(pinned.times, "seconds"), _median(s.times, "seconds")),
            check_table(spark, s.table, stream.expected).summary(),
            verdict(this.times, pinned.times) if s is this else "(baseline)",
        )
    t.notes.append(
        f"{cfg.fixed_batches} measured batches per method after {cfg.fixed_warmup} warm-up batches, alternating "
        f"which runs first; ratio >1 = faster than {PINNED}. REGRESSION when both the median wall time and the "
        f"median CPU time are over {SLOWER:.2f}x the pinned commit's."
    )
    return [t]
