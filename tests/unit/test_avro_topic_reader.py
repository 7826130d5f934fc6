"""The stack tests read an Avro change topic (tests/avro_topic.py) as JsonConverter would have written
it: checked against the JSON twin's records of the same changes, captured live (tests/fixtures/debezium/avro/)."""

from __future__ import annotations

import base64
import math
import struct

import pytest
from avro_records import load
from avro_topic import TopicDecoder

# The connector's own timing (the twin is another connector) and name differ; nothing else may.
CONNECTOR_OWN = {"name", "ts_ms", "ts_us", "ts_ns"}


def _number(v: float | str, single: bool) -> float | str:
    """A float column's value comparable across the formats: JsonConverter writes NaN and the
    infinities as text, and a float32 as its shortest decimal text, Avro as its binary value."""
    f = float(v)
    if math.isnan(f):
        return "NaN"
    return struct.unpack("<f", struct.pack("<f", f))[0] if single and math.isfinite(f) else f


def _comparable(payload: dict, floats: dict[str, bool]) -> dict:
    out = {k: v for k, v in payload.items() if k not in CONNECTOR_OWN}
    out["source"] = {k: v for k, v in payload["source"].items() if k not in CONNECTOR_OWN}
    for image in ("before", "after"):
        if out.get(image):
            out[image] = {
                c: _number(v, floats[c]) if c in floats and v is not None else v for c, v in out[image].items()
            }
    return out


@pytest.mark.parametrize("name", ["mariadb/all_types.json", "postgres/all_types.json"])
def test_an_avro_record_reads_as_the_json_twins_record_of_the_same_change(name):
    fixture = load(name)
    decode = TopicDecoder(fixture["schema_versions"].__getitem__)
    twin = fixture["json_twin"]["messages"]
    assert len(twin) == len(fixture["messages"]) > 0
    for avro, json_ in zip(fixture["messages"], twin, strict=True):
        key = decode(None if avro["key"] is None else base64.b64decode(avro["key"]))
        assert key["payload"] == json_["key"]["payload"]
        assert [f["field"] for f in key["schema"]["fields"]] == [f["field"] for f in json_["key"]["schema"]["fields"]]
        value = decode(None if avro["value"] is None else base64.b64decode(avro["value"]))
        if json_["value"] is None:
            assert value is None  # the tombstone after a delete
            continue
        row = next(f for f in json_["value"]["schema"]["fields"] if f["field"] == "after")["fields"]
        floats = {f["field"]: f["type"] == "float" for f in row if f["type"] in ("float", "double")}
        assert _comparable(value["payload"], floats) == _comparable(json_["value"]["payload"], floats)
