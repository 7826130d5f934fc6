"""scripts/check_pins.py: what the set-up scripts install again although their last install finished."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_pins.py"


def run(req: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(req)], capture_output=True, text=True, timeout=60)


def test_installed_pins_through_an_include_report_nothing(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text(f"pytest=={metadata.version('pytest')}  # the runner\n")
    (tmp_path / "req.txt").write_text(f"# comment\n-r base.txt\n\npyspark[sql]=={metadata.version('pyspark')}\n")
    res = run(tmp_path / "req.txt")
    assert res.returncode == 0 and res.stdout.strip() == "", res.stdout + res.stderr


def test_a_package_removed_or_at_another_version_is_reported_even_inside_an_include(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("pytest==0.0.1\n")
    (tmp_path / "req.txt").write_text("-r base.txt\nno-such-package-cdclake==1.0\n")
    res = run(tmp_path / "req.txt")
    assert res.returncode == 0
    assert res.stdout.splitlines() == [
        f"pytest==0.0.1 (installed: {metadata.version('pytest')})",
        "no-such-package-cdclake==1.0 (installed: none)",
    ]


def test_the_project_requirements_are_all_installed_after_make_setup() -> None:
    res = run(ROOT / "requirements-dev.txt")
    assert res.returncode == 0 and res.stdout.strip() == "", f"run make setup: {res.stdout}"


def test_a_missing_requirements_file_is_a_usage_error(tmp_path: Path) -> None:
    res = run(tmp_path / "absent.txt")
    assert res.returncode == 2 and "usage: check_pins.py REQUIREMENTS_FILE" in res.stderr
