"""Row images read straight from Avro bodies (`schema_registry.as_parse_type`) against the JSON path:
for every real change the connector captured in Avro (tests/fixtures/debezium/avro/), its `before`
and `after` images, read with `from_avro` and the schema version the record names, give each column
the value the JSON twin's image (the same change through JsonConverter) parses to, and after the
column's conversion the same lake value: every Connect logical type the fixtures hold (Decimal,
Date, Time, Timestamp, io.debezium.time.*, VariableScaleDecimal, Bits, arrays...)."""

from __future__ import annotations

import base64
import json

import pytest
from avro_records import load
from cdclake.events.connect_types import cast_type, row_columns
from cdclake.events.schema_registry import as_parse_type, parse_frame, reader_schema
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.avro.functions import from_avro

FIXTURES = ["mariadb/all_types.json", "postgres/all_types.json"]  # the ones with a JSON twin


def _changes(fixture: dict) -> dict[str, list[tuple[bytes, str | None, str | None, str]]]:
    """By schema version: (Avro body, the JSON twin's before and after as text, its Connect schema)."""
    out: dict[str, list] = {}
    for m, twin in zip(fixture["messages"], fixture["json_twin"]["messages"], strict=True):
        if m["value"] is None:
            continue
        frame = parse_frame(base64.b64decode(m["value"]))
        payload = twin["value"]["payload"]
        # compact and UTF-8, as JsonConverter writes
        images = [
            None if payload.get(k) is None else json.dumps(payload[k], separators=(",", ":"), ensure_ascii=False)
            for k in ("before", "after")
        ]
        out.setdefault(frame.version_id, []).append((frame.body, *images, json.dumps(twin["value"]["schema"])))
    return out


def _mismatches(spark, definition: str, changes: list) -> tuple[int, list[str]]:
    """(images compared, `column: image` of each value that differs between the paths)."""
    schemas = {c[3] for c in changes}
    assert len(schemas) == 1, "one Connect schema per schema version"
    columns = row_columns(json.loads(schemas.pop()))
    image_type = T.StructType([T.StructField(c.source, c.parse_type) for c in columns])
    df = spark.createDataFrame(changes, "body binary, before string, after string, schema string")
    df = df.select("*", from_avro("body", json.dumps(reader_schema(json.loads(definition)))).alias("v"))
    envelope = df.schema["v"].dataType
    # Both paths' images materialized once: referenced per column, the whole image expressions made a
    # plan of thousands of nodes (minutes of planning for the all-types table).
    images = [
        expr.alias(f"{path}_{image}")
        for image in ("before", "after")
        for path, expr in (
            ("avro", as_parse_type(F.col("v").getField(image), envelope[image].dataType, image_type)),
            ("json", F.from_json(F.col(image), image_type)),
        )
    ]
    df = df.select(*images).localCheckpoint()
    differ = []
    for image in ("before", "after"):
        avro, parsed = F.col(f"avro_{image}"), F.col(f"json_{image}")
        for c in columns:
            a, j = avro.getField(c.source), parsed.getField(c.source)
            lake_a, lake_j = (c.convert(x).cast(cast_type(c.spark_type)) for x in (a, j))
            same = a.eqNullSafe(j) & lake_a.eqNullSafe(lake_j) & (avro.isNull() == parsed.isNull())
            differ.append(F.when(~same, F.lit(f"{c.source}: {image}")))
    rows = df.select(F.array_compact(F.array(*differ)).alias("d")).collect()
    return len(rows), sorted({d for r in rows for d in r["d"]})


@pytest.mark.parametrize("name", FIXTURES)
def test_every_column_of_a_real_avro_row_image_reads_as_its_json_twins_value(spark, name):
    fixture = load(name)
    compared = 0
    for vid, changes in sorted(_changes(fixture).items()):
        n, differ = _mismatches(spark, fixture["schema_versions"][vid], changes)
        assert differ == [], f"schema version {vid}"
        compared += n
    assert compared >= 2
