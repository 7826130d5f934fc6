"""run_bounded: the tables of a batch at once, results in table order, and what one table's
failure does to the others (cdclake/jobs/concurrency.py)."""

from __future__ import annotations

import threading
import time

import pytest
from cdclake.jobs.concurrency import MAX_AUTO, concurrency, run_bounded


def test_results_come_in_the_items_order_whatever_order_they_finish_in():
    def slow_first(x: int) -> int:
        time.sleep(0.05 * (5 - x))
        return x * 10

    assert run_bounded(slow_first, [1, 2, 3, 4], workers=4) == [10, 20, 30, 40]


def test_no_more_than_the_bound_run_at_once():
    running, peak, lock = 0, 0, threading.Lock()

    def track(_: int) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1

    run_bounded(track, list(range(8)), workers=3)
    assert peak == 3


def test_one_failure_stops_the_items_not_started_lets_the_running_finish_and_raises_the_first_in_order():
    started, finished = [], []
    gate = threading.Event()
    all_three = threading.Barrier(3)  # 0, 1 and 2 are running when 1 fails

    def apply(x: int) -> int:
        started.append(x)
        all_three.wait(5)
        if x == 1:
            raise RuntimeError("table 1 failed")
        if x == 2:
            gate.wait(5)  # still running when table 1 fails
            finished.append(x)
            raise RuntimeError("table 2 failed too")
        if x == 0:
            gate.wait(5)
            finished.append(x)
        return x

    threading.Timer(0.3, gate.set).start()
    with pytest.raises(RuntimeError, match="table 1 failed"):
        run_bounded(apply, list(range(6)), workers=3)
    assert sorted(started) == [0, 1, 2]  # 3, 4, 5 never started: the re-run applies them
    assert sorted(finished) == [0, 2]  # the running ones were not abandoned mid-commit


def test_one_worker_runs_in_the_calling_thread_in_order():
    seen = []
    run_bounded(lambda x: seen.append((x, threading.current_thread())), [3, 1, 2], workers=1)
    assert seen == [(3, threading.current_thread()), (1, threading.current_thread()), (2, threading.current_thread())]


def test_zero_means_the_cores_within_bounds():
    assert concurrency(0, 2) == 2
    assert concurrency(0, 64) == MAX_AUTO
    assert concurrency(0, 0) == 1
    assert concurrency(5, 64) == 5
