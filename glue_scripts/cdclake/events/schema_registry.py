"""Avro records framed for the AWS Glue Schema Registry: the frame, the registry, the schemas.

With the wire format `avro` the connector writes each key and value with the Glue Schema
Registry's Avro converter: a header (version byte 3, compression byte 0 or 5 for zlib), the
16-byte id (a UUID) of the schema version in the registry, then the Avro body, zlib-compressed
when the compression byte says so. The job reads such a record as text (sources.py): MARKER and
the base64 of its bytes, which the `files` format (dead letters, raw zone) keeps as it is.

Each schema version's definition is fetched once per job run (Glue GetSchemaVersion) and kept as
a `SchemaVersion`: the Connect schema JsonConverter would have written for the same record (rebuilt
from the Avro schema's `connect.*` properties, which the converter's AvroData writes for every
Connect schema: name, version, parameters, int8/int16), so that the lake's column types are the
JSON path's, and the Avro readers the batch decodes with (avro_readers.py). The records themselves
are decoded by Spark in avro_batch.py.
"""

from __future__ import annotations

import base64
import json
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import avro_readers
from .envelope import payload_type

MARKER = "gsr-avro:"  # a framed record as text: MARKER + base64 of its bytes (no JSON starts so)
HEADER_VERSION = 3
NO_COMPRESSION, ZLIB = 0, 5
HEADER_LENGTH = 18  # version byte, compression byte, 16-byte schema version id


class FrameError(ValueError):
    """Bytes that are not a Glue Schema Registry record; the message says what is wrong with them."""


class UnsupportedAvroSchema(ValueError):
    """An Avro schema that no Connect schema maps to (a union other than a nullable type)."""


@dataclass(frozen=True)
class Frame:
    version_id: str  # the schema version's id, as the registry writes it (8-4-4-4-12 hex)
    compressed: bool
    body: bytes  # the record's Avro binary encoding, inflated when it was compressed


def as_text(data: bytes) -> str:
    return MARKER + base64.b64encode(data).decode("ascii")


def version_id(raw: bytes) -> str:
    return str(uuid.UUID(bytes=bytes(raw)))


def parse_frame(data: bytes) -> Frame:
    """Header checked, schema version id read, body inflated when compressed."""
    if len(data) < HEADER_LENGTH:
        raise FrameError(f"record of {len(data)} bytes is shorter than the {HEADER_LENGTH}-byte header")
    if data[0] != HEADER_VERSION:
        raise FrameError(f"header version byte {data[0]} (expected {HEADER_VERSION})")
    if data[1] not in (NO_COMPRESSION, ZLIB):
        raise FrameError(f"compression byte {data[1]} (expected {NO_COMPRESSION}: none or {ZLIB}: zlib)")
    vid = version_id(data[2:HEADER_LENGTH])
    body = data[HEADER_LENGTH:]
    if data[1] == ZLIB:
        try:
            body = zlib.decompress(body)
        except zlib.error as e:
            raise FrameError(f"zlib body of schema version {vid} does not inflate: {e}") from None
    return Frame(vid, data[1] == ZLIB, body)


# ------------------------------------------------------------------------- Avro -> Connect schema
_PRIMITIVE = {"long": "int64", "float": "float", "double": "double", "boolean": "boolean", "string": "string"}
_AVRO_PRIMITIVES = {"null", "int", "bytes", *_PRIMITIVE}
_NO_DEFAULT = object()


def connect_schema(avro: Any) -> dict[str, Any]:
    """The Connect schema, as JsonConverter writes it, of an Avro schema the converter's AvroData
    wrote for it (`connect.name`, `connect.version`, `connect.parameters`, `connect.type`)."""
    return _Translation().schema(avro, "", optional=False, default=_NO_DEFAULT)


class _Translation:
    """One Avro schema's translation: its named types (records), which later fields reference by name
    (a Debezium envelope's `after` is the record `before` defined)."""

    def __init__(self) -> None:
        self.named: dict[str, dict[str, Any]] = {}

    def schema(self, avro: Any, namespace: str, optional: bool, default: Any) -> dict[str, Any]:
        if isinstance(avro, list):
            branches = [b for b in avro if b != "null"]
            if len(branches) != 1 or len(avro) != 2:
                raise UnsupportedAvroSchema(f"union {json.dumps(avro)[:200]}: only [null, type] unions map to Connect")
            return self.schema(branches[0], namespace, optional=True, default=default)
        if isinstance(avro, str) and avro not in _AVRO_PRIMITIVES:
            return {**self._reference(avro, namespace), "optional": optional}
        node: dict[str, Any] = {"type": avro} if isinstance(avro, str) else avro
        if isinstance(node.get("type"), dict | list):  # {"type": {...}}: the nested schema is the type
            return self.schema(node["type"], namespace, optional, default)
        if node.get("type") in ("record", "enum", "fixed"):
            namespace = node.get("namespace", namespace)
        out = self._typed(node, namespace)
        out["optional"] = optional
        for avro_key, connect_key in (("connect.name", "name"), ("connect.version", "version"), ("connect.doc", "doc")):
            if avro_key in node:
                out[connect_key] = node[avro_key]
        if node.get("connect.parameters"):
            out["parameters"] = {str(k): str(v) for k, v in node["connect.parameters"].items()}
        value = node.get("connect.default", default)
        if value is not _NO_DEFAULT and value is not None:
            out["default"] = _default(out, value)
        if node.get("type") in ("record", "enum", "fixed"):
            self._define(node, namespace, out)
        return out

    def _define(self, node: dict[str, Any], namespace: str, out: dict[str, Any]) -> None:
        name = node["name"]
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        self.named[full] = {k: v for k, v in out.items() if k not in ("optional", "default")}

    def _reference(self, name: str, namespace: str) -> dict[str, Any]:
        for candidate in (name, f"{namespace}.{name}"):
            if candidate in self.named:
                return dict(self.named[candidate])
        raise UnsupportedAvroSchema(f"Avro type {name!r} is neither a primitive nor a type defined before it")

    def _typed(self, node: dict[str, Any], namespace: str) -> dict[str, Any]:
        """The Connect type of one Avro type node, with its parts (fields, items, values)."""
        t = node.get("type")
        if t == "record":
            fields = []
            for f in node.get("fields", []):
                spec = self.schema(f["type"], namespace, optional=False, default=f.get("default", _NO_DEFAULT))
                fields.append({**spec, "field": f["name"]})
            return {"type": "struct", "fields": fields}
        if t == "array":
            return {"type": "array", "items": self.schema(node["items"], namespace, False, _NO_DEFAULT)}
        if t == "map":
            values = self.schema(node["values"], namespace, False, _NO_DEFAULT)
            return {"type": "map", "keys": {"type": "string", "optional": False}, "values": values}
        if t in ("bytes", "fixed"):
            return {"type": "bytes"}
        if t == "enum":
            return {"type": "string"}
        if t == "int":
            return {"type": node.get("connect.type") if node.get("connect.type") in ("int8", "int16") else "int32"}
        if t in _PRIMITIVE:
            return {"type": _PRIMITIVE[t]}
        raise UnsupportedAvroSchema(f"Avro type {t!r} has no Connect type")


def _default(schema: dict[str, Any], value: Any) -> Any:
    """An Avro JSON default in JsonConverter's encoding: bytes (also a Decimal's unscaled value)
    are base64, not Avro's one character per byte."""
    t = schema["type"]
    if t == "bytes" and isinstance(value, str):
        return base64.b64encode(value.encode("latin-1")).decode("ascii")
    if t == "struct" and isinstance(value, dict):
        by_name = {f["field"]: f for f in schema["fields"]}
        return {k: _default(by_name[k], v) if k in by_name and v is not None else v for k, v in value.items()}
    if t == "array" and isinstance(value, list):
        return [_default(schema["items"], v) if v is not None else None for v in value]
    if t == "map" and isinstance(value, dict):
        return {k: _default(schema["values"], v) if v is not None else None for k, v in value.items()}
    return value


def reader_schema(avro: Any) -> Any:
    """The schema `from_avro` reads a body with: the writer's, without logical types, so that
    Spark keeps each value in its Avro encoding (a decimal's bytes, a date's days), which is
    JsonConverter's encoding too, and without the defaults a decode never uses
    (avro_readers.for_decoding)."""
    return avro_readers.for_decoding(avro)


def as_parse_type(value: Column, avro: T.DataType, target: T.DataType) -> Column:
    """A value `from_avro` read with `reader_schema` (each in its Avro encoding: a decimal's or a
    byte string's bytes, a date's days, a timestamp's epoch units) as the JSON path's `from_json`
    gives it with `target`, a column's `parse_type` (connect_types.py): bytes as base64 text, as
    JsonConverter writes them, a nested value kept as text as its JSON; the rest as it is. The
    column's conversion stages then take it as they take the JSON value."""
    if isinstance(target, T.StringType):
        if isinstance(avro, T.BinaryType):
            return F.base64(value)
        if isinstance(avro, T.StructType | T.ArrayType | T.MapType):
            return _nested_text(value)
        return value if isinstance(avro, T.StringType) else value.cast(target)
    if isinstance(target, T.StructType) and isinstance(avro, T.StructType):
        parts = {f.name: f.dataType for f in avro.fields}
        fields = [
            (as_parse_type(value.getField(f.name), parts[f.name], f.dataType) if f.name in parts
             else F.lit(None).cast(f.dataType)).alias(f.name)
            for f in target.fields
        ]  # fmt: skip
        return F.when(value.isNotNull(), F.struct(*fields))
    if isinstance(target, T.ArrayType) and isinstance(avro, T.ArrayType):
        return F.transform(value, lambda e: as_parse_type(e, avro.elementType, target.elementType))
    return value if avro == target else value.cast(target)


def _nested_text(value: Column) -> Column:
    """A nested value as the text `from_json` keeps for it under a string type: written with its null
    fields (JsonConverter writes them), then read back as that string, which re-writes it the way the
    JSON path's parse does (e.g. a character outside the BMP as its `\\u` surrogate escapes)."""
    text = F.concat(F.lit('{"v":'), F.to_json(value, {"ignoreNullFields": "false"}), F.lit("}"))
    return F.from_json(text, "v string").getField("v")


@dataclass(frozen=True)
class SchemaVersion:
    """A schema version of the registry as the job uses it."""

    version_id: str
    reader: str  # the writer's schema without logical types (JSON): `from_avro`'s writer schema
    envelope_head: str  # the JsonConverter text before the payload: `{"schema":<Connect schema>,"payload":`
    # `to_json` of a record whose every field is null: what `from_avro` gives for a body that does not
    # decode (its PERMISSIVE mode), and no Debezium record is (each has a field that is never null)
    undecodable: str
    definition: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # Why a value of this version cannot be read as a Debezium envelope (a field the first pass reads
    # in another type, avro_readers.IncompatibleEnvelope); None when it can.
    envelope_problem: str | None = None

    @classmethod
    def of(cls, version_id: str, definition: str) -> SchemaVersion:
        avro = json.loads(definition)
        schema = json.dumps(connect_schema(avro), separators=(",", ":"), ensure_ascii=False)
        if not isinstance(avro, dict) or avro.get("type") != "record":
            raise UnsupportedAvroSchema("a record's key or value schema must be an Avro record")
        try:
            avro_readers.envelope_reader(avro, 0, 0, payload_type(True))
            problem = None
        except avro_readers.IncompatibleEnvelope as e:  # a key's record is not an envelope: fine for keys
            problem = f"schema version {version_id} has no Connect equivalent: {e}"
        nulls = "{" + ",".join(f"{json.dumps(f['name'])}:null" for f in avro.get("fields", [])) + "}"
        head = '{"schema":' + schema + ',"payload":'
        return cls(version_id, json.dumps(reader_schema(avro)), head, nulls, avro, problem)

    @property
    def schema_text(self) -> str:
        """The Connect schema as the classification keeps it (`{"schema":` before it, envelope.schema_json)."""
        return self.envelope_head.removesuffix(',"payload":')

    @cached_property
    def probes(self) -> avro_readers.Probes:
        return avro_readers.probes(self.definition)

    def envelope_reader(self, strings: int, binaries: int, transactions: bool) -> dict[str, Any]:
        """The first pass's reader (avro_readers.envelope_reader) for `envelope.payload_type(transactions)`."""
        return avro_readers.envelope_reader(self.definition, strings, binaries, payload_type(transactions))

    @cached_property
    def image_reader(self) -> str:
        return json.dumps(avro_readers.image_reader(self.definition))

    @cached_property
    def check_reader(self) -> str:
        """A reader that decodes the record and keeps nothing but `DECODED` (a key's first pass)."""
        name = avro_readers.full_name(self.definition, "")
        return json.dumps({"type": "record", "name": name, "fields": [avro_readers.decoded_field()]})

    @cached_property
    def kinds(self) -> dict[str, str | None]:
        """The Avro type of each column of the record's row image (an envelope) or of the record (a key)."""
        return avro_readers.column_kinds(self.definition)

    @cached_property
    def postgres(self) -> bool:
        """An envelope of Debezium's PostgreSQL connector (whose DDL log the first pass reads)."""
        return avro_readers.source_name(self.definition) == "io.debezium.connector.postgresql.Source"


# ------------------------------------------------------------------------- the registry
class SchemaVersions:
    """The definitions of schema versions by id, fetched once each (Glue GetSchemaVersion) and kept
    for the run: a version never changes. An id the registry does not know is asked again in a
    later batch (its records are dead letters meanwhile); any other error fails the batch, which
    runs again, so that an unreachable registry never turns records into dead letters."""

    def __init__(self, client: Callable[[], Any] | None = None) -> None:
        self._client_factory = client or _glue_client
        self._client: Any = None
        self._known: dict[str, SchemaVersion] = {}
        self.fetches = 0  # GetSchemaVersion calls made (the cache's test and the batch log)

    def known(self, vid: str) -> SchemaVersion | None:
        """A version fetched earlier in this run."""
        return self._known.get(vid)

    def lookup(self, ids: Iterable[str]) -> tuple[dict[str, SchemaVersion], dict[str, str]]:
        """(the versions found, reason per id that cannot be used)."""
        found: dict[str, SchemaVersion] = {}
        unusable: dict[str, str] = {}
        for vid in sorted(set(ids)):
            if vid not in self._known:
                problem = self._fetch(vid)
                if problem:
                    unusable[vid] = problem
                    continue
            found[vid] = self._known[vid]
        return found, unusable

    def _fetch(self, vid: str) -> str | None:
        if self._client is None:
            self._client = self._client_factory()
        self.fetches += 1
        try:
            reply = self._client.get_schema_version(SchemaVersionId=vid)
        except self._client.exceptions.EntityNotFoundException:
            return f"schema version {vid} is not in the AWS Glue Schema Registry (GetSchemaVersion: not found)"
        if reply.get("DataFormat", "AVRO") != "AVRO":
            return f"schema version {vid} is {reply['DataFormat']}, not AVRO"
        try:
            self._known[vid] = SchemaVersion.of(vid, reply["SchemaDefinition"])
        except (ValueError, KeyError, TypeError) as e:  # JSON, UnsupportedAvroSchema, malformed Avro
            return f"schema version {vid} has no Connect equivalent: {e}"
        return None


def _glue_client() -> Any:
    import boto3  # the Glue runtime has it; imported only when a framed record is seen

    return boto3.client("glue")
