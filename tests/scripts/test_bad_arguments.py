"""Every command answers a wrong argument with one line that names it and the fix, exit code 2,
before it writes anything; the job scripts answer --help with their arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from cdclake.common.settings import ARGS, MAINTENANCE_JOB_ARGS  # noqa: E402

JOB = "glue_scripts/cdc_lake_job.py"
MAINTENANCE = "glue_scripts/cdc_maintenance_job.py"


def job_run(out: Path) -> list[str]:
    """A valid local run of the streaming job, writing only under `out`."""
    (out / "in").mkdir(parents=True, exist_ok=True)
    return [
        "--source", "files", "--files_path", str(out / "in"), "--catalog_type", "hadoop",
        "--warehouse", str(out / "wh"), "--checkpoint_location", str(out / "cp"), "--dead_letter_path", str(out / "dl"),
    ]  # fmt: skip


# command, its arguments (`OUT`: a folder the command must not create), the message expected
CASES: list[tuple[str, list[str], str]] = [
    (JOB, ["--sourc", "files"], "unknown argument --sourc: did you mean --source?"),
    (JOB, ["JOB", "--max_offsets_per_trigger", "lots"], "--max_offsets_per_trigger must be an integer, got 'lots'"),
    (JOB, ["JOB", "--write_mode", "sometimes"], "--write_mode must be one of merge-on-read, copy-on-write"),
    (JOB, ["JOB", "--files_path", "OUT/nothing"], "/nothing is not a directory"),
    (JOB, ["--source", "files", "--files_path", "OUT"], "--warehouse is required"),
    (JOB, ["--source"], "argument --source has no value"),
    (MAINTENANCE, ["--warehouse", "OUT", "--tabels", "t"], "unknown argument --tabels: did you mean --tables?"),
    (MAINTENANCE, ["--warehouse", "OUT", "--force", "maybe"], "--force must be true or false, got 'maybe'"),
    (MAINTENANCE, ["--tables", "t"], "--warehouse is required"),
    (
        "bench",
        ["--sections", "z", "--work", "OUT"],
        "--sections 'z': choose a comma-separated subset of a, b, c",
    ),
    ("bench", ["--quick", "--work", "OUT", "--methods", "fast"], "unknown --methods ['fast']"),
    (
        "bench",
        ["--work", "OUT", "--batch-sizes", "lots"],
        "--batch-sizes 'lots': comma-separated whole numbers",
    ),
    ("apply-sql", [], "the following arguments are required: file"),
    ("apply-sql", ["x.sql", "--source", "oracle"], "argument --source: invalid choice: 'oracle'"),
    ("reconcile", ["--wait", "soon"], "argument --wait: invalid float value: 'soon'"),
    ("reconcile", ["--tabel", "t"], "unrecognized arguments: --tabel"),
    ("demo", ["--source", "oracle"], "argument --source: invalid choice: 'oracle'"),
    ("local-job", [], "the following arguments are required: command"),
    ("local-job", ["start", "--bogus"], "unrecognized arguments: --bogus"),
    ("local-stack", ["up", "--bogus"], "unrecognized arguments: --bogus"),
    ("local-stack", ["sideways"], "argument command: invalid choice: 'sideways'"),
    ("build-artifacts", ["--out", "OUT", "--source-engine", "oracle"], "invalid choice: 'oracle'"),
    ("deploy", ["--bogus"], "unrecognized arguments: --bogus"),
    ("destroy", ["--bogus"], "unrecognized arguments: --bogus"),
    ("deploy", ["--wait-minutes", "long"], "argument --wait-minutes: 'long' is not a number of minutes"),
    ("deploy", ["--wait-minutes", "0"], "argument --wait-minutes: '0': give a number of minutes above 0"),
    ("destroy", ["--region", ""], "--region (or AWS_REGION) is required"),
    ("doctor", [], "the following arguments are required: stack"),
    ("doctor", ["cdc-lake", "--bogus"], "unrecognized arguments: --bogus"),
    ("replay", [], "give files_path (a folder to replay) or --resume TABLE, one of them"),
    ("replay", ["OUT", "--timeout-minutes", "soon"], "argument --timeout-minutes: 'soon' is not a number"),
    ("glue-container", ["--dry-run", "--", "--sourc", "files"], "unknown argument --sourc"),
    ("scripts/setup-local", ["--bogus"], "unknown argument --bogus: it takes no arguments"),
    ("scripts/setup-stack", ["--bogus"], "unknown argument --bogus: it takes no arguments"),
    ("scripts/setup-deploy", ["--bogus"], "unknown argument --bogus: it takes no arguments"),
]


def run(command: str, args: list[str]) -> subprocess.CompletedProcess:
    if command.endswith(".py"):
        exe = [sys.executable, command]
    else:  # a set-up script, or one of the commands installed into the venv (pyproject.toml)
        exe = [command if command.startswith("scripts/") else str(Path(sys.executable).parent / command)]
    return subprocess.run(
        [*exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize(("command", "args", "message"), CASES, ids=[f"{c} {' '.join(a)}" for c, a, _ in CASES])
def test_wrong_argument_is_one_line_exit_2_and_nothing_written(command, args, message, tmp_path):
    out = tmp_path / "out"
    resolved: list[str] = []
    for a in args:
        resolved += job_run(tmp_path) if a == "JOB" else [a.replace("OUT", str(out))]
    proc = run(command, resolved)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, lines)
    assert len(lines) == 1 and message in lines[0], lines
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) in ([], ["in"])


@pytest.mark.parametrize(("script", "args"), [(JOB, ARGS), (MAINTENANCE, MAINTENANCE_JOB_ARGS)])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_job_script_answers_help_with_each_argument_its_default_and_meaning(script, args, flag):
    proc = run(script, [flag])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  --")}
    assert list(rows) == [f"--{a.name}" for a in args]
    for a in args:
        assert a.help in rows[f"--{a.name}"]
        assert (f"[{a.default}]" in rows[f"--{a.name}"]) == bool(a.default)
