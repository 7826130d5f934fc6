"""Measurement helpers: wall time, Spark jobs per call, process-tree RSS, Iceberg table files."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

R = TypeVar("R")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):  # processes and threads come and go while we look
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out += [int(c) for c in (task / "children").read_text().split()]
    return out


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (the Python driver, its JVM, Python workers)."""
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += _children(p)
    return tree


def tree_rss(pid: int) -> int:
    """Resident bytes of the process tree (statm: resident pages)."""
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):  # the process may have exited
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * _PAGE
    return total


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by the process tree. Unlike wall time it hardly
    changes when other work shares the machine, so it is reported next to it."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / ticks


class RssSampler:
    """Samples the RSS of a process tree in a thread; `peak()` since the last `mark()`."""

    def __init__(self, pid: int | None = None, interval: float = 0.2) -> None:
        self.pid = pid or os.getpid()
        self.interval = interval
        self._peak = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = tree_rss(self.pid)
            with self._lock:
                self._peak = max(self._peak, rss)
            self._stop.wait(self.interval)

    def mark(self) -> None:
        with self._lock:
            self._peak = tree_rss(self.pid)

    def peak(self) -> int:
        with self._lock:
            return max(self._peak, tree_rss(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


_groups = itertools.count()


@dataclass
class Timed:
    seconds: float
    cpu_seconds: float
    spark_jobs: int
    value: Any = None


def timed(spark: Any, fn: Callable[[], R]) -> Timed:
    """Run `fn`, returning its wall time and how many Spark jobs it ran (status tracker)."""
    group = f"bench-{next(_groups)}"
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    pid = os.getpid()
    cpu0, t0 = tree_cpu(pid), time.perf_counter()
    try:
        value = fn()
    finally:
        seconds = time.perf_counter() - t0
        cpu = tree_cpu(pid) - cpu0
        sc.setLocalProperty("spark.jobGroup.id", None)
    return Timed(seconds, cpu, len(sc.statusTracker().getJobIdsForGroup(group)), value)


@dataclass
class JobTime:
    name: str  # call site, e.g. "collect at .../batch.py:177"
    seconds: float  # wall time of the job
    task_cpu_seconds: float  # CPU time of its tasks (excludes driver-side planning and commits)


@contextmanager
def job_log(spark: Any) -> Iterator[list[JobTime]]:
    """Every Spark job that ran inside the block, from the application status store (it is
    there with the UI off)."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    # Scala default arguments are not visible through Py4J: pass them all.
    no_tasks = sc._jvm.java.util.ArrayList()
    no_quantiles = sc._gateway.new_array(sc._jvm.double, 0)
    before = {j.jobId() for j in _jobs(store)}
    out: list[JobTime] = []
    yield out
    for j in sorted(_jobs(store), key=lambda j: j.jobId()):
        if j.jobId() in before:
            continue
        start, end = j.submissionTime(), j.completionTime()
        seconds = (end.get().getTime() - start.get().getTime()) / 1000 if start.isDefined() and end.isDefined() else 0.0
        cpu_ns = 0
        ids = j.stageIds()
        for i in range(ids.size()):
            attempts = store.stageData(ids.apply(i), False, no_tasks, False, no_quantiles)
            for a in range(attempts.size()):
                cpu_ns += attempts.apply(a).executorCpuTime()
        out.append(JobTime(str(j.name()), seconds, cpu_ns / 1e9))


def _jobs(store: Any) -> list[Any]:
    jl = store.jobsList(None)
    return [jl.apply(i) for i in range(jl.size())]


def table_files(spark: Any, table: str) -> dict[str, int]:
    """Live data files, delete files and snapshots of an Iceberg table."""
    files = {
        r["content"]: r["n"]
        for r in spark.sql(f"SELECT content, count(*) AS n FROM {table}.files GROUP BY content").collect()
    }
    snaps = spark.sql(f"SELECT count(*) AS n FROM {table}.snapshots").first()["n"]
    return {"data_files": files.get(0, 0), "delete_files": files.get(1, 0) + files.get(2, 0), "snapshots": snaps}


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"
