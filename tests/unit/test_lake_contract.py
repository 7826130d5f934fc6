"""The lake table's contract (cdclake/common/lake_contract.py) is written once: no other module of the job
or of scripts/ spells a metadata column (`_cdc_*`) or a table property (`cdc.*`) in a string, and
the names are the ones lake readers' queries depend on."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from cdclake.common import lake_contract as contract
from cdclake.common.lake_contract import ColumnChange, DropPolicy, SchemaChangePolicy, TableState, dumps
from cdclake.common.settings import ArgumentError, build_settings

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "glue_scripts" / "cdclake" / "common" / "lake_contract.py"
PROPERTIES = [v for k, v in vars(contract).items() if k.endswith("_PROPERTY")] + [contract.BACKFILL_PREFIX]
# A metadata column, a marker table's suffix, or a property-like `cdc.<word>-` / `cdc.<word>.`.
COPY = re.compile(r"_cdc_[a-z]|__cdc_|(?<![\w.-])cdc\.[a-z]+[-.]|^cdc\.$")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: prose may name the contract."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def contract_copies(path: Path) -> list[str]:
    """`file:line: text` of each string constant in `path` (f-string parts included, docstrings and
    comments not) that spells a name of the contract."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
            if COPY.search(text) or any(p in text for p in PROPERTIES):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
                found.append(f"{where}:{node.lineno}: {text[:80]!r}")
    return found


def test_no_module_outside_the_contract_spells_a_metadata_column_or_a_table_property():
    files = sorted((ROOT / "glue_scripts").rglob("*.py")) + sorted((ROOT / "scripts").rglob("*.py"))
    copies = [hit for f in files if f != CONTRACT for hit in contract_copies(f)]
    assert not copies, "import these from cdclake/common/lake_contract.py instead:\n" + "\n".join(copies)


def test_the_copy_check_finds_a_column_a_property_and_a_marker_suffix(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Docstrings may say _cdc_seq and cdc.primary-key."""\n'
        "# so may comments: _cdc_op\n"
        'a = f"DELETE FROM {t} WHERE _cdc_seq < 1"\n'
        'b = "cdc.primary-key"\n'
        'c = t + "__cdc_deletes"\n'
        'd = "cdc.some-new-property"\n'
        'e = "glue_catalog.cdc.orders"\n'
    )
    lines = sorted(int(hit.split(":")[1]) for hit in contract_copies(probe))
    assert lines == [3, 4, 5, 6]


def test_the_names_lake_readers_depend_on():
    assert contract.METADATA_COLUMNS == ("_cdc_op", "_cdc_seq", "_cdc_offset", "_cdc_source_ts", "_cdc_ingested_at")
    assert (contract.CDC_COPY, contract.MARKER_SUFFIX) == ("_cdc_copy", "__cdc_deletes")
    assert (contract.KEY_PROPERTY, contract.SOURCE_DROPPED_PROPERTY) == ("cdc.primary-key", "cdc.source-dropped")
    assert all(p.startswith(contract.PROPERTY_PREFIX) for p in PROPERTIES)


def test_table_state_is_read_from_the_table_properties():
    renamed = ColumnChange("rename", "a", "b", 7)
    props = {
        "cdc.primary-key": "id,region",
        "cdc.backfill.tier": "CAST('bronze' AS string)",
        "cdc.column-changes": dumps([renamed]),
        "cdc.source-dropped": "2026-11-23T10:00:00.000000Z",
        "cdc.source-dropped-position": "42",
        "cdc.primary-key-position": "40",
        "cdc.primary-key-batch": "fp",
        "write.merge.mode": "merge-on-read",
    }
    state = TableState.from_properties([], props)
    assert state == TableState([], ["id", "region"], {"tier": "CAST('bronze' AS string)"}, [renamed], 42, 40, "fp")
    assert TableState.from_properties([], {}) == TableState([], [])  # a keyless table the job did nothing else to


REQUIRED = {"source": "files", "files_path": "/in", "warehouse": "/w", "checkpoint_location": "/c",
            "dead_letter_path": "/d"}  # fmt: skip


def test_policies_are_parsed_once_into_their_enums():
    s = build_settings(REQUIRED | {"schema_change_policy": "fail", "dropped_column_policy": "drop"})
    assert s.schema_change_policy is SchemaChangePolicy.FAIL and s.dropped_column_policy is DropPolicy.DROP
    assert build_settings(REQUIRED).dropped_table_policy is DropPolicy.KEEP


def test_a_bad_policy_names_the_argument_and_the_allowed_values():
    with pytest.raises(
        ArgumentError, match=re.escape("--schema_change_policy must be one of evolve, fail, dead_letter; got 'Fail'")
    ):
        build_settings(REQUIRED | {"schema_change_policy": "Fail"})
