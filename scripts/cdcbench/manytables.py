"""t. Many tables: batches of 20 changes on each of 1, 10, 50 and 200 tables.

A real database captures dozens to hundreds of tables into one job, and every table a batch
touches is a commit of its own with its own fixed cost (schema lookups, Spark actions, the
MERGE's planning and commit). This section measures how a batch's time grows with the number of
tables it touches, at a constant 20 changes per table: the seconds per batch, the marginal seconds
per added table ((t(n) - t(1)) / (n - 1)) and t(n) / t(1).

Each table is a topic of its own (benchdb_manyN.tNNN), created by the job from 20 snapshot records
in an unmeasured first batch; then every batch holds 20 changes of each table (70/20/10
updates/inserts/deletes, tombstones after deletes), in one file, as the `files` source reads it.
With `--compare REV` the job at REV runs the same batches in the same process, on tables of its
own, alternating which side runs first.
"""

from __future__ import annotations

import itertools
import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdclake.jobs.batch import BatchProcessor
from pyspark.sql import SparkSession

from . import generator, tables
from .checker import check_table
from .compare import import_module
from .config import Config
from .measure import Timed, timed
from .report import Table, secs

log = logging.getLogger("cdcbench")

CHANGES_PER_TABLE = 20
INITIAL_ROWS = 20  # per table, from the snapshot batch


@dataclass
class _Side:
    name: str
    namespace: str
    processor: Any
    settings: Any
    times: dict[int, list[Timed]] = field(default_factory=dict)
    correct: dict[int, str] = field(default_factory=dict)


@dataclass
class _Source:
    """One source table of the benchmark: its topic's template and change stream."""

    template: generator.Template
    stream: generator.ChangeStream


def _sides(spark: SparkSession, cfg: Config) -> list[_Side]:
    w = cfg.work

    def settings(namespace: str, build: Any = None) -> Any:
        extra = {"build": build} if build else {}
        return tables.job_settings(
            w / "warehouse", namespace, w, shuffle_partitions=str(cfg.shuffle_partitions), **extra
        )

    this = settings("many_this")
    out = [_Side("job (this tree)", "many_this", BatchProcessor(spark, this), this)]
    if cfg.compare_package and cfg.compare_rev:
        other = import_module(cfg.compare_package, "batch")
        build = import_module(cfg.compare_package, "settings").build_settings
        s = settings("many_cmp", build)
        out.append(_Side(f"job at {cfg.compare_rev} (--compare)", "many_cmp", other.BatchProcessor(spark, s), s))
    return out


def _sources(n: int) -> list[_Source]:
    db = f"benchdb_many{n}"
    return [
        _Source(generator.Template(db, f"t{i:03d}"), generator.ChangeStream(INITIAL_ROWS, seed=i)) for i in range(n)
    ]


def _snapshot_records(sources: list[_Source]) -> list[tuple[Any, ...]]:
    """Keys 0..INITIAL_ROWS-1 of every table at version 0, as snapshot records."""
    ms = generator.BASE_MS - 60_000
    out: list[tuple[Any, ...]] = []
    for src in sources:
        changes = [
            generator.Change("r", k, version=0, binlog_index=4, pos=4, ts_ms=ms, source_ts_ms=ms, offset=k)
            for k in range(INITIAL_ROWS)
        ]
        out += generator.records(changes, src.template)
    return out


def _change_records(sources: list[_Source]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for src in sources:
        out += generator.records(src.stream.batch(CHANGES_PER_TABLE), src.template)
    return out


def _check(spark: SparkSession, side: _Side, sources: list[_Source]) -> str:
    """The first and the last table against their streams (every table is written alike)."""
    wrong = []
    for src in {id(s): s for s in (sources[0], sources[-1])}.values():
        source = src.template.source
        table = side.settings.table_identifier(source["db"], source["table"])
        verdict = check_table(spark, table, src.stream.expected)
        if not verdict.correct:
            wrong.append(f"{table}: {verdict.summary()}")
    return "; ".join(wrong) or "correct"


def _measure(spark: SparkSession, cfg: Config, sides: list[_Side], n: int, batch_ids: Any, work: Path) -> None:
    sources = _sources(n)
    raw = tables.raw_records(spark, _snapshot_records(sources), work / f"n{n}-snapshot")
    for s in sides:
        t = timed(spark, lambda s=s: s.processor.process(raw, next(batch_ids)))
        log.info("many tables %s, %d tables created: %.2fs", s.name, n, t.seconds)
    tables.drop_batch(work / f"n{n}-snapshot")
    warmup = cfg.tables_warmup if n == min(cfg.table_counts) else 0
    for i in range(warmup + cfg.tables_batches):
        path = work / f"n{n}-b{i}"
        raw = tables.raw_records(spark, _change_records(sources), path)
        for s in sides if i % 2 == 0 else sides[::-1]:
            t = timed(spark, lambda s=s, raw=raw: s.processor.process(raw, next(batch_ids)))
            log.info("many tables %s, %d tables: %.2fs (%d Spark jobs)", s.name, n, t.seconds, t.spark_jobs)
            if i >= warmup:
                s.times.setdefault(n, []).append(t)
        tables.drop_batch(path)
    for s in sides:
        s.correct[n] = _check(spark, s, sources)


def run(spark: SparkSession, cfg: Config) -> list[Table]:
    sides = _sides(spark, cfg)
    work = cfg.work / "many-tables"
    work.mkdir(parents=True, exist_ok=True)
    batch_ids = itertools.count(1)
    for n in sorted(cfg.table_counts):
        _measure(spark, cfg, sides, n, batch_ids, work)
    return [_table(cfg, sides)]


def _median(ts: list[Timed], attr: str) -> float:
    return statistics.median(getattr(t, attr) for t in ts)


def _table(cfg: Config, sides: list[_Side]) -> Table:
    counts = sorted(cfg.table_counts)
    cmp = [f"vs {cfg.compare_rev}"] if len(sides) > 1 else []
    t = Table(
        f"t. Many tables: {CHANGES_PER_TABLE} changes per table per batch, tables of {INITIAL_ROWS}+ rows",
        ["method", "tables", "s/batch (median)", "CPU s/batch", "Spark jobs", "marginal s/table", "x 1 table", *cmp,
         "correct"],
    )  # fmt: skip
    for s in sides:
        one = _median(s.times[counts[0]], "seconds") if counts[0] == 1 else None
        for n in counts:
            wall = _median(s.times[n], "seconds")
            marginal = f"{(wall - one) / (n - 1):.3f}" if one is not None and n > 1 else "-"
            ratio = f"{wall / one:.1f}x" if one is not None else "-"
            vs = [f"{_median(sides[1].times[n], 'seconds') / wall:.2f}x"] if cmp else []
            jobs = f"{statistics.median(x.spark_jobs for x in s.times[n]):.0f}"
            t.add(s.name, n, secs(wall), secs(_median(s.times[n], "cpu_seconds")), jobs, marginal, ratio, *vs,
                  s.correct[n])  # fmt: skip
    t.notes.append(
        f"{cfg.tables_batches} measured batch(es) per count after the batch that creates the tables "
        f"({cfg.tables_warmup} more warm-up batches at the smallest count); one topic per table, one file per batch; "
        "marginal s/table = (t(n) - t(1)) / (n - 1); correct: the first and last table equal their source"
        + (f"; vs {cfg.compare_rev}: its s/batch / this tree's (>1 = this tree faster)" if cmp else "")
    )
    return t
