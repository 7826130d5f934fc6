"""Properties of the pure (no Spark) half of decoding, on generated and mutated Debezium schemas.

A schema group's schema is resolved in Python before any row is decoded (decode.SchemaGroup.resolve,
connect_types). Whatever the schema text (truncated, mistyped, unknown logical types, garbage
parameters), resolving either yields columns whose lake types Iceberg can hold and keys among
those columns, or an `unsupported schema` error that dead-letters the group: it never raises,
which would fail the whole batch.

Budget: FUZZ_EXAMPLES examples per property (default 300; `make fuzz` runs more). Derandomized,
so every run of the suite tries the same inputs.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from cdc_events import captured
from cdclake.events.connect_types import MAX_DECIMAL_PRECISION
from cdclake.events.decode import SchemaGroup, _key_specs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES") or 300)
PROPERTY = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _captured() -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """(value schema, key schema) of every captured change event (not the schema-change events)."""
    out = []
    for _, rec in captured():
        value, key = rec.get("value") if isinstance(rec, dict) else None, rec.get("key")
        schema = value.get("schema") if isinstance(value, dict) else None
        if isinstance(schema, dict) and any(f.get("field") == "after" for f in schema.get("fields", [])):
            out.append((value["schema"], key.get("schema") if isinstance(key, dict) else None))
    return out


CAPTURED = _captured()
LOGICAL_NAMES = [
    "org.apache.kafka.connect.data.Decimal",
    "io.debezium.data.VariableScaleDecimal",
    "io.debezium.data.Bits",
    "io.debezium.time.Date",
    "io.debezium.time.Timestamp",
    "io.debezium.time.MicroTimestamp",
    "io.debezium.time.NanoTimestamp",
    "io.debezium.time.ZonedTimestamp",
    "io.debezium.time.Time",
    "io.debezium.time.MicroTime",
    "io.debezium.time.NanoTime",
    "io.debezium.data.Json",
    "io.debezium.data.geometry.Point",
    "io.debezium.time.Unknown",
    "com.example.Money",
]
CONNECT_TYPES = [
    "int8", "int16", "int32", "int64", "float", "double", "float32", "float64", "boolean",
    "string", "bytes", "array", "map", "struct", "int128", "",
]  # fmt: skip
# Parameter values as connectors write them (digits) and as they should never be written.
PARAM_VALUES = st.one_of(
    st.integers(-100, 100).map(str),
    st.sampled_from(["", "abc", "1e3", "38", "39", "65", "-1", " 7", "9" * 30, "١٢"]),
    st.integers(-(2**70), 2**70),
    st.none(),
)
PARAM_KEYS = st.sampled_from(
    [
        "scale",
        "connect.decimal.precision",
        "length",
        "__debezium.source.column.type",
        "__debezium.source.column.length",
        "__debezium.source.column.scale",
    ]
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def connect_fields(draw: st.DrawFn, name: str | None = None) -> Any:
    """A Connect field schema: mostly well-formed, with unknown names and garbage mixed in."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values)  # not a field schema at all
    f: dict[str, Any] = {"type": draw(st.sampled_from(CONNECT_TYPES)), "field": name or draw(st.text(max_size=6))}
    if draw(st.booleans()):
        f["name"] = draw(st.sampled_from(LOGICAL_NAMES))
    if draw(st.booleans()):
        f["parameters"] = draw(
            st.dictionaries(PARAM_KEYS, PARAM_VALUES, max_size=3)
            | st.dictionaries(PARAM_KEYS, st.sampled_from(["DECIMAL", "NUMERIC", "varchar"]), max_size=1)
            | json_values
        )
    if f["type"] == "struct" and draw(st.booleans()):
        f["fields"] = draw(st.lists(json_values, max_size=2))
    return f


@st.composite
def mutated(draw: st.DrawFn, doc: Any, depth: int = 0) -> Any:
    """`doc` with a few nodes replaced, removed or retyped (a wrong or damaged schema)."""
    if depth > 6 or draw(st.integers(0, 9)) == 0:
        return draw(json_values | connect_fields()) if draw(st.integers(0, 3)) == 0 else doc
    if isinstance(doc, dict):
        out = {}
        for k, v in doc.items():
            if draw(st.integers(0, 24)) == 0:
                continue  # a key dropped
            out[k] = draw(mutated(v, depth + 1)) if draw(st.integers(0, 3)) == 0 else v
        return out
    if isinstance(doc, list) and doc:
        i = draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], draw(mutated(doc[i], depth + 1)), *doc[i + 1 :]]
    return doc


def _text(schema: Any, cut: int | None) -> str:
    """The column value as the envelope pass keeps it: `{"schema":` + the schema's JSON text,
    possibly truncated."""
    text = json.dumps(schema, separators=(",", ":"))
    return '{"schema":' + (text[:cut] if cut is not None else text)


@st.composite
def schema_groups(draw: st.DrawFn) -> SchemaGroup:
    if CAPTURED and draw(st.integers(0, 2)) > 0:
        value, key = draw(st.sampled_from(CAPTURED))
        value, key = draw(mutated(value)), draw(st.none() | mutated(key)) if key is not None else None
    else:
        image = {"type": "struct", "fields": draw(st.lists(connect_fields(), max_size=5))}
        value = {"type": "struct", "fields": [{"field": "after", **image}]}
        key = draw(st.none() | st.builds(lambda f: {"type": "struct", "fields": [f]}, connect_fields()))
    cut = draw(st.none() | st.integers(0, 200)) if draw(st.integers(0, 9)) == 0 else None
    sample = draw(st.none() | json_values.map(json.dumps) | st.text(max_size=10))
    return SchemaGroup(
        db="db",
        table="t",
        schema_id=1,
        key_schema_id=2,
        value_schema=None if draw(st.integers(0, 19)) == 0 else _text(value, cut),
        key_schema=None if key is None else _text(key, None),
        sample_key=sample,
        events=1,
        max_seq=1,
    )


def _fits_the_lake(t: T.DataType) -> bool:
    if isinstance(t, T.DecimalType):
        return 0 <= t.scale <= t.precision <= MAX_DECIMAL_PRECISION and t.precision >= 1
    return isinstance(
        t,
        T.IntegerType | T.LongType | T.FloatType | T.DoubleType | T.BooleanType | T.StringType
        | T.BinaryType | T.DateType | T.TimestampType | T.TimestampNTZType,
    )  # fmt: skip


def _infer_nothing(group: SchemaGroup) -> list[T.StructField]:
    return [T.StructField("id", T.LongType())]


@PROPERTY
@given(schema_groups())
def test_resolving_any_schema_yields_lake_columns_or_a_reason_and_never_raises(group):
    group.resolve(infer=_infer_nothing)
    if group.error is not None:
        assert group.error.startswith("unsupported schema: ")
        return
    assert group.columns is not None and group.keys is not None
    assert all(_fits_the_lake(c.spark_type) for c in group.columns), [c.spark_type for c in group.columns]
    names = {c.name.lower() for c in group.columns}
    assert {k.lower() for k in group.keys} <= names
    # decode_group derives the key's parse types from here: a resolved group must not fail there.
    assert len(_key_specs(group)) == len(group.keys)


def test_every_captured_schema_resolves_without_error():
    assert len(CAPTURED) >= 30  # every captured change event (32)
    for value, key in CAPTURED:
        group = SchemaGroup("db", "t", 1, 2, _text(value, None), None if key is None else _text(key, None), None, 1, 1)
        group.resolve()
        assert group.error is None and group.keys and group.columns, group.error


# Found by the property above; each failed the whole batch before the fix.
REGRESSIONS = [
    pytest.param(
        {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [None]}]},
        None,
        id="a null field schema (AttributeError)",
    ),
    pytest.param(
        {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": 5, "type": "int32"}]}]},
        None,
        id="a field name that is not a string (AttributeError)",
    ),
    pytest.param(
        {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": [{"field": "id", "type": "int64"}]}]},
        {"type": "struct", "fields": [{"field": "id", "type": "int128"}]},
        id="a key field the mapping rejects (UnsupportedSchema raised in decode_group)",
    ),
    pytest.param(
        {
            "type": "struct",
            "fields": [
                {
                    "field": "after",
                    "type": "struct",
                    "fields": [
                        {"field": "id", "type": "int64"},
                        {"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                         "parameters": {"scale": "-2", "connect.decimal.precision": "3"}},
                    ],
                }
            ],
        },
        None,
        id="a negative decimal scale (decimal(3,-2): Spark fails the cast)",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("value", "key"), REGRESSIONS)
def test_damaged_schemas_found_by_the_property_dead_letter_their_group(value, key):
    group = SchemaGroup(
        "db", "t", 1, 2, _text(value, None), None if key is None else _text(key, None), '{"id": 1}', 1, 1
    )
    group.resolve()
    assert group.error is not None and group.error.startswith("unsupported schema: ")
