"""Every Debezium / Connect logical type decodes to the exact lake value.

Field schemas are written the way Debezium 3.x emits them for MySQL (time.precision.mode=
adaptive_time_microseconds, decimal.handling.mode=precise, bigint.unsigned.handling.mode=precise),
inside the envelope of a real captured message."""

from __future__ import annotations

import base64
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from cdc_events import Events, decimal_b64, value_schema_of, with_row_fields
from pyspark.sql import types as T


def f(field: str, type_: str, name: str | None = None, optional: bool = True, params: dict | None = None) -> dict:
    out = {"type": type_, "optional": optional, "field": field}
    if name:
        out["name"] = name
        out["version"] = 1
    if params:
        out["parameters"] = params
    return out


def dec(scale: int, precision: int) -> dict:
    return {"scale": str(scale), "connect.decimal.precision": str(precision)}


FIELDS = [
    f("id", "int32", optional=False),
    f("tiny", "int16"),
    f("small", "int16"),
    f("big", "int64"),
    f("ubig", "bytes", "org.apache.kafka.connect.data.Decimal", params=dec(0, 20)),
    f("price", "bytes", "org.apache.kafka.connect.data.Decimal", params=dec(2, 10)),
    f("huge", "bytes", "org.apache.kafka.connect.data.Decimal", params=dec(10, 38)),
    f("ratio", "float32"),
    f("score", "float64"),
    f("flag", "boolean"),
    f("born", "int32", "io.debezium.time.Date"),
    f("wake", "int64", "io.debezium.time.MicroTime"),
    f("wake_ms", "int32", "io.debezium.time.Time"),
    f("wake_ns", "int64", "io.debezium.time.NanoTime"),
    f("dt_ms", "int64", "io.debezium.time.Timestamp"),
    f("dt_us", "int64", "io.debezium.time.MicroTimestamp"),
    f("dt_ns", "int64", "io.debezium.time.NanoTimestamp"),
    f("ts_zoned", "string", "io.debezium.time.ZonedTimestamp"),
    f("yr", "int32", "io.debezium.time.Year"),
    f("doc", "string", "io.debezium.data.Json"),
    f("color", "string", "io.debezium.data.Enum", params={"allowed": "red,green"}),
    f("tags", "string", "io.debezium.data.EnumSet", params={"allowed": "a,b,c"}),
    f("bits", "bytes", "io.debezium.data.Bits", params={"length": "12"}),
    f("blob", "bytes"),
    f("label", "string"),
    # decimal.handling.mode=string with column.propagate.source.type: precision and scale known
    f(
        "amount_str",
        "string",
        params={
            "__debezium.source.column.type": "DECIMAL",
            "__debezium.source.column.length": "12",
            "__debezium.source.column.scale": "3",
        },
    ),
]

EPOCH_US = 1_795_303_971_123_456  # 2026-11-21T23:32:51.123456Z

ROW = {
    "id": 1,
    "tiny": -7,
    "small": 32000,
    "big": -9_000_000_000_000,
    "ubig": decimal_b64("18446744073709551615", 0),
    "price": decimal_b64("-1234.56", 2),
    "huge": decimal_b64("1234567890123456789012345678.0123456789", 10),
    "ratio": 1.5,
    "score": 2.25,
    "flag": True,
    "born": 20_000,
    "wake": (13 * 3600 + 5 * 60 + 9) * 1_000_000 + 42,
    "wake_ms": -((1 * 3600) * 1000 + 500),
    "wake_ns": 838 * 3_600_000_000_000 + 59 * 60_000_000_000 + 59_000_000_000 + 1_000,
    "dt_ms": EPOCH_US // 1000,
    "dt_us": EPOCH_US,
    "dt_ns": EPOCH_US * 1000 + 789,
    "ts_zoned": "2026-11-21T23:32:51.5+01:00",
    "yr": 2026,
    "doc": '{"a": [1, 2]}',
    "color": "green",
    "tags": "a,c",
    "bits": base64.b64encode(b"\x0a\x01").decode(),
    "blob": base64.b64encode(b"\x00\xffhello").decode(),
    "label": "naïve ☃",
    "amount_str": "123456789.125",
}


@pytest.fixture
def typed_lake(lake):
    schema = with_row_fields(value_schema_of("mariadb/c_insert.json"), FIELDS)
    ev = Events(topic="mdb.inventory.all_types", table="all_types")
    ev.record("c", {"id": 1}, ROW, value_schema=schema)
    nulls = {k: None for k in ROW} | {"id": 2}
    ev.record("c", {"id": 2}, nulls, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 0, report.dead_reasons
    return lake


def test_every_logical_type_decodes_to_the_exact_value(typed_lake):
    row = typed_lake.by_id("inventory_all_types")[1]
    assert row["tiny"] == -7 and row["small"] == 32000 and row["big"] == -9_000_000_000_000
    assert row["ubig"] == Decimal("18446744073709551615")
    assert row["price"] == Decimal("-1234.56")
    assert row["huge"] == Decimal("1234567890123456789012345678.0123456789")
    assert row["ratio"] == 1.5 and row["score"] == 2.25 and row["flag"] is True
    assert row["born"] == date(2024, 10, 4)
    assert row["wake"] == "13:05:09.000042"
    assert row["wake_ms"] == "-01:00:00.500000"
    assert row["wake_ns"] == "838:59:59.000001"
    assert row["dt_ms"] == datetime(2026, 11, 21, 23, 32, 51, 123000)
    assert row["dt_us"] == datetime(2026, 11, 21, 23, 32, 51, 123456)
    assert row["dt_ns"] == datetime(2026, 11, 21, 23, 32, 51, 123456)
    assert row["ts_zoned"].astimezone(UTC) == datetime(2026, 11, 21, 22, 32, 51, 500000, tzinfo=UTC)
    assert row["yr"] == 2026
    assert row["doc"] == '{"a": [1, 2]}'
    assert row["color"] == "green" and row["tags"] == "a,c"
    assert bytes(row["bits"]) == b"\x0a\x01"
    assert bytes(row["blob"]) == b"\x00\xffhello"
    assert row["label"] == "naïve ☃"
    assert row["amount_str"] == Decimal("123456789.125")


def test_logical_types_map_to_the_documented_lake_types(typed_lake):
    schema = {f.name: f.dataType for f in typed_lake.spark.table(typed_lake.table("inventory_all_types")).schema}
    assert schema["tiny"] == T.IntegerType() and schema["big"] == T.LongType()
    assert schema["ubig"] == T.DecimalType(20, 0)
    assert schema["price"] == T.DecimalType(10, 2)
    assert schema["huge"] == T.DecimalType(38, 10)
    assert schema["born"] == T.DateType()
    assert schema["dt_ms"] == T.TimestampNTZType() and schema["dt_us"] == T.TimestampNTZType()
    assert schema["ts_zoned"] == T.TimestampType()
    assert schema["wake"] == T.StringType()
    assert schema["bits"] == T.BinaryType() and schema["blob"] == T.BinaryType()
    assert schema["amount_str"] == T.DecimalType(12, 3)
    assert schema["id"].typeName() == "integer"


def test_null_values_of_every_type_stay_null(typed_lake):
    row = typed_lake.by_id("inventory_all_types")[2]
    assert {k: row[k] for k in ROW if k != "id" and row[k] is not None} == {}


def test_decimal_string_and_double_modes_keep_what_the_connector_sent(lake):
    schema = with_row_fields(
        value_schema_of("mariadb/c_insert.json"),
        [f("id", "int32", optional=False), f("as_string", "string"), f("as_double", "float64")],
    )
    ev = Events(topic="mdb.inventory.modes", table="modes")
    ev.record("c", {"id": 1}, {"id": 1, "as_string": "99.99", "as_double": 99.99}, value_schema=schema)
    lake.apply(ev.take())
    row = lake.by_id("inventory_modes")[1]
    assert row["as_string"] == "99.99" and row["as_double"] == 99.99


def test_decimal_decoding_is_exact_for_random_values(spark):
    import random

    from cdclake.connect_types import decimal_from_base64
    from pyspark.sql import functions as F

    rng = random.Random(7)
    values = [0, 1, -1, 127, 128, -128, -129, 2**63 - 1, -(2**63), 2**64, -(2**64), 10**38 - 1, -(10**38 - 1)]
    values += [rng.randint(-(10**37), 10**37) for _ in range(300)]
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 60  # exact arithmetic for 38-digit values on the Python side too
        encoded = [(decimal_b64(Decimal(v).scaleb(-6), 6), str(v)) for v in values]
        df = spark.createDataFrame(encoded, "b string, v string")
        got = df.select("v", decimal_from_base64(F.col("b"), 38, 6).alias("d")).collect()
        wrong = [(r.v, r.d) for r in got if r.d != Decimal(int(r.v)).scaleb(-6)]
    assert wrong == []
