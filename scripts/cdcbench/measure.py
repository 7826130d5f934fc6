"""Measurement helpers: wall time, Spark jobs per call, process-tree RSS, Iceberg table files."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import itertools
import os
import platform
import threading
import time
from collections.abc import Callable, Iterator, Mapping
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


def _tree_with_parents(pid: int) -> list[tuple[int, int | None]]:
    """(pid, its parent in the tree) for `pid` and all its descendants, parents first."""
    tree: list[tuple[int, int | None]] = []
    todo: list[tuple[int, int | None]] = [(pid, None)]
    while todo:
        p, parent = todo.pop()
        tree.append((p, parent))
        todo += [(c, p) for c in _children(p)]
    return tree


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (the Python driver, its JVM, Python workers)."""
    return [p for p, _ in _tree_with_parents(pid)]


# kcmp(2) syscall numbers: KCMP_VM tells whether two processes share one address space.
_KCMP_NR = {"x86_64": 312, "aarch64": 272}.get(platform.machine())
_KCMP_VM = 1
_PF_FORKNOEXEC = 0x40  # /proc/<pid>/stat flags: forked, has not exec'd yet


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _kcmp_vm(a: int, b: int) -> bool | None:
    """Whether `a` and `b` share their address space; None where kcmp is not allowed (seccomp, e.g.
    Docker's default profile without CAP_SYS_PTRACE) or not known for this architecture."""
    if _KCMP_NR is None:
        return None
    r = _libc().syscall(_KCMP_NR, a, b, _KCMP_VM, 0, 0)
    if r >= 0:
        return r == 0
    return False if ctypes.get_errno() == errno.ESRCH else None  # ESRCH: gone, nothing to count twice


def shares_memory_by_stat(child: int, parent: int) -> bool:
    """Without kcmp: a child that has not exec'd and has its parent's virtual size is taken to run on
    the parent's memory (a fork's copy-on-write pages are shared with the parent just as well)."""
    try:
        flags = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[6])
        if not flags & _PF_FORKNOEXEC:
            return False
        return _statm(child)[0] == _statm(parent)[0]
    except (OSError, IndexError, ValueError):
        return False


def shares_memory(child: int, parent: int) -> bool:
    """Whether `child` runs on `parent`'s address space: a vfork()/posix_spawn() child until its exec
    (how a JVM starts `chmod` for Hadoop's local file system, how Python's subprocess starts a
    program). Its statm then reports the parent's resident pages."""
    same = _kcmp_vm(child, parent)
    return shares_memory_by_stat(child, parent) if same is None else same


def _statm(pid: int) -> list[int]:
    return [int(x) for x in Path(f"/proc/{pid}/statm").read_text().split()]


def tree_rss(pid: int, shares: Callable[[int, int], bool] = shares_memory) -> int:
    """Resident bytes of the process tree: statm's resident pages of each address space once. A child
    on its parent's address space (`shares`) is not counted again; pages that two address spaces
    share (libraries, a fork's copy-on-write pages) count in each."""
    total = 0
    for p, parent in _tree_with_parents(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):  # the process may have exited
            if parent is None or not shares(p, parent):
                total += _statm(p)[1] * _PAGE
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


def trees_cpu(pids: Mapping[str, int]) -> dict[str, float]:
    """`tree_cpu` of several named process trees at one moment (the job, the stack's components)."""
    return {name: tree_cpu(pid) for name, pid in pids.items()}


def cpu_spent(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds each named tree used between two `trees_cpu` readings. A tree missing from
    either reading is left out rather than counted from zero (its whole life's CPU)."""
    return {name: after[name] - before[name] for name in before if name in after}


def cpu_split_cells(spent: Mapping[str, float], changes: int, job: str = "job") -> list[str]:
    """Cells that keep the job's CPU apart from the stack's: job CPU-s, job CPU-s per million
    changes, and each other tree's CPU-s by name (`connect 3.1, kafka 2.0, mariadb 1.4`)."""
    if job not in spent:
        raise ValueError(f"no CPU reading of {job!r} among {sorted(spent)}")
    others = ", ".join(f"{name} {spent[name]:.1f}" for name in sorted(spent) if name != job)
    per_million = f"{spent[job] / changes * 1e6:,.0f}" if changes > 0 else "-"
    return [f"{spent[job]:.1f}", per_million, others or "-"]


class RssSampler:
    """Samples the RSS of a process tree in a thread; `peak()` since the last `mark()`."""

    def __init__(
        self, pid: int | None = None, interval: float = 0.2, shares: Callable[[int, int], bool] = shares_memory
    ) -> None:
        self.pid = pid or os.getpid()
        self.interval = interval
        self.shares = shares
        self._peak = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = tree_rss(self.pid, self.shares)
            with self._lock:
                self._peak = max(self._peak, rss)
            self._stop.wait(self.interval)

    def mark(self) -> None:
        with self._lock:
            self._peak = tree_rss(self.pid, self.shares)

    def peak(self) -> int:
        with self._lock:
            return max(self._peak, tree_rss(self.pid, self.shares))

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
