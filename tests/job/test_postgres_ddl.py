"""PostgreSQL DDL followed through the DDL capture's log (sql/postgres/ddl_capture.sql): real Debezium
messages of sessions on the local stack (tests/stack/test_postgres_pipeline.py keeps them with
CDC_CAPTURE_FIXTURES=1: the tables' topics and their rows of `public.cdclake_ddl`, and the source's
rows at the end), fed to the job in several batchings. Each ends with the lake equal to the source."""

from __future__ import annotations

import itertools
import json
from decimal import Decimal
from typing import Any

import pytest
from cdc_events import captured_session, connect_json

DDL_TOPIC = "salesdb.public.cdclake_ddl"


def session(name: str) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]] | None]]:
    """The captured records (Kafka records, in source order: LSN, then topic order) and source rows."""
    records, source = captured_session(f"postgres/ddl/{name}.json")
    return sorted(records, key=_lsn), source


def _lsn(record: dict[str, Any]) -> tuple[int, str, int]:
    value = json.loads(record["value"]) if record["value"] else None
    lsn = (value or {}).get("payload", {}).get("source", {}).get("lsn") if value else None
    # A tombstone follows its delete: the same topic, the next offset.
    return (lsn if lsn is not None else 0, record["topic"], record["offset"])


def ddl_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(r["value"])["payload"]["after"] for r in records if r["topic"] == DDL_TOPIC and r["value"]]


def _transaction(record: dict[str, Any]) -> int:
    return json.loads(record["value"])["payload"]["source"]["txId"] if record["value"] else 0


def _alters(record: dict[str, Any]) -> bool:
    """A row of the DDL log that changed the table's columns (not its creation)."""
    after = json.loads(record["value"])["payload"]["after"]
    return any(c[0] != "create" for c in json.loads(after["changes"]))


def _same(lake_value: Any, source_value: Any) -> bool:
    if isinstance(lake_value, Decimal) and source_value is not None:
        return lake_value == Decimal(str(source_value))
    return lake_value == source_value


def assert_lake_equals_source(lake, source: dict[str, list[dict[str, Any]] | None]) -> None:
    for table, rows in source.items():
        ident = lake.table(f"public_{table}")
        if rows is None:
            assert not lake.spark.catalog.tableExists(ident), f"{table}: gone at the source, still in the lake"
            continue
        got = lake.rows(f"public_{table}")
        assert [r["id"] for r in got] == [r["id"] for r in rows], table
        for g, s in zip(got, rows, strict=True):
            diff = {c: (g.get(c), v) for c, v in s.items() if not _same(g.get(c), v)}
            assert not diff, f"{table} id {s['id']}: (lake, source) {diff}"
    assert lake.dead_letters() == []


@pytest.mark.parametrize("batching", ["one record per batch", "the DDL log read first"])
def test_columns_dropped_and_added_again_renamed_and_renamed_onto_a_dropped_name_end_as_at_the_source(lake, batching):
    records, source = session("columns")
    changes = [c[0] for row in ddl_rows(records) for c in json.loads(row["changes"])]
    assert changes.count("drop") == 3 and changes.count("rename") == 2 and changes.count("add") == 2
    # The table and its first rows reach the lake first, as on the stack; then the statements and the
    # changes around them.
    first_ddl = next(i for i, r in enumerate(records) if r["topic"] == DDL_TOPIC and _alters(r))
    lake.apply(records[:first_ddl])
    rest = records[first_ddl:]
    if batching == "one record per batch":
        for r in rest:
            lake.apply([r])
    else:
        # A job catching up reads the small DDL topic ahead of the table's.
        lake.apply([r for r in rest if r["topic"] == DDL_TOPIC])
        lake.apply([r for r in rest if r["topic"] != DDL_TOPIC])
    assert_lake_equals_source(lake, source)
    columns = [f.name for f in lake.spark.table(lake.table("public_readd_t")).schema if not f.name.startswith("_cdc_")]
    assert columns == ["id", "note__dropped", "tag", "tag__dropped", "memo__dropped", "town", "note", "memo"]


def test_a_renamed_table_and_two_tables_swapped_through_a_temporary_name_end_as_at_the_source(lake, spark):
    from cdclake.jobs.batch import BatchProcessor

    records, source = session("tables")
    renamed = [(r["old_table_name"], r["table_name"]) for r in ddl_rows(records) if r["old_table_name"]]
    assert renamed == [("ren_a", "ren_b"), ("sw_a", "sw_tmp"), ("sw_b", "sw_a"), ("sw_tmp", "sw_b")]
    # One source transaction per batch (the swap's three renames are one), the job started again
    # between batches: what a table moved to is read back from the lake, not from the job's memory.
    for _, batch in itertools.groupby(records, key=_transaction):
        lake.apply(list(batch))
        lake.processor = BatchProcessor(spark, lake.settings)
    assert_lake_equals_source(lake, source)


def test_without_the_ddl_log_a_renamed_column_is_a_new_column_as_before(lake):
    # The job on a PostgreSQL source without the capture installed: only the data events.
    records, _ = session("columns")
    lake.apply([r for r in records if r["topic"] != DDL_TOPIC])
    columns = [f.name for f in lake.spark.table(lake.table("public_readd_t")).schema if not f.name.startswith("_cdc_")]
    assert columns == ["id", "note", "v", "tag", "memo", "city"]
    # `note` dropped and added again as a decimal, `v` renamed onto the dropped `tag`: they look like
    # type changes the old text values cannot take, so the table's later changes are dead letters.
    reasons = " ".join(d["reason"] for d in lake.dead_letters())
    assert "column 'note' is string in the lake but decimal(6,1) in the event" in reasons
    assert "column 'tag' is string in the lake but int in the event" in reasons


def test_a_ddl_log_row_the_trigger_did_not_write_is_named_in_an_error_and_the_changes_apply(lake, caplog):
    records, _ = session("tables")
    broken = []
    for r in records:
        if r["topic"] == DDL_TOPIC and r["value"]:
            value = json.loads(r["value"])
            value["payload"]["after"]["changes"] = "not json"
            r = {**r, "value": connect_json(value)}
        broken.append(r)
    lake.apply(broken)
    assert "a row of cdclake_ddl at position" in caplog.text and "is not followed" in caplog.text
    # The rename is not followed: each name's events went to a lake table of that name.
    assert [r["id"] for r in lake.rows("public_ren_a")] == [1, 2]
    assert [r["id"] for r in lake.rows("public_ren_b")] == [3]


def _of(records: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """The records of one table: its topic and its rows of the DDL log."""
    return [
        r
        for r in records
        if r["topic"] == f"salesdb.public.{table}"
        or (r["topic"] == DDL_TOPIC and json.loads(r["value"])["payload"]["after"]["table_name"] == table)
    ]


def test_an_enum_label_renamed_at_the_source_reads_anew_in_every_lake_row_and_array_older_than_the_statement(lake):
    records, source = session("enum_using")
    records = _of(records, "enum_t")
    relabels = [c for row in ddl_rows(records) for c in json.loads(row["changes"]) if c[0] == "relabel"]
    assert relabels == [
        ["relabel", "c", ["red", "crimson"]], ["relabel", "cs", ["red", "crimson"]],
        ["relabel", "c", ["it's", "it's new"]], ["relabel", "cs", ["it's", "it's new"]],
    ]  # fmt: skip
    # The rows reach the lake first (1 and 2 never change again); then both renames, row 3's update
    # between them (its `it's` is older than the second one) and row 4 with the new labels.
    first = next(i for i, r in enumerate(records) if r["topic"] == DDL_TOPIC and "relabel" in r["value"])
    lake.apply(records[:first])
    lake.apply(records[first:])
    got = [{**r, "cs": None if r["cs"] is None else json.loads(r["cs"])} for r in lake.rows("public_enum_t")]
    assert [{k: r[k] for k in ("id", "c", "cs", "note")} for r in got] == [
        {k: v for k, v in r.items() if k != "shout"} for r in source["enum_t"]
    ]  # `shout` is generated: pgoutput does not send it
    assert "shout" not in got[0] and lake.dead_letters() == []


def test_a_column_retyped_with_using_is_named_in_an_error_saying_the_table_needs_a_new_snapshot(lake, caplog):
    records, source = session("enum_using")
    lake.apply(_of(records, "using_t"))
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert [e for e in errors if "ALTER TABLE ... TYPE ... USING" in e] == [
        f"source table public.using_t no longer equals the lake: ALTER TABLE ... TYPE ... USING at position {seq} "
        f"rewrote column(s) {columns} at the source without change events, and the lake keeps (casts) the old "
        "values of rows not changed since. Rebuild the lake table from a new snapshot: drop it and take a new "
        'Debezium snapshot of the table (docs/SCHEMA_CHANGES.md, "Statements without row events")'
        for seq, columns in _using_positions(records)
    ]
    # What the error is about: the source divided the stored cents by 100; the lake keeps them (here
    # int -> decimal(10,2) is no exact change, so the update after it went to the dead letters too).
    assert [r["price"] for r in lake.rows("public_using_t")] == [1999, 500]
    assert [r["price"] for r in source["using_t"]] == [19.99, 5.0]


def _using_positions(records: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(position, columns) of each DDL log row that records a USING; a streamed change's position is
    its LSN * 10 + 1 (cdclake/events/ordering.py)."""
    out = []
    for r in records:
        if r["topic"] != DDL_TOPIC:
            continue
        payload = json.loads(r["value"])["payload"]
        if using := [c[1] for c in json.loads(payload["after"]["changes"]) if c[0] == "using"]:
            out.append((payload["source"]["lsn"] * 10 + 1, ", ".join(using)))
    return out
