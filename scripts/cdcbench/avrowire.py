"""Debezium records in the wire format avro, as the AWS Glue Schema Registry's Avro converter
writes them: the benchmark's generated changes in both wire formats, and the registry they name.

The converter turns each record's Connect schema into an Avro schema (its AvroData: a struct is a
record named after the Connect name, an optional field a `["null", T]` union, Connect's names,
versions, parameters and defaults kept as `connect.*` properties, a Decimal Avro's `decimal`
logical type), registers that schema's version in the registry, and frames the Avro binary body
with a header: version byte 3, compression byte 0 (none), the version's 16-byte id.
`avro_schema` and `encode` do the same from the Connect schema and the payload as JsonConverter
wrote them (tests/bench/test_bench_avro.py holds them to records the real converter wrote, and to
the job's own decoder).

The registry is moto's Glue API in a process of its own (motoserver.py), as the tests run it;
`register` creates the schema or adds a version, as the converter does.
"""

from __future__ import annotations

import base64
import contextlib
import json
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

HEADER_VERSION, NO_COMPRESSION = 3, 0
REGION = "us-east-1"

# ------------------------------------------------------------------------- Connect -> Avro schema
_PRIMITIVE = {
    "int32": "int",
    "int64": "long",
    "float": "float",  # JsonConverter's names: float and double, not float32 and float64
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DEFAULT_DECIMAL_PRECISION = 64  # AvroData's precision when the Connect schema names none


def avro_schema(connect: dict[str, Any]) -> dict[str, Any]:
    """The Avro schema the converter registers for a record's Connect schema (a struct)."""
    if connect.get("type") != "struct":
        raise ValueError(f"a record's key or value schema is a Connect struct, not {connect.get('type')!r}")
    return _AvroData().type_of(connect, namespace=None)


class _AvroData:
    """One schema's translation: records already defined are referenced by name afterwards."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def type_of(self, s: dict[str, Any], namespace: str | None) -> Any:
        t = s["type"]
        if t == "struct":
            return self._record(s, namespace)
        if t == "array":
            node: dict[str, Any] = {"type": "array", "items": self._field_type(s["items"], namespace)[0]}
        elif t == "map":
            if s["keys"].get("type") != "string" or s["keys"].get("optional"):
                raise ValueError("a Connect map with keys other than required strings has no Avro map")
            node = {"type": "map", "values": self._field_type(s["values"], namespace)[0]}
        elif t in ("int8", "int16"):
            node = {"type": "int", "connect.type": t}
        elif t in _PRIMITIVE:
            node = {"type": _PRIMITIVE[t]}
        else:
            raise ValueError(f"Connect type {t!r} has no Avro type")
        if s.get("name") == DECIMAL:
            params = s.get("parameters", {})
            precision = int(params.get("connect.decimal.precision", DEFAULT_DECIMAL_PRECISION))
            node.update(scale=int(params.get("scale", 0)), precision=precision)
        self._connect_properties(node, s)
        if s.get("name") == DECIMAL:
            node["logicalType"] = "decimal"
        return node["type"] if len(node) == 1 else node

    def _record(self, s: dict[str, Any], namespace: str | None) -> Any:
        full = s.get("name") or "io.confluent.connect.avro.ConnectDefault"
        ns, _, name = full.rpartition(".")
        ref = name if ns == (namespace or "") else full
        if full in self.defined:
            return ref
        self.defined.add(full)
        node: dict[str, Any] = {"type": "record", "name": name}
        if ns and ns != namespace:
            node["namespace"] = ns
        fields = []
        for f in s["fields"]:
            avro, default = self._field_type(f, ns or None)
            fields.append({"name": f["field"], "type": avro} | ({"default": default} if default is not _NONE else {}))
        node["fields"] = fields
        self._connect_properties(node, s, record=True)
        return node

    def _field_type(self, s: dict[str, Any], namespace: str | None) -> tuple[Any, Any]:
        """A field's Avro type and default: optional is a union with null, first unless the
        field's default is not null."""
        inner = self.type_of(s, namespace)
        default = _avro_default(s, s["default"]) if s.get("default") is not None else _NONE
        if s.get("default") is not None and s["type"] != "struct":
            inner = ({"type": inner} if isinstance(inner, str) else inner) | {"connect.default": default}
        if not s.get("optional"):
            return inner, default
        if default is _NONE:
            return ["null", inner], None
        return [inner, "null"], default

    @staticmethod
    def _connect_properties(node: dict[str, Any], s: dict[str, Any], record: bool = False) -> None:
        if "doc" in s:
            node["connect.doc"] = s["doc"]
        if "version" in s:
            node["connect.version"] = s["version"]
        if s.get("parameters"):
            node["connect.parameters"] = s["parameters"]
        if s.get("name"):
            node["connect.name"] = s["name"]


_NONE = object()


def _avro_default(s: dict[str, Any], value: Any) -> Any:
    """A JsonConverter default in Avro's JSON encoding: bytes are one character per byte, not base64."""
    if s["type"] == "bytes" and isinstance(value, str):
        return base64.b64decode(value).decode("latin-1")
    return value


# ------------------------------------------------------------------------- Avro binary encoding
def encode(schema: Any, value: Any) -> bytes:
    """The Avro binary encoding of a JsonConverter payload (bytes as base64 text) under `schema`."""
    out = bytearray()
    _Writer(schema, out).write(schema, value, None)
    return bytes(out)


def _zigzag(n: int, out: bytearray) -> None:
    z = (n << 1) ^ (n >> 63)
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def named_types(schema: Any, namespace: str | None = None, into: dict | None = None) -> dict[str, Any]:
    """Every record a schema defines, by full name, with the namespace its fields resolve names in
    (a later field names a record by it: a Debezium envelope's `after` is the `before` record)."""
    found: dict[str, Any] = {} if into is None else into
    if isinstance(schema, list):
        for branch in schema:
            named_types(branch, namespace, found)
    elif isinstance(schema, dict):
        if schema.get("type") == "record":
            name = schema["name"]
            ns = schema.get("namespace", namespace)
            found[name if "." in name or not ns else f"{ns}.{name}"] = (schema, ns)
            for f in schema["fields"]:
                named_types(f["type"], ns, found)
        else:
            for part in ("type", "items", "values"):
                named_types(schema.get(part), namespace, found)
    return found


class _Writer:
    def __init__(self, schema: Any, out: bytearray) -> None:
        self.out = out
        self.named = named_types(schema)

    def write(self, schema: Any, value: Any, namespace: str | None) -> None:
        if isinstance(schema, list):
            branch = next((i for i, b in enumerate(schema) if (b == "null") == (value is None)), None)
            if branch is None:
                raise ValueError(f"no branch of union {json.dumps(schema)[:120]} takes {value!r}")
            _zigzag(branch, self.out)
            self.write(schema[branch], value, namespace)
            return
        if isinstance(schema, str):
            ref = self.named.get(schema) or self.named.get(f"{namespace}.{schema}")
            schema = ref[0] if ref else {"type": schema}
        t = schema["type"]
        if isinstance(t, dict | list):
            self.write(t, value, namespace)
        elif t == "record":
            ns = schema.get("namespace", namespace)
            for f in schema["fields"]:
                self.write(f["type"], value.get(f["name"]), ns)
        else:
            self._plain(schema, t, value, namespace)

    def _plain(self, schema: dict[str, Any], t: str, value: Any, namespace: str | None) -> None:
        out = self.out
        if t == "null":
            return
        if t == "boolean":
            out.append(1 if value else 0)
        elif t in ("int", "long"):
            _zigzag(int(value), out)
        elif t == "float":
            out += struct.pack("<f", float(value))  # JsonConverter writes NaN and infinities as text
        elif t == "double":
            out += struct.pack("<d", float(value))
        elif t in ("string", "bytes"):
            data = value.encode() if t == "string" else base64.b64decode(value)
            _zigzag(len(data), out)
            out += data
        elif t == "array":
            if value:
                _zigzag(len(value), out)
                for v in value:
                    self.write(schema["items"], v, namespace)
            out.append(0)
        elif t == "map":
            if value:
                _zigzag(len(value), out)
                for k, v in value.items():
                    self._plain({}, "string", k, namespace)
                    self.write(schema["values"], v, namespace)
            out.append(0)
        else:
            raise ValueError(f"Avro type {t!r} is not one the converter writes for Debezium's records")


# ------------------------------------------------------------------------- framing and registry
def frame(version_id: str, body: bytes) -> bytes:
    """A record as the converter writes it: header, schema version id, body (uncompressed)."""
    return bytes([HEADER_VERSION, NO_COMPRESSION]) + uuid.UUID(version_id).bytes + body


def version_of(framed: bytes) -> str:
    return str(uuid.UUID(bytes=framed[2:18]))


def with_version(framed: bytes, version_id: str) -> bytes:
    return framed[:2] + uuid.UUID(version_id).bytes + framed[18:]


def glue_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "glue", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t"
    )


def register(glue: Any, registry: str, schema_name: str, definition: str) -> str:
    """The id of `definition` as a version of schema `schema_name` (created with the registry when
    missing, compatibility NONE as the local stack's converter sets it)."""
    with contextlib.suppress(glue.exceptions.AlreadyExistsException):
        glue.create_registry(RegistryName=registry)
    try:
        reply = glue.create_schema(
            RegistryId={"RegistryName": registry}, SchemaName=schema_name, DataFormat="AVRO",
            Compatibility="NONE", SchemaDefinition=definition,
        )  # fmt: skip
    except glue.exceptions.AlreadyExistsException:
        schema = {"RegistryName": registry, "SchemaName": schema_name}
        reply = glue.register_schema_version(SchemaId=schema, SchemaDefinition=definition)
    return reply["SchemaVersionId"]


# ------------------------------------------------------------------------- the benchmark's topic
@dataclass(frozen=True)
class AvroTopic:
    """A generator template's key and value schemas in Avro, as registered: their version ids."""

    key_schema: dict[str, Any]
    value_schema: dict[str, Any]
    key_version: str
    value_version: str


def register_template(glue: Any, template: Any, registry: str = "cdc-lake") -> AvroTopic:
    """Register the Avro forms of a generator.Template's schemas, as the converter does on the
    topic's first record: both are versions of one registry schema named after the topic."""
    key, value = avro_schema(template.key_schema), avro_schema(template.value_schema)
    compact = lambda s: json.dumps(s, separators=(",", ":"), ensure_ascii=False)  # noqa: E731
    key_id = register(glue, registry, template.topic, compact(key))
    value_id = register(glue, registry, template.topic, compact(value))
    return AvroTopic(key, value, key_id, value_id)


def avro_records(changes: list[Any], template: Any, topic: AvroTopic) -> Iterator[tuple[Any, ...]]:
    """generator.records' Kafka records in the wire format avro: key and value framed for the
    Glue Schema Registry, as the job's raw batch carries them (schema_registry.as_text)."""
    from cdclake.events.schema_registry import as_text

    from .generator import kafka_timestamp, messages

    for ch, offset, payload in messages(changes, template):
        key = as_text(frame(topic.key_version, encode(topic.key_schema, {"id": ch.key})))
        value = None if payload is None else as_text(frame(topic.value_version, encode(topic.value_schema, payload)))
        yield (template.topic, 0, offset, kafka_timestamp(ch), key, value)


def topic_bytes(records: Iterator[tuple[Any, ...]]) -> tuple[int, int]:
    """(records, bytes of their keys and values on the topic): JSON's UTF-8, a framed record's bytes."""
    from cdclake.events.schema_registry import MARKER

    count = size = 0
    for *_, key, value in records:
        count += 1
        for text in (key, value):
            if text is None:
                continue
            if text.startswith(MARKER):
                size += len(base64.b64decode(text[len(MARKER) :]))
            else:
                size += len(text.encode())
    return count, size
