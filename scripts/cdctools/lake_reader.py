"""Reading the local lake the way Athena reads it on AWS: a separate SQL engine (DuckDB) over the
files and table metadata the job wrote, for each table format. Nothing here goes through Spark.

- Iceberg: DuckDB's Iceberg extension over the Hadoop catalog's metadata (`iceberg_scan`).
- Delta Lake: DuckDB's Delta extension (delta-kernel-rs, `delta_scan`), which follows the column
  mapping by name the job creates its Delta tables with (renamed and dropped columns).
- Apache Hudi: hudi-rs (the `hudi` package) reads the table's latest snapshot (merge-on-read: log files merged) into
  Arrow, registered in DuckDB as a view. hudi-rs does not apply Hudi's schema evolution on read:
  a table with a renamed or dropped column is refused (`LakeReadError`), never read wrongly.

The DuckDB extensions come from PyPI packages (duckdb-extension-iceberg/-avro/-delta), loaded from
their files: this machine cannot download DuckDB extensions at run time.
"""

from __future__ import annotations

import json
import re
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import duckdb

# The job's lake-table contract (names of its metadata columns, properties, marker tables).
from cdclake.common.lake_contract import is_job_table
from cdclake.common.names import source_name
from cdclake.lake.formats.hudi import HUDI_META_COLUMNS

ICEBERG, DELTA, HUDI = "iceberg", "delta", "hudi"
FORMATS = (ICEBERG, DELTA, HUDI)
# The folder inside a table's location that makes it a table of that format.
_FORMAT_MARKERS = {ICEBERG: "metadata", DELTA: "_delta_log", HUDI: ".hoodie"}


class LakeReadError(Exception):
    """A lake table this reader cannot read correctly: reported, never read as something else."""


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
    con.execute(f"LOAD '{_extension_file('duckdb_extension_delta', 'delta')}'")
    con.execute("SET TimeZone = 'UTC'")
    return con


def namespace_dir(warehouse: Path, namespace: str, table_format: str = ICEBERG) -> Path:
    """Iceberg's Hadoop catalog keeps a namespace in <warehouse>/<namespace>; Spark's session catalog
    (Delta and Hudi: managed tables) in <warehouse>/<namespace>.db."""
    return Path(warehouse) / (namespace if table_format == ICEBERG else f"{namespace}.db")


def table_location(warehouse: Path, namespace: str, table: str, table_format: str = ICEBERG) -> Path:
    """Iceberg (Hadoop catalog): <warehouse>/<namespace>/<table>/metadata/vN.metadata.json; Delta and
    Hudi: <warehouse>/<namespace>.db/<table> with its _delta_log/ or .hoodie/."""
    return namespace_dir(warehouse, namespace, table_format) / table


def format_at(location: Path) -> str | None:
    """The format of the table at `location`, from its metadata folder; None when there is none."""
    return next((f for f, marker in _FORMAT_MARKERS.items() if (Path(location) / marker).is_dir()), None)


def exists(location: Path) -> bool:
    """Whether a readable table is at `location` (Iceberg: a metadata file; Delta: a first commit;
    Hudi: its table properties)."""
    fmt = format_at(location)
    if fmt == ICEBERG:
        return current_metadata(location) is not None
    if fmt == DELTA:
        return any((Path(location) / "_delta_log").glob("*.json"))
    return fmt == HUDI and (Path(location) / ".hoodie" / "hoodie.properties").is_file()


def list_tables(warehouse: Path, namespace: str, table_format: str = ICEBERG) -> list[str]:
    """The lake's tables of source tables (delete-marker tables left out)."""
    ns = namespace_dir(warehouse, namespace, table_format)
    if not ns.is_dir():
        return []
    marker = _FORMAT_MARKERS[table_format]
    return sorted(p.name for p in ns.iterdir() if (p / marker).is_dir() and not is_job_table(p.name))


def lake_format(warehouse: Path, namespace: str) -> str:
    """The format of the lake's tables, found from what is there (iceberg for a lake without tables).
    Tables of several formats in one warehouse are refused: the caller must say which."""
    found = [f for f in FORMATS if list_tables(warehouse, namespace, f)]
    if len(found) > 1:
        raise LakeReadError(
            f"{warehouse} holds {' and '.join(found)} tables in namespace {namespace}: say which with --table-format"
        )
    return found[0] if found else ICEBERG


def current_metadata(location: Path) -> Path | None:
    meta = location / "metadata"
    hint = meta / "version-hint.text"
    if hint.exists():
        f = meta / f"v{hint.read_text().strip()}.metadata.json"
        if f.exists():
            return f
    versions = sorted(meta.glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    return versions[-1] if versions else None


def scan(con: duckdb.DuckDBPyConnection, location: Path) -> str:
    """A FROM-clause expression reading the table's current snapshot, whatever its format."""
    fmt = format_at(location)
    if fmt == ICEBERG and (meta := current_metadata(location)) is not None:
        return f"iceberg_scan('{meta}')"
    if fmt == DELTA:
        return f"delta_scan('{location}')"
    if fmt == HUDI:
        view = "hudi_" + re.sub(r"\W", "_", Path(location).name)
        con.register(view, hudi_snapshot(location))
        return view
    raise FileNotFoundError(f"no Iceberg, Delta or Hudi table at {location}")


def rows(con: duckdb.DuckDBPyConnection, location: Path, where: str = "") -> list[dict[str, Any]]:
    cur = con.execute(f"SELECT * FROM {scan(con, location)} {where}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def properties(location: Path) -> dict[str, str]:
    """The table's properties: Iceberg's metadata, Delta's latest `metaData` configuration, Hudi's
    `hoodie.properties` (the table's properties set through Spark live in its catalog, not here)."""
    fmt = format_at(location)
    if fmt == ICEBERG:
        meta = current_metadata(location)
        return json.loads(meta.read_text()).get("properties", {}) if meta else {}
    if fmt == DELTA:
        configs = [a["metaData"].get("configuration", {}) for a in _delta_actions(location) if "metaData" in a]
        return configs[-1] if configs else {}
    if fmt == HUDI:
        text = (Path(location) / ".hoodie" / "hoodie.properties").read_text()
        pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
        return {k.strip(): v.strip() for k, v in pairs}
    return {}


def _delta_actions(location: Path) -> list[dict[str, Any]]:
    """Every action of the table's Delta log, in commit order, each with its `version`."""
    out = []
    for f in sorted((Path(location) / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if line.strip():
                out.append({**json.loads(line), "version": int(f.stem)})
    return out


def _hudi_table(location: Path) -> Any:
    from hudi import HudiTable

    return HudiTable(str(location))


def _hudi_commits(table: Any) -> list[tuple[Any, dict[str, Any]]]:
    """The completed commits of a Hudi table's timeline (writes and schema changes, a merge-on-read
    table's delta commits, and the replace commits of clustering), oldest first, with their metadata."""
    timeline = table.get_timeline()
    completed = (
        timeline.get_completed_commits()
        + timeline.get_completed_deltacommits()
        + timeline.get_completed_replacecommits()
    )
    instants = sorted(completed, key=lambda i: i.timestamp)
    return [(i, json.loads(timeline.get_instant_metadata_in_json(i) or "{}")) for i in instants]


def hudi_column_changes(commits: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """The columns Hudi's schema evolution on read renamed or dropped, as (instant, `old -> new` or
    `old dropped`), from the commits' metadata in timeline order (`latest_schema`: Hudi's internal
    schema, which names each column by id). Pure: (instant, metadata) as read from the timeline."""
    names: dict[int, str] = {}
    changes: list[tuple[str, str]] = []
    for instant, meta in commits:
        text = (meta.get("extraMetadata") or {}).get("latest_schema")
        if not text:
            continue
        now = {f["id"]: f["name"] for f in json.loads(text).get("fields", [])}
        for fid, old in names.items():
            new = now.get(fid)
            if new != old:
                changes.append((instant, f"{old} dropped" if new is None else f"{old} -> {new}"))
        names = now
    return changes


def hudi_snapshot(location: Path) -> Any:
    """The latest snapshot of a Hudi table as an Arrow table (a merge-on-read table's log files merged,
    as its real-time view reads it), without Hudi's `_hoodie_*` columns. hudi-rs reads each base file by column name and does not apply Hudi's schema evolution on
    read, so a base file written before a column was renamed or dropped cannot be read correctly by
    it: such a table is refused with a LakeReadError naming the change. (Copy-on-write rewrites a
    file group on every write to it, so the files written after the change read correctly.)"""
    try:
        return _hudi_rows(location)
    except Exception as e:  # hudi-rs's HudiCoreError: its class lives in a private module
        if type(e).__name__ != "HudiCoreError":
            raise
        # e.g. a commit file read while the job is still writing it: read again on the next try
        raise LakeReadError(f"hudi-rs cannot read {location} now ({e})") from e


def _hudi_rows(location: Path) -> Any:
    import pyarrow as pa

    table = _hudi_table(location)
    commits = _hudi_commits(table)
    changes = hudi_column_changes([(i.timestamp, meta) for i, meta in commits])
    if changes:
        last = max(instant for instant, _ in changes)
        older = sorted(s.base_file_name for s in table.get_file_slices() if s.creation_instant_time < last)
        if older:
            raise LakeReadError(
                f"the Hudi table {location} has {len(older)} data file(s) written before a column change of "
                f"Hudi's schema evolution on read ({', '.join(c for _, c in changes)}), which hudi-rs does "
                f"not apply: read by column name they would give wrong values (e.g. {older[0]})"
            )
    schema = table.get_schema_with_meta_fields()
    data = pa.Table.from_batches(table.read(), schema) if commits else schema.empty_table()
    data = data.drop_columns([c for c in data.column_names if c in HUDI_META_COLUMNS])
    # Under the source's names: the job escapes those Avro refuses (common/names.py).
    return data.rename_columns([source_name(c) for c in data.column_names])


def snapshots(location: Path) -> list[dict[str, Any]]:
    """Iceberg's snapshot history from the table metadata: id, time, operation and summary counts."""
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


def commits(location: Path) -> list[dict[str, Any]]:
    """The table's history in any format, oldest first: `timestamp_ms`, `operation` and `summary`, a
    line of the format's own counts (Iceberg's snapshot summary, Delta's operation metrics, Hudi's
    write statistics)."""
    fmt = format_at(location)
    if fmt == ICEBERG:
        return [
            {
                "timestamp_ms": s["timestamp_ms"],
                "operation": s["operation"],
                "summary": f"+{s['added_records']} rows, +{s['added_position_deletes']} position deletes, "
                f"total {s['total_records']}",
            }
            for s in snapshots(location)
        ]
    if fmt == DELTA:
        return [_delta_commit(a["commitInfo"]) for a in _delta_actions(location) if "commitInfo" in a]
    if fmt == HUDI:
        return [_hudi_commit(i, meta) for i, meta in _hudi_commits(_hudi_table(location))]
    return []


# Delta's operation metrics worth a line, in the order shown.
_DELTA_METRICS = (
    ("numTargetRowsInserted", "inserted"),
    ("numTargetRowsUpdated", "updated"),
    ("numTargetRowsDeleted", "deleted"),
    ("numDeletedRows", "deleted"),
    ("numOutputRows", "rows written"),
)


def _delta_commit(info: dict[str, Any]) -> dict[str, Any]:
    metrics = info.get("operationMetrics", {})
    shown: dict[str, str] = {}
    for key, label in _DELTA_METRICS:
        if key in metrics and label not in shown:
            shown[label] = metrics[key]
    summary = ", ".join(f"{v} {label}" for label, v in shown.items())
    return {"timestamp_ms": info.get("timestamp", 0), "operation": info.get("operation"), "summary": summary}


def _hudi_commit(instant: Any, meta: dict[str, Any]) -> dict[str, Any]:
    stats = [s for group in (meta.get("partitionToWriteStats") or {}).values() for s in group]
    count = {k: sum(int(s.get(k, 0)) for s in stats) for k in ("numInserts", "numUpdateWrites", "numDeletes")}
    return {
        "timestamp_ms": instant.epoch_mills,
        "operation": meta.get("operationType") or instant.action,
        "summary": f"{count['numInserts']} inserted, {count['numUpdateWrites']} updated, {count['numDeletes']} deleted",
    }


def schema_history(location: Path) -> list[tuple[int, list[str]]]:
    """Every schema the table has had: (schema id, column names). Iceberg: its schemas; Delta: each
    `metaData` action's schema (id: the commit version); Hudi: each commit's writer schema that
    differs from the one before (id: the commit's position on the timeline), `_hoodie_*` left out."""
    fmt = format_at(location)
    if fmt == DELTA:
        found = [
            (a["version"], [f["name"] for f in json.loads(a["metaData"]["schemaString"])["fields"]])
            for a in _delta_actions(location)
            if "metaData" in a
        ]
    elif fmt == HUDI:
        found = [
            (n, [f["name"] for f in json.loads(meta["extraMetadata"]["schema"])["fields"]])
            for n, (_, meta) in enumerate(_hudi_commits(_hudi_table(location)))
            if (meta.get("extraMetadata") or {}).get("schema")
        ]
        found = [(n, [source_name(c) for c in cols if c not in HUDI_META_COLUMNS]) for n, cols in found]
    else:
        meta = current_metadata(location)
        data = json.loads(meta.read_text()) if meta else {}
        return [(s["schema-id"], [f["name"] for f in s["fields"]]) for s in data.get("schemas", [])]
    return [(n, cols) for i, (n, cols) in enumerate(found) if i == 0 or cols != found[i - 1][1]]
