"""a. The job's apply cost on the two Glue runtimes the template deploys: Glue 5.0's (Spark 3.5.4,
Iceberg 1.7.1; the runtime of Hudi, and of a stack deployed before 6.0) and Glue 6.0's (Spark 4.1.1,
Iceberg 1.11.0, the default). The same job code and the same batches (Parquet, written once) on an
Iceberg merge-on-read table of the same initial rows.

Two Sparks cannot share a JVM, so each run is a child process (cdcbench/formats.py's worker, started
with the runtime's pyspark: local/session.runtime_env), and the runtimes alternate over the rounds
(5.0, 6.0, then 6.0, 5.0, ...) so that a drift of the machine's load falls on both. Each child
applies a warm-up batch, then the measured ones, to a table of its own.
"""

from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path
from typing import Any

from . import formats
from .config import Config
from .formats import timing_cells
from .report import Table, ratio

log = logging.getLogger("cdcbench")
RUNTIMES = ("5.0", "6.0")


def run(spark: Any, cfg: Config, glue_scripts: Path, rounds: int = 2) -> list[Table]:
    from cdclake.local.session import GLUE_VERSION_ENV

    work = cfg.work / "runtimes"
    formats._write_batches(spark, cfg, work)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in RUNTIMES}
    for r in range(rounds):
        for version in RUNTIMES if r % 2 == 0 else RUNTIMES[::-1]:
            started, tag = time.monotonic(), f"iceberg-{version}-r{r}"
            runs[version].append(formats.run_worker(work, "iceberg", glue_scripts, tag, {GLUE_VERSION_ENV: version}))
            log.info("runtimes: Glue %s, round %d done in %.0f s", version, r + 1, time.monotonic() - started)
    return [_table(cfg, runs, n, rounds) for n in cfg.batch_sizes]


def _table(cfg: Config, runs: dict[str, list[dict[str, Any]]], n: int, rounds: int) -> Table:
    t = Table(
        f"a. The job on Glue 5.0's and Glue 6.0's runtime, batches of {n:,} change events ({n // 10:,} tombstones "
        f"more), Iceberg merge-on-read table of {cfg.table_rows:,} rows, 10 columns",
        ["Glue runtime", *formats.TIMING_COLUMNS, "vs Glue 5.0", "correct", "peak RSS MiB"],
    )  # fmt: skip
    times = {v: [x for r in rs for x in r["times"][str(n)]] for v, rs in runs.items()}
    med = {v: statistics.median(x["seconds"] for x in ts) for v, ts in times.items()}
    for version, ts in times.items():
        spark = runs[version][0]["spark"]
        t.add(
            f"Glue {version} (Spark {spark}, Iceberg {'1.7.1' if version == '5.0' else '1.11.0'})",
            *timing_cells(ts, n, med[version]),
            ratio(med["5.0"], med[version]),
            ", ".join(sorted({r["verdicts"].get(str(n), "n/a") for r in runs[version]})),
            f"{max(r['peak_rss'] for r in runs[version]) / (1 << 20):,.0f}",
        )
    t.notes.append(
        f"{len(times['6.0'])} measured batch(es) per runtime over {rounds} rounds, each round a child process per "
        "runtime (a warm-up batch, then the measured ones, on a table of its own), the runtimes alternating in "
        "order. CPU s = user+system time of the child's process tree (Python + JVM). Correctness is checked "
        "against the expected table state after the last batch of this size."
    )
    return t
