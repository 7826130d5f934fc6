"""`bench --compare REV` measures another revision of the job in the same process: the
revision's package must import as its own package, not as the working tree's cdclake."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from cdcbench.compare import CompareError, extract, import_module  # noqa: E402

# The fixed-cost row's pinned baseline: a revision of before the package's layer folders.
FLAT_LAYOUT_REV = "fe5ec51"


@pytest.mark.parametrize("rev", ["HEAD", FLAT_LAYOUT_REV], ids=["layer folders", "flat package"])
def test_compare_imports_a_revision_of_the_job_beside_the_working_tree(tmp_path, rev):
    short, package = extract(rev, tmp_path)

    batch = import_module(package, "batch")
    settings = import_module(package, "settings")

    assert package == f"cdclake_{short}"
    assert Path(batch.__file__).resolve().is_relative_to(tmp_path.resolve())
    assert batch.__name__.startswith(f"{package}.") and settings.__name__.startswith(f"{package}.")
    assert hasattr(batch, "BatchProcessor") and hasattr(settings, "build_settings")


def test_compare_names_a_revision_that_does_not_exist(tmp_path):
    with pytest.raises(CompareError, match="--compare no-such-rev: not a revision"):
        extract("no-such-rev", tmp_path)
