"""Source names as each table format holds them (common/names.py, formats.Format.column_name) and
the check for names no lake table holds (table_writer.lake_named). No Spark session."""

from __future__ import annotations

import pytest
from cdclake.common.lake_contract import ColumnChange, TableState, keys_of, keys_text
from cdclake.common.names import ESCAPE_PREFIX, MAX_COLUMN_NAME, UnsupportedName, lake_table_name, source_name
from cdclake.events.connect_types import ColumnSpec
from cdclake.events.decode import SchemaGroup
from cdclake.lake.formats.delta import Delta
from cdclake.lake.formats.hudi import Hudi
from cdclake.lake.formats.iceberg import Iceberg
from cdclake.lake.table_plan import TableDDL
from cdclake.lake.table_writer import lake_named
from pyspark.sql import types as T

NAMES = [
    "unit price",
    "select",
    "1st",
    "Größe",
    "CamelCase",
    "v.2",
    "price`s",
    "a,b",
    "x;y{}()=\t\n",
    "_x_already_looks_escaped",
    "__",
    "_hoodie_commit_time",
    "価格",
    "emoji 😀",
    "the widest name MySQL allows: sixty-four characters, ünïcödé too",
]


@pytest.mark.parametrize("name", NAMES)
def test_hudi_holds_every_name_as_an_avro_name_that_reads_back_as_the_source_name(name: str) -> None:
    lake = Hudi().column_name(name)
    assert lake[0].isascii() and (lake[0].isalpha() or lake[0] == "_")
    assert all(c.isascii() and (c.isalnum() or c == "_") for c in lake), lake
    assert source_name(lake) == name
    assert len(lake) <= MAX_COLUMN_NAME


def test_names_avro_takes_stay_as_they_are_and_iceberg_and_delta_keep_every_name() -> None:
    for name in ("id", "first_name", "CamelCase", "select", "_private"):
        assert Hudi().column_name(name) == name
    assert Hudi().column_name("unit price") == ESCAPE_PREFIX + "unit_20_price"
    assert Hudi().column_name("1st") == ESCAPE_PREFIX + "1st"
    assert Hudi().column_name("a_b c") == ESCAPE_PREFIX + "a__b_20_c"
    assert Hudi().column_name("_hoodie_record_key") != "_hoodie_record_key"  # Hudi's own column
    for fmt in (Iceberg(), Delta()):
        assert [fmt.column_name(n) for n in NAMES] == NAMES


def test_escaped_names_are_distinct_for_distinct_names() -> None:
    lake = [Hudi().column_name(n) for n in [*NAMES, "unit_20_price", "_x_unit_20_price", "a b", "a_b"]]
    assert len(set(lake)) == len(lake)


def test_a_name_too_long_once_escaped_is_refused_naming_it_and_the_fix() -> None:
    with pytest.raises(UnsupportedName, match="rename it at the source"):
        Hudi().column_name("é" * 64)


def test_hudi_records_each_escaped_names_source_name_in_a_table_property() -> None:
    lake = [Hudi().column_name(n) for n in ("id", "unit price")]
    assert Hudi().name_properties(lake) == {"cdc.source-name._x_unit_20_price": "unit price"}
    sql = Hudi().create_table_sql("t", [(n, T.StringType()) for n in lake], ["id"], "copy-on-write")
    assert "'cdc.source-name._x_unit_20_price'='unit price'" in sql and "`_x_unit_20_price` string" in sql


def test_a_key_holding_a_comma_is_recorded_as_a_json_list_and_read_back() -> None:
    for keys in (["id"], ["order_id", "line_no"], ["Order Id", "line,no"], ["[x"]):
        assert keys_of(keys_text(keys)) == keys
    assert keys_text(["order_id", "line_no"]) == "order_id,line_no"  # as before
    assert TableState.from_properties([], {"cdc.primary-key": keys_text(["a,b"])}).keys == ["a,b"]


def test_lake_table_names_are_lower_case_with_other_characters_as_underscores() -> None:
    assert lake_table_name("inventory_Unit Prices") == "inventory_unit_prices"
    assert lake_table_name("inventory_Größe") == "inventory_gr__e"


def _group(*names: str, keys: tuple[str, ...] = ("Order Id",)) -> SchemaGroup:
    g = SchemaGroup("inventory", "t", 1, 1, None, None, None, 1, 10)
    g.columns = [ColumnSpec(n, T.StringType(), T.StringType(), ()) for n in names]
    g.keys = list(keys)
    return g


def test_groups_and_statements_take_the_formats_names_and_keep_the_events_names() -> None:
    g = _group("Order Id", "unit price", "plain")
    ddl = TableDDL(
        changes=[ColumnChange("rename", "plain", "new name!", 5), ColumnChange("drop", "unit price", None, 6)]
    )
    named = lake_named("cdc.t", [g], ddl, Hudi())
    assert [(c.name, c.source) for c in g.columns] == [
        ("_x_Order_20_Id", "Order Id"),
        ("_x_unit_20_price", "unit price"),
        ("plain", "plain"),
    ]
    assert g.keys == ["_x_Order_20_Id"]
    assert [(c.old, c.new) for c in named.changes] == [("plain", "_x_new_20_name_21_"), ("_x_unit_20_price", None)]
    lake_named("cdc.t", [g], None, Hudi())  # named once only
    assert g.columns[0].name == "_x_Order_20_Id"


def test_two_columns_differing_only_by_case_are_refused_on_every_format_naming_both() -> None:
    for fmt in (Iceberg(), Delta(), Hudi()):
        with pytest.raises(UnsupportedName, match="'Name' and 'name' differ only by case"):
            lake_named("cdc.t", [_group("Order Id", "Name", "name")], None, fmt)
