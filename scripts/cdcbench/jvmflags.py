"""Section j: JIT and garbage-collector flags for short-lived local JVMs (CDC_JVM_OPTIONS).

The test suite starts dozens of Spark JVMs (one per pytest worker, one per job subprocess) that
live for seconds to minutes. Each round runs the same workload once per flag set, in a fresh
process, interleaved (default, flags, default, flags, ...) so drift in the machine's load falls on
both sides: start a local Spark session, apply a few small batches with the job's BatchProcessor
(what a job-tier test does), and report the wall time and the CPU seconds of the process tree
(Python and its JVM).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .config import Config
from .report import Table

ROOT = Path(__file__).resolve().parents[2]

FLAG_SETS = {
    "JDK defaults (tiered C1+C2, G1)": "",
    "C1 only + serial GC (tests/conftest.py)": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def worker(work: str, batches: int, events: int) -> None:
    """One measured run, in its own process (CDC_JVM_OPTIONS is read when the JVM starts)."""
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.local.session import local_session

    from . import generator, tables
    from .measure import tree_cpu

    t0 = time.monotonic()
    w = Path(work)
    settings = tables.job_settings(w / "warehouse", "jvm", w, shuffle_partitions="2")
    spark = local_session(settings, app_name="cdc-bench-jvm", master="local[2]")
    processor = BatchProcessor(spark, settings)
    stream, template = generator.ChangeStream(1_000), generator.Template()
    for i in range(batches):
        processor.process(tables.raw_batch(spark, stream.batch(events), w / f"batch{i}", template), i)
    # Read before stopping: once the JVM has exited it is no longer part of the process tree.
    result = {"wall": time.monotonic() - t0, "cpu": tree_cpu(os.getpid())}
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


def _one(cfg: Config, flags: str, run: int, batches: int, events: int) -> dict[str, float]:
    work = cfg.work / "jvm" / f"run{run}"
    env = {k: v for k, v in os.environ.items() if k not in ("CDC_JVM_OPTIONS", "CDC_SPARK_DRIVER_MEMORY")}
    if flags:
        env["CDC_JVM_OPTIONS"] = flags
    code = "import sys; from cdcbench.jvmflags import worker; worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))"
    spec = importlib.util.find_spec("cdclake")  # the package --glue-scripts chose
    assert spec is not None and spec.origin is not None
    # The child imports that cdclake and these tools first (the venv's install comes after).
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(Path(spec.origin).parents[1]), str(ROOT / "scripts"), *inherited])
    args = [sys.executable, "-c", code, str(work), str(batches), str(events)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"section j: the workload failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def run(cfg: Config) -> list[Table]:
    rounds, batches, events = (1, 3, 500) if cfg.quick else (3, 6, 2_000)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in FLAG_SETS}
    for r in range(rounds):
        for i, (name, flags) in enumerate(FLAG_SETS.items()):
            res = _one(cfg, flags, r * len(FLAG_SETS) + i, batches, events)
            print(f"  j: round {r + 1}/{rounds}, {name}: {res['wall']:.1f} s wall, {res['cpu']:.1f} CPU s", flush=True)
            results[name].append(res)
    t = Table(
        f"j. Short-lived JVM flags: Spark session + {batches} batches of {events:,} changes, "
        f"{rounds} interleaved round(s), fresh process each (medians)",
        ["JVM flags", "wall s", "CPU s (Python + JVM)", "CPU vs defaults"],
    )
    base = statistics.median(x["cpu"] for x in results[next(iter(FLAG_SETS))])
    for name, runs in results.items():
        cpu = statistics.median(x["cpu"] for x in runs)
        t.add(name, f"{statistics.median(x['wall'] for x in runs):.1f}", f"{cpu:.1f}", f"{cpu / base - 1:+.0%}")
    t.notes.append("CPU is what matters when pytest workers, stacks and job subprocesses share two cores.")
    return [t]
