"""Reading the local lake the way Athena reads it on AWS: a separate SQL engine (DuckDB with its
Iceberg extension) over the Iceberg metadata the job wrote. Nothing here goes through Spark.

The extensions come from PyPI packages (duckdb-extension-iceberg/-avro), loaded from their files:
this machine cannot download DuckDB extensions at run time.
"""

from __future__ import annotations

import json
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import duckdb

# The job's lake-table contract (names of its metadata columns, properties, marker tables).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "glue_scripts"))
from cdclake.common.lake_contract import MARKER_SUFFIX


def _extension_file(package: str, name: str) -> str:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"Python package {package} is missing: run `make setup`")
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.rglob(f"{name}.duckdb_extension"))
    if not found:
        raise RuntimeError(f"{name}.duckdb_extension not found under {root}")
    return str(found[-1])


def connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    # The Iceberg extension reads manifests with the Avro extension: load that one first.
    con.execute(f"LOAD '{_extension_file('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{_extension_file('duckdb_extension_iceberg', 'iceberg')}'")
    con.execute("SET TimeZone = 'UTC'")
    return con


def table_location(warehouse: Path, namespace: str, table: str) -> Path:
    """Hadoop-catalog layout: <warehouse>/<namespace>/<table>/metadata/vN.metadata.json."""
    return Path(warehouse) / namespace / table


def current_metadata(location: Path) -> Path | None:
    meta = location / "metadata"
    hint = meta / "version-hint.text"
    if hint.exists():
        f = meta / f"v{hint.read_text().strip()}.metadata.json"
        if f.exists():
            return f
    versions = sorted(meta.glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    return versions[-1] if versions else None


def list_tables(warehouse: Path, namespace: str) -> list[str]:
    """The lake's tables of source tables (delete-marker tables left out)."""
    ns = Path(warehouse) / namespace
    if not ns.is_dir():
        return []
    return sorted(p.name for p in ns.iterdir() if (p / "metadata").is_dir() and not p.name.endswith(MARKER_SUFFIX))


def scan(con: duckdb.DuckDBPyConnection, location: Path) -> str:
    """A FROM-clause expression reading the table's current snapshot."""
    meta = current_metadata(location)
    if meta is None:
        raise FileNotFoundError(f"no Iceberg table at {location}")
    return f"iceberg_scan('{meta}')"


def rows(con: duckdb.DuckDBPyConnection, location: Path, where: str = "") -> list[dict[str, Any]]:
    cur = con.execute(f"SELECT * FROM {scan(con, location)} {where}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def snapshots(location: Path) -> list[dict[str, Any]]:
    """Snapshot history from the table metadata: id, time, operation and summary counts."""
    meta = current_metadata(location)
    data = json.loads(meta.read_text()) if meta else {}
    out = []
    for s in data.get("snapshots", []):
        summary = s.get("summary", {})
        out.append(
            {
                "snapshot_id": s["snapshot-id"],
                "timestamp_ms": s["timestamp-ms"],
                "operation": summary.get("operation"),
                "added_records": int(summary.get("added-records", 0)),
                "deleted_records": int(summary.get("deleted-records", 0)),
                "added_position_deletes": int(summary.get("added-position-deletes", 0)),
                "total_records": int(summary.get("total-records", 0)),
            }
        )
    return out


def schema_history(location: Path) -> list[tuple[int, list[str]]]:
    """Every schema the table has had: (schema id, column names)."""
    meta = current_metadata(location)
    data = json.loads(meta.read_text()) if meta else {}
    return [(s["schema-id"], [f["name"] for f in s["fields"]]) for s in data.get("schemas", [])]
