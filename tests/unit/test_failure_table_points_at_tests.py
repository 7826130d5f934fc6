"""docs/ARCHITECTURE.md's failure-and-recovery table: every row names the tests that prove it, and
every test it names exists, so a renamed or deleted test cannot leave a promise unproven."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
# `tests/dir/test_x.py::test_name`, `tests/dir/test_x.py` or `::test_name` (same file as the one before)
REF = re.compile(r"`(tests/[\w/]+\.py)?(?:::(test_\w+))?`")


def table_rows() -> list[tuple[str, str]]:
    """(what fails, its tests) per row; a cell too long for the table is in the list under it, as
    `- <what fails>, proven by: <tests>`, in the rows' order."""
    text = DOC.read_text()
    section = text.split("## Failure and recovery", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    header, *body = rows
    assert header.split("|")[-2].strip() == "proven by", header
    items = [" ".join(i.split()) for i in re.findall(r"^- (.*?)(?=^- |^$|\Z)", section, re.M | re.S)]
    below = iter(item.split(", proven by: ", 1) for item in items if ", proven by: " in item)
    out = []
    for row in body:
        what, proven = row.split("|")[1].strip(), row.split("|")[-2]
        if proven.strip() == "(below)":
            name, proven = next(below)
            assert what.replace("**", "").startswith(name), f"the list under the table is out of order at {name!r}"
        out.append((what, proven))
    return out


@cache
def defined_tests(path: str) -> set[str]:
    tree = ast.parse((ROOT / path).read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def references(cell: str) -> list[tuple[str, str | None]]:
    """(file, test or None) for each reference in a cell; `::name` takes the file named before it."""
    out: list[tuple[str, str | None]] = []
    current: str | None = None
    for path, name in REF.findall(cell):
        if path:
            current = path
        if current is None:
            raise AssertionError(f"`::{name}` with no file before it in: {cell.strip()[:120]}")
        if path or name:
            out.append((current, name or None))
    return out


def test_every_failure_row_names_at_least_one_test() -> None:
    rows = table_rows()
    assert len(rows) >= 20
    unproven = [what for what, cell in rows if not references(cell)]
    assert not unproven, f"rows with no test: {unproven}"


def test_every_test_the_failure_table_names_exists() -> None:
    missing = []
    for what, cell in table_rows():
        for path, name in references(cell):
            if not (ROOT / path).is_file():
                missing.append(f"{what[:50]}: no file {path}")
            elif name is not None and name not in defined_tests(path):
                missing.append(f"{what[:50]}: no {path}::{name}")
    assert not missing, "\n".join(missing)


def test_a_renamed_test_is_reported_as_missing() -> None:
    cell = " `tests/job/test_dead_letters.py::test_no_such_test`, `::test_schemaless_json_events_use_the_documented_fallback` "
    refs = references(cell)
    assert refs == [
        ("tests/job/test_dead_letters.py", "test_no_such_test"),
        ("tests/job/test_dead_letters.py", "test_schemaless_json_events_use_the_documented_fallback"),
    ]
    assert "test_no_such_test" not in defined_tests(refs[0][0])
    assert refs[1][1] in defined_tests(refs[1][0])
