"""Columns an ALTER TABLE adds or retypes reach the lake when the MySQL connector's schema-change
event is read, not when the table's next row event comes: real messages of a MariaDB session on
the local stack (tests/fixtures/debezium/mariadb/ddl/added_columns.json: two tables, their rows
before the statements, the statements, one insert after them, and the source's rows at the end)."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
from cdc_events import captured_session

SCHEMA_TOPIC = "salesdb"


def session() -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    return captured_session("mariadb/ddl/added_columns.json")


def _pos(r: dict[str, Any]) -> int:
    return json.loads(r["value"])["payload"]["source"]["pos"]


def _ddl(r: dict[str, Any]) -> str:
    return json.loads(r["value"])["payload"]["ddl"]


def parts(table: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The table's CREATE and rows before its ALTER statements; the ALTER statements; the insert after them."""
    records, _ = session()
    statements = [r for r in records if r["topic"] == SCHEMA_TOPIC and f" {table} " in _ddl(r) + " "]
    alters = [r for r in statements if _ddl(r).startswith("ALTER")]
    first_alter = min(_pos(r) for r in alters)
    rows = [r for r in records if r["topic"] == f"salesdb.salesdb.{table}"]
    before = [r for r in statements if not _ddl(r).startswith("ALTER")] + [r for r in rows if _pos(r) < first_alter]
    return before, alters, [r for r in rows if _pos(r) > first_alter]


def _same(lake: Any, source: Any) -> bool:
    if isinstance(lake, Decimal):
        return lake == Decimal(str(source))
    if isinstance(lake, float):
        return lake == pytest.approx(source, rel=1e-6)
    if isinstance(lake, datetime):
        return lake == datetime.fromisoformat(source)
    if isinstance(lake, date):
        return lake.isoformat() == source
    return lake == source


def assert_equal_to_source(lake, table: str, skip: tuple[str, ...] = ()) -> None:
    source = session()[1][table]
    got = lake.rows(f"salesdb_{table}")
    assert [r["id"] for r in got] == [r["id"] for r in source]
    for g, s in zip(got, source, strict=True):
        diff = {c: (g.get(c, "<missing>"), v) for c, v in s.items() if c not in skip and not _same(g.get(c), v)}
        assert not diff, f"{table} id {s['id']}: (lake, source) {diff}"


def data_columns(lake, table: str) -> list[tuple[str, str]]:
    schema = lake.spark.table(lake.table(f"salesdb_{table}")).schema
    return [(f.name, f.dataType.simpleString()) for f in schema if not f.name.startswith("_cdc_")]


# MariaDB gives existing rows the implicit default of a NOT NULL column added without one (`zero`: 0)
# and the ALTER's time for a CURRENT_TIMESTAMP default (`ts`); the connector sends neither.
UNKNOWN = ("zero", "ts")


def test_columns_added_to_a_table_with_no_later_change_arrive_with_their_defaults_on_every_row(lake):
    before, alters, _ = parts("ddl_add")
    lake.apply(before)
    report = lake.apply(alters)
    assert report.dead == 0
    assert [c for c, _ in data_columns(lake, "ddl_add")] == [
        "id", "name", "tier", "qty", "price", "flag", "since", "at_dt", "big", "ratio", "f", "zero", "ts", "color",
        "b1", "t", "y", "small",
    ]  # fmt: skip
    rows = lake.rows("salesdb_ddl_add")
    assert [r["zero"] for r in rows] == [None, None] and [r["ts"] for r in rows] == [None, None]
    source = session()[1]["ddl_add"]
    for g, s in zip(rows, source[:2], strict=True):
        diff = {c: (g[c], v) for c, v in s.items() if c not in UNKNOWN and not _same(g[c], v)}
        assert not diff, diff


def test_the_next_row_event_after_the_statement_changes_no_column_and_ends_as_the_row_events_alone_would(
    lake, make_lake
):
    before, alters, after = parts("ddl_add")
    lake.apply(before)
    lake.apply(alters)
    columns = data_columns(lake, "ddl_add")
    report = lake.apply(after)
    assert report.dead == 0 and not [t.schema for t in report.tables if t.schema]
    assert data_columns(lake, "ddl_add") == columns
    assert_equal_to_source(lake, "ddl_add", skip=UNKNOWN)
    # The same session with the statements read only after the insert: the row event adds the
    # columns; the lake table is the same, column for column and value for value.
    other = make_lake()
    other.apply(before)
    other.apply(after)
    other.apply(alters)
    assert data_columns(other, "ddl_add") == columns
    strip = {"_cdc_ingested_at"}
    assert [{k: v for k, v in r.items() if k not in strip} for r in other.rows("salesdb_ddl_add")] == [
        {k: v for k, v in r.items() if k not in strip} for r in lake.rows("salesdb_ddl_add")
    ]


@pytest.mark.parametrize(
    "batching", ["one statement per batch", "every statement in one batch", "with the table's creation and rows"]
)
def test_a_column_added_twice_and_one_added_then_renamed_end_as_at_the_source_without_a_row_event(lake, batching):
    before, alters, after = parts("ddl_again")
    assert [_ddl(r).split(" ", 4)[3] for r in alters] == ["ADD", "DROP", "ADD", "ADD", "RENAME", "MODIFY"]
    if batching == "with the table's creation and rows":
        batches = [before + alters]
    else:
        lake.apply(before)
        batches = [[r] for r in alters] if batching == "one statement per batch" else [alters]
    for batch in batches:
        assert lake.apply(batch).dead == 0
    columns = data_columns(lake, "ddl_again")
    if batching != "every statement in one batch":
        # The first `qty` (an int, 7 on every row) reached the lake before its drop (or the lake
        # table is created in the batch that read it, as its rows held it): kept aside
        # (--dropped_column_policy keep), and the second is the source's `qty`.
        assert columns == [
            ("id", "bigint"), ("name", "string"), ("qty__dropped", "int"), ("qty", "string"), ("level", "string")
        ]  # fmt: skip
        assert [r["qty__dropped"] for r in lake.rows("salesdb_ddl_again")] == [7, 7]
    else:
        # Dropped before the lake had it: only the second `qty` arrives.
        assert columns == [("id", "bigint"), ("name", "string"), ("qty", "string"), ("level", "string")]
    source = session()[1]["ddl_again"]
    got = lake.rows("salesdb_ddl_again")
    assert [{c: r[c] for c in source[0]} for r in got] == source[:2]
    report = lake.apply(after)
    assert report.dead == 0 and not [t.schema for t in report.tables if t.schema]
    assert data_columns(lake, "ddl_again") == columns
    assert_equal_to_source(lake, "ddl_again")
