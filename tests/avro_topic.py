"""Reading a change topic of a stack with the wire format avro the way the tests read JSON ones.

A record the AWS Glue Schema Registry converter framed (glue_scripts/cdclake/events/schema_registry.py)
becomes what Kafka Connect's JsonConverter would have written for it: {"schema", "payload"}, the
schema rebuilt from the Avro schema by the job's own `connect_schema`, the payload decoded here from
the Avro binary encoding (bytes and decimals as base64 text, as JsonConverter writes them). JSON
records (a topic written before a switch of the format) are parsed as they are. The schema versions
come from the stack's registry, each fetched once.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from typing import Any

from cdclake.events.schema_registry import HEADER_VERSION, connect_schema, parse_frame

Reader = Callable[[memoryview, int], tuple[Any, int]]


def _long(buf: memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint."""
    shift = n = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos


def _bytes(buf: memoryview, pos: int) -> tuple[bytes, int]:
    size, pos = _long(buf, pos)
    return bytes(buf[pos : pos + size]), pos + size


class AvroReader:
    """Decodes the Avro binary encoding of one writer schema into JsonConverter's payload values."""

    def __init__(self, schema: Any) -> None:
        self.named: dict[str, Reader] = {}
        self.read = self._reader(schema, "")

    def _reader(self, s: Any, namespace: str) -> Reader:  # one branch per Avro type
        if isinstance(s, list):
            branches = [self._reader(b, namespace) for b in s]

            def union(buf: memoryview, pos: int) -> tuple[Any, int]:
                i, pos = _long(buf, pos)
                return branches[i](buf, pos)

            return union
        t = s if isinstance(s, str) else s["type"]
        if isinstance(t, (dict, list)):
            return self._reader(t, namespace)
        if t in self.named or f"{namespace}.{t}" in self.named:
            # a reference to a record defined earlier (resolved at read time: it may still be building)
            name = t if t in self.named else f"{namespace}.{t}"
            return lambda buf, pos: self.named[name](buf, pos)
        simple: dict[str, Reader] = {
            "null": lambda buf, pos: (None, pos),
            "boolean": lambda buf, pos: (buf[pos] == 1, pos + 1),
            "int": _long,
            "long": _long,
            "float": lambda buf, pos: (struct.unpack_from("<f", buf, pos)[0], pos + 4),
            "double": lambda buf, pos: (struct.unpack_from("<d", buf, pos)[0], pos + 8),
            "string": lambda buf, pos: (lambda b, p: (b.decode("utf-8"), p))(*_bytes(buf, pos)),
            "bytes": lambda buf, pos: (lambda b, p: (base64.b64encode(b).decode(), p))(*_bytes(buf, pos)),
        }
        if t in simple:
            return simple[t]
        if t == "record":
            return self._record(s, namespace)
        if t == "array":
            return self._blocks(self._reader(s["items"], namespace), list)
        if t == "map":
            return self._blocks(self._reader(s["values"], namespace), dict)
        if t == "enum":
            symbols = s["symbols"]
            return lambda buf, pos: (lambda i, p: (symbols[i], p))(*_long(buf, pos))
        if t == "fixed":
            size = s["size"]
            return lambda buf, pos: (base64.b64encode(bytes(buf[pos : pos + size])).decode(), pos + size)
        raise ValueError(f"Avro type {t!r} is not read by the tests")

    def _record(self, s: dict[str, Any], namespace: str) -> Reader:
        ns = s.get("namespace", namespace)
        name = s["name"] if "." in s["name"] else f"{ns}.{s['name']}" if ns else s["name"]
        fields: list[tuple[str, Reader]] = []

        def record(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
            out = {}
            for field, read in fields:
                out[field], pos = read(buf, pos)
            return out, pos

        self.named[name] = self.named[s["name"]] = record
        fields += [(f["name"], self._reader(f["type"], ns)) for f in s["fields"]]
        return record

    @staticmethod
    def _blocks(item: Reader, kind: type) -> Reader:
        def blocks(buf: memoryview, pos: int) -> tuple[Any, int]:
            out: list[Any] = []
            while True:
                n, pos = _long(buf, pos)
                if n == 0:
                    return (dict(out) if kind is dict else out), pos
                if n < 0:  # a block with its size in bytes first
                    n = -n
                    _, pos = _long(buf, pos)
                for _ in range(n):
                    if kind is dict:
                        key, pos = _bytes(buf, pos)
                        value, pos = item(buf, pos)
                        out.append((key.decode("utf-8"), value))
                    else:
                        value, pos = item(buf, pos)
                        out.append(value)

        return blocks


class TopicDecoder:
    """Kafka record bytes -> JsonConverter's {"schema", "payload"} (None for a tombstone).
    `definition` gives a schema version's Avro schema (JSON text) by its id."""

    def __init__(self, definition: Callable[[str], str]) -> None:
        self.definition = definition
        self.versions: dict[str, tuple[dict[str, Any], AvroReader]] = {}

    def __call__(self, data: bytes | None) -> dict[str, Any] | None:
        if data is None:
            return None
        if not data or data[0] != HEADER_VERSION:
            return json.loads(data)
        frame = parse_frame(data)
        if frame.version_id not in self.versions:
            avro = json.loads(self.definition(frame.version_id))
            self.versions[frame.version_id] = (connect_schema(avro), AvroReader(avro))
        schema, reader = self.versions[frame.version_id]
        payload, _ = reader.read(memoryview(frame.body), 0)
        return {"schema": schema, "payload": payload}


def registry_definitions(endpoint: str) -> Callable[[str], str]:
    """Schema version definitions from a Glue API (the stack's registry), its client made on first use."""

    def definition(vid: str) -> str:
        import boto3

        glue = boto3.client(
            "glue", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="local",
            aws_secret_access_key="local",
        )  # fmt: skip
        return glue.get_schema_version(SchemaVersionId=vid)["SchemaDefinition"]

    return definition
