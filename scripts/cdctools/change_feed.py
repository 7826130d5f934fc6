"""What changed in a lake table since a mark, on every table format: the change query of
sql/spark/changes_since.sql through DuckDB (the demo's step 5), and the replay a reader does with it.

A table's rows carry the apply time of their newest change (`_cdc_ingested_at`); the keys deleted
are in its delete markers beside it (`_cdc_deleted_at`, the deleted row's image). So the changes
since a mark are the rows applied after it (as they are now) and the markers written after it. A
reader keeps as its mark the newest apply time it read, reads again from a little before it (the
markers commit after their batch's rows), and applies each change in source-log order only when
newer than what it holds for the key: docs/OPERATIONS.md, "Reading what changed".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdclake.common.lake_contract import (
    CDC_DELETED_AT,
    CDC_INGESTED_AT,
    CDC_KEY,
    CDC_OFFSET,
    CDC_ROW,
    CDC_SEQ,
    MARKER_SUFFIX,
)

from . import lake_reader as lake

UPSERT, DELETE, TRUNCATE = "upsert", "delete", "truncate"


@dataclass(frozen=True)
class Change:
    kind: str  # UPSERT, DELETE or TRUNCATE
    seq: Decimal  # the change's position in the source log
    offset: int
    applied_at: Any
    row: dict[str, Any]  # the row as it is now (upsert), the deleted row (delete), {} (truncate)


def markers_of(table: Path) -> Path:
    """Where the table's delete markers are: the table `<table>__cdc_deletes` beside it."""
    return table.with_name(table.name + MARKER_SUFFIX)


def high_water(con: Any, table: Path) -> Any:
    """The newest apply time in the table and its markers: a reader's mark after reading them."""
    markers = markers_of(table)
    marks = [con.execute(f"SELECT max({CDC_INGESTED_AT}) FROM {lake.scan(con, table)}").fetchone()[0]]
    if lake.exists(markers):
        marks.append(con.execute(f"SELECT max({CDC_DELETED_AT}) FROM {lake.scan(con, markers)}").fetchone()[0])
    return max((m for m in marks if m is not None), default=None)


def changes_since(con: Any, table: Path, mark: Any) -> list[Change]:
    """The changes applied after `mark`, in source-log order."""
    markers = markers_of(table)
    out = [
        Change(UPSERT, Decimal(r[CDC_SEQ]), r[CDC_OFFSET], r[CDC_INGESTED_AT], r)
        for r in _rows(con, table, f"WHERE {CDC_INGESTED_AT} > ?", mark)
    ]
    if lake.exists(markers):
        for m in _rows(con, markers, f"WHERE {CDC_DELETED_AT} > ?", mark):
            image = json.loads(m[CDC_ROW]) if m[CDC_ROW] else {}
            kind = TRUNCATE if m[CDC_KEY] == "*" else DELETE
            out.append(Change(kind, Decimal(m[CDC_SEQ]), m[CDC_OFFSET], m[CDC_DELETED_AT], image))
    return sorted(out, key=lambda c: (c.seq, c.offset))


def _rows(con: Any, location: Path, where: str, mark: Any) -> list[dict[str, Any]]:
    cur = con.execute(f"SELECT * FROM {lake.scan(con, location)} {where}", [mark])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def replay(
    held: Iterable[dict[str, Any]], changes: Iterable[Change], key: Callable[[dict[str, Any]], Any]
) -> dict[Any, dict[str, Any]]:
    """The rows a reader holds after applying `changes` to `held` (rows with their `_cdc_seq`): each
    change only when newer than what it holds for the key, deletes remembered by position too."""
    rows = {key(r): r for r in held}
    seen = {k: Decimal(r[CDC_SEQ]) for k, r in rows.items()}
    for c in changes:
        if c.kind == TRUNCATE:
            rows = {k: r for k, r in rows.items() if seen[k] >= c.seq}
            continue
        k = key(c.row)
        if k in seen and seen[k] >= c.seq:
            continue
        seen[k] = c.seq
        if c.kind == UPSERT:
            rows[k] = c.row
        else:
            rows.pop(k, None)
    return rows
