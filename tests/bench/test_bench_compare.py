"""`scripts/bench --compare REV` measures another revision of the job in the same process: the
revision's package must import as its own package, not as the working tree's cdclake."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from cdcbench.compare import CompareError, extract  # noqa: E402


def test_compare_imports_a_revision_of_the_job_beside_the_working_tree(tmp_path):
    rev, package = extract("HEAD", tmp_path)

    batch = importlib.import_module(f"{package}.batch")
    settings = importlib.import_module(f"{package}.settings")

    assert package == f"cdclake_{rev}"
    assert Path(batch.__file__).resolve().is_relative_to(tmp_path.resolve())
    assert Path(settings.__file__).parent == Path(batch.__file__).parent
    assert hasattr(batch, "BatchProcessor") and hasattr(settings, "build_settings")


def test_compare_names_a_revision_that_does_not_exist(tmp_path):
    with pytest.raises(CompareError, match="--compare no-such-rev: not a revision"):
        extract("no-such-rev", tmp_path)
