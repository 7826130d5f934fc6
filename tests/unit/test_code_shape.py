"""Every function of the Glue job's code and of the tools (scripts/) fits on a screen: at most 60 lines, nested ones included
(a nested function counts in its own length and in its parent's). And one module runs a table's
batch against the catalog: the others build what it runs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 60


def long_functions(source: str, name: str, limit: int = MAX_LINES) -> list[str]:
    """`file:line name (n lines)` of every function in `source` longer than `limit` lines,
    decorators and docstring included."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = node.end_lineno - first + 1
            if lines > limit:
                out.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_of_the_job_or_the_tools_is_longer_than_60_lines():
    files = sorted([*(ROOT / "glue_scripts").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")])
    assert any(p.is_relative_to(ROOT / "scripts" / "cdcbench") for p in files)
    found = [f for p in files for f in long_functions(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert not found, "split these into well-named helpers:\n" + "\n".join(found)


def _function(name: str, statements: int, indent: str = "", inner: list[str] | None = None) -> list[str]:
    """A function of `statements` assignments (+ a nested function) and a return."""
    body = [f"{indent}    x{i} = {i}" for i in range(statements)]
    return [f"{indent}def {name}():", *body, *(inner or []), f"{indent}    return 1"]


def test_the_check_counts_nested_and_decorated_functions_and_methods():
    lines = [
        *_function("exactly_60", 58),
        "@staticmethod",
        *_function("decorated_61", 58),
        "class C:",
        *_function("method_63", 0, "    ", inner=_function("inner_61", 59, "        ")),
    ]
    found = long_functions("\n".join(lines), "m.py")
    assert [f.split()[1] for f in found] == ["decorated_61", "method_63", "inner_61"]
    assert found[0] == "m.py:62 decorated_61 (61 lines)"


# The modules that may hand Spark a statement or write a table: the executor layer runs a table's
# batch (executor.py dispatches to the DDL, the writes and markers, the table moves; execution.py is
# their shared catalog access), maintenance (the frame and each format's actions, formats/) runs
# between batches or in its own job, and sqltext reads a table's properties (SHOW TBLPROPERTIES). Everything else builds text and
# DataFrames for the executor.
ISSUERS = {
    "cdclake/lake/executor.py",
    "cdclake/lake/execution.py",
    "cdclake/lake/exec_ddl.py",
    "cdclake/lake/exec_writes.py",
    "cdclake/lake/exec_moves.py",
    "cdclake/lake/maintenance.py",
    "cdclake/lake/formats/iceberg.py",
    "cdclake/lake/formats/delta.py",
    "cdclake/lake/formats/hudi.py",
    "cdclake/common/sqltext.py",
}
ISSUING = {"sql", "writeTo", "insertInto", "saveAsTable"}


def issuing_calls(source: str, name: str) -> list[str]:
    """`file:line .method(` of every call of a method that runs a statement or writes a table."""
    calls = [
        node
        for node in ast.walk(ast.parse(source, name))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ISSUING
    ]
    return [f"{name}:{c.lineno} .{c.func.attr}(" for c in sorted(calls, key=lambda c: c.lineno)]


def test_only_the_executor_and_maintenance_issue_statements_or_write_tables():
    package = ROOT / "glue_scripts"
    files = [p for p in sorted((package / "cdclake").rglob("*.py")) if str(p.relative_to(package)) not in ISSUERS]
    found = [f for p in files for f in issuing_calls(p.read_text(encoding="utf-8"), str(p.relative_to(package)))]
    assert not found, "build the statement or DataFrame here and let lake/executor.py run it:\n" + "\n".join(found)


def test_the_issuing_check_finds_statements_and_table_writes():
    source = "spark.sql(q)\ndf.writeTo(t).append()\ndf.write.insertInto(t)\nnames.append(1)\nspark.table(t)"
    assert issuing_calls(source, "m.py") == ["m.py:1 .sql(", "m.py:2 .writeTo(", "m.py:3 .insertInto("]
