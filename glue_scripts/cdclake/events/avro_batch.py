"""The wire format avro in a batch: Avro records of the Glue Schema Registry decoded by Spark
straight into what the JSON path reads from its records, never through JSON text.

First pass (`AvroDecoder.classify`): one Spark action lists the schema versions of the batch's
framed records (schema_registry.py fetches each once per run). Each record's body is read with
`from_avro` and its version's first-pass reader (avro_readers.py: the envelope's `op`, `source`
and schema-change fields, and a probe of the row's text and binary columns for the TOAST
placeholder), and those values take the place of the JSON path's parsed payload (`_p`, envelope.py,
of the one type `envelope.payload_type` that both paths fill) before the classification's last
projection, which JSON and Avro records share: the statuses, dead-letter reasons, positions
(`_cdc_seq`) and source tables are computed by the same expressions. A record's value schema is
named by its version (`VERSION_REF` + id, and the Connect schema's name, by which heartbeat and
transaction records are told), which groups the records per schema version; the classified batch
is kept as a one-node plan for the batch (`release` frees it); `attach` gives each such group its Connect schema (the lake's
column types, connect_types.py) and its versions. The bodies go along (`AVRO_VALUE`, `AVRO_KEY`,
inflated when zlib-compressed).

Second pass (decode.py, one schema group): the row images and the key read with the group's
image and key readers, each column taken as Avro decoded it (`AvroSchemas.adapt`: nested values
as their JSON text, an `int` where the JSON path parses a `long` widened) and converted by the
JSON path's conversions with bytes for base64 (`column_spec(..., binary=True)`).

A record that cannot be decoded keeps its framed text and becomes a dead letter with the reason
(`_mark`): a malformed header, an unknown schema version, a corrupt body. A record that decoded
but holds a value no lake column takes is kept as the JsonConverter text it decodes to
(`AvroSchemas.record_text`), replayable with either wire format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.avro.functions import from_avro

from ..common.records import RAW_COLUMNS
from .avro_readers import BYTES_PROBE, DECODED, IMAGE_FIELDS, STRING_PROBE
from .connect_types import ColumnSpec
from .envelope import DEAD, classify_envelopes, payload_type, read_envelopes
from .leaf import as_leaf, release
from .schema_registry import HEADER_LENGTH, HEADER_VERSION, MARKER, NO_COMPRESSION, ZLIB, SchemaVersion, SchemaVersions
from .source_ddl import POSTGRES_DDL_TABLE

VERSION_REF = "gsr-version:"  # an Avro record's `_value_schema` / `_key_schema`: its version's id follows
AVRO_VALUE, AVRO_KEY = "_avro_value", "_avro_key"  # the bodies, for the second pass
_OK = ("_gsr_value_ok", "_gsr_key_ok")  # whether the value / key decoded (for `_mark`)
_PERMISSIVE = {"mode": "PERMISSIVE"}
_REST = 2**31 - 1  # `substring` length: to the end
_COMPLEX = ("record", "array", "map")
_NESTED = T.StructType([T.StructField("v", T.StringType())])


@dataclass(frozen=True)
class AvroSchemas:
    """The schema versions of one schema group's values and keys (either may be JSON: None)."""

    value: SchemaVersion | None
    key: SchemaVersion | None

    def image_record(self) -> Column:
        """`before` and `after` of the group's records, as Avro decoded them."""
        assert self.value is not None
        reader = {**_PERMISSIVE, "avroSchema": self.value.image_reader}
        return from_avro(F.col(AVRO_VALUE), self.value.reader, reader)

    def key_record(self) -> Column:
        assert self.key is not None
        return from_avro(F.col(AVRO_KEY), self.key.reader, _PERMISSIVE)

    def adapt(self, spec: ColumnSpec, value: Column, key: bool) -> Column:
        """A column as Avro decoded it, in the form the JSON path parses it to (`spec.parse_type`)."""
        version = self.key if key else self.value
        kind = version.kinds.get(spec.source) if version is not None else None
        if kind in _COMPLEX and isinstance(spec.parse_type, T.StringType):
            # Its JSON text as the JSON path keeps it: written by `from_json` for a string field
            # (e.g. a character outside the BMP escaped), so the text goes through that parse too.
            text = F.to_json(F.struct(value.alias("v")), {"ignoreNullFields": "false"})
            return F.from_json(text, _NESTED).getField("v")
        if kind == "int" and isinstance(spec.parse_type, T.LongType):
            return value.cast("bigint")  # e.g. a Connect Time (int32 ms), converted as a long
        return value

    def record_text(self, column: str) -> Column:
        """The raw `key` or `value` column, a framed record as the JsonConverter text it decodes to."""
        version = self.key if column == "key" else self.value
        if version is None:
            return F.col(column)
        body = from_avro(F.col(AVRO_KEY if column == "key" else AVRO_VALUE), version.reader, _PERMISSIVE)
        text = F.concat(F.lit(version.envelope_head), F.to_json(body, {"ignoreNullFields": "false"}), F.lit("}"))
        return F.when(_framed(F.col(column)), text).otherwise(F.col(column))


class AvroDecoder:
    """Classifies the batch with its framed records decoded (`decoding`: --wire_format avro), or
    only names those in their dead letters (--wire_format json). `placeholder`: the connector's
    TOAST placeholder, which the first pass looks for in text and binary columns of updates."""

    def __init__(self, decoding: bool, versions: SchemaVersions | None = None, placeholder: str = "") -> None:
        self.decoding = decoding
        self.versions = versions or SchemaVersions()
        self.placeholder = placeholder
        self._inflate: Any = None
        self._built: tuple[Any, list[list[Column]]] | None = None
        self._leaf: DataFrame | None = None

    def classify(self, raw: DataFrame, transactions: bool = False) -> DataFrame:
        """The classified batch (envelope.classify's columns, and the bodies with the wire format
        avro). One Spark action when decoding: the batch's schema versions."""
        envelopes = read_envelopes(raw, transactions)
        if not self.decoding:
            return _mark(classify_envelopes(envelopes, transactions), {}, decoding=False)
        parted = envelopes.select("*", *_bytes("key"), *_bytes("value")).select("*", *_header("key"), *_header("value"))
        seen = _versions_seen(parted)
        if not seen:
            return _mark(classify_envelopes(envelopes, transactions), {}, decoding=True)
        found, unusable = self.versions.lookup(vid for vid, _, _ in seen)
        for vid in {vid for vid, _, c in seen if c == "value" and vid in found and found[vid].envelope_problem}:
            unusable[vid] = found.pop(vid).envelope_problem  # type: ignore[assignment]
        if all(v.envelope_problem for v in found.values()):  # every framed record is a dead letter naming why
            return _mark(classify_envelopes(envelopes, transactions), unusable, decoding=True)
        df = parted
        for columns in self._projections(raw, found, any(z == ZLIB for _, z, _ in seen), transactions):
            df = df.select(*columns)
        classified = _mark(classify_envelopes(df, transactions, (AVRO_VALUE, AVRO_KEY, *_OK)), unusable, True)
        # Kept as a one-node plan (leaf.as_leaf), computed by the first action that reads it: a
        # filter over the classification (a schema group's rows, the dead letters) is pushed down
        # through every projection, and with the Avro projections under the JSON path's the pushed
        # condition repeats the versions' reads so often that the optimizer runs out of memory.
        self.release()
        self._leaf = as_leaf(classified.drop(*_OK))
        return self._leaf

    def release(self) -> None:
        """Free the rows `classify` kept (after the batch)."""
        if self._leaf is not None:
            release(self._leaf)
            self._leaf = None

    def attach(self, groups: Iterable[Any]) -> None:
        """Schema groups of Avro records: their Connect schemas and versions (decode.SchemaGroup)."""
        for g in groups:
            value, key = _referenced(self.versions, g.value_schema), _referenced(self.versions, g.key_schema)
            if value is None and key is None:
                continue
            g.avro = AvroSchemas(value, key)
            g.value_schema = value.schema_text if value is not None else g.value_schema
            g.key_schema = key.schema_text if key is not None else g.key_schema

    def _projections(
        self, raw: DataFrame, found: dict[str, SchemaVersion], zlib: bool, transactions: bool
    ) -> list[list[Column]]:
        """The projections from the parted batch to `read_envelopes`' columns with the Avro
        records' values in place, built once for a set of versions (a steady stream's batches
        share it)."""
        jvm = id(raw.sparkSession.sparkContext._jvm)
        key = (jvm, tuple(sorted(found)), zlib, self.placeholder, transactions)
        if self._built is None or self._built[0] != key:
            inflate = self._inflate_udf() if zlib else None
            self._built = (key, _avro_projections(found, inflate, self.placeholder, transactions))
        return self._built[1]

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


def _referenced(versions: SchemaVersions, schema: str | None) -> SchemaVersion | None:
    if schema is None or not schema.startswith(VERSION_REF):
        return None
    return versions.known(schema[len(VERSION_REF) :].split(" ", 1)[0])


def _schema_ref(v: SchemaVersion) -> str:
    """A value's `_value_schema`: its version's id, then its Connect schema's name as JsonConverter
    writes it (the classification tells heartbeat and transaction records by that name)."""
    name = json.loads(v.schema_text[len('{"schema":') :]).get("name")
    return VERSION_REF + v.version_id + ("" if name is None else ' {"name":' + json.dumps(name) + "}")


# ------------------------------------------------------------------------- the frame, in Spark
def _framed(text: Column) -> Column:
    return F.coalesce(text.startswith(MARKER), F.lit(False))


def _decoded_bytes(text: Column) -> Column:
    return F.try_to_binary(F.substring(text, len(MARKER) + 1, _REST), F.lit("base64"))


def _byte(b: Column, pos: int) -> Column:
    return F.conv(F.hex(F.substring(b, pos, 1)), 16, 10).cast("int")


def _version_id(b: Column) -> Column:
    h = F.lower(F.hex(F.substring(b, 3, 16)))
    return F.concat_ws("-", h.substr(1, 8), h.substr(9, 4), h.substr(13, 4), h.substr(17, 4), h.substr(21, 12))


def _header_ok(b: Column) -> Column:
    return (F.length(b) >= HEADER_LENGTH) & (_byte(b, 1) == HEADER_VERSION) & _byte(b, 2).isin(NO_COMPRESSION, ZLIB)


def _bytes(c: str) -> list[Column]:
    """The bytes of a raw column holding a framed record (null for anything else), projected once."""
    return [F.when(_framed(F.col(c)), _decoded_bytes(F.col(c))).alias(f"_gsr_{c}_b")]


def _header(c: str) -> list[Column]:
    """Of a framed record's bytes with a good header: its schema version id and compression byte."""
    b = F.col(f"_gsr_{c}_b")
    ok = F.coalesce(_header_ok(b), F.lit(False))
    return [F.when(ok, _version_id(b)).alias(f"_gsr_{c}_id"), F.when(ok, _byte(b, 2)).alias(f"_gsr_{c}_zip")]


def _versions_seen(parted: DataFrame) -> list[tuple[str, int, str]]:
    """(version id, compression byte, `key` or `value`) of the batch's framed records: the batch's one
    extra action."""
    pairs = F.array(*[F.struct(F.col(f"_gsr_{c}_id").alias("id"), F.col(f"_gsr_{c}_zip").alias("zip"), F.lit(c).alias("c")) for c in ("key", "value")])  # fmt: skip
    rows = parted.select(F.explode(pairs).alias("v")).where(F.col("v.id").isNotNull()).distinct().collect()
    return [(r["v"]["id"], r["v"]["zip"], r["v"]["c"]) for r in rows]


# ------------------------------------------------------------------------- the first pass
def _avro_projections(
    found: dict[str, SchemaVersion], inflate: Any, placeholder: str, transactions: bool
) -> list[list[Column]]:
    """parted -> bodies -> the first-pass records (`_av`, `_ak`) -> `read_envelopes`' columns with
    the Avro records' values in place, the bodies and whether each decoded."""
    strings = max((len(v.probes.strings) for v in found.values()), default=0) if placeholder else 0
    binaries = max((len(v.probes.binaries) for v in found.values()), default=0) if placeholder else 0
    bodies = [_body(c, inflate).alias(n) for c, n in (("value", AVRO_VALUE), ("key", AVRO_KEY))]
    envelopes = {k: v for k, v in found.items() if v.envelope_problem is None}  # the others are keys only
    readers = {k: v.envelope_reader(strings, binaries, transactions) for k, v in envelopes.items()}
    # Versions with a nested value the payload keeps as text (MySQL's tableChanges[].table) are read
    # into a column each and converted from it (a column is read once however often the conversion
    # names it); the others' readers give the payload's types already: one CASE reads them all.
    texts = sorted(k for k, r in readers.items() if _has_text(r, payload_type(transactions)))
    plain = _by_version("_gsr_value_id", {k: v for k, v in envelopes.items() if k not in texts}, lambda v: _read(v, readers[v.version_id]))  # fmt: skip
    read = [F.when(F.col("_gsr_value_id") == k, _read(envelopes[k], readers[k])).alias(f"_avr{i}") for i, k in enumerate(texts)]  # fmt: skip
    av = plain
    for i, k in reversed(list(enumerate(texts))):
        av = F.when(F.col("_gsr_value_id") == k, _converted(F.col(f"_avr{i}"), readers[k], transactions)).otherwise(av)
    ak = _by_version("_gsr_key_id", found, lambda v: from_avro(F.col(AVRO_KEY), v.reader, {**_PERMISSIVE, "avroSchema": v.check_reader}))  # fmt: skip
    ref = _by_version("_gsr_value_id", found, lambda v: F.lit(_schema_ref(v)))
    postgres = {k: v for k, v in found.items() if v.postgres}
    ddl_log = F.coalesce((F.col("_av.source.table") == POSTGRES_DDL_TABLE) & F.col("_av.source.lsn").isNotNull(), F.lit(False))  # fmt: skip
    pg_after = _by_version("_gsr_value_id", postgres, lambda v: F.to_json(from_avro(F.col(AVRO_VALUE), v.reader, _PERMISSIVE).getField("after"), {"ignoreNullFields": "false"}))  # fmt: skip
    return [
        [F.col("*"), *bodies],
        [F.col("*"), *read],
        [F.col("*"), av.alias("_av"), ak.alias("_ak"), ref.alias("_gsr_value_ref")],  # `_in_place` drops the `_avr`s
        [F.col("*"), F.when(ddl_log, pg_after).alias("_pg_after")],
        _in_place(_toasted(strings, binaries, placeholder), placeholder, payload_type(transactions)),
    ]


def _read(v: SchemaVersion, reader: dict[str, Any]) -> Column:
    """A value read with its version's first-pass reader (avro_readers.envelope_reader)."""
    return from_avro(F.col(AVRO_VALUE), v.reader, {**_PERMISSIVE, "avroSchema": json.dumps(reader)})


def _has_text(reader: Any, spark: T.DataType) -> bool:
    """Whether a reader reads a nested value where the payload type has text (`_as_payload` converts it)."""
    reader = next((b for b in reader if b != "null"), reader) if isinstance(reader, list) else reader
    if isinstance(spark, T.StructType):
        parts = {f["name"]: f["type"] for f in reader["fields"]}
        return any(_has_text(parts[f.name], f.dataType) for f in spark.fields if f.name in parts)
    if isinstance(spark, T.ArrayType):
        return _has_text(reader["items"], spark.elementType)
    return isinstance(spark, T.StringType) and isinstance(reader, dict) and reader.get("type") != "enum"


def _converted(rec: Column, reader: dict[str, Any], transactions: bool) -> Column:
    """A first-pass read (`rec`, a column) with its payload fields in the JSON path's types
    (`payload_type`): the type every version's read has, which the CASE over them needs."""
    parts = {f["name"]: f["type"] for f in reader["fields"]}
    read = [f for f in payload_type(transactions).fields if f.name in parts and f.name not in IMAGE_FIELDS]
    fields = [_as_payload(rec.getField(f.name), f.dataType, parts[f.name]).alias(f.name) for f in read]
    return F.struct(rec.getField(DECODED).alias(DECODED), *fields, rec.getField("after").alias("after"))


def _as_payload(value: Column, spark: T.DataType, reader: Any) -> Column:
    """A value read with `reader` (avro_readers.payload_reader) as the JSON path parses it with `spark`:
    a nested record, array or map under a string type as its JSON text (with its null fields, as
    JsonConverter writes them), structs and arrays part by part."""
    reader = next((b for b in reader if b != "null"), reader) if isinstance(reader, list) else reader
    if isinstance(spark, T.StructType):
        parts = {f["name"]: f["type"] for f in reader["fields"]}
        fields = [_as_payload(value.getField(f.name), f.dataType, parts[f.name]).alias(f.name) for f in spark.fields]
        return F.when(value.isNotNull(), F.struct(*fields))
    if isinstance(spark, T.ArrayType):
        return F.transform(value, lambda e: _as_payload(e, spark.elementType, reader["items"]))
    if isinstance(spark, T.StringType) and isinstance(reader, dict) and reader.get("type") != "enum":
        return F.to_json(value, {"ignoreNullFields": "false"})
    return value


def _body(c: str, inflate: Any) -> Column:
    body = F.when(F.col(f"_gsr_{c}_id").isNotNull(), F.substring(F.col(f"_gsr_{c}_b"), HEADER_LENGTH + 1, _REST))
    return body if inflate is None else F.when(F.col(f"_gsr_{c}_zip") == ZLIB, inflate(body)).otherwise(body)


def _by_version(vid: str, versions: dict[str, SchemaVersion], read: Any) -> Column:
    """One CASE over the versions: each record is read once, with its own version's schema."""
    out: Any = None
    for version_id, v in sorted(versions.items()):
        cond = F.col(vid) == version_id
        out = F.when(cond, read(v)) if out is None else out.when(cond, read(v))
    return out if out is not None else F.lit(None)


def _toasted(strings: int, binaries: int, placeholder: str) -> Column:
    """Whether an Avro record's new row image holds the placeholder in a text or binary column."""
    if not placeholder or not (strings or binaries):
        return F.lit(False)
    text = [F.col(f"_av.after.{STRING_PROBE}{i}") == placeholder for i in range(strings)]
    data = [F.col(f"_av.after.{BYTES_PROBE}{i}") == F.lit(placeholder.encode("utf-8")) for i in range(binaries)]
    out = text[0] if text else data[0]
    for c in (text + data)[1:]:
        out = out | c
    return F.coalesce(out, F.lit(False))


def _in_place(toasted: Column, placeholder: str, payload: T.StructType) -> list[Column]:
    """`read_envelopes`' columns, an Avro record's from `_av` / `_ak`. Its payload and row images
    have no text: `_payload_json` is empty (a payload is there), `_p.before` null, `_p.after` null
    when there is no `after`, else the PostgreSQL DDL log's row as JSON (source_ddl.py reads it),
    else the placeholder's JSON text when the probe found it (summary.may_hold looks for it), else
    empty."""
    value, key = F.col("_gsr_value_id").isNotNull(), F.col("_gsr_key_id").isNotNull()
    value_ok = F.coalesce(F.col(f"_av.{DECODED}"), F.lit(False))
    key_ok = F.coalesce(F.col(f"_ak.{DECODED}"), F.lit(False))
    after = (
        F.when(F.col("_av.after").isNull(), F.lit(None).cast("string"))
        .when(F.col("_pg_after").isNotNull(), F.col("_pg_after"))
        .when(toasted, F.lit(json.dumps(placeholder)))
        .otherwise(F.lit(""))
    )
    nothing = F.lit(None).cast("string")  # `before` is read in the second pass; nothing is corrupt
    images = {n: after if n == "after" else nothing for n in IMAGE_FIELDS}
    p = F.struct(*[images.get(f.name, F.col(f"_av.{f.name}")).alias(f.name) for f in payload.fields])
    avro_value = {
        "_value_schema": F.col("_gsr_value_ref"),
        "_payload_json": F.lit(""),
        "_value_valid": value_ok,
        "_p": p,
    }
    avro_key = {"_key_schema": F.concat(F.lit(VERSION_REF), F.col("_gsr_key_id")), "_key_json": F.lit(None).cast("string"), "_key_valid": key_ok}  # fmt: skip
    replaced = [F.when(value, c).otherwise(F.col(n)).alias(n) for n, c in avro_value.items()]
    replaced += [F.when(key, c).otherwise(F.col(n)).alias(n) for n, c in avro_key.items()]
    carried = [F.col(c) for c in (*RAW_COLUMNS, AVRO_VALUE, AVRO_KEY)]
    return [*carried, *replaced, (value & value_ok).alias(_OK[0]), (key & key_ok).alias(_OK[1])]


# ------------------------------------------------------------------------- dead letters' reasons
def _reason(c: str, unusable: dict[str, str], decoding: bool) -> Column:
    """Why the framed record in column `c` (the key or the value) was not decoded."""
    text = F.col(c)
    b = _decoded_bytes(text)
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


def _mark(classified: DataFrame, unusable: dict[str, str], decoding: bool) -> DataFrame:
    """The classified batch with the reason of each framed record that was not decoded (the
    classification made it a dead letter: its value or key is not valid)."""
    has_ok = _OK[0] in classified.columns
    dead = F.col("_status") == DEAD
    bad = {c: _framed(F.col(c)) & (~F.col(ok) if has_ok else F.lit(True)) for c, ok in zip(("value", "key"), _OK, strict=True)}  # fmt: skip
    reason = F.when(dead & bad["value"], _reason("value", unusable, decoding))
    reason = reason.when(dead & bad["key"], _reason("key", unusable, decoding))
    return classified.withColumn("_reason", F.coalesce(reason, F.col("_reason")))
