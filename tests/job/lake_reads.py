"""What scripts/reconcile reads from a worker's Delta or Hudi lake (scripts/lake.py: DuckDB's Delta
extension, hudi-rs; no Spark), side by side with the rows the job's own Spark session read back: the
Delta and Hudi modules check the reconcile reader on the lake their one run already wrote."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import lake

# Columns compared value by value: those whose JSON form (Spark's read-back) and Python form
# (DuckDB's) say the same thing without a per-type conversion; decimals through Decimal.
_PLAIN = ("tinyint", "smallint", "int", "bigint", "string", "boolean")


def _value(v: Any, spark_type: str) -> Any:
    if v is None:
        return None
    return Decimal(str(v)).normalize() if spark_type.startswith("decimal") else v


def read_differences(out: dict[str, Any], warehouse: Path, table_format: str) -> dict[str, str]:
    """Each lake table whose reconcile read differs from Spark's, with how: the column names (in
    order, Hudi's `_hoodie_*` left out on both sides) and, over the plain and decimal columns, the
    rows as multisets. A table the reader refuses is listed with its LakeReadError."""
    con = lake.connect()
    found: dict[str, str] = {}
    for name, t in out["tables"].items():
        location = lake.table_location(warehouse, "cdc", name, table_format)
        try:
            got = lake.rows(con, location)
        except lake.LakeReadError as exc:
            found[name] = f"refused: {exc}"
            continue
        names = [n for n, _, _ in t["schema"]]
        if got and list(got[0]) != names:
            found[name] = f"columns {list(got[0])} != {names}"
            continue
        cols = [(n, ty) for n, ty, _ in t["schema"] if ty in _PLAIN or ty.startswith("decimal")]
        mine = sorted(repr([_value(r[n], ty) for n, ty in cols]) for r in got)
        spark = sorted(repr([_value(r.get(n), ty) for n, ty in cols]) for r in t["rows"])
        if mine != spark:
            found[name] = f"rows {mine} != {spark}"
    return found
