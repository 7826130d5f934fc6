"""What reconcile reads from a Delta or Hudi extras' lake (scripts/cdctools/lake_reader.py: DuckDB's Delta
extension, hudi-rs; no Spark), side by side with the rows the job's own Spark session read back: the
Delta and Hudi modules check the reconcile reader on the lake their corpus already wrote."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdclake.common.lake_contract import MARKER_SUFFIX
from cdclake.common.names import source_name
from cdctools import lake_reader as lake

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
        # The reader gives the source's names: Spark reads Hudi's escaped ones (common/names.py).
        names = [source_name(n) for n, _, _ in t["schema"]]
        if got and list(got[0]) != names:
            found[name] = f"columns {list(got[0])} != {names}"
            continue
        cols = [(n, ty) for n, ty, _ in t["schema"] if ty in _PLAIN or ty.startswith("decimal")]
        mine = sorted(repr([_value(r[source_name(n)], ty) for n, ty in cols]) for r in got)
        spark = sorted(repr([_value(r.get(n), ty) for n, ty in cols]) for r in t["rows"])
        if mine != spark:
            found[name] = f"rows {mine} != {spark}"
    return found


def type_differences(warehouse: Path, table_format: str, dialect: str = "postgres") -> list[str]:
    """A source's all-types table as reconcile reads it, value by value against what the
    database held (type_matrix: the same comparison as Iceberg's in test_types.py)."""
    import type_matrix as tm

    table = "public_all_types" if dialect == "postgres" else "salesdb_all_types"
    con = lake.connect()
    try:
        rows = lake.rows(con, lake.table_location(warehouse, "cdc", table, table_format))
    finally:
        con.close()
    if table_format == "hudi":  # no timestamp_ntz in Hudi 0.15: a `timestamp` is its wall-clock time in UTC
        columns = tm.PG_COLUMNS if dialect == "postgres" else tm.MARIADB_COLUMNS
        naive = [c.name for c in columns if c.kind == "datetime"]
        rows = [r | {c: _utc_wall_clock(r[c]) for c in naive} for r in rows]
    _, source = tm.load_fixtures(dialect)
    return tm.differences(dialect, {r["id"]: r for r in rows}, source)


def _utc_wall_clock(v: Any) -> Any:
    """A UTC timestamp as its wall-clock time (other values, a non-UTC one included, as they are)."""
    return v.replace(tzinfo=None) if isinstance(v, datetime) and v.utcoffset() == timedelta(0) else v


def source_named_rows(out: dict[str, Any], name: str, key: tuple[str, ...]) -> dict[tuple, dict[str, Any]]:
    """An extras' lake table as the job's Spark session read it, under the source's names (Hudi's
    escaped ones read back, common/names.py) and without the `_cdc_*` columns, by its key."""
    table = out["tables"][name]
    columns = [n for n, _, _ in table["schema"] if not n.startswith("_cdc_")]
    # Spark's toJSON leaves out null values: a column missing from a row's JSON holds null.
    rows = [{source_name(c): r.get(c) for c in columns} for r in table["rows"]]
    by_key = {tuple(r[k] for k in key): r for r in rows}
    assert len(by_key) == len(rows), f"{name}: a key stored more than once"
    return by_key


def postgres_rows(out: dict[str, Any]) -> dict[str, Any]:
    """What an extras' lake holds of the PostgreSQL customers and TOAST tables (format_corpus's
    postgres_batches), in a form to compare with the source's rows."""
    customers = {
        r["id"]: (r["first_name"], r["email"], Decimal(str(r["balance"])), r["_cdc_op"])
        for r in out["tables"]["public_customers"]["rows"]
    }
    toasty = {r["id"]: (r["note"], r["big"], r["blob"]) for r in out["tables"]["public_toasty"]["rows"]}
    return {"customers": customers, "toasty": toasty}


def postgres_source_rows() -> dict[str, Any]:
    """The source's rows of those tables after format_corpus's postgres_batches, as postgres_rows gives
    a lake's: batch 4's captured update (before=null) and delete (before holds only the key) apply by
    key, and the update whose TOASTed values are Debezium's placeholder keeps what batch 3 wrote."""
    from cdc_events import load

    insert = load("postgres/toast_c_insert.json")["value"]["payload"]["after"]
    return {
        "customers": {1: ("Sally", "sally.t@example.com", Decimal("11.25"), "u"), 3: ("Pg3", "pg@example.com", Decimal("1.00"), "c")},
        "toasty": {1: ("one, changed", insert["big"], insert["blob"])},
    }  # fmt: skip


def infinite_timestamp_offsets() -> set[int]:
    """Offsets of the captured PostgreSQL all-types rows with infinite timestamps, which no lake type holds."""
    import type_matrix as tm

    return {m["offset"] for m in tm.load_fixtures("postgres")[0] if tm.is_infinite_row(m)}


def dead_letter_offsets(out: dict[str, Any], topic: str) -> set[int]:
    return {d["offset"] for d in out["dead"] if d["topic"] == topic}


# ---------------------------------------------------------------- reading what changed (every format)
def change_feed_sql(table: str, since_micros: int) -> str:
    """sql/spark/changes_since.sql over `table` and its delete markers, since a mark in microseconds."""
    text = (Path(__file__).resolve().parents[2] / "sql" / "spark" / "changes_since.sql").read_text()
    return (
        text.replace("${table}", table)
        .replace("${markers}", f"{table}{MARKER_SUFFIX}")
        .replace("${since}", f"timestamp_micros({since_micros})")
    )


def high_water(spark: Any, table: str) -> int:
    """A reader's mark: the newest apply time in the table and, once it has had a delete, its markers."""
    if spark.catalog.tableExists(f"{table}{MARKER_SUFFIX}"):
        feed = spark.sql(change_feed_sql(table, 0)).selectExpr("unix_micros(max(applied_at)) AS t")
    else:
        feed = spark.sql(f"SELECT unix_micros(max(_cdc_ingested_at)) AS t FROM {table}")
    return feed.first()["t"]


def feed_since(spark: Any, table: str, mark: int) -> list[dict[str, Any]]:
    """The change query's rows since `mark`, JSON-ready (positions as text)."""
    rows = spark.sql(change_feed_sql(table, mark)).collect()
    return [{**r.asDict(), "_cdc_seq": str(r["_cdc_seq"]), "applied_at": str(r["applied_at"])} for r in rows]


def replayed(held: list[dict[str, Any]], feed: list[dict[str, Any]], key: str = "id") -> dict[Any, dict[str, Any]]:
    """The rows a reader holding `held` (with `_cdc_seq`) has after applying `feed` (cdctools.change_feed)."""
    from cdctools import change_feed

    changes = [
        change_feed.Change(
            r["change"], Decimal(r["_cdc_seq"]), r["_cdc_offset"], r["applied_at"],
            json.loads(r["row_json"], parse_float=Decimal) if r["row_json"] else {},
        )
        for r in feed
    ]  # fmt: skip
    return change_feed.replay(held, changes, lambda row: row[key])


def reader_at(spark: Any, table: str) -> dict[str, Any]:
    """A downstream reader of `table` now: the rows it holds (key, first name, position) and its mark."""
    rows = spark.sql(f"SELECT id, first_name, CAST(_cdc_seq AS string) AS _cdc_seq FROM {table}").collect()
    return {"held": [r.asDict() for r in rows], "mark": high_water(spark, table)}


def feed_after(spark: Any, table: str, reader: dict[str, Any]) -> dict[str, Any]:
    """What the reader reads later: the changes since its mark, and the table's rows then (key, first name)."""
    now = spark.sql(f"SELECT id, first_name FROM {table}").collect()
    return {**reader, "changes": feed_since(spark, table, reader["mark"]), "now": [r.asDict() for r in now]}


def feed_differences(feed: dict[str, Any]) -> dict[Any, tuple[Any, Any]]:
    """Keys whose first name differs between the reader's replay and the table (absent: None)."""
    rows = replayed(feed["held"], feed["changes"])
    mine = {k: r.get("first_name") for k, r in rows.items()}
    now = {r["id"]: r["first_name"] for r in feed["now"]}
    return {k: (mine.get(k), now.get(k)) for k in mine.keys() | now.keys() if mine.get(k) != now.get(k)}
