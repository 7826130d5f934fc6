"""Every Debezium / Connect logical type decodes to the exact lake value.

The MariaDB and PostgreSQL column types come as the real connector wrote them: messages captured
from the all-types tables (tests/type_matrix.py) of the stack tests (test_pipeline_end_to_end.py,
test_postgres_pipeline.py), compared value by value with what the database held then.

Hand-written field schemas remain only for what the project's connector configuration does not
emit, so no captured message has it: time.precision.mode=connect and nanosecond types
(io.debezium.time.Time in ms, NanoTime, NanoTimestamp; the configuration uses
adaptive_time_microseconds), decimal.handling.mode=string/double and column.propagate.source.type
(the configuration uses precise), and Connect's Java type names float32/float64 that some
converters write instead of JsonConverter's float/double."""

from __future__ import annotations

import base64
import copy
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import type_matrix as tm
from cdc_events import Events, decimal_b64, load, value_schema_of, with_row_fields
from pyspark.sql import types as T

TOPIC = {"mariadb": "salesdb.salesdb.all_types", "postgres": "salesdb.public.all_types"}
LAKE_TABLE = {"mariadb": "salesdb_all_types", "postgres": "public_all_types"}
PLACEHOLDER = "__debezium_unavailable_value"


def duckdb_rows(lake, table: str) -> dict:
    """The lake table as another engine reads it (DuckDB, Athena's role in scripts/cdctools/lake_reader.py): no
    Python conversion of Spark's, which cannot build datetimes near year 1 from epoch values."""
    from cdctools import lake_reader as lakefiles

    con = lakefiles.connect()
    try:
        location = lakefiles.table_location(Path(lake.settings.warehouse), lake.namespace, table)
        rows = lakefiles.rows(con, location)
        assert len(rows) == len({r["id"] for r in rows}), f"{table}: an id stored more than once"
        return {r["id"]: r for r in rows}
    finally:
        con.close()


@pytest.fixture(scope="module")
def real_lake(spark, warehouse, tmp_path_factory, lake_class):
    """Both sources' captured all-types messages applied in one batch (two tables, written side by side)."""
    lake = lake_class(spark, warehouse, tmp_path_factory.mktemp("types"))
    batch = [r for d in ("mariadb", "postgres") for r in tm.kafka_records(TOPIC[d], tm.load_fixtures(d)[0])]
    return lake, lake.apply(batch)


@pytest.mark.parametrize("dialect", ["mariadb", "postgres"])
def test_every_column_type_of_real_messages_decodes_to_the_value_the_database_held(real_lake, dialect):
    lake, _ = real_lake
    _, source = tm.load_fixtures(dialect)
    assert tm.differences(dialect, duckdb_rows(lake, LAKE_TABLE[dialect]), source) == []


def test_values_no_lake_type_holds_are_dead_lettered_with_the_column_and_the_rest_applies(real_lake):
    lake, report = real_lake
    infinite = [m for m in tm.load_fixtures("postgres")[0] if tm.is_infinite_row(m)]
    assert report.dead == len(infinite) >= 1
    letters = lake.dead_letters()
    assert {d["topic"] for d in letters} == {TOPIC["postgres"]}  # none of MariaDB's
    assert {d["offset"] for d in letters} == {m["offset"] for m in infinite}
    assert {d["reason"] for d in letters} == {
        "could not decode column(s): c_timestamp (io.debezium.time.MicroTimestamp value does not fit "
        "timestamp_ntz), c_timestamptz (io.debezium.time.ZonedTimestamp value does not fit timestamp)"
    }


def test_real_column_types_map_to_the_documented_lake_types(real_lake):
    lake, _ = real_lake

    def schema(dialect):
        return {f.name: f.dataType for f in lake.spark.table(lake.table(LAKE_TABLE[dialect])).schema}

    mdb, pg = schema("mariadb"), schema("postgres")
    assert mdb["c_tinyint"] == T.IntegerType() and mdb["c_int_u"] == T.LongType()
    assert mdb["c_bigint_u"] == T.DecimalType(20, 0) and mdb["c_decimal_wide"] == T.DecimalType(38, 10)
    assert mdb["c_decimal_max"] == T.StringType()  # DECIMAL(65,30): exact text
    assert mdb["c_float"] == T.FloatType() and mdb["c_double"] == T.DoubleType()
    assert mdb["c_bit1"] == T.BooleanType() and mdb["c_bit12"] == T.BinaryType()
    assert mdb["c_blob"] == T.BinaryType() and mdb["c_json"] == T.StringType()
    assert mdb["c_datetime0"] == T.TimestampNTZType() and mdb["c_timestamp6"] == T.TimestampType()
    assert mdb["c_time6"] == T.StringType() and mdb["c_year"] == T.IntegerType() and mdb["c_date"] == T.DateType()
    assert mdb["c_point"] == T.StringType() and mdb["c_geometry"] == T.StringType()
    assert pg["c_real"] == T.FloatType() and pg["c_double"] == T.DoubleType()
    assert pg["c_numeric"] == T.DecimalType(10, 2) and pg["c_numeric_huge"] == T.StringType()
    assert pg["c_numeric_free"] == T.StringType() and pg["c_bytea"] == T.BinaryType()
    assert pg["c_interval"] == T.StringType() and pg["c_int_array"] == T.StringType()
    assert pg["c_timestamp"] == T.TimestampNTZType() and pg["c_timestamptz"] == T.TimestampType()


def _toast_messages():
    return load("postgres/toast_c_insert.json"), load("postgres/toast_u_update_unavailable_value.json")


def _toast_lake(make_lake, *batches):
    lake = make_lake()
    for batch in batches:
        report = lake.apply(tm.kafka_records("salesdb.public.toasty", batch))
        assert report.dead == 0, report.dead_reasons
    return lake, lake.by_id("public_toasty")


def test_an_update_without_its_toasted_values_keeps_the_lake_values(make_lake):
    insert, update = _toast_messages()
    assert update["value"]["payload"]["after"]["big"] == PLACEHOLDER  # what the connector sent
    _, rows = _toast_lake(make_lake, [insert], [update])
    ins = insert["value"]["payload"]["after"]
    assert rows[1]["note"] == "one, changed"
    assert rows[1]["big"] == ins["big"] and len(rows[1]["big"]) == 10_000
    assert bytes(rows[1]["blob"]) == base64.b64decode(ins["blob"])


def test_an_insert_and_an_update_without_its_toasted_values_in_one_batch_keep_the_inserted_values(make_lake):
    insert, update = _toast_messages()
    _, rows = _toast_lake(make_lake, [insert, update])
    ins = insert["value"]["payload"]["after"]
    assert rows[1]["note"] == "one, changed"
    assert rows[1]["big"] == ins["big"] and bytes(rows[1]["blob"]) == base64.b64decode(ins["blob"])


def test_an_update_that_changes_the_toasted_value_replaces_it(make_lake):
    insert, update = _toast_messages()
    changed = copy.deepcopy(update)
    changed["offset"] += 1
    changed["value"]["payload"]["source"]["lsn"] += 8
    changed["value"]["payload"]["after"]["big"] = "new text"
    _, rows = _toast_lake(make_lake, [insert], [update, changed])
    assert rows[1]["big"] == "new text"
    assert bytes(rows[1]["blob"]) == base64.b64decode(insert["value"]["payload"]["after"]["blob"])


def test_the_placeholder_is_kept_as_sent_when_the_job_is_told_there_is_none(make_lake):
    insert, update = _toast_messages()
    lake = make_lake(unavailable_value_placeholder="")
    lake.apply(tm.kafka_records("salesdb.public.toasty", [insert]))
    lake.apply(tm.kafka_records("salesdb.public.toasty", [update]))
    assert lake.rows("public_toasty")[0]["big"] == PLACEHOLDER


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


# Hand-written: what the project's connector configuration does not emit (module docstring).
FIELDS = [
    f("id", "int32", optional=False),
    f("ratio", "float32"),
    f("score", "float64"),
    f("wake_ms", "int32", "io.debezium.time.Time"),
    f("wake_ns", "int64", "io.debezium.time.NanoTime"),
    f("dt_ns", "int64", "io.debezium.time.NanoTimestamp"),
    f("c_date", "int32", "org.apache.kafka.connect.data.Date"),
    f("c_time", "int32", "org.apache.kafka.connect.data.Time"),
    f("c_ts", "int64", "org.apache.kafka.connect.data.Timestamp"),
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
FAR_NS = 2**63 - 1  # 2262-04-11T23:47:16.854775807Z, the last NanoTimestamp: beyond a double's precision

ROW = {
    "id": 1,
    "ratio": 1.5,
    "score": 2.25,
    "wake_ms": -((1 * 3600) * 1000 + 500),
    "wake_ns": 838 * 3_600_000_000_000 + 59 * 60_000_000_000 + 59_000_000_000 + 1_000,
    "dt_ns": EPOCH_US * 1000 + 789,
    "c_date": 20_000,
    "c_time": (13 * 3600 + 5 * 60 + 9) * 1000 + 42,
    "c_ts": EPOCH_US // 1000,
    "amount_str": "123456789.125",
}


@pytest.fixture
def typed_lake(lake):
    schema = with_row_fields(value_schema_of("mariadb/c_insert.json"), FIELDS)
    ev = Events(topic="mdb.inventory.all_types", table="all_types")
    ev.record("c", {"id": 1}, ROW, value_schema=schema)
    nulls = {k: None for k in ROW} | {"id": 2}
    ev.record("c", {"id": 2}, nulls, value_schema=schema)
    ev.record("c", {"id": 3}, nulls | {"id": 3, "dt_ns": FAR_NS}, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 0, report.dead_reasons
    return lake


def test_logical_types_the_connector_configuration_does_not_emit_decode_to_the_exact_value(typed_lake):
    rows = typed_lake.by_id("inventory_all_types")
    row = rows[1]
    assert row["ratio"] == 1.5 and row["score"] == 2.25
    assert row["wake_ms"] == "-01:00:00.500000"
    assert row["wake_ns"] == "838:59:59.000001"
    assert row["dt_ns"] == datetime(2026, 11, 21, 23, 32, 51, 123456)
    assert row["c_date"] == date(2024, 10, 4)
    assert row["c_time"] == "13:05:09.042000"
    assert row["c_ts"] == datetime(2026, 11, 21, 23, 32, 51, 123000)
    assert row["amount_str"] == Decimal("123456789.125")
    assert rows[3]["dt_ns"] == datetime(2262, 4, 11, 23, 47, 16, 854775)


def test_logical_types_map_to_the_documented_lake_types(typed_lake):
    schema = {f.name: f.dataType for f in typed_lake.spark.table(typed_lake.table("inventory_all_types")).schema}
    assert schema["ratio"] == T.FloatType() and schema["score"] == T.DoubleType()
    assert schema["dt_ns"] == T.TimestampNTZType() and schema["c_ts"] == T.TimestampNTZType()
    assert schema["wake_ns"] == T.StringType() and schema["c_time"] == T.StringType()
    assert schema["c_date"] == T.DateType()
    assert schema["amount_str"] == T.DecimalType(12, 3)
    assert schema["id"].typeName() == "integer"


def test_null_values_of_every_type_stay_null(typed_lake):
    row = typed_lake.by_id("inventory_all_types")[2]
    assert {k: row[k] for k in ROW if k != "id" and row[k] is not None} == {}


def test_decimal_string_and_double_modes_keep_what_the_connector_sent(lake):
    schema = with_row_fields(
        value_schema_of("mariadb/c_insert.json"),
        [f("id", "int32", optional=False), f("as_string", "string"), f("as_double", "double")],
    )
    ev = Events(topic="mdb.inventory.modes", table="modes")
    ev.record("c", {"id": 1}, {"id": 1, "as_string": "99.99", "as_double": 99.99}, value_schema=schema)
    lake.apply(ev.take())
    row = lake.by_id("inventory_modes")[1]
    assert row["as_string"] == "99.99" and row["as_double"] == 99.99


def test_decimal_decoding_is_exact_for_random_values(spark):
    import random

    from cdclake.events.connect_types import decimal_from_base64
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


def test_wide_decimal_text_is_exact_beyond_38_digits(spark):
    import decimal
    import random

    from cdclake.events.connect_types import wide_decimal_text
    from pyspark.sql import functions as F

    rng = random.Random(11)
    values = [0, 1, -1, 9, -10, 127, 128, -128, -129, 255, -256, 10**65 - 1, -(10**65 - 1)]
    values += [rng.randint(-(10**70), 10**70) for _ in range(300)]
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        encoded = [(decimal_b64(Decimal(v).scaleb(-30), 30), str(v)) for v in values]
        df = spark.createDataFrame(encoded, "b string, v string")
        got = df.select("v", wide_decimal_text(F.col("b"), F.lit(30)).alias("t")).collect()
        wrong = [
            (r.v, r.t) for r in got if Decimal(r.t) != Decimal(int(r.v)).scaleb(-30) or len(r.t.split(".")[1]) != 30
        ]
    assert wrong == []


# PostgreSQL's to_json of each array column of the captured row (UTC session), as the database
# printed it when the messages were captured (tests/fixtures/debezium/postgres/arrays_*.json).
PG_ARRAYS_TO_JSON = {
    "n": "[1.50,null,-3]",
    "n2": "[1.50,2.00]",
    "d": '["2024-02-29",null]',
    "ts": '["2024-02-29T12:34:56.123456"]',
    "tz": '["2024-02-29T07:04:56+00:00"]',
    "b": "[true,false,null]",
    "u": '["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]',
    "by": '["\\\\x00ff"]',
    "f": '[1.5,"NaN"]',
    "t": '["12:34:56"]',
    "j": '[{"a": 1}]',
}


def test_array_elements_reach_the_lake_as_values_not_as_the_connectors_encodings(make_lake):
    # numeric elements arrived as base64 structs, dates as epoch days, timestamps and times as
    # microseconds, bytea as base64, jsonb as quoted text.
    import json

    from cdctools import reconcile

    lake = make_lake()
    batch = [load("postgres/arrays_c_insert.json"), load("postgres/arrays_c_insert_nulls.json")]
    report = lake.apply(tm.kafka_records("salesdb.public.arr_t", batch))
    assert report.dead == 0, report.dead_reasons
    rows = lake.by_id("public_arr_t")
    assert rows[2] == {**rows[2], **dict.fromkeys(PG_ARRAYS_TO_JSON)}
    got = {c: rows[1][c] for c in PG_ARRAYS_TO_JSON}
    assert json.loads(got["n"]) == [1.5, None, -3] and got["d"] == '["2024-02-29",null]'
    assert got["ts"] == '["2024-02-29T12:34:56.123456"]' and got["by"] == '["\\\\x00ff"]'
    assert json.loads(got["j"]) == [{"a": 1}] and json.loads(got["t"]) == ["12:34:56.000000"]
    # reconcile's JSON comparison (the oracle users run) takes each one as the source's.
    for c, want in PG_ARRAYS_TO_JSON.items():
        assert reconcile.normalise_as(reconcile.JSON, got[c]) == reconcile.normalise_as(reconcile.JSON, want), c
