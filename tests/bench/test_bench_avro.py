"""The benchmark's Avro records (scripts/cdcbench/avrowire.py) are what the AWS Glue Schema
Registry's converter writes, and what the job decodes back to the JSON records of the same changes.

Held to the converter: the all-types records captured from the local stack in Avro, with the JSON
twin's records of the same changes (tests/fixtures/debezium/avro/). Held to the job: its own frame
parser, registry client (against moto, as a server) and Avro -> Connect schema translation; the Avro
body is read here with the job's reader schema by a plain Avro reader, where the job uses Spark's
`from_avro` (the benchmark's apply section then checks the lake the job wrote from these records)."""

from __future__ import annotations

import base64
import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

from avro_records import load  # noqa: E402
from cdcbench import avrowire, generator  # noqa: E402
from cdcbench.motoserver import moto_server_process  # noqa: E402
from cdclake.events.schema_registry import MARKER, SchemaVersions, parse_frame  # noqa: E402

CAPTURED = ("mariadb/all_types.json", "postgres/all_types.json")


class _Reader:
    """Avro's binary decoding of one body, values as JsonConverter writes them (bytes as base64)."""

    def __init__(self, schema: Any, data: bytes) -> None:
        self.data, self.pos = data, 0
        self.named = avrowire.named_types(schema)

    def long(self) -> int:
        shift = z = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            z |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (z >> 1) ^ -(z & 1)

    def raw(self) -> bytes:
        n = self.long()
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def read(self, schema: Any, ns: str | None = None) -> Any:
        if isinstance(schema, list):
            return self.read(schema[self.long()], ns)
        if isinstance(schema, str):
            ref = self.named.get(schema) or self.named.get(f"{ns}.{schema}")
            schema = ref[0] if ref else {"type": schema}
        t = schema["type"]
        if isinstance(t, dict | list):
            return self.read(t, ns)
        if t == "record":
            inner = schema.get("namespace", ns)
            return {f["name"]: self.read(f["type"], inner) for f in schema["fields"]}
        if t in ("array", "map"):
            items: list[Any] = []
            while n := self.long():
                for _ in range(n):
                    key = self.raw().decode() if t == "map" else None
                    items.append((key, self.read(schema["items" if t == "array" else "values"], ns)))
            return [v for _, v in items] if t == "array" else dict(items)
        if t in ("int", "long"):
            return self.long()
        if t in ("float", "double"):
            size, fmt = (4, "<f") if t == "float" else (8, "<d")
            self.pos += size
            return struct.unpack(fmt, self.data[self.pos - size : self.pos])[0]
        if t == "boolean":
            self.pos += 1
            return self.data[self.pos - 1] == 1
        if t == "string":
            return self.raw().decode()
        if t == "bytes":
            return base64.b64encode(self.raw()).decode()
        assert t == "null", t
        return None


def _comparable(v: Any) -> Any:
    """JSON's text for NaN and infinities; floats to float32's precision (JsonConverter prints a
    float32 as its shortest decimal, 1e-38, which Avro's four bytes read back as 9.999999e-39). The
    bytes check below holds doubles exactly."""
    if isinstance(v, dict):
        return {k: _comparable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_comparable(x) for x in v]
    if v in ("NaN", "Infinity", "-Infinity") or (isinstance(v, float) and not math.isfinite(v)):
        return str(float(v))
    if isinstance(v, float):
        try:
            return struct.pack("<f", v)
        except OverflowError:  # beyond float32: a double
            return v
    return v


def _captured_pairs() -> list[tuple[str, str, bytes, dict[str, Any], dict[str, Any]]]:
    """(fixture, part, framed bytes, the twin's {schema, payload} with the Avro connector's names)."""
    out = []
    for name in CAPTURED:
        fx = load(name)
        prefix = fx["topic"].split(".")[0]  # the twin connector's topics and names start with `twin`
        defs = {k: json.loads(v) for k, v in fx["schema_versions"].items()}
        for m, twin in zip(fx["messages"], fx["json_twin"]["messages"], strict=True):
            for part in ("key", "value"):
                if m[part] is not None:
                    framed = base64.b64decode(m[part])
                    renamed = json.loads(json.dumps(twin[part]).replace('"twin.', f'"{prefix}.'))
                    if part == "value":
                        renamed["payload"]["source"]["name"] = prefix
                    out.append((name, part, framed, defs[parse_frame(framed).version_id], renamed))
    return out


def test_the_avro_schema_of_each_captured_record_is_the_one_the_converter_registered():
    pairs = _captured_pairs()
    assert len(pairs) == 34
    for name, part, _framed, registered, twin in pairs:
        assert avrowire.avro_schema(twin["schema"]) == registered, (name, part)


def test_each_captured_avro_body_reads_as_the_json_twin_and_encodes_back_to_its_bytes():
    # The two connectors took the envelope's ts_ms/us/ns when each processed the change: those differ.
    for name, part, framed, registered, twin in _captured_pairs():
        body = parse_frame(framed).body
        read = _Reader(registered, body).read(registered)
        expected = dict(twin["payload"])
        if part == "value":
            expected.update({k: read[k] for k in ("ts_ms", "ts_us", "ts_ns")})
        assert _comparable(read) == _comparable(expected), (name, part)
        assert avrowire.encode(registered, expected) == body, (name, part)


@pytest.fixture(scope="module")
def registry():
    with moto_server_process() as endpoint:
        yield endpoint


def test_a_generated_avro_batch_decodes_with_the_jobs_schema_versions_to_the_json_batch(registry):
    template = generator.Template()
    changes = generator.ChangeStream(200, seed=3).batch(60)
    topic = avrowire.register_template(avrowire.glue_client(registry), template)
    versions = SchemaVersions(lambda: avrowire.glue_client(registry))
    json_records = list(generator.records(changes, template))
    avro_records = list(avrowire.avro_records(changes, template, topic))
    assert len(avro_records) == len(json_records) == 66  # six deletes, each with its tombstone
    for a, j in zip(avro_records, json_records, strict=True):
        assert a[:4] == j[:4]  # topic, partition, offset, timestamp
        for framed_text, json_text in zip(a[4:], j[4:], strict=True):
            if json_text is None:
                assert framed_text is None
                continue
            frame = parse_frame(base64.b64decode(framed_text.removeprefix(MARKER)))
            found, unusable = versions.lookup([frame.version_id])
            assert unusable == {}
            version = found[frame.version_id]
            connect = json.loads(version.envelope_head + "null}")["schema"]
            payload = _Reader(json.loads(version.reader), frame.body).read(json.loads(version.reader))
            assert {"schema": connect, "payload": payload} == json.loads(json_text)
    assert versions.fetches == 2  # the key's version and the value's, each fetched once
    assert avrowire.topic_bytes(iter(avro_records))[1] < avrowire.topic_bytes(iter(json_records))[1] / 5
