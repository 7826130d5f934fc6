"""Avro reader schemas derived from a writer schema of the registry, without Spark.

The job reads an Avro record of the Glue Schema Registry twice, each time with Avro's schema
resolution (the writer's schema, as the registry holds it, and a reader schema derived here), so
that each read decodes only what it needs and skips the rest:

* `envelope_reader`: the first pass (classification). The fields of the JSON path's parsed
  payload (`envelope.payload_type`: `op`, `source`, the schema-change fields, with --transactions
  keep the transaction fields), derived from that one type so that both paths read the same, and of
  `after` only its text and binary columns (renamed `__gsr_s<i>` / `__gsr_b<i>` by aliases, to
  find the TOAST placeholder). Missing fields take their null default, `int` is promoted to `long`;
  a nested value the JSON path keeps as text (MySQL's `tableChanges[].table`) is read whole and
  written as its JSON text. `DECODED` is true in every record that decodes (a body that does not
  decode reads as all nulls).
* `image_reader`: the second pass (one schema group): the `before` and `after` row images.
* `record_reader`: the whole record (a key; a dead letter's JsonConverter text).

All readers, and the writer schemas Spark reads with, drop Avro's logical types (`for_decoding`):
Spark then keeps each value in its Avro encoding (a decimal's bytes, a date's days), which is what
the Connect types' conversions take (connect_types.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

DECODED = "__gsr_decoded"
STRING_PROBE, BYTES_PROBE = "__gsr_s", "__gsr_b"
_NAMED = ("record", "enum", "fixed")
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
# The Avro writer types each Spark type of the payload reads (Avro promotes an int to a long).
_ACCEPTS = {"string": {"string"}, "bigint": {"int", "long"}, "int": {"int"}, "boolean": {"boolean"}}
# The payload fields the first pass does not read: the row images (the second pass) and the parse's own.
IMAGE_FIELDS = ("before", "after", "_corrupt")


def for_decoding(avro: Any) -> Any:
    """The schema without its `logicalType`s (see the module docstring) and without its fields'
    defaults. A decode never uses a writer's defaults (only a reader's, for a field the writer lacks),
    but Avro checks them when a reader has aliases (the first pass's probes), and the converter
    writes defaults Avro rejects: a double's NaN or Infinity as text, from PostgreSQL's
    `DEFAULT 'NaN'`. With them every record of the version would read as undecodable."""
    if isinstance(avro, list):
        return [for_decoding(a) for a in avro]
    if not isinstance(avro, dict):
        return avro
    out = {k: for_decoding(v) for k, v in avro.items() if k != "logicalType"}
    if avro.get("type") == "record":
        out["fields"] = [{k: v for k, v in f.items() if k != "default"} for f in out.get("fields", [])]
    return out


class Names:
    """The named types (records, enums, fixed) of a writer schema by full name, in definition
    order: a later field may name a type an earlier one defined (`after` names `before`'s)."""

    def __init__(self, writer: dict[str, Any]) -> None:
        self.types: dict[str, dict[str, Any]] = {}
        self._full: dict[int, str] = {}  # id of a named type's node -> its full name
        self._walk(writer, "")

    def _walk(self, node: Any, namespace: str) -> None:
        if isinstance(node, list):
            for branch in node:
                self._walk(branch, namespace)
        elif isinstance(node, dict):
            if node.get("type") in _NAMED:
                full = full_name(node, namespace)
                self._full[id(node)] = full
                self.types.setdefault(full, {**node, "name": full})
                namespace = full.rpartition(".")[0]
            for child in ("type", "items", "values"):
                if isinstance(node.get(child), dict | list):
                    self._walk(node[child], namespace)
            for f in node.get("fields", []) if node.get("type") == "record" else []:
                self._walk(f.get("type"), namespace)

    def resolve(self, node: Any) -> Any:
        """A field's type with a nullable union unwrapped and a name reference replaced by its
        definition (None: a union other than [null, type])."""
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            return self.resolve(branches[0]) if len(branches) == 1 else None
        if isinstance(node, str) and node not in _PRIMITIVES:
            exact = self.types.get(node)
            return exact or next((t for n, t in self.types.items() if n.endswith("." + node)), None)
        if isinstance(node, dict) and isinstance(node.get("type"), dict | list):
            return self.resolve(node["type"])
        if isinstance(node, dict) and node.get("type") in _NAMED:
            return {**node, "name": self._full.get(id(node), node["name"])}
        return node

    def kind(self, node: Any) -> str | None:
        """The Avro type name of a field's type (`record`, `string`, `int`, ...), resolved."""
        t = self.resolve(node)
        return t if isinstance(t, str) else t.get("type") if isinstance(t, dict) else None


def full_name(node: dict[str, Any], namespace: str) -> str:
    name = node["name"]
    if "." in name:
        return name
    ns = node.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _nullable(t: Any) -> list[Any]:
    return ["null", t]


def _field(name: str, t: Any, aliases: tuple[str, ...] = ()) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, "type": _nullable(t), "default": None}
    if aliases:
        f["aliases"] = list(aliases)
    return f


def _fields(writer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in writer.get("fields", [])}


class IncompatibleEnvelope(ValueError):
    """A writer field the first pass reads (`op`, `source.pos`, ...) in a type it cannot read as
    Debezium's: the version is unusable and its records are dead letters saying so."""


def _record(names: Names, node: Any, what: str) -> dict[str, Any] | None:
    """The writer's record a field's type is (None: no such field)."""
    if node is None:
        return None
    t = names.resolve(node)
    if not isinstance(t, dict) or t.get("type") != "record":
        raise IncompatibleEnvelope(f"{what} is not a record")
    return t


@dataclass(frozen=True)
class Probes:
    """The text and binary columns of a row image, in order (the first pass's TOAST probe)."""

    strings: tuple[str, ...]
    binaries: tuple[str, ...]


def probes(writer: dict[str, Any]) -> Probes:
    names = Names(writer)
    after = _fields(writer).get("after")
    image = names.resolve(after["type"]) if after else None
    if not isinstance(image, dict) or image.get("type") != "record":
        return Probes((), ())
    kinds = [(f["name"], names.kind(f["type"]), _decimal(names.resolve(f["type"]))) for f in image.get("fields", [])]
    # A decimal's bytes never become a text or binary lake column that could hold the placeholder.
    return Probes(
        tuple(n for n, k, _ in kinds if k == "string"), tuple(n for n, k, d in kinds if k == "bytes" and not d)
    )


def _decimal(node: Any) -> bool:
    return isinstance(node, dict) and (
        node.get("logicalType") == "decimal" or "Decimal" in str(node.get("connect.name"))
    )


def envelope_reader(writer: dict[str, Any], strings: int, binaries: int, payload: T.StructType) -> dict[str, Any]:
    """The first pass's reader of a writer schema (module docstring); `strings` and `binaries`:
    how many probe fields every reader of the batch has (the most any version needs). `payload`:
    the JSON path's parsed payload type (envelope.payload_type), whose fields but the row images
    the reader reads, each in the writer's type where the JSON path keeps nested values as text.
    Raises IncompatibleEnvelope when the writer holds such a field in a type it cannot be read as."""
    names = Names(writer)
    have = _fields(writer)
    read = [f for f in payload.fields if f.name not in IMAGE_FIELDS]
    fields = [_field(f.name, payload_reader(names, have.get(f.name, {}).get("type"), f.dataType, f.name)) for f in read]
    after = _after_probe(writer, strings, binaries)
    return {"type": "record", "name": full_name(writer, ""), "fields": [decoded_field(), *fields, after]}


def payload_reader(names: Names, writer: Any, spark: T.DataType, path: str) -> Any:
    """The reader type of a writer's field (None: the writer has none) read as the Spark type `spark`
    of the JSON path's payload: a struct from the writer's record, an array's items alike, text from a
    string or an enum, or, as the JSON path keeps a nested object under a string type, the writer's
    record, array or map whole (`payload_value` writes it as its JSON text)."""
    kind = names.kind(writer) if writer is not None else None
    resolved = names.resolve(writer) if writer is not None else None
    if isinstance(spark, T.StructType):
        if kind not in (None, "record"):
            raise IncompatibleEnvelope(f"field {path!r} is not a record")
        have = _fields(resolved or {})
        name = resolved["name"] if resolved else f"cdclake.absent.{path.replace('.', '_')}"
        parts = [
            _field(f.name, payload_reader(names, have.get(f.name, {}).get("type"), f.dataType, f"{path}.{f.name}"))
            for f in spark.fields
        ]
        return {"type": "record", "name": name, "fields": parts}
    if isinstance(spark, T.ArrayType):
        if kind not in (None, "array"):
            raise IncompatibleEnvelope(f"field {path!r} is not an array")
        return {"type": "array", "items": payload_reader(names, resolved["items"] if resolved else None, spark.elementType, path)}  # fmt: skip
    if isinstance(spark, T.StringType) and kind in ("record", "array", "map", "enum"):
        return for_decoding(resolved)
    accepted = _ACCEPTS.get(spark.simpleString())
    if accepted is None:
        raise IncompatibleEnvelope(f"field {path!r}: the payload type {spark.simpleString()} has no Avro reader")
    if kind is not None and kind not in accepted:
        raise IncompatibleEnvelope(f"field {path!r} is not {' or '.join(sorted(accepted))}")
    return spark.simpleString().replace("bigint", "long")


def _after_probe(writer: dict[str, Any], strings: int, binaries: int) -> dict[str, Any]:
    image = _record(Names(writer), _fields(writer).get("after", {}).get("type"), "after")
    p = probes(writer) if image else Probes((), ())
    fields = [_field(f"{STRING_PROBE}{i}", "string", p.strings[i : i + 1]) for i in range(strings)]
    fields += [_field(f"{BYTES_PROBE}{i}", "bytes", p.binaries[i : i + 1]) for i in range(binaries)]
    return _field(
        "after", {"type": "record", "name": image["name"] if image else "cdclake.absent.Image", "fields": fields}
    )


def image_reader(writer: dict[str, Any]) -> dict[str, Any]:
    """The second pass's reader: the envelope's `before` and `after` (in the writer's order: the
    first defines the row's record, the second names it)."""
    kept = [f for f in writer.get("fields", []) if f["name"] in ("before", "after")]
    out = {k: v for k, v in writer.items() if k != "fields"}
    return for_decoding({**out, "fields": kept})


def decoded_field() -> dict[str, Any]:
    """A field no writer has, true in every record read: a body that does not decode reads as all
    nulls (`from_avro`'s PERMISSIVE mode)."""
    return {"name": DECODED, "type": "boolean", "default": True}


def column_kinds(writer: dict[str, Any]) -> dict[str, str | None]:
    """The Avro type (`int`, `record`, `array`, ...) of each column of a row image: an envelope's
    `after` (else `before`), or the record itself (a key)."""
    names = Names(writer)
    have = _fields(writer)
    image = next((names.resolve(have[f]["type"]) for f in ("after", "before") if f in have), writer)
    fields = image.get("fields", []) if isinstance(image, dict) else []
    return {f["name"]: names.kind(f["type"]) for f in fields}


def source_name(writer: dict[str, Any]) -> str | None:
    """The full name of an envelope's `source` record."""
    names = Names(writer)
    source = names.resolve(_fields(writer).get("source", {}).get("type"))
    return source.get("name") if isinstance(source, dict) else None
