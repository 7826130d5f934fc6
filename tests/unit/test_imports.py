"""Every project module imports on its own, and no two project modules import each other in a cycle.

A module that imports only after some other module was imported first, or that a cycle hands out
half-initialised, fails for whoever imports it first. So each module of glue_scripts/ and scripts/
(package modules included) is imported alone, in a process of its own with both folders on its path
and no project module loaded (forked from one interpreter that has loaded only the third-party
libraries the project imports, which cannot hide an import-order fault of the project's own modules);
and the import graph of the project's own modules, read from their source with `ast` (imports inside
functions too: they run sooner or later; not those under `if TYPE_CHECKING:`), has no cycle."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOTS = (ROOT / "glue_scripts", ROOT / "scripts")


def project_modules() -> dict[str, Path]:
    """Module name -> file, for every module under ROOTS (a package is its __init__.py)."""
    modules = {}
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            # A file in a folder without __init__.py is no importable module of the project.
            if all((root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                modules[".".join(parts)] = path
    return modules


# Run by a fresh interpreter: load the third-party libraries once, then fork a child per module that
# imports it and writes its traceback (empty: imported) to a pipe. One interpreter start instead of one
# per module: the spawned interpreters cost ~40 s of the suite, mostly importing pyspark again and again.
_FORK_EACH = """
import gc, importlib, json, os, sys, traceback
names, libraries = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for lib in libraries:
    try:
        importlib.import_module(lib)
    except Exception:
        pass  # a library missing or failing on its own shows in the child that imports the module
assert not [m for m in sys.modules if m.split(".")[0] in {n.split(".")[0] for n in names}], "project module preloaded"
gc.freeze()  # the children's collector leaves the preloaded objects alone: no copy-on-write of them
errors = {}
for name in names:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            out = b""
        except BaseException:
            out = "\\n".join(traceback.format_exc().strip().splitlines()[-3:]).encode() or b"failed"
        os.write(w, out)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if text or status:
        errors[name] = text or f"exit status {status}"
print(json.dumps(errors))
"""


def third_party_imports(modules: dict[str, Path]) -> list[str]:
    """The modules (dotted, as imported) the project's modules import that are not the project's own."""
    own = {name.split(".")[0] for name in modules}
    names: set[str] = set()
    for path in modules.values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(n for n in names if n.split(".")[0] not in own | {"__future__"})


def import_each_alone(modules: dict[str, Path], cwd: Path) -> dict[str, str]:
    """Module name -> the end of its error output, for each module whose `import` fails on its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, ROOTS))}
    res = subprocess.run(
        [sys.executable, "-c", _FORK_EACH, json.dumps(sorted(modules)), json.dumps(third_party_imports(modules))],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules a module imports at run time, each as named: `import a.b` is a.b,
    `from a import b` is a.b when that is a module, else a; relative imports are resolved against
    the module. The parent packages Python runs on the way are left out: a package whose __init__
    imports its own modules is no cycle of those modules."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*anchor, *([base] if base else [])])
            out.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return out & modules.keys()


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None. A module importing itself is a cycle too."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def test_every_project_module_imports_on_its_own(tmp_path: Path) -> None:
    modules = project_modules()
    # The enumeration itself: top-level modules and package modules of both folders.
    assert {"cdc_lake_job", "cdclake", "cdclake.jobs.job", "cdctools.reconcile", "cdcstack.commands"} <= set(modules)
    failed = import_each_alone(modules, tmp_path)
    assert not failed, "\n".join(f"import {name} failed on its own:\n{error}" for name, error in failed.items())


def test_a_module_that_needs_another_imported_first_fails_the_import_check(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "first.py").write_text("import builtins\nbuiltins.READY = True\n")
    (pkg / "needs_first.py").write_text("import builtins\nassert builtins.READY\n")
    modules = {"pkg.first": pkg / "first.py", "pkg.needs_first": pkg / "needs_first.py"}
    failed = import_each_alone(modules, tmp_path)
    assert set(failed) == {"pkg.needs_first"} and "AttributeError" in failed["pkg.needs_first"], failed


def test_no_project_modules_import_each_other_in_a_cycle() -> None:
    cycle = find_cycle(import_graph(project_modules()))
    assert cycle is None, f"import cycle: {' -> '.join(cycle or [])}"


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import_and_a_relative_one(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    import pkg.c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\nfrom .a import x\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    modules = {f"pkg.{p.stem}" if p.stem != "__init__" else "pkg": p for p in pkg.glob("*.py")}
    graph = import_graph(modules)
    assert graph["pkg.d"] == set()  # type-checking imports do not run
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    graph["pkg.b"] = set()
    assert find_cycle(graph) is None
    assert find_cycle({"m": {"m"}}) == ["m", "m"]


# cdclake's layers, lowest first: a module may import its own layer and the layers below it only.
LAYERS = ("common", "events", "lake", "local", "jobs")


def layer_violations(graph: dict[str, set[str]], package: str = "cdclake") -> list[str]:
    """`a -> b` for every import of a module of a higher cdclake layer than the importer's."""

    def rank(module: str) -> int | None:
        parts = module.split(".")
        if parts[0] != package or len(parts) < 3:
            return None  # outside the package, or the package's own __init__ / a layer's __init__
        return LAYERS.index(parts[1])

    out = []
    for module, imported in graph.items():
        here = rank(module)
        if here is None:
            continue
        out += [f"{module} -> {m}" for m in sorted(imported) if (there := rank(m)) is not None and there > here]
    return sorted(out)


def test_every_cdclake_module_sits_in_a_layer() -> None:
    loose = [m for m in project_modules() if m.startswith("cdclake.") and m.split(".")[1] not in LAYERS]
    assert not loose, f"modules outside the layers {LAYERS}: {loose}"


def test_cdclake_layers_import_only_downwards() -> None:
    violations = layer_violations(import_graph(project_modules()))
    assert not violations, "imports against the layers " + " < ".join(LAYERS) + ":\n" + "\n".join(violations)


def test_the_layer_check_names_an_upward_import() -> None:
    graph = {
        "cdclake.events.decode": {"cdclake.lake.merge", "cdclake.common.sqltext"},
        "cdclake.jobs.batch": {"cdclake.lake.merge"},
    }
    assert layer_violations(graph) == ["cdclake.events.decode -> cdclake.lake.merge"]


# Within the lake layer: the planner (table_plan.py and its plan_*.py parts) is pure and runs nothing,
# so it imports no part of the executor; the executor's parts (execution.py, exec_*.py) are reached
# only through executor.py, the one module the batch hands a plan to.
def _executor_part(module: str) -> bool:
    return module == "cdclake.lake.execution" or module.startswith("cdclake.lake.exec_")


def _executor_layer(module: str) -> bool:
    return module == "cdclake.lake.executor" or _executor_part(module)


def _planner(module: str) -> bool:
    return module == "cdclake.lake.table_plan" or module.startswith("cdclake.lake.plan_")


def planner_executor_violations(graph: dict[str, set[str]]) -> list[str]:
    """`a -> b` for a planner module importing the executor layer, and for a module outside the
    executor layer importing one of its parts."""
    out = [f"{m} -> {i}" for m, imp in graph.items() if _planner(m) for i in sorted(imp) if _executor_layer(i)]
    out += [
        f"{m} -> {i}" for m, imp in graph.items() if not _executor_layer(m) for i in sorted(imp) if _executor_part(i)
    ]
    return sorted(out)


def test_the_planner_imports_no_executor_and_the_executor_parts_only_the_executor() -> None:
    graph = import_graph(project_modules())
    assert any(_executor_part(m) for m in graph) and any(_planner(m) for m in graph if m != "cdclake.lake.table_plan")
    violations = planner_executor_violations(graph)
    assert not violations, "the planner is pure; the executor's parts are reached through executor.py:\n" + "\n".join(
        violations
    )


def test_the_planner_executor_check_names_both_kinds_of_import() -> None:
    graph = {
        "cdclake.lake.plan_columns": {"cdclake.lake.executor", "cdclake.lake.table_plan"},
        "cdclake.lake.table_writer": {"cdclake.lake.exec_writes", "cdclake.lake.executor"},
        "cdclake.lake.executor": {"cdclake.lake.exec_ddl"},
    }
    assert planner_executor_violations(graph) == [
        "cdclake.lake.plan_columns -> cdclake.lake.executor",
        "cdclake.lake.table_writer -> cdclake.lake.exec_writes",
    ]
