"""The tables of a batch applied at once: each is an independent commit, so their writes run from a
bounded thread pool (Spark takes jobs from several threads; a table's own steps stay in order).

Failure semantics: the first table that fails stops the tables not started yet; the ones already
running finish (a commit is atomic: it lands whole or not at all); then the batch fails with the
failure of the first table, in table order, that failed. The batch runs again from its checkpoint,
and the tables that committed take their changes again as no-ops (the MERGE's position guard).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_AUTO = 8  # `--table_concurrency 0`: the executors' cores, at most this (the driver plans every write)


def concurrency(configured: int, cores: int) -> int:
    """How many tables run at once: `configured`, or for 0 the cores (at least 1, at most MAX_AUTO)."""
    return configured if configured > 0 else max(1, min(cores, MAX_AUTO))


class _NotStarted(Exception):
    """An item not started because another one failed first."""


def run_bounded(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    wrap: Callable[[Callable[[T], R]], Callable[[T], R]] = lambda f: f,
) -> list[R]:
    """`fn` of every item, at most `workers` at a time, results in the items' order. `wrap` wraps
    `fn` in the calling thread (to carry Spark's thread-local job properties into the pool)."""
    if workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    target = wrap(fn)
    failed = threading.Event()

    def guarded(x: T) -> R:
        if failed.is_set():
            raise _NotStarted
        try:
            return target(x)
        except BaseException:
            failed.set()  # before this worker takes the next item
            raise

    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="cdc-table") as pool:
        futures: list[Future[R]] = [pool.submit(guarded, x) for x in items]
        wait(futures)
    for f in futures:
        e = f.exception()
        if e is not None and not isinstance(e, _NotStarted):
            raise e
    return [f.result() for f in futures]
