"""The fixed-cost row of `bench` (section a, method `fixed`) flags a small batch that got
slower than at the pinned commit, and only when both its wall time and its CPU time did."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from cdcbench.fixedcost import PINNED, verdict  # noqa: E402
from cdcbench.measure import Timed  # noqa: E402


def _runs(*pairs: tuple[float, float]) -> list[Timed]:
    return [Timed(seconds=w, cpu_seconds=c, spark_jobs=10) for w, c in pairs]


def test_a_small_batch_slower_in_wall_and_cpu_than_the_pinned_commit_is_a_regression():
    pinned = _runs((1.0, 2.0), (1.1, 2.1), (0.9, 1.9))
    slower = _runs((1.5, 3.0), (1.6, 3.1), (1.4, 2.9))
    assert verdict(slower, pinned).startswith("REGRESSION: 1.50x the wall time, 1.50x the CPU")


def test_a_batch_slowed_in_wall_time_only_by_a_busy_machine_is_not_flagged():
    pinned = _runs((1.0, 2.0), (1.1, 2.1), (0.9, 1.9))
    noisy = _runs((1.5, 2.0), (1.6, 2.1), (1.4, 1.9))
    assert verdict(noisy, pinned) == "ok"
    assert verdict(pinned, pinned) == "ok"


def test_the_pinned_commit_exists_in_the_repository():
    found = subprocess.run(["git", "cat-file", "-t", PINNED], cwd=ROOT, capture_output=True, text=True)
    assert found.stdout.strip() == "commit"
