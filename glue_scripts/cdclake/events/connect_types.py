"""Kafka Connect / Debezium field schemas -> exact Spark (and so Iceberg) types.

Each event carries its own schema (JsonConverter with schemas enabled). For every column we
derive a `ColumnSpec`: how to parse the JSON value (`parse_type`), the type stored in the lake
(`spark_type`) and a Spark expression that converts one into the other. Everything runs as Spark
SQL expressions in the JVM: no Python UDF on the hot path.

Mapping (time.precision.mode=adaptive_time_microseconds or connect; decimal.handling.mode any).
JsonConverter names the schema types int8/16/32/64, float (32-bit), double, boolean, string,
bytes, array, map and struct; `float32`/`float64` (the Connect Java enum names) are accepted too.
Every row marked "captured" is checked against a real Debezium message from MariaDB or
PostgreSQL (tests/fixtures/debezium/*/all_types_*.json, tests/type_matrix.py).

| Connect type / logical name                    | lake type       | note                            |
|------------------------------------------------|-----------------|---------------------------------|
| int8, int16, int32, io.debezium.time.Year      | int             | Iceberg has no tinyint/smallint; MySQL TINYINT..MEDIUMINT, INT, YEAR; PG smallint, integer (captured). YEAR 0000 arrives from the binlog as 1900 (no YEAR value): 0 again |
| int64                                          | bigint          | MySQL BIGINT, INT UNSIGNED; PG bigint (captured) |
| float / double (also float32 / float64)        | float / double  | MySQL FLOAT, DOUBLE; PG real, double precision; NaN and +-Infinity arrive as strings and are kept (captured); also decimal.handling.mode=double |
| boolean (BIT(1), BOOLEAN)                      | boolean         | (captured)                      |
| string, Enum, EnumSet, Json, Uuid, Xml, ZonedTime, Interval | string | EnumSet: comma-separated; Json: the source's text; PG interval: ISO 8601 text (interval.handling.mode=string) (captured) |
| connect Decimal (bytes, base64 + scale), precision <= 38 | decimal(p, s) | p from connect.decimal.precision, else 38; MySQL DECIMAL, BIGINT UNSIGNED; PG numeric(p, s) (captured) |
| connect Decimal, precision > 38 (MySQL DECIMAL(65, s), PG numeric(60, s)) | string | exact decimal text with s fraction digits: no lake decimal holds 39+ digits (captured) |
| io.debezium.data.VariableScaleDecimal (PG numeric without precision) | string | exact decimal text; PG's numeric NaN arrives as null from the connector (captured) |
| string with __debezium.source.column.type=DECIMAL/NUMERIC | decimal(len, scale) | column.propagate.source.type |
| string (decimal.handling.mode=string otherwise) | string         | the schema carries no precision |
| io.debezium.time.Date, connect Date (days)     | date            | (captured)                      |
| io.debezium.time.Timestamp (ms), MicroTimestamp (us), NanoTimestamp (ns), connect Timestamp | timestamp_ntz | MySQL DATETIME, PG timestamp have no zone; ns truncated to us (captured). PG +-infinity and values beyond year 294247 do not fit: dead letter naming the column |
| io.debezium.time.ZonedTimestamp (ISO string)   | timestamp       | with zone (MySQL TIMESTAMP, PG timestamptz) (captured); PG +-infinity: dead letter |
| io.debezium.time.Time (ms), MicroTime (us), NanoTime (ns), connect Time | string `[-]HH:MM:SS.ffffff` | Spark has no TIME type; MySQL TIME may exceed 24h or be negative (captured) |
| bytes                                          | binary          | MySQL BINARY/VARBINARY/BLOB, PG bytea (captured) |
| io.debezium.data.Bits (BIT(n), n > 1)          | binary          | big-endian, as the database shows it; the connector sends the bytes little-endian (captured) |
| array (PG arrays), map                         | string (JSON)   | e.g. `[1,null,-3]`; elements decoded as PG's to_json writes them: numeric as numbers, date/timestamp/time as ISO text, bytea as `\\x` hex, json as JSON; the connector sends multi-dimensional PG arrays as nulls (captured) |
| struct (e.g. io.debezium.data.geometry.Geometry/Point) | string (JSON) | `{"wkb": base64, "srid": n}` (Point adds x, y) (captured) |

With the wire format avro the same specs take the values Avro decodes (`column_spec(..., binary=True)`):
bytes (a Decimal's unscaled value, Bits, bytes) arrive as bytes instead of base64 text, and every
conversion after that first step is the JSON path's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T


def cast_type(dtype: T.DataType) -> T.DataType | str:
    """A cast target for `Column.cast` that needs no JVM round trip: PySpark sends a DataType
    object as JSON to be parsed in the JVM, looking up the active session for each cast (~2 ms,
    and a batch builds dozens); a non-nested type's DDL name goes straight to the column."""
    if isinstance(dtype, T.StructType | T.ArrayType | T.MapType):
        return dtype
    return dtype.simpleString()


Converter = Callable[[Column], Column]
Stages = tuple[Converter, ...]

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
BITS = "io.debezium.data.Bits"
YEAR = "io.debezium.time.Year"
MAX_DECIMAL_PRECISION = 38  # Spark's and Iceberg's limit
_DATE_NAMES = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
# logical name -> factor to microseconds
_TIMESTAMP_NTZ = {
    "io.debezium.time.Timestamp": 1000,
    "org.apache.kafka.connect.data.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1,
    "io.debezium.time.NanoTimestamp": None,  # divide by 1000
}
_TIME = {
    "io.debezium.time.Time": 1000,
    "org.apache.kafka.connect.data.Time": 1000,
    "io.debezium.time.MicroTime": 1,
    "io.debezium.time.NanoTime": None,
}
_PRIMITIVE: dict[str, T.DataType] = {
    "int8": T.IntegerType(),
    "int16": T.IntegerType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    # JsonConverter writes "float"/"double" (its JSON schema names); "float32"/"float64" are the
    # Connect Java names, which some hand-written or converted schemas use.
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "float32": T.FloatType(),
    "float64": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
}


class UnsupportedSchema(ValueError):
    """The event's schema cannot be mapped (e.g. a struct without fields). Sent to dead letters."""


@dataclass(frozen=True)
class ColumnSpec:
    """One source column: how it is parsed from JSON, its lake type, and the conversion.

    `stages` are applied one projection each. Splitting a long conversion (decimals) into stages
    lets Spark keep intermediate results as columns instead of inlining the same expression
    many times, which would blow the 64 KB limit of generated code on wide tables.
    """

    name: str
    parse_type: T.DataType
    spark_type: T.DataType
    stages: Stages
    connect_name: str | None = None
    # The column's default in the source, encoded like a value (e.g. a Decimal as base64).
    default: Any = None
    # The field's name in the events when the lake names the column otherwise (`name`: a name the
    # table format cannot hold as it is, formats.Format.column_name); None: the same name.
    field: str | None = None

    @property
    def source(self) -> str:
        """The column's name in the events."""
        return self.field or self.name

    def convert(self, c: Column) -> Column:
        """All stages in one expression (for single values and tests)."""
        for stage in self.stages:
            c = stage(c)
        return c

    def __hash__(self) -> int:  # converters are closures; identity by name and types is enough
        return hash((self.name, self.parse_type.simpleString(), self.spark_type.simpleString()))


def _bytes(value: Column, binary: bool) -> Column:
    """A bytes value: as it is when it arrived as bytes (Avro), else from its base64 text (JSON)."""
    return value if binary else _unbase64(value)


def _bytes_type(binary: bool) -> T.DataType:
    return T.BinaryType() if binary else T.StringType()


def _unbase64(b64: Column) -> Column:
    """Base64 text -> bytes; null for text that is not base64. `unbase64` throws on it instead
    (IllegalArgumentException), which fails the whole batch; a null here makes the record a
    dead letter naming the column."""
    return F.try_to_binary(b64, F.lit("base64"))


def _epoch_us_to_ntz(us: Column) -> Column:
    # Arithmetic on TIMESTAMP_NTZ is independent of the session time zone, unlike a cast.
    # Decimal division: a double (what `/` on integers gives) loses microseconds beyond ~2255.
    seconds = (us.cast(cast_type(T.DecimalType(20, 0))) / F.lit(1_000_000)).cast(cast_type(T.DecimalType(38, 6)))
    return F.expr("TIMESTAMP_NTZ'1970-01-01 00:00:00'") + F.make_dt_interval(F.lit(0), F.lit(0), F.lit(0), seconds)


def _nanos_to_micros(ns: Column) -> Column:
    # Exact (decimal) division: nanoseconds since 1970 exceed a double's 53-bit mantissa.
    return F.floor(ns.cast(cast_type(T.DecimalType(20, 0))) / F.lit(1000)).cast(cast_type(T.LongType()))


def _micros_to_time_string(us: Column) -> Column:
    a = F.abs(us)
    return F.when(
        us.isNotNull(),
        F.format_string(  # format_string renders null as "null"
            "%s%02d:%02d:%02d.%06d",
            F.when(us < 0, F.lit("-")).otherwise(F.lit("")),
            F.floor(a / 3_600_000_000),
            F.floor(a / 60_000_000) % 60,
            F.floor(a / 1_000_000) % 60,
            a % 1_000_000,
        ),
    )


def _unsigned_hex_to_decimal(h: Column) -> Column:
    """Unsigned big-endian hex string -> decimal(38,0). conv() is exact up to 16 hex digits, so
    longer values (precision > 18) are split into a high and a low 64-bit half."""
    n = F.length(h)
    dec = T.DecimalType(38, 0)
    low = F.conv(F.substring(h, -16, 16), 16, 10).cast(cast_type(dec))
    high = F.conv(h.substr(F.lit(1), n - 16), 16, 10).cast(cast_type(dec))
    two64 = F.lit("18446744073709551616").cast(cast_type(dec))
    return F.when(n <= 16, F.conv(h, 16, 10).cast(cast_type(dec))).otherwise(high * two64 + low)


def _decimal_stages(precision: int, scale: int, binary: bool = False) -> Stages:
    """Connect Decimal (base64 of the two's-complement big-endian unscaled value) -> decimal(p, s).

    Exact: the unscaled integer is built from hex digits, then the decimal point is placed in its
    string form, so no floating point or decimal-division rounding is involved.
    """

    def to_hex(b64: Column) -> Column:
        return F.hex(_bytes(b64, binary))

    def to_unscaled(h: Column) -> Column:
        """The unscaled integer as signed decimal text. |v| = NOT(v) + 1 is added in digits: as a
        decimal(38,0) sum it would overflow for a value beyond the type, and Spark 4 fails the batch
        when it negates such a sum (Spark 3.5 gave NULL, a dead letter)."""
        negative = F.substring(h, 1, 1) >= F.lit("8")
        inverted = F.translate(h, "0123456789ABCDEF", "FEDCBA9876543210")  # bitwise NOT, digit by digit
        magnitude = F.when(negative, _increment_digits(_unsigned_hex_to_decimal(inverted).cast("string"))).otherwise(
            _unsigned_hex_to_decimal(h).cast("string")
        )
        return F.when(F.length(h) > 0, F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), magnitude))

    def to_decimal(unscaled: Column) -> Column:
        digits = F.regexp_replace(unscaled, "^-", "")
        if scale > 0:
            # lpad also truncates longer strings, so pad only short ones
            padded = F.when(F.length(digits) > scale, digits).otherwise(F.lpad(digits, scale + 1, "0"))
            digits = F.concat(
                padded.substr(F.lit(1), F.length(padded) - scale), F.lit("."), F.substring(padded, -scale, scale)
            )
        text = F.concat(F.when(unscaled.startswith("-"), F.lit("-")).otherwise(F.lit("")), digits)
        return text.cast(cast_type(T.DecimalType(precision, scale)))

    return (to_hex, to_unscaled, to_decimal)


def _repeat_zero(n: Column) -> Column:
    return F.call_function("repeat", F.lit("0"), n)  # F.repeat takes no column count in Spark 3.5


def _increment_digits(digits: Column) -> Column:
    """A non-negative decimal digit string plus one, as a string (arbitrary length)."""
    nines = F.length(F.regexp_extract(digits, "(9*)$", 1))
    n = F.length(digits)
    head = digits.substr(F.lit(1), n - nines - 1)
    bumped = (digits.substr(n - nines, F.lit(1)).cast("int") + 1).cast("string")
    return F.when(nines == n, F.concat(F.lit("1"), _repeat_zero(nines))).otherwise(
        F.concat(head, bumped, _repeat_zero(nines))
    )


def _place_point(negative: Column, digits: Column, scale: Column) -> Column:
    """Sign + magnitude digits + scale -> exact decimal text, e.g. (true, "12345", 2) -> "-123.45"."""
    padded = F.when(F.length(digits) > scale, digits).otherwise(
        F.call_function("lpad", digits, scale + 1, F.lit("0"))  # F.lpad takes no column length
    )
    int_part = padded.substr(F.lit(1), F.length(padded) - scale)
    frac = padded.substr(F.length(padded) - scale + 1, scale)
    body = F.when(scale > 0, F.concat(int_part, F.lit("."), frac)).otherwise(padded)
    is_zero = F.length(F.regexp_replace(digits, "0", "")) == 0
    return F.concat(F.when(negative & ~is_zero, F.lit("-")).otherwise(F.lit("")), body)


def wide_decimal_text(b64: Column, scale: Column, binary: bool = False) -> Column:
    """Connect Decimal bytes of any length -> exact decimal text (for precisions Spark cannot hold).

    The unscaled integer is turned into decimal digits by Scala's BigInt (a static JVM method
    called through `reflect`, still no Python on the hot path); two's-complement negatives via
    their bitwise NOT (|v| = NOT(v) + 1)."""
    h = F.hex(_bytes(b64, binary))
    negative = F.substring(h, 1, 1) >= F.lit("8")
    inverted = F.translate(h, "0123456789ABCDEF", "FEDCBA9876543210")
    as_digits = F.when(
        negative, _increment_digits(F.reflect(F.lit("scala.math.BigInt"), F.lit("apply"), inverted, F.lit(16)))
    ).otherwise(F.reflect(F.lit("scala.math.BigInt"), F.lit("apply"), h, F.lit(16)))
    return F.when(F.length(h) > 0, _place_point(negative, as_digits, scale))


def _bits_to_big_endian(b64: Column, length: int | None, binary: bool = False) -> Column:
    """io.debezium.data.Bits carries the bit string little-endian (java.util.BitSet order), from
    PostgreSQL without its high zero bytes; the lake keeps the ceil(n/8) big-endian bytes a
    MySQL or PostgreSQL client shows for BIT(n)."""
    pairs = F.regexp_extract_all(F.hex(_bytes(b64, binary)), F.lit("(..)"), 1)
    hexed = F.array_join(F.reverse(pairs), "")
    if length:
        width = 2 * ((length + 7) // 8)
        hexed = F.when(F.length(hexed) < width, F.lpad(hexed, width, "0")).otherwise(hexed)
    return F.unhex(hexed)


def decimal_from_base64(b64: Column, precision: int, scale: int) -> Column:
    """Single-expression form of the Connect Decimal conversion."""
    for stage in _decimal_stages(precision, scale):
        b64 = stage(b64)
    return b64


def _object(node: Any, what: str) -> dict[str, Any]:
    """`node` if it is a JSON object. A schema is the record's own text: any other shape is an
    UnsupportedSchema (the group is dead-lettered), never an AttributeError failing the batch."""
    if not isinstance(node, dict):
        raise UnsupportedSchema(f"{what} is not a JSON object: {str(node)[:80]}")
    return node


def _list(node: Any, what: str) -> list[Any]:
    if node is None:
        return []
    if not isinstance(node, list):
        raise UnsupportedSchema(f"{what} is not a JSON array: {str(node)[:80]}")
    return node


def _parameters(field: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in _object(field.get("parameters") or {}, "schema parameters").items()}


def column_spec(field: dict[str, Any], binary: bool = False) -> ColumnSpec:
    """Map one Connect field schema (a dict from the event's `schema`) to a ColumnSpec; `binary`:
    the values arrive decoded from Avro (module docstring)."""
    field = _object(field, "field schema")
    return replace(_column_spec(field, binary), default=field.get("default"))


def _column_spec(field: dict[str, Any], binary: bool) -> ColumnSpec:
    name = field.get("field")
    if not name or not isinstance(name, str):
        raise UnsupportedSchema(f"field schema without a name: {str(field)[:80]}")
    ctype = field.get("type")
    if not isinstance(ctype, str):
        raise UnsupportedSchema(f"column {name!r}: Connect type {str(ctype)[:40]!r} is not a name")
    logical = field.get("name")
    logical = logical if isinstance(logical, str) else None  # not a logical name: the physical type decides
    params = _parameters(field)
    spec = _logical_spec(name, logical, params, binary)
    if spec is None and ctype == "array" and isinstance(field.get("items"), dict):
        spec = _array_spec(name, field["items"], logical, binary)
    return spec if spec is not None else _physical_spec(name, ctype, logical, params, binary)


# Array elements (PostgreSQL arrays) whose Connect encoding is not their value: the lake's JSON text
# holds the values, as PostgreSQL's to_json writes them. Elements that are JSON text themselves
# (exact decimal text, a json/jsonb value) are joined as they are; dates, timestamps, times,
# decimals and bytes are decoded (bytes as PostgreSQL's `\\x` hex text); any other element is
# already its value in the connector's JSON, which the lake keeps as sent.
_JSON_NAME = "io.debezium.data.Json"
_NTZ_TEXT = {"timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"}


def _array_spec(name: str, items: dict[str, Any], logical: str | None, binary: bool) -> ColumnSpec | None:
    """An array column whose elements need decoding; None for one the lake keeps as sent."""
    element = _column_spec({**items, "field": name}, binary)
    raw_json = element.connect_name in (VARIABLE_SCALE_DECIMAL, _JSON_NAME) or (
        element.connect_name == DECIMAL and element.spark_type == T.StringType()
    )
    if raw_json:
        return ColumnSpec(
            name,
            T.ArrayType(element.parse_type),
            T.StringType(),
            (lambda c, e=element: _join_json(c, e.convert),),
            logical,
        )
    if element.connect_name == BITS or items.get("type") not in ("bytes", "int32", "int64"):
        return None  # strings, numbers, booleans, zoned times: the connector's JSON is the value
    if items.get("type") == "bytes" and element.connect_name != DECIMAL:
        element = replace(element, stages=(lambda c: F.concat(F.lit("\\x"), F.lower(F.hex(_bytes(c, binary)))),))
    elif not element.stages:
        return None  # plain integers
    return ColumnSpec(
        name,
        T.ArrayType(element.parse_type),
        T.StringType(),
        (lambda c, e=element: F.to_json(F.transform(c, e.convert), _NTZ_TEXT),),
        logical,
    )


def _join_json(array: Column, convert: Converter) -> Column:
    """`[a,b,null]` from elements that are JSON text each (null stays JSON's null)."""
    joined = F.array_join(F.transform(array, convert), ",", "null")
    return F.when(array.isNull(), F.lit(None)).otherwise(F.concat(F.lit("["), joined, F.lit("]")))


def _logical_spec(name: str, logical: str | None, params: dict[str, str], binary: bool) -> ColumnSpec | None:
    """The spec of a column whose logical name decides its type; None for the other columns."""
    if logical == DECIMAL:
        return _decimal_spec(name, params, binary)
    temporal = _temporal_spec(name, logical)
    if temporal is not None:
        return temporal
    if logical == VARIABLE_SCALE_DECIMAL:
        vsd = T.StructType([T.StructField("scale", T.IntegerType()), T.StructField("value", _bytes_type(binary))])
        return ColumnSpec(
            name,
            vsd,
            T.StringType(),
            (lambda c: wide_decimal_text(c.getField("value"), c.getField("scale"), binary),),
            logical,
        )
    if logical == YEAR:
        # The binlog's YEAR byte is the year minus 1900, and 0 stands for 0000: the connector's
        # reader adds 1900 to it. 1900 is no YEAR value (1901-2155, 0000), so it can only be 0000.
        return ColumnSpec(
            name, T.IntegerType(), T.IntegerType(), (lambda c: F.when(c == 1900, 0).otherwise(c),), logical
        )
    if logical == BITS:
        length = int(params["length"]) if params.get("length", "").isdigit() else None
        return ColumnSpec(
            name, _bytes_type(binary), T.BinaryType(), (lambda c, n=length: _bits_to_big_endian(c, n, binary),), logical
        )
    return None


def _decimal_spec(name: str, params: dict[str, str], binary: bool) -> ColumnSpec:
    """A Connect Decimal: a lake decimal up to 38 digits, exact decimal text beyond."""
    scale = int(params.get("scale", "0"))
    precision = int(params.get("connect.decimal.precision", "38"))
    if scale < 0:
        # PostgreSQL 15's numeric(p, -s): no Spark or Iceberg decimal has a negative scale.
        raise UnsupportedSchema(f"column {name!r}: decimal scale {scale} is negative")
    if precision > MAX_DECIMAL_PRECISION or scale > MAX_DECIMAL_PRECISION:
        return ColumnSpec(
            name,
            _bytes_type(binary),
            T.StringType(),
            (lambda c, s=scale: wide_decimal_text(c, F.lit(s), binary),),
            DECIMAL,
        )
    precision = max(precision, scale, 1)
    return ColumnSpec(
        name,
        _bytes_type(binary),
        T.DecimalType(precision, scale),
        _decimal_stages(precision, scale, binary),
        DECIMAL,
    )


def _temporal_spec(name: str, logical: str | None) -> ColumnSpec | None:
    """Dates, timestamps and times by their logical name; None for any other column."""
    if logical in _DATE_NAMES:
        return ColumnSpec(name, T.IntegerType(), T.DateType(), (F.date_from_unix_date,), logical)
    if logical in _TIMESTAMP_NTZ:
        factor = _TIMESTAMP_NTZ[logical]
        to_us: Converter = _nanos_to_micros if factor is None else (lambda c, f=factor: c * f)
        return ColumnSpec(
            name, T.LongType(), T.TimestampNTZType(), (lambda c, g=to_us: _epoch_us_to_ntz(g(c)),), logical
        )
    if logical == "io.debezium.time.ZonedTimestamp":
        return ColumnSpec(
            name, T.StringType(), T.TimestampType(), (lambda c: c.cast(cast_type(T.TimestampType())),), logical
        )
    if logical in _TIME:
        factor = _TIME[logical]
        to_us = _nanos_to_micros if factor is None else (lambda c, f=factor: c * f)
        return ColumnSpec(
            name, T.LongType(), T.StringType(), (lambda c, g=to_us: _micros_to_time_string(g(c)),), logical
        )
    return None


def _physical_spec(name: str, ctype: str, logical: str | None, params: dict[str, str], binary: bool) -> ColumnSpec:
    """A column without a logical name this module maps: its Connect type decides."""
    if ctype == "bytes":
        return ColumnSpec(name, _bytes_type(binary), T.BinaryType(), () if binary else (_unbase64,), logical)
    if ctype == "string":
        src_type = params.get("__debezium.source.column.type", "").upper()
        if src_type in ("DECIMAL", "NUMERIC") and "__debezium.source.column.length" in params:
            scale = int(params.get("__debezium.source.column.scale", "0"))
            dtype = T.DecimalType(max(min(int(params["__debezium.source.column.length"]), 38), scale, 1), scale)
            return ColumnSpec(name, T.StringType(), dtype, (lambda c, d=dtype: c.cast(cast_type(d)),), logical)
        return ColumnSpec(name, T.StringType(), T.StringType(), (), logical)
    if ctype in _PRIMITIVE:
        return ColumnSpec(name, _PRIMITIVE[ctype], _PRIMITIVE[ctype], (), logical)
    if ctype in ("struct", "array", "map"):
        # Parsed as its raw JSON text (Spark keeps nested JSON as text for a string field).
        return ColumnSpec(name, T.StringType(), T.StringType(), (), logical)
    raise UnsupportedSchema(f"column {name!r}: unsupported Connect type {ctype!r}")


def row_columns(envelope_schema: dict[str, Any], binary: bool = False) -> list[ColumnSpec]:
    """Columns of the row image (`after`, else `before`) of a Debezium envelope schema."""
    envelope_fields = _list(_object(envelope_schema, "envelope schema").get("fields"), "envelope fields")
    fields = {f.get("field"): f for f in envelope_fields if isinstance(f, dict) and isinstance(f.get("field"), str)}
    image = fields.get("after") or fields.get("before")
    if not image or image.get("type") != "struct" or not image.get("fields"):
        raise UnsupportedSchema("envelope schema has no before/after struct with fields")
    specs = [column_spec(f, binary) for f in _list(image["fields"], "row image fields")]
    if (fields.get("source") or {}).get("name") == MYSQL_SOURCE:
        specs = [
            replace(spec, default=mysql_string_default(spec.default))
            if f.get("type") == "string" and isinstance(spec.default, str)
            else spec
            for f, spec in zip(image["fields"], specs, strict=True)
        ]
    return specs


MYSQL_SOURCE = "io.debezium.connector.mysql.Source"
# MySQL's backslash escapes in string literals; \% and \_ keep their backslash (LIKE patterns).
_MYSQL_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_MYSQL_ESCAPE = re.compile(r"''|\\(.)", re.DOTALL)


def mysql_string_default(text: str) -> str:
    """The value of a MySQL string column's default from Debezium's MySQL connector, which sends the
    quoted literal of the DDL without applying its escapes (`DEFAULT 'it''s'` arrives as `it''s`,
    `'a\\'b'` as `a\\'b`; a double-quoted literal as if single-quoted). Rows an ADD COLUMN fills get
    the default without a binlog event, so the lake must apply the escapes as MySQL did."""
    return _MYSQL_ESCAPE.sub(lambda m: "'" if m.group(0) == "''" else _MYSQL_ESCAPES.get(m.group(1), m.group(1)), text)


def key_columns(key_schema: dict[str, Any] | None) -> list[str]:
    """Primary-key column names from the Kafka key's schema (one or more fields)."""
    if (
        not key_schema
        or not isinstance(key_schema, dict)
        or key_schema.get("type") != "struct"
        or not key_schema.get("fields")
    ):
        raise UnsupportedSchema("the record key has no struct schema with fields (table without a primary key?)")
    return [column_spec(f).name for f in _list(key_schema["fields"], "key fields")]


def inferred_column_spec(name: str, inferred: T.DataType) -> ColumnSpec:
    """Schemaless fallback (schemas.enable=false): types come from the JSON values themselves.

    JSON integers -> bigint, other numbers -> double, strings -> string, booleans -> boolean,
    objects and arrays -> their JSON text. No logical types can be recognised without a schema:
    decimals arrive as whatever the connector wrote (use decimal.handling.mode=string or double)
    and temporal values as their raw numbers/strings.
    """
    if isinstance(inferred, T.LongType | T.IntegerType):
        return ColumnSpec(name, T.LongType(), T.LongType(), ())
    if isinstance(inferred, T.DoubleType | T.FloatType | T.DecimalType):
        return ColumnSpec(name, T.DoubleType(), T.DoubleType(), ())
    if isinstance(inferred, T.BooleanType):
        return ColumnSpec(name, T.BooleanType(), T.BooleanType(), ())
    return ColumnSpec(name, T.StringType(), T.StringType(), ())
