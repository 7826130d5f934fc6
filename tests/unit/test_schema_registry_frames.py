"""The Glue Schema Registry framing and the Connect schema of an Avro schema, without Spark, on the
records and schema versions captured with the wire format avro (tests/fixtures/debezium/avro/)."""

from __future__ import annotations

import base64
import json
import re
import zlib

import cdc_events
import pytest
from avro_records import load, version_of
from cdclake.events.schema_registry import FrameError, SchemaVersion, UnsupportedAvroSchema, connect_schema, parse_frame

FIXTURE = "mariadb/all_types.json"


def _framed(i: int = 0, part: str = "value") -> bytes:
    return base64.b64decode(load(FIXTURE)["messages"][i][part])


def test_a_captured_record_names_a_captured_schema_version_and_carries_its_body() -> None:
    fx = load(FIXTURE)
    for m in fx["messages"]:
        for part in ("key", "value"):
            if m[part] is None:
                continue
            frame = parse_frame(base64.b64decode(m[part]))
            assert frame.version_id in fx["schema_versions"]
            assert not frame.compressed and frame.body


def test_a_zlib_compressed_body_is_inflated() -> None:
    plain = _framed()
    frame = parse_frame(plain[:1] + bytes([5]) + plain[2:18] + zlib.compress(plain[18:]))
    assert frame.compressed and frame.body == parse_frame(plain).body
    assert frame.version_id == version_of(plain)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda b: b[:10], "record of 10 bytes is shorter than the 18-byte header"),
        (lambda b: bytes([2]) + b[1:], "header version byte 2 (expected 3)"),
        (lambda b: b[:1] + bytes([1]) + b[2:], "compression byte 1 (expected 0: none or 5: zlib)"),
        (lambda b: b[:1] + bytes([5]) + b[2:], "does not inflate"),
    ],
)
def test_a_malformed_record_is_refused_with_what_is_wrong(change, message) -> None:
    with pytest.raises(FrameError, match=re.escape(message)):
        parse_frame(change(_framed()))


@pytest.mark.parametrize("part", ["key", "value"])
def test_the_connect_schema_of_a_captured_avro_schema_is_the_one_jsonconverter_wrote(part) -> None:
    # The JSON capture of the same table with the same connector settings (topic prefix salesdb: the
    # JSON twin in the Avro fixture has another prefix, which Debezium writes into the schema names).
    fx = load(FIXTURE)
    definition = fx["schema_versions"][version_of(_framed(0, part))]
    assert connect_schema(json.loads(definition)) == cdc_events.load("mariadb/all_types_00_c.json")[part]["schema"]


def test_a_union_other_than_a_nullable_type_has_no_connect_schema() -> None:
    with pytest.raises(UnsupportedAvroSchema, match="only \\[null, type\\] unions"):
        connect_schema({"type": "record", "name": "r", "fields": [{"name": "x", "type": ["int", "string"]}]})


def test_a_version_knows_the_json_of_a_body_that_did_not_decode() -> None:
    definition = json.dumps({"type": "record", "name": "k", "fields": [{"name": "id", "type": "int"}]})
    version = SchemaVersion.of("v", definition)
    assert version.undecodable == '{"id":null}'
    assert (
        version.envelope_head
        == '{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false},"payload":'
    )
