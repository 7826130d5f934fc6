"""The local job's figures, read from the CloudWatch embedded-metric-format lines in its log: the
same lines, metric names and dimensions the dashboard on AWS shows (cdclake/common/metrics.py).

    status                 a table that refreshes every 2 s (Ctrl-C ends it)
    status --once          print it once (for scripts and tests)
    status --log FILE      read another job log (default: the local stack's, logs/job.log)

Counts are totals since the job's latest start (the log's lines after it); the state, the lag and
the seconds are the latest batch's. Exit code 0, 1 when the log has no metrics line yet.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdclake.common.metrics import JOB, MAINTENANCE_METRICS, TABLE, parse
from cdcstack import plumbing, sources

from cdctools import cli

# The per-table counts a table adds up over batches; the others are the latest batch's.
SUMMED = ("Inserts", "Updates", "Deletes", "DeadLetters", "Commits")


@dataclass
class Figures:
    """What the log's EMF lines say: per (job, table) and per job, and the maintenance runs."""

    tables: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    maintenance: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    def add(self, obj: dict[str, Any]) -> None:
        names = {m["Name"] for d in obj["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
        job, table = obj.get(JOB, ""), obj.get(TABLE)
        if names & set(MAINTENANCE_METRICS):
            self.maintenance[(job, table or "")] = obj
        elif table is None:
            b = self.batches.setdefault(job, {"Records": 0, "BatchDeadLetters": 0, "batches": 0})
            b["Records"] += obj.get("Records", 0)
            b["BatchDeadLetters"] += obj.get("BatchDeadLetters", 0)
            b["batches"] += 1
            b.update({k: obj.get(k) for k in ("Batch", "StoppedTables", "BatchSeconds", "BehindSourceSeconds")})
        else:
            row = self.tables.setdefault((job, table), {k: 0 for k in SUMMED})
            for k in SUMMED:
                row[k] += obj.get(k, 0)
            row.update({k: obj[k] for k in ("Batch", "Stopped", "ApplySeconds") if k in obj})


def since_latest_start(text: str) -> str:
    """The log's part written by the job's latest start (local-stack marks each start)."""
    return text.rsplit(f"local-stack starts {plumbing.JOB}", 1)[-1]


def read_figures(lines: Iterable[str]) -> Figures:
    figures = Figures()
    for line in lines:
        obj = parse(line)
        if obj is not None and "_aws" in obj:
            figures.add(obj)
    return figures


def render(f: Figures) -> str:
    """The figures as text: one line per job's latest batch, one row per table, then maintenance."""
    out = []
    for job, b in sorted(f.batches.items()):
        lag = b.get("BehindSourceSeconds")
        out.append(
            f"job {job}: {b['batches']} batch(es), latest {b.get('Batch')} | {b['Records']} records | "
            f"{b['BatchDeadLetters']} dead letters | latest batch {b.get('BatchSeconds', 0):.1f} s | "
            f"behind source {'-' if lag is None else f'{lag:.1f} s'} | {b.get('StoppedTables', 0)} table(s) stopped"
        )
    head = ("table", "state", "inserts", "updates", "deletes", "dead", "commits", "batch", "apply s")
    rows = [
        (t, "STOPPED" if r.get("Stopped") else "following", *(str(r[k]) for k in SUMMED), str(r.get("Batch", "")),
         f"{r.get('ApplySeconds', 0):.2f}")
        for (_, t), r in sorted(f.tables.items())
    ]  # fmt: skip
    if rows:
        out += _columns(head, rows, left=2)
    if f.maintenance:
        out += [""] if out else []
        mhead = ("maintained table", "data files", "delete files", "failed", "seconds")
        mrows = [
            (t, str(m.get("DataFiles", "-")), str(m.get("DeleteFiles", "-")), "yes" if m.get("MaintenanceFailed") else "no",
             f"{m.get('MaintenanceSeconds', 0):.1f}")
            for (_, t), m in sorted(f.maintenance.items())
        ]  # fmt: skip
        out += _columns(mhead, mrows)
    return "\n".join(out)


def _columns(head: tuple[str, ...], rows: list[tuple[str, ...]], left: int = 1) -> list[str]:
    """Aligned columns: the first `left` to the left (names), the others to the right (numbers)."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(row: tuple[str, ...]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(cells))

    return [fmt(head), *(fmt(r) for r in rows)]


def snapshot(log: Path) -> tuple[str, bool]:
    """The table for the log as it is now, and whether it had any figure."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return f"no job log at {log} (start the job: local-job start)", False
    figures = read_figures(since_latest_start(text).splitlines())
    if not (figures.batches or figures.maintenance):
        return f"no batch in {log} yet (the job prints its figures after each batch)", False
    return render(figures), True


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(prog="status", description=__doc__.split("\n\n")[0])
    parser.add_argument("--once", action="store_true", help="print the table once and exit")
    parser.add_argument("--log", type=Path, help="the job log to read (default: the local stack's job log)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default 2)")
    parser.add_argument("--source", choices=sorted(sources.ENGINES), help="the stack whose job log to read")
    args = parser.parse_args(argv)
    log = args.log or sources.stack_config(args.source).log(plumbing.JOB)
    if args.once:
        text, ok = snapshot(log)
        print(text)
        return 0 if ok else 1
    try:
        while True:
            text, _ = snapshot(log)
            print(f"\033[H\033[J{time.strftime('%H:%M:%S')}  {log}\n{text}", flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
