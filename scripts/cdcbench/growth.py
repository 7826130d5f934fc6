"""b. Growth: time per batch as the table grows, per table layout; then files, delete files,
snapshots and read times after many batches, before and after maintenance.

Layouts compared (the job creates the table; the layout is applied with ALTER TABLE before the
bulk rows are loaded, so every row is laid out that way):
* the job's default: unpartitioned;
* bucket(16, id), rows hash-distributed by partition on write.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cdclake.jobs.batch import BatchProcessor
from pyspark.sql import SparkSession

from . import generator, tables
from .checker import check_table
from .config import Config
from .measure import RssSampler, Timed, mib, table_files, timed
from .report import Table, rate, secs

log = logging.getLogger("cdcbench")

LAYOUTS: dict[str, list[str]] = {
    "unpartitioned (job default)": [],
    "bucket(16, id), hash distribution": [
        "ALTER TABLE {t} ADD PARTITION FIELD bucket(16, id)",
        "ALTER TABLE {t} SET TBLPROPERTIES ('write.distribution-mode'='hash', 'write.merge.distribution-mode'='hash')",
    ],
}


@dataclass
class LayoutRun:
    name: str
    times: dict[int, list[Timed]] = field(default_factory=dict)
    files: dict[int, dict[str, int]] = field(default_factory=dict)
    correct: str = ""


def _grow(spark: SparkSession, cfg: Config, layout: str, ddl: list[str], index: int) -> LayoutRun:
    w = cfg.work
    settings = tables.job_settings(w / "warehouse", f"growth{index}", w, shuffle_partitions=str(cfg.shuffle_partitions))
    template = generator.Template()
    stream = generator.ChangeStream(1)
    table = tables.create_job_table(spark, settings, 1, template, w)
    for stmt in ddl:
        spark.sql(stmt.format(t=table))
    processor = BatchProcessor(spark, settings)
    run = LayoutRun(layout)
    batch_id = 1
    for size in cfg.growth_sizes:
        missing = size - stream.expected.row_count()
        if missing > 0:
            tables.append_rows(spark, table, stream.bulk_insert(missing))
        # one unmeasured batch first at every size: its file layout is what steady state sees
        warm = 1 if cfg.growth_warmup else 0
        for i in range(cfg.growth_batches_per_size + warm):
            raw = tables.raw_batch(spark, stream.batch(cfg.growth_batch), w / "growth-batch", template)
            t = timed(spark, lambda raw=raw, b=batch_id: processor.process(raw, b))
            batch_id += 1
            log.info("growth %s at %d rows: %.2fs", layout, size, t.seconds)
            if i >= warm:
                run.times.setdefault(size, []).append(t)
            tables.drop_batch(w / "growth-batch")
        run.files[size] = table_files(spark, table)
    verdict = check_table(spark, table, stream.expected)
    run.correct = verdict.summary()
    spark.sql(f"DROP TABLE {table} PURGE")
    return run


def _reads(spark: SparkSession, table: str, key: int) -> tuple[float, float]:
    """Median of 3 runs: count(*) and a lookup by primary key."""

    def med(sql: str) -> float:
        out = []
        for _ in range(3):
            t0 = time.perf_counter()
            spark.sql(sql).collect()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    return med(f"SELECT count(*) FROM {table}"), med(f"SELECT * FROM {table} WHERE id = {key}")


def _maintenance(spark: SparkSession, cfg: Config) -> Table:
    w = cfg.work
    settings = tables.job_settings(w / "warehouse", "maint", w, shuffle_partitions=str(cfg.shuffle_partitions))
    template = generator.Template()
    stream = generator.ChangeStream(cfg.maintenance_rows)
    table = tables.create_job_table(spark, settings, cfg.maintenance_rows, template, w)
    processor = BatchProcessor(spark, settings)
    per_batch: list[Timed] = []
    for b in range(cfg.maintenance_batches):
        raw = tables.raw_batch(spark, stream.batch(cfg.maintenance_batch), w / "maint-batch", template)
        per_batch.append(timed(spark, lambda raw=raw, b=b: processor.process(raw, b + 1)))
        tables.drop_batch(w / "maint-batch")
    probe = cfg.maintenance_rows // 2
    before = table_files(spark, table), *_reads(spark, table, probe)
    ident = table.split(".", 1)[1]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")  # the session time zone is UTC
    steps = [
        # files with any delete file are rewritten with their deletes applied; small files are combined
        f"CALL glue_catalog.system.rewrite_data_files(table => '{ident}', "
        "options => map('delete-file-threshold', '1', 'min-input-files', '2'))",
        f"CALL glue_catalog.system.rewrite_position_delete_files(table => '{ident}', options => map('rewrite-all', 'true'))",
        f"CALL glue_catalog.system.expire_snapshots(table => '{ident}', "
        f"older_than => TIMESTAMP '{now}', retain_last => 1)",
    ]
    maint_times = []
    for stmt in steps:
        t0 = time.perf_counter()
        spark.sql(stmt).collect()
        maint_times.append(time.perf_counter() - t0)
    after = table_files(spark, table), *_reads(spark, table, probe)
    verdict = check_table(spark, table, stream.expected)
    after_batch = timed(
        spark,
        lambda: processor.process(
            tables.raw_batch(spark, stream.batch(cfg.maintenance_batch), w / "maint-batch", template), 10_000
        ),
    )
    tables.drop_batch(w / "maint-batch")

    n = cfg.maintenance_batches
    t = Table(
        f"b. After {n} batches of {cfg.maintenance_batch:,} events on a {cfg.maintenance_rows:,}-row table "
        "(merge-on-read), before and after maintenance",
        ["", "data files", "delete files", "snapshots", "count(*) s", "key lookup s"],
    )
    for label, (files, count_s, lookup_s) in (("before maintenance", before), ("after maintenance", after)):
        t.add(label, files["data_files"], files["delete_files"], files["snapshots"], secs(count_s), secs(lookup_s))
    half = max(1, min(5, n // 2))
    first = statistics.mean(x.seconds for x in per_batch[:half])
    last = statistics.mean(x.seconds for x in per_batch[-half:])
    t.notes.append(
        f"Maintenance: rewrite_data_files {maint_times[0]:.1f} s, rewrite_position_delete_files {maint_times[1]:.1f} s, "
        f"expire_snapshots {maint_times[2]:.1f} s. Table after maintenance: {verdict.summary()}. "
        f"Time per batch: first {half} batches {first:.2f} s, last {half} {last:.2f} s, the batch after maintenance "
        f"{after_batch.seconds:.2f} s. Reads are medians of 3 runs."
    )
    spark.sql(f"DROP TABLE {table} PURGE")
    return t


def run(spark: SparkSession, cfg: Config, rss: RssSampler) -> list[Table]:
    rss.mark()
    runs = [_grow(spark, cfg, name, ddl, i) for i, (name, ddl) in enumerate(LAYOUTS.items())]
    t = Table(
        f"b. Time per batch of {cfg.growth_batch:,} events as the table grows (merge-on-read)",
        [
            "layout",
            "table rows",
            "s/batch (median)",
            "events/s",
            "CPU s/batch",
            "data files",
            "delete files",
            "vs smallest",
        ],
    )
    for r in runs:
        base = statistics.median(x.seconds for x in r.times[cfg.growth_sizes[0]])
        for size in cfg.growth_sizes:
            med = statistics.median(x.seconds for x in r.times[size])
            f = r.files[size]
            t.add(
                r.name,
                f"{size:,}",
                secs(med),
                rate(cfg.growth_batch, med),
                secs(statistics.median(x.cpu_seconds for x in r.times[size])),
                f["data_files"],
                f["delete_files"],
                f"{med / base:.2f}x time for {size / cfg.growth_sizes[0]:.0f}x rows",
            )
    t.notes.append(
        f"{cfg.growth_batches_per_size} measured batches per size"
        + (" after one unmeasured batch" if cfg.growth_warmup else " (no unmeasured batch first: quick mode)")
        + "; rows are bulk-loaded "
        "between sizes. Final tables: " + "; ".join(f"{r.name}: {r.correct}" for r in runs) + "."
    )
    maint = _maintenance(spark, cfg)
    maint.notes.append(f"Peak RSS of the process tree during section b: {mib(rss.peak())}.")
    return [t, maint]
