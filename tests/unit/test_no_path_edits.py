"""The code imports the installed package (pyproject.toml, `make setup`): no module edits sys.path,
except the two Glue entry scripts (Glue runs them as files next to, or with, cdclake.zip). The
benchmark loads another revision's cdclake (--compare REV, --glue-scripts DIR) as a package from its
folder (cdcbench/compare.load_package), its child processes get a PYTHONPATH."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    "glue_scripts/cdc_lake_job.py",
    "glue_scripts/cdc_maintenance_job.py",
}
# An insert, append, extend, slice assignment or rebinding of sys.path, also inside a `python -c` string.
_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend|remove)\s*\(|\[[^\]]*\]\s*=(?!=)|[+]?=(?!=))")


def path_edits(text: str, name: str) -> list[str]:
    """`file:line` of every line of `text` that edits sys.path."""
    return [f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if _EDIT.search(line)]


def _code_files() -> list[Path]:
    """The .py files, and the scripts without an extension (Python or shell: `python -c` strings)."""
    folders = ("glue_scripts", "scripts", "tests", "cloudformation")
    files = [p for f in folders for p in (ROOT / f).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return [p for p in files if p.suffix == ".py" or (not p.suffix and p.read_bytes().startswith(b"#!"))]


def test_no_module_edits_sys_path_outside_the_glue_entry_scripts():
    files = [p for p in _code_files() if str(p.relative_to(ROOT)) not in ALLOWED and p != Path(__file__)]
    assert len(files) > 100
    found = [e for p in files for e in path_edits(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert not found, "import the installed package (make setup) instead of editing sys.path:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_path_edit():
    lines = [
        "sys.path.insert(0, str(ROOT))",
        "sys.path.append(x)",
        "sys.path[:0] = [a, b]",
        "code = 'import sys; sys.path.extend(argv)'",
        "sys.path = [x, *sys.path]",
        "sys.path += [x]",
        "if str(x) not in sys.path: pass",
        "first = sys.path[0]",
        "assert sys.path == before",
    ]
    assert path_edits("\n".join(lines), "m.py") == [f"m.py:{n}" for n in range(1, 7)]


def test_the_tools_are_the_packages_commands_and_scripts_holds_only_set_up_scripts():
    # No launcher next to its module: a tool is a [project.scripts] command (make setup installs it).
    launchers = [p.name for p in (ROOT / "scripts").iterdir() if p.is_file() and not p.suffix]
    assert launchers and all(name.startswith("setup-") for name in launchers), launchers
    commands = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {"local-stack", "local-job", "reconcile", "deploy", "bench"} <= set(commands)
    for name, target in commands.items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), name
