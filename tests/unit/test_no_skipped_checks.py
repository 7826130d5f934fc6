"""A test that skips (a missing tool, a missing jar) fails the run: make setup installs everything
the suite uses, so a skip can only mean an install step is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_run_with_a_skipped_test_fails_and_names_it(workers: list[str]) -> None:
    # Under tests/ so that tests/conftest.py applies; the name matches no test pattern.
    target = ROOT / "tests" / "unit" / f"_probe_skip_{os.getpid()}_{len(workers)}.py"
    target.write_text(
        "import pytest\n"
        "def test_needs_a_tool():\n"
        "    pytest.skip('no such tool')\n"
        "def test_passes():\n"
        "    assert True\n"
    )
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", *workers, str(target)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        target.unlink()
    assert res.returncode == pytest.ExitCode.TESTS_FAILED, res.stdout[-3000:] + res.stderr[-2000:]
    assert "1 test(s) skipped, which this suite does not allow (run make setup)" in res.stdout
    assert f"{target.name}::test_needs_a_tool" in res.stdout
