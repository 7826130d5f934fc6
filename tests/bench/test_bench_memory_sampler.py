"""The benchmark's peak memory (cdcbench.measure.RssSampler) on real processes: a parent and children
that hold known amounts of memory while the parent keeps starting programs, as a JVM does for
Hadoop's `chmod` (each start is a vfork child that runs on the parent's memory until its exec)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cdcbench import measure

MIB = 1 << 20

# The parent holds 256 MiB and two children 48 MiB each; on "go" four threads start `true` for 1 s.
TREE = """
import subprocess, sys, threading, time
held = bytearray(256 << 20)
for i in range(0, len(held), 4096):
    held[i] = 1
hold = "b = bytearray(48 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\nprint(flush=True)\\ninput()"
kids = [subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
for k in kids:
    k.stdout.readline()
print(" ".join(str(k.pid) for k in kids), flush=True)
input()
end = time.monotonic() + 1.0
def spawn():
    while time.monotonic() < end:
        subprocess.run(["true"])
threads = [threading.Thread(target=spawn) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
for k in kids:
    k.communicate(b"\\n")
"""


def vm_rss(pid: int) -> int:
    """The kernel's own VmRSS of one process, in bytes."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_peak_rss_of_a_tree_that_starts_programs_is_what_its_processes_hold() -> None:
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        kids = [int(p) for p in proc.stdout.readline().split()]
        truth = sum(vm_rss(p) for p in [proc.pid, *kids])  # all allocated, nothing started yet
        # side by side on the same tree: kcmp, and the check used where kcmp is not allowed
        samplers = {
            how: measure.RssSampler(proc.pid, interval=0.005, shares=shares)
            for how, shares in (("kcmp", measure.shares_memory), ("without kcmp", measure.shares_memory_by_stat))
        }
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(timeout=60)
        peaks = {how: s.peak() for how, s in samplers.items()}
        for s in samplers.values():
            s.stop()
    finally:
        proc.kill()
        proc.wait()
    assert truth > (256 + 2 * 48) * MIB
    # counting a vfork child's view of the parent's 256 MiB even once would be > 1.5x the truth
    for how, peak in peaks.items():
        assert truth * 0.95 <= peak <= truth * 1.1, f"{how}: peak {peak / MIB:.0f} MiB, truth {truth / MIB:.0f} MiB"
