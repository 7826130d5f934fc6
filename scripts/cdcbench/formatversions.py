"""a. Iceberg format version 3 (deletion vectors) beside version 2 (position-delete files): the job,
merge-on-read, `--iceberg_format_version 2` and `3`, each on its own table of the same initial rows,
in the same process (Glue 6.0's Iceberg 1.11.0 writes both), on the same batches (Parquet, written
once), the order of the two alternating batch by batch.

Per batch: wall and CPU time, and the delete files its commit added (entries in the table's delete
manifests; a v3 commit puts the deletion vectors of all the data files it touches in one Puffin
file, so the Puffin files are counted too). After the batches: the live delete files, a full read
of each table (median of 3, alternated), the job's maintenance (`maintain_table`, every action
forced, the job's default limits) with its CPU, and the same read after it.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from typing import Any

from cdclake.jobs.batch import BatchProcessor
from cdclake.lake.formats.iceberg import Iceberg
from cdclake.lake.maintenance import MaintenancePolicy, maintain_table

from . import generator, tables
from .checker import check_table
from .config import Config
from .formats import TIMING_COLUMNS, timing_cells
from .measure import Timed, timed
from .report import Table

log = logging.getLogger("cdcbench")
VERSIONS = ("2", "3")


@dataclass
class Run:
    """One format version's table and what was measured on it."""

    version: str
    table: str
    processor: BatchProcessor
    times: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    added: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # (entries, files) per batch
    verdicts: dict[int, str] = field(default_factory=dict)
    reads: dict[str, tuple[float, float]] = field(default_factory=dict)  # (s, CPU s) before / after maintenance
    live: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # (entries, files, bytes)
    data: dict[str, tuple[int, int]] = field(default_factory=dict)  # (data files, bytes)
    maintenance: Timed | None = None


def delete_files(spark: Any, table: str) -> set[tuple[str, int, int]]:
    """The table's live delete files: (file, offset of the blob or 0, bytes of the file)."""
    spark.catalog.refreshTable(table)
    rows = spark.sql(
        f"SELECT file_path, coalesce(content_offset, 0) AS o, file_size_in_bytes AS b FROM {table}.delete_files"
    ).collect()
    return {(r["file_path"], r["o"], r["b"]) for r in rows}


def live(entries: set[tuple[str, int, int]]) -> tuple[int, int, int]:
    """(delete entries, physical files, bytes of those files)."""
    files = {(f, b) for f, _, b in entries}
    return len(entries), len(files), sum(b for _, b in files)


def _apply(run: Run, raw: Any, batch_id: int, n: int, measured: bool) -> None:
    spark = raw.sparkSession
    before = delete_files(spark, run.table)
    t = timed(spark, lambda: run.processor.process(raw, batch_id))
    new = delete_files(spark, run.table) - before
    log.info("format version %s, %d events: %.2fs, %d delete entries added", run.version, n, t.seconds, len(new))
    if measured:
        run.times.setdefault(n, []).append(
            {"seconds": t.seconds, "cpu_seconds": t.cpu_seconds, "spark_jobs": t.spark_jobs}
        )
        run.added.setdefault(n, []).append(live(new)[:2])


def data_files(spark: Any, table: str) -> tuple[int, int]:
    """(live data files, their bytes)."""
    r = spark.sql(f"SELECT count(*) AS n, coalesce(sum(file_size_in_bytes), 0) AS b FROM {table}.data_files").first()
    return int(r["n"]), int(r["b"])


def _read(spark: Any, runs: list[Run], label: str, times: int = 5) -> None:
    """A full read of each table (every column, deletes applied), `times` times alternated; the
    median wall and CPU seconds."""
    reads: dict[str, list[Timed]] = {r.version: [] for r in runs}
    for i in range(times):
        for r in runs if i % 2 == 0 else runs[::-1]:
            sql = f"SELECT count(*), sum(xxhash64(*)) FROM {r.table}"
            reads[r.version].append(timed(spark, lambda sql=sql: spark.sql(sql).collect()))
    for r in runs:
        ts = reads[r.version]
        r.reads[label] = statistics.median(t.seconds for t in ts), statistics.median(t.cpu_seconds for t in ts)
        r.live[label] = live(delete_files(spark, r.table))
        r.data[label] = data_files(spark, r.table)


def _runs(spark: Any, cfg: Config, template: generator.Template) -> list[Run]:
    out = []
    for version in VERSIONS:
        settings = tables.job_settings(
            cfg.work / "warehouse", f"fv{version}", cfg.work, shuffle_partitions=str(cfg.shuffle_partitions),
            write_mode="merge-on-read", iceberg_format_version=version,
        )  # fmt: skip
        table = tables.create_job_table(spark, settings, cfg.table_rows, template, cfg.work)
        out.append(Run(version, table, BatchProcessor(spark, settings)))
    return out


def run(spark: Any, cfg: Config) -> list[Table]:
    template = generator.Template()
    stream = generator.ChangeStream(cfg.table_rows)
    runs = _runs(spark, cfg, template)
    plan = [(cfg.batch_sizes[0], False)] + [(n, True) for n in cfg.batch_sizes for _ in range(cfg.batches_per_size)]
    for i, (n, measured) in enumerate(plan):
        path = cfg.work / "fv-batch"
        raw = tables.raw_batch(spark, stream.batch(n), path, template)
        for r in runs if i % 2 == 0 else runs[::-1]:
            _apply(r, raw, i + 1, n, measured)
        tables.drop_batch(path)
        if measured and (i == len(plan) - 1 or plan[i + 1][0] != n):
            for r in runs:
                r.verdicts[n] = check_table(spark, r.table, stream.expected).summary()
    _read(spark, runs, "before")
    for r in runs:
        r.maintenance = timed(
            spark, lambda r=r: maintain_table(spark, r.table, MaintenancePolicy(), Iceberg(), force=True)
        )
        report = r.maintenance.value
        log.info("format version %s: %s", r.version, report.line())
    _read(spark, runs, "after")
    after = {r.version: check_table(spark, r.table, stream.expected).summary() for r in runs}
    return [_batches_table(cfg, runs, n) for n in cfg.batch_sizes] + [_maintenance_table(cfg, runs, after)]


def _batches_table(cfg: Config, runs: list[Run], n: int) -> Table:
    t = Table(
        f"a. Iceberg format version 2 and 3, the job merge-on-read, batches of {n:,} change events ({n // 10:,} "
        f"tombstones more), table of {cfg.table_rows:,} rows, 10 columns",
        ["format version", *TIMING_COLUMNS, "delete entries added per batch", "delete files added per batch",
         "correct"],
    )  # fmt: skip
    for r in runs:
        ts = r.times[n]
        entries = statistics.median(a for a, _ in r.added[n])
        files = statistics.median(f for _, f in r.added[n])
        kind = "position-delete files" if r.version == "2" else "deletion vectors"
        t.add(f"v{r.version} ({kind})", *timing_cells(ts, n, statistics.median(x["seconds"] for x in ts)),
              f"{entries:,.0f}", f"{files:,.0f}", r.verdicts.get(n, "n/a"))  # fmt: skip
    t.notes.append(
        f"{len(runs[0].times[n])} measured batch(es) per version after one warm-up batch, in one Spark session, the "
        "two tables' order alternating per batch. CPU s = user+system time of the process tree (Python + JVM). "
        "Delete entries: the delete files a commit added to the table's delete manifests (v3: one deletion vector "
        "per data file touched); delete files: the physical files holding them (v3: Puffin files)."
    )
    return t


def _maintenance_table(cfg: Config, runs: list[Run], after: dict[str, str]) -> Table:
    t = Table(
        "a. Iceberg format version 2 and 3: live delete files and a full read, before and after maintenance",
        ["format version", "", "data files / MiB", "delete entries / files / KiB", "full read s (CPU s)",
         "maintenance s (CPU s)", "correct"],
    )  # fmt: skip
    for r in runs:
        m = r.maintenance
        assert m is not None
        for label in ("before", "after"):
            (n, size), (entries, files, dsize) = r.data[label], r.live[label]
            read_s, read_cpu = r.reads[label]
            t.add(f"v{r.version}", f"{label} maintenance", f"{n:,} / {size / (1 << 20):,.1f}",
                  f"{entries:,} / {files:,} / {dsize / 1024:,.0f}", f"{read_s:.2f} ({read_cpu:.2f})",
                  f"{m.seconds:.2f} ({m.cpu_seconds:.2f})" if label == "after" else "-",
                  after[r.version] if label == "after" else r.verdicts[max(r.verdicts)])  # fmt: skip
    t.notes.append(
        "Full read: `SELECT count(*), sum(xxhash64(*))` over the table (every column, deletes applied), median of 5 "
        "runs alternated between the tables. Maintenance: the job's `maintain_table` with every action forced "
        "(compaction, delete-file rewrite, manifest rewrite, snapshot expiry) and the job's default limits."
    )
    return t
