"""The Connect schema -> lake type mapping is pure: a field schema in, parse and lake types out (no Spark)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cdc_events import load
from cdclake.events.connect_types import UnsupportedSchema, column_spec, key_columns, mysql_string_default, row_columns
from pyspark.sql import types as T

INT, LONG, FLOAT, DOUBLE = T.IntegerType(), T.LongType(), T.FloatType(), T.DoubleType()
BOOL, STR, BIN, DATE = T.BooleanType(), T.StringType(), T.BinaryType(), T.DateType()
NTZ, TS = T.TimestampNTZType(), T.TimestampType()
VSD = T.StructType([T.StructField("scale", INT), T.StructField("value", STR)])
DECIMAL = "org.apache.kafka.connect.data.Decimal"


def field(ctype: str, name: str | None = None, **params: Any) -> dict[str, Any]:
    f: dict[str, Any] = {"type": ctype, "field": "c", "optional": True}
    if name:
        f["name"] = name
    if params:
        f["parameters"] = params
    return f


def decimal(precision: int | None, scale: int) -> dict[str, Any]:
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    return {"type": "bytes", "field": "c", "name": DECIMAL, "parameters": params}


def propagated(col_type: str, length: str | None, scale: str | None) -> dict[str, Any]:
    """A string column with column.propagate.source.type (decimal.handling.mode=string)."""
    params = {"__debezium.source.column.type": col_type}
    if length is not None:
        params["__debezium.source.column.length"] = length
    if scale is not None:
        params["__debezium.source.column.scale"] = scale
    return {"type": "string", "field": "c", "parameters": params}


# (field schema, JSON parse type, lake type)
MAPPING = [
    pytest.param(field("int8"), INT, INT, id="int8"),
    pytest.param(field("int16"), INT, INT, id="int16"),
    pytest.param(field("int32"), INT, INT, id="int32"),
    pytest.param(field("int64"), LONG, LONG, id="int64"),
    pytest.param(field("float"), FLOAT, FLOAT, id="float"),
    pytest.param(field("float32"), FLOAT, FLOAT, id="float32 (Connect Java name)"),
    pytest.param(field("double"), DOUBLE, DOUBLE, id="double"),
    pytest.param(field("float64"), DOUBLE, DOUBLE, id="float64 (Connect Java name)"),
    pytest.param(field("boolean"), BOOL, BOOL, id="boolean"),
    pytest.param(field("string"), STR, STR, id="string"),
    pytest.param(field("int32", "io.debezium.time.Year"), INT, INT, id="Year"),
    pytest.param(field("string", "io.debezium.data.Enum", allowed="a,b"), STR, STR, id="Enum"),
    pytest.param(field("string", "io.debezium.data.EnumSet", allowed="a,b"), STR, STR, id="EnumSet"),
    pytest.param(field("string", "io.debezium.data.Json"), STR, STR, id="Json"),
    pytest.param(field("string", "io.debezium.data.Uuid"), STR, STR, id="Uuid"),
    pytest.param(field("string", "io.debezium.time.ZonedTime"), STR, STR, id="ZonedTime"),
    pytest.param(field("string", "io.debezium.time.Interval"), STR, STR, id="Interval as string"),
    pytest.param(decimal(10, 2), STR, T.DecimalType(10, 2), id="Decimal(10,2)"),
    pytest.param(decimal(38, 10), STR, T.DecimalType(38, 10), id="Decimal at the lake's precision limit"),
    pytest.param(decimal(None, 4), STR, T.DecimalType(38, 4), id="Decimal without precision: 38"),
    pytest.param(decimal(39, 0), STR, STR, id="Decimal(39,0): exact text"),
    pytest.param(decimal(65, 30), STR, STR, id="MySQL DECIMAL(65,30): exact text"),
    pytest.param(decimal(10, 39), STR, STR, id="scale beyond 38: exact text"),
    pytest.param(decimal(3, 5), STR, T.DecimalType(5, 5), id="PG numeric(3,5): precision raised to the scale"),
    pytest.param(decimal(0, 0), STR, T.DecimalType(1, 0), id="precision 0: at least 1"),
    pytest.param(
        field("struct", "io.debezium.data.VariableScaleDecimal"), VSD, STR, id="VariableScaleDecimal: exact text"
    ),
    pytest.param(propagated("DECIMAL", "12", "3"), STR, T.DecimalType(12, 3), id="string DECIMAL with length"),
    pytest.param(propagated("numeric", "60", "4"), STR, T.DecimalType(38, 4), id="string NUMERIC beyond 38: 38"),
    pytest.param(propagated("NUMERIC", "5", None), STR, T.DecimalType(5, 0), id="string NUMERIC without scale"),
    pytest.param(propagated("NUMERIC", None, "2"), STR, STR, id="string NUMERIC without length: text"),
    pytest.param(propagated("VARCHAR", "20", None), STR, STR, id="propagated VARCHAR: text"),
    pytest.param(field("int32", "io.debezium.time.Date"), INT, DATE, id="Debezium Date"),
    pytest.param(field("int32", "org.apache.kafka.connect.data.Date"), INT, DATE, id="Connect Date"),
    pytest.param(field("int64", "io.debezium.time.Timestamp"), LONG, NTZ, id="Timestamp (ms)"),
    pytest.param(field("int64", "io.debezium.time.MicroTimestamp"), LONG, NTZ, id="MicroTimestamp"),
    pytest.param(field("int64", "io.debezium.time.NanoTimestamp"), LONG, NTZ, id="NanoTimestamp"),
    pytest.param(field("int64", "org.apache.kafka.connect.data.Timestamp"), LONG, NTZ, id="Connect Timestamp"),
    pytest.param(field("string", "io.debezium.time.ZonedTimestamp"), STR, TS, id="ZonedTimestamp"),
    pytest.param(field("int32", "io.debezium.time.Time"), LONG, STR, id="Time (ms)"),
    pytest.param(field("int64", "io.debezium.time.MicroTime"), LONG, STR, id="MicroTime"),
    pytest.param(field("int64", "io.debezium.time.NanoTime"), LONG, STR, id="NanoTime"),
    pytest.param(field("int32", "org.apache.kafka.connect.data.Time"), LONG, STR, id="Connect Time"),
    pytest.param(field("bytes"), STR, BIN, id="bytes: base64 text"),
    pytest.param(field("bytes", "io.debezium.data.Bits", length="12"), STR, BIN, id="Bits(12)"),
    pytest.param(field("bytes", "io.debezium.data.Bits"), STR, BIN, id="Bits without length"),
    pytest.param(field("array"), STR, STR, id="array: JSON text"),
    pytest.param(field("map"), STR, STR, id="map: JSON text"),
    pytest.param(field("struct", "io.debezium.data.geometry.Point"), STR, STR, id="Point: JSON text"),
    pytest.param(field("int64", "com.example.NotALogicalType"), LONG, LONG, id="unknown logical name: physical type"),
    pytest.param(field("string", "io.debezium.time.Unknown"), STR, STR, id="unknown Debezium name: physical type"),
]


@pytest.mark.parametrize(("schema", "parse_type", "lake_type"), MAPPING)
def test_connect_field_maps_to_its_parse_and_lake_type(schema, parse_type, lake_type):
    spec = column_spec(schema)
    assert (spec.name, spec.parse_type, spec.spark_type) == ("c", parse_type, lake_type)


def test_logical_types_keep_their_connect_name_for_error_messages():
    assert column_spec(field("int64", "io.debezium.time.MicroTimestamp")).connect_name == (
        "io.debezium.time.MicroTimestamp"
    )
    assert column_spec(field("int64")).connect_name is None


def test_the_source_default_is_carried_as_encoded():
    schema = decimal(10, 2) | {"default": "AJY="}
    assert column_spec(schema).default == "AJY="


# A real MariaDB event (Debezium's MySQL connector) after ADD COLUMN ... DEFAULT with quotes and
# escapes; row 2 was updated only in `remark`, so its other new columns hold the stored defaults.
QUOTED_DEFAULTS = "mariadb/u_update_after_add_quoted_defaults.json"


def test_mysql_string_defaults_are_the_values_mysql_stored_not_the_literals_of_the_ddl():
    value = load(QUOTED_DEFAULTS)["value"]
    after = value["payload"]["after"]
    defaults = {c.name: c.default for c in row_columns(value["schema"])}
    assert defaults["remark"] == "it's new"  # DEFAULT 'it''s new' (this row's remark was updated)
    for column in ("r2", "r3", "r4", "r5", "r6", "r7", "r8"):
        assert defaults[column] == after[column], column


@pytest.mark.parametrize(
    "sent, stored",
    [
        ("it''s", "it's"),
        ("a\\'b", "a'b"),
        ("x''''y", "x''y"),
        ("tab\\there", "tab\there"),
        ("two\\\\\\\\back", "two\\\\back"),
        ("like\\%\\_", "like\\%\\_"),
        ('q\\"', 'q"'),
        ("nul\\0 sub\\Z", "nul\0 sub\x1a"),
        ("", ""),
    ],
)
def test_mysql_string_default_applies_the_escapes_of_a_mysql_string_literal(sent, stored):
    assert mysql_string_default(sent) == stored


def test_defaults_of_other_connectors_are_taken_as_sent():
    value = copy.deepcopy(load(QUOTED_DEFAULTS)["value"])
    for f in value["schema"]["fields"]:
        if f["field"] == "source":
            f["name"] = "io.debezium.connector.postgresql.Source"
    assert {c.name: c.default for c in row_columns(value["schema"])}["remark"] == "it''s new"


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "int32"}, id="no field name"),
        pytest.param({"type": "int32", "field": ""}, id="empty field name"),
        pytest.param(field("int128"), id="unknown physical type"),
        pytest.param({"field": "c"}, id="no type"),
    ],
)
def test_unmappable_field_schemas_raise_unsupported_schema(schema):
    with pytest.raises(UnsupportedSchema):
        column_spec(schema)


def test_row_columns_come_from_after_else_before():
    image = {"type": "struct", "fields": [field("int32") | {"field": "id"}, field("string") | {"field": "n"}]}
    envelope = {"type": "struct", "fields": [{"field": "before", **image}, {"field": "op", "type": "string"}]}
    assert [c.name for c in row_columns(envelope)] == ["id", "n"]
    after = {"field": "after", "type": "struct", "fields": [field("int64") | {"field": "id"}]}
    envelope["fields"].append(after)
    assert [(c.name, c.spark_type) for c in row_columns(envelope)] == [("id", LONG)]


@pytest.mark.parametrize(
    "envelope",
    [
        pytest.param({"type": "struct", "fields": [{"field": "op", "type": "string"}]}, id="no row image"),
        pytest.param({"type": "struct", "fields": [{"field": "after", "type": "string"}]}, id="image not a struct"),
        pytest.param({"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": []}]}, id="empty"),
        pytest.param({"type": "struct"}, id="no fields at all"),
    ],
)
def test_envelope_schemas_without_a_row_struct_are_unsupported(envelope):
    with pytest.raises(UnsupportedSchema):
        row_columns(envelope)


def test_key_columns_are_the_key_struct_fields_in_order():
    key = {"type": "struct", "fields": [{"field": "b", "type": "int32"}, {"field": "a", "type": "string"}]}
    assert key_columns(key) == ["b", "a"]


@pytest.mark.parametrize(
    "key",
    [None, {"type": "int32"}, {"type": "struct", "fields": []}],
    ids=["no key schema", "not a struct", "no fields"],
)
def test_a_key_schema_without_fields_is_unsupported(key):
    with pytest.raises(UnsupportedSchema):
        key_columns(key)
