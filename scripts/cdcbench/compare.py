"""`--compare REV`: another revision of the job measured in the same process as this one.

Separate runs of two revisions differ by more than most optimisations change (JIT warm-up,
page cache, whatever else the machine does); side by side on the same batches, in rotating
order, they do not. The revision's `glue_scripts/cdclake` is extracted with `git archive` and
imported under another package name (its modules import each other relatively)."""

from __future__ import annotations

import importlib
import importlib.util
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


class CompareError(RuntimeError):
    pass


def extract(rev: str, dest: Path, repo: Path = ROOT) -> tuple[str, str]:
    """Extract `rev`'s cdclake package into `dest` as `cdclake_<short sha>`, import it under that
    name, and return (short sha, package name)."""
    found = subprocess.run(
        ["git", "rev-parse", "--short", f"{rev}^{{commit}}"], cwd=repo, capture_output=True, text=True
    )
    if found.returncode != 0:
        raise CompareError(f"--compare {rev}: not a revision of {repo} ({found.stderr.strip()})")
    short = found.stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", short, "glue_scripts/cdclake"], cwd=repo, capture_output=True
    )
    if archive.returncode != 0:
        raise CompareError(f"--compare {rev}: revision {short} has no glue_scripts/cdclake")
    package = f"cdclake_{short}"
    shutil.rmtree(dest / package, ignore_errors=True)
    staging = dest / "staging"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(staging, filter="data")
    (staging / "glue_scripts" / "cdclake").rename(dest / package)
    shutil.rmtree(staging)
    load_package(package, dest / package)
    return short, package


def load_package(name: str, folder: Path) -> ModuleType:
    """The package in `folder` imported as `name` (the one already imported under that name, if any).
    Its submodules import through the package's own __path__: nothing goes on sys.path."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# Where the modules the benchmark drives live in each layout: the layer subpackages, then the flat
# package of older revisions (so `--compare` and the fixed-cost row's pinned baseline keep working).
_LOCATIONS = {"batch": ("jobs.batch", "batch"), "settings": ("common.settings", "settings")}


def import_module(package: str, name: str) -> ModuleType:
    """Module `name` ("batch" or "settings") of an extracted revision's package, whichever layout it has."""
    for candidate in _LOCATIONS[name]:
        wanted = f"{package}.{candidate}"
        try:
            return importlib.import_module(wanted)
        except ModuleNotFoundError as e:
            # Only "this layout has no such module" moves on; a missing import inside it is an error.
            if not e.name or e.name == package or not wanted.startswith(e.name):
                raise
    raise CompareError(f"{package} has no module {name} in any layout the benchmark knows")
