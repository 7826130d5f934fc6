"""Section c keeps the job's CPU apart from the stack's (MariaDB, Kafka, Connect): each named process
tree is read on its own, a reading's difference is per tree, and the cells name every tree."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cdcbench.measure import cpu_spent, cpu_split_cells, trees_cpu

# spins 0.6 CPU-s, says so, then sleeps
BUSY = (
    "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
    "print('spun', flush=True)\ntime.sleep(30)"
)


def test_each_tree_is_charged_only_its_own_cpu():
    busy = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        before = trees_cpu({"job": busy.pid, "kafka": idle.pid})
        assert busy.stdout is not None and busy.stdout.readline() == "spun\n"
        spent = cpu_spent(before, trees_cpu({"job": busy.pid, "kafka": idle.pid}))
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()
    assert spent["job"] >= 0.5
    assert spent["kafka"] < 0.1


def test_a_tree_absent_from_one_reading_is_left_out_not_counted_from_zero():
    spent = cpu_spent({"job": 10.0, "connect": 50.0}, {"job": 12.5, "connect": 51.0, "registry": 40.0})

    assert spent == {"job": 2.5, "connect": 1.0}


def test_cells_give_the_job_per_million_changes_and_each_component_by_name():
    cells = cpu_split_cells({"mariadb": 1.44, "job": 6.0, "kafka": 2.0, "connect": 3.06}, changes=12_000)

    assert cells == ["6.0", "500", "connect 3.1, kafka 2.0, mariadb 1.4"]


def test_cells_refuse_a_reading_without_the_job():
    with pytest.raises(ValueError, match="no CPU reading of 'job' among \\['kafka'\\]"):
        cpu_split_cells({"kafka": 1.0}, changes=10)
