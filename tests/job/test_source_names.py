"""Names the source allows quoted (tests/name_corpus.py: spaces, punctuation, a reserved word, a
leading digit, mixed case, letters outside ASCII, the longest MySQL allows, in the key too; renamed
from and to such names; one added) on Iceberg. The Delta and Hudi modules apply the same batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import name_corpus as nc
import pytest


@pytest.fixture(scope="module")
def named(spark, warehouse, tmp_path_factory, lake_class) -> tuple[Any, list[Any]]:
    lake = lake_class(spark, warehouse, tmp_path_factory.mktemp("names"))
    return lake, [lake.apply(batch) for batch in nc.batches()]


def by_key(rows: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    out = {(r[nc.KEY[0]], r[nc.KEY[1]]): {k: v for k, v in r.items() if not k.startswith("_cdc_")} for r in rows}
    assert len(out) == len(rows), "a key stored more than once"
    return out


def test_a_table_named_and_keyed_with_every_kind_of_name_holds_the_sources_rows_under_its_names(named):
    lake, reports = named
    assert [r.dead for r in reports] == [0, 0, 0]
    table = lake.spark.table(lake.table(nc.LAKE_TABLE))
    assert [c for c in table.columns if not c.startswith("_cdc_")] == list(nc.expected()[(3, 1)])
    assert by_key([r.asDict() for r in table.collect()]) == nc.expected()
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {lake.table(nc.LAKE_TABLE)}").collect()}
    assert props["cdc.primary-key"] == '["Order Id", "line,no"]'  # a name with a comma: a JSON list


def test_reconciles_reader_gives_the_rows_under_the_sources_names(named):
    lake, _ = named
    from cdctools import lake_reader as lakefiles

    con = lakefiles.connect()
    try:
        location = lakefiles.table_location(Path(lake.settings.warehouse), lake.namespace, nc.LAKE_TABLE)
        assert by_key(lakefiles.rows(con, location)) == nc.expected()
    finally:
        con.close()


def test_a_second_source_table_mapping_to_the_same_lake_table_is_set_aside_naming_both(make_lake):
    from cdc_events import Events, customer

    lake = make_lake()
    lower, upper = (
        Events(topic="mdb.inventory.orders", table="orders"),
        Events(topic="mdb.inventory.Orders", table="Orders"),
    )
    lower.record("c", {"id": 1}, customer(1))
    lake.apply(lower.take())
    upper.record("c", {"id": 2}, customer(2, "Upper"))
    report = lake.apply(upper.take())
    [t] = report.tables
    assert t.set_aside.startswith("UnsupportedName: source tables inventory.orders and inventory.Orders both map")
    lake.assert_rows({1: "Sally"}, name="inventory_orders")  # nothing of the other table in it


def test_a_table_with_two_columns_differing_only_by_case_is_set_aside_and_nothing_is_written(make_lake):
    from cdc_events import Events, customer, row_fields, value_schema_of, with_row_fields

    lake = make_lake()
    ev = Events()
    schema = value_schema_of("mariadb/c_insert.json")
    fields = [*row_fields(schema), {"type": "string", "optional": True, "field": "First_Name"}]
    ev.record("c", {"id": 1}, customer(1) | {"First_Name": "Other"}, value_schema=with_row_fields(schema, fields))
    [t] = lake.apply(ev.take()).tables
    assert (
        t.set_aside.startswith("UnsupportedName: table ")
        and "'first_name' and 'First_Name' differ only by case" in t.set_aside
    )
    assert t.dead == 1
    assert not lake.spark.catalog.tableExists(lake.table())
