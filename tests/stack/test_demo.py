"""`make demo` itself, as a user runs it: its own state directory and ports, so it runs beside the
other stack tests' components in any order."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from processes import free_port

pytestmark = pytest.mark.stack


def test_demo_runs_the_walkthrough_and_reports_a_match(stack_dir: Path) -> None:
    env = {
        **os.environ,
        "CDC_STACK_DIR": str(stack_dir),
        "CDC_STACK_MARIADB_PORT": str(free_port()),
        "CDC_STACK_KAFKA_PORT": str(free_port()),
        "CDC_STACK_KAFKA_CONTROLLER_PORT": str(free_port()),
        "CDC_STACK_CONNECT_PORT": str(free_port()),
    }
    res = subprocess.run(
        [str(Path(sys.executable).parent / "demo")], env=env, capture_output=True, text=True, timeout=900
    )
    out = res.stdout
    assert res.returncode == 0, out[-4000:] + res.stderr[-2000:]
    for text in ("[demo 7/7]", "p95", "[demo] PASS: source and lake match"):
        assert text in out
    # The schema history ends with the schema that ADD COLUMN status made.
    schemas = re.findall(r"^    schema (\d+): (.*)$", out, re.M)
    assert len(schemas) >= 2 and schemas[-1][1].endswith(", status"), schemas
    assert "DIFFERENT" not in out
    # Every probe change is seen in the lake (a missed one also holds the demo a minute).
    assert re.search(r"^  end-to-end latency \(.*\), 20 changes, ", out, re.M), out[-2000:]
    assert not list((stack_dir / "run").glob("*.json")), "the demo stops every process it started"
