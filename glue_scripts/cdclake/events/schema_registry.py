"""Avro records framed for the AWS Glue Schema Registry, decoded into the text the job reads.

With the wire format `avro` the connector writes each key and value with the Glue Schema
Registry's Avro converter: a header (version byte 3, compression byte 0 or 5 for zlib), the
16-byte id (a UUID) of the schema version in the registry, then the Avro body, zlib-compressed
when the compression byte says so. The job reads such a record as text (sources.py): MARKER and
the base64 of its bytes, which the `files` format (dead letters, raw zone) keeps as it is.

Per batch (`AvroDecoder.decode`): one Spark action lists the schema versions of the batch's
framed records; each version's definition is fetched once per job run (Glue GetSchemaVersion)
and cached; each record is decoded with Spark's `from_avro` and its version's schema, and
re-written as the JsonConverter text (`{"schema": <Connect schema>, "payload": <value>}`) that
JSON records are. Everything after (classification, types, ordering, evolution, MERGE) is the
JSON path. A record that cannot be decoded keeps its framed text and becomes a dead letter with
the reason (`Decoded.mark`): a malformed header, an unknown schema version, a corrupt body.

The Connect schema is rebuilt from the Avro schema's `connect.*` properties, which the
converter's AvroData writes for every Connect schema (name, version, parameters, int8/int16):
JsonConverter would have written the same schema for the same record.
"""

from __future__ import annotations

import base64
import json
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.avro.functions import from_avro

from ..common.records import RAW_COLUMNS
from .envelope import DEAD

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
    JsonConverter's encoding too."""
    if isinstance(avro, list):
        return [reader_schema(a) for a in avro]
    if isinstance(avro, dict):
        return {k: reader_schema(v) for k, v in avro.items() if k != "logicalType"}
    return avro


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
    reader: str  # `from_avro`'s schema (JSON)
    envelope_head: str  # the JsonConverter text before the payload: `{"schema":<Connect schema>,"payload":`
    # `to_json` of a record whose every field is null: what `from_avro` gives for a body that does not
    # decode (its PERMISSIVE mode), and no Debezium record is (each has a field that is never null)
    undecodable: str

    @classmethod
    def of(cls, version_id: str, definition: str) -> SchemaVersion:
        avro = json.loads(definition)
        schema = json.dumps(connect_schema(avro), separators=(",", ":"), ensure_ascii=False)
        if not isinstance(avro, dict) or avro.get("type") != "record":
            raise UnsupportedAvroSchema("a record's key or value schema must be an Avro record")
        nulls = "{" + ",".join(f"{json.dumps(f['name'])}:null" for f in avro.get("fields", [])) + "}"
        return cls(version_id, json.dumps(reader_schema(avro)), '{"schema":' + schema + ',"payload":', nulls)


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


# ------------------------------------------------------------------------- Spark
_REST = 2**31 - 1  # `substring` length: to the end


def _framed(text: Column) -> Column:
    return F.coalesce(text.startswith(MARKER), F.lit(False))


def _bytes(text: Column) -> Column:
    return F.try_to_binary(F.substring(text, len(MARKER) + 1, _REST), F.lit("base64"))


def _byte(b: Column, pos: int) -> Column:
    return F.conv(F.hex(F.substring(b, pos, 1)), 16, 10).cast("int")


def _version_id(b: Column) -> Column:
    h = F.lower(F.hex(F.substring(b, 3, 16)))
    return F.concat_ws("-", h.substr(1, 8), h.substr(9, 4), h.substr(13, 4), h.substr(17, 4), h.substr(21, 12))


def _header_ok(b: Column) -> Column:
    return (F.length(b) >= HEADER_LENGTH) & (_byte(b, 1) == HEADER_VERSION) & _byte(b, 2).isin(NO_COMPRESSION, ZLIB)


def _parts(c: str) -> list[Column]:
    """Of a raw column holding a framed record: its schema version id and compression byte
    (both null for anything else) and its body."""
    b = _bytes(F.col(c))
    ok = _framed(F.col(c)) & F.coalesce(_header_ok(b), F.lit(False))
    return [
        F.when(ok, _version_id(b)).alias(f"_gsr_{c}_id"),
        F.when(ok, _byte(b, 2)).alias(f"_gsr_{c}_zip"),
        F.when(ok, F.substring(b, HEADER_LENGTH + 1, _REST)).alias(f"_gsr_{c}_body"),
    ]


def _decoded(c: str, versions: dict[str, SchemaVersion], inflate_udf: Any) -> list[Column]:
    """Of a framed record whose version is known: `to_json` of its body read with that version's
    schema, the JsonConverter text that goes before it, and what the JSON is when the body does not
    decode. One CASE per column over the batch's versions; each record decodes once."""
    body = F.col(f"_gsr_{c}_body")
    if inflate_udf is not None:
        body = F.when(F.col(f"_gsr_{c}_zip") == ZLIB, inflate_udf(body)).otherwise(body)
    vid = F.col(f"_gsr_{c}_id")
    parts: list[Column | None] = [None, None, None]
    for v in versions.values():
        payload = F.to_json(from_avro(body, v.reader, {"mode": "PERMISSIVE"}), {"ignoreNullFields": "false"})
        for i, value in enumerate((payload, F.lit(v.envelope_head), F.lit(v.undecodable))):
            parts[i] = (
                F.when(vid == v.version_id, value) if parts[i] is None else parts[i].when(vid == v.version_id, value)
            )  # type: ignore[union-attr]
    names = (f"_gsr_{c}_json", f"_gsr_{c}_head", f"_gsr_{c}_null")
    return [(p if p is not None else F.lit(None).cast("string")).alias(n) for p, n in zip(parts, names, strict=True)]


def _as_connect_json(c: str) -> Column:
    """The JsonConverter text of a framed record `_decoded` read; the raw column as it was otherwise."""
    payload = F.col(f"_gsr_{c}_json")
    text = F.when(payload != F.col(f"_gsr_{c}_null"), F.concat(F.col(f"_gsr_{c}_head"), payload, F.lit("}")))
    return F.coalesce(text, F.col(c)).alias(c)


def _reason(c: str, unusable: dict[str, str], decoding: bool) -> Column:
    """Why the framed record in column `c` (the key or the value) was not decoded."""
    text = F.col(c)
    b = _bytes(text)
    vid = _version_id(b)
    what = f"record {c}: "
    reason = (
        F.when(b.isNull(), F.lit(f"{what}framed record is not base64 after {MARKER!r}"))
        .when(F.length(b) < HEADER_LENGTH, F.lit(f"{what}shorter than the {HEADER_LENGTH}-byte Glue Schema Registry header"))
        .when(_byte(b, 1) != HEADER_VERSION, F.concat(F.lit(f"{what}header version byte "), _byte(b, 1).cast("string"), F.lit(f" (expected {HEADER_VERSION})")))
        .when(~_byte(b, 2).isin(NO_COMPRESSION, ZLIB), F.concat(F.lit(f"{what}compression byte "), _byte(b, 2).cast("string"), F.lit(f" (expected {NO_COMPRESSION}: none or {ZLIB}: zlib)")))
    )  # fmt: skip
    if not decoding:
        return reason.otherwise(F.lit(what + JSON_ONLY))
    for vid_text, why in sorted(unusable.items()):
        reason = reason.when(vid == vid_text, F.lit(what + why))
    return reason.otherwise(F.concat(F.lit(f"{what}Avro body does not decode with schema version "), vid))


JSON_ONLY = (
    "Avro record of the AWS Glue Schema Registry, and the job runs with --wire_format json: run it "
    "with --wire_format avro, then replay these dead letters (replay)"
)


@dataclass
class Decoded:
    """A raw batch with its framed records as JsonConverter text, and what to say of those not."""

    raw: DataFrame
    unusable: dict[str, str]
    decoding: bool
    persisted: bool = False

    def mark(self, classified: DataFrame) -> DataFrame:
        """The classified batch with the reason of each framed record that was not decoded (its
        text is not JSON, so classification made it a dead letter already)."""
        dead = F.col("_status") == DEAD
        reason = F.when(dead & _framed(F.col("value")), _reason("value", self.unusable, self.decoding))
        reason = reason.when(dead & _framed(F.col("key")), _reason("key", self.unusable, self.decoding))
        return classified.withColumn("_reason", F.coalesce(reason, F.col("_reason")))

    def release(self) -> None:
        if self.persisted:
            self.raw.unpersist()


class AvroDecoder:
    """Decodes the framed records of each batch (`decoding`: --wire_format avro), or only names
    them in their dead letters (--wire_format json)."""

    def __init__(self, decoding: bool, versions: SchemaVersions | None = None) -> None:
        self.decoding = decoding
        self.versions = versions or SchemaVersions()
        self._inflate: Any = None

    def decode(self, raw: DataFrame) -> Decoded:
        if not self.decoding:
            return Decoded(raw, {}, False)
        parted = raw.select(*RAW_COLUMNS, *_parts("key"), *_parts("value"))
        seen = (
            parted.select(
                F.explode(
                    F.array(
                        F.struct(F.col("_gsr_key_id").alias("id"), F.col("_gsr_key_zip").alias("zip")),
                        F.struct(F.col("_gsr_value_id").alias("id"), F.col("_gsr_value_zip").alias("zip")),
                    )
                ).alias("v")
            )
            .where(F.col("v.id").isNotNull())
            .distinct()
            .collect()
        )
        if not seen:
            return Decoded(raw, {}, True)
        found, unusable = self.versions.lookup(r["v"]["id"] for r in seen)
        inflate_udf = self._inflate_udf() if any(r["v"]["zip"] == ZLIB for r in seen) else None
        decoded = parted.select(
            *RAW_COLUMNS, *_decoded("key", found, inflate_udf), *_decoded("value", found, inflate_udf)
        )
        decoded = decoded.select(*[_as_connect_json(c) if c in ("key", "value") else F.col(c) for c in RAW_COLUMNS])
        # Kept: the batch reads its records several times (the group aggregate, the tables, the dead
        # letters), and a plan that started from this projection would inline it into every use of
        # `value` (its schema text, many kilobytes, in each), more code than Spark can generate.
        return Decoded(decoded.persist(StorageLevel.MEMORY_AND_DISK), unusable, True, persisted=True)

    def _inflate_udf(self) -> Any:
        """`inflate` as a Python UDF, in the plan only of batches that hold zlib-compressed records
        (Spark has no zlib function). Defined here so that it travels by value: the executors'
        Python need not import this package."""
        if self._inflate is None:

            def inflate_body(body: bytes | None) -> bytes | None:
                import zlib

                try:
                    return None if body is None else zlib.decompress(bytes(body))
                except zlib.error:
                    return None

            self._inflate = F.udf(inflate_body, T.BinaryType())
        return self._inflate
