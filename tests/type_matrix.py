"""Every column type a MySQL/MariaDB or PostgreSQL user has, with edge values, and a type-aware
comparison of lake values with what the database holds.

Used twice: by the stack tests (tests/stack/test_stack_types.py: the tables are created in the real
databases, changed, captured by the real connector and applied by the job), and by the job tests
(tests/job/test_types.py: the messages those runs captured, tests/fixtures/debezium/*/all_types_*.json,
applied to a local lake and compared with the database values captured with them).

The source side is read as text the database itself renders (hex for bytes, the server's own
decimal/float/temporal text), never through a Python driver's type conversion, so the comparison
checks the lake against the database and not against a driver.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc_events import FIXTURES

TABLE = "all_types"


@dataclass(frozen=True)
class Col:
    name: str
    sql_type: str
    kind: str  # how lake and source values are compared, see `same`
    source_expr: str = ""  # SQL rendering the source value as text (default per kind)


# ---- MariaDB -------------------------------------------------------------------------------------

MARIADB_COLUMNS = [
    Col("c_tinyint", "TINYINT", "int"),
    Col("c_tinyint_u", "TINYINT UNSIGNED", "int"),
    Col("c_smallint", "SMALLINT", "int"),
    Col("c_smallint_u", "SMALLINT UNSIGNED", "int"),
    Col("c_mediumint", "MEDIUMINT", "int"),
    Col("c_mediumint_u", "MEDIUMINT UNSIGNED", "int"),
    Col("c_int", "INT", "int"),
    Col("c_int_u", "INT UNSIGNED", "int"),
    Col("c_bigint", "BIGINT", "int"),
    Col("c_bigint_u", "BIGINT UNSIGNED", "decimal"),
    Col("c_decimal", "DECIMAL(10,2)", "decimal"),
    Col("c_decimal_wide", "DECIMAL(38,10)", "decimal"),
    Col("c_decimal_max", "DECIMAL(65,30)", "decimal_text"),
    Col("c_decimal_int", "DECIMAL(20,0)", "decimal"),
    Col("c_float", "FLOAT", "float32"),
    Col("c_double", "DOUBLE", "float64"),
    Col("c_bit1", "BIT(1)", "bool", "{c} + 0"),
    Col("c_bit12", "BIT(12)", "bits:12", "HEX({c})"),
    Col("c_bit64", "BIT(64)", "bits:64", "HEX({c})"),
    Col("c_bool", "BOOLEAN", "bool"),
    Col("c_char", "CHAR(10)", "text"),
    Col("c_varchar", "VARCHAR(100)", "text"),
    Col("c_text", "TEXT", "text"),
    Col("c_binary", "BINARY(4)", "hex", "HEX({c})"),
    Col("c_varbinary", "VARBINARY(20)", "hex", "HEX({c})"),
    Col("c_blob", "BLOB", "hex", "HEX({c})"),
    Col("c_enum", "ENUM('red','green','blue')", "text"),
    Col("c_set", "SET('a','b','c')", "text"),
    Col("c_json", "JSON", "text"),
    Col("c_date", "DATE", "date"),
    Col("c_datetime0", "DATETIME(0)", "datetime"),
    Col("c_datetime3", "DATETIME(3)", "datetime"),
    Col("c_datetime6", "DATETIME(6)", "datetime"),
    Col("c_timestamp6", "TIMESTAMP(6) NULL", "timestamptz"),
    Col("c_time0", "TIME(0)", "time"),
    Col("c_time6", "TIME(6)", "time"),
    Col("c_year", "YEAR", "int"),
    Col("c_point", "POINT", "geometry", "CONCAT(ST_SRID({c}), ':', HEX(ST_AsWKB({c})))"),
    Col("c_geometry", "GEOMETRY", "geometry", "CONCAT(ST_SRID({c}), ':', HEX(ST_AsWKB({c})))"),
]

MARIADB_SETUP = (
    f"CREATE TABLE {TABLE} (\n  id INT NOT NULL PRIMARY KEY,\n  "
    + ",\n  ".join(f"{c.name} {c.sql_type}" for c in MARIADB_COLUMNS)
    + "\n) DEFAULT CHARSET=utf8mb4;\n"
)

# Minimum, maximum, small/zero-ish values and all-NULL; then updates (incl. -0.0, a denormal-ish
# float, TIME beyond 24 h) and a delete. Runs with the session in UTC and utf8mb4.
MARIADB_CHANGES = """SET NAMES utf8mb4;
SET time_zone = '+00:00';
INSERT INTO all_types VALUES
(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
 -99999999.99, -9999999999999999999999999999.9999999999,
 -99999999999999999999999999999999999.999999999999999999999999999999, 0,
 -3.40282e38, -1.7976931348623157e308, b'0', b'0', b'0', FALSE,
 '', '', '', x'00000000', x'', x'',
 'red', '', '[]', '1000-01-01', '1000-01-01 00:00:00', '1000-01-01 00:00:00.000', '1000-01-01 00:00:00.000000',
 '1970-01-01 00:00:01.000000', '-838:59:59', '-838:59:59.000000', 1901,
 ST_GeomFromText('POINT(0 0)'), ST_GeomFromText('LINESTRING(0 0, 1 1)')),
(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
 99999999.99, 9999999999999999999999999999.9999999999,
 99999999999999999999999999999999999.999999999999999999999999999999, 99999999999999999999,
 3.40282e38, 1.7976931348623157e308, b'1', b'111111111111',
 b'1111111111111111111111111111111111111111111111111111111111111111', TRUE,
 'ab😀', 'naïve ☃ 😀 日本', REPEAT('x😀', 100), x'ffffffff', x'00ff00ff', x'00010203fffefd',
 'blue', 'a,c', '{"k": [1, 2.5, "x", null, true], "😀": {}}', '9999-12-31', '9999-12-31 23:59:59',
 '9999-12-31 23:59:59.999', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999',
 '838:59:59', '838:59:59.000000', 2155,
 ST_GeomFromText('POINT(-122.4194 37.7749)'), ST_GeomFromText('POLYGON((0 0, 4 0, 4 4, 0 4, 0 0))')),
(3, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
 0.01, -0.0000000001, 0.000000000000000000000000000001, 1,
 1.5, 0.1, b'1', b'100000000001', b'1000000000000000000000000000000000000000000000000000000000000001', TRUE,
 'x', 'x', 'x', x'01', x'01', x'01',
 'green', 'a,b,c', '"text"', '2024-02-29', '2024-02-29 12:34:56', '2024-02-29 12:34:56.789',
 '2024-02-29 12:34:56.123456', '2024-02-29 12:34:56.000001', '00:00:00', '-00:00:00.000001', 2000,
 ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(3 4)'));
INSERT INTO all_types (id) VALUES (4);
INSERT INTO all_types (id, c_int) VALUES (5, 5);
UPDATE all_types SET c_double = -0.0, c_float = 1e-38, c_time6 = '100:00:00.5', c_text = 'updated 😀',
  c_decimal_wide = 1.5, c_decimal_max = -0.5, c_bit12 = b'1', c_json = '{"a": 1}' WHERE id = 3;
DELETE FROM all_types WHERE id = 5;
"""

# ---- PostgreSQL ----------------------------------------------------------------------------------

PG_COLUMNS = [
    Col("c_smallint", "smallint", "int"),
    Col("c_integer", "integer", "int"),
    Col("c_bigint", "bigint", "int"),
    Col("c_real", "real", "float32"),
    Col("c_double", "double precision", "float64"),
    Col("c_numeric", "numeric(10,2)", "decimal"),
    Col("c_numeric_wide", "numeric(38,10)", "decimal"),
    Col("c_numeric_huge", "numeric(60,20)", "decimal_text"),
    Col("c_numeric_free", "numeric", "decimal_text"),
    Col("c_boolean", "boolean", "bool"),
    Col("c_text", "text", "text"),
    Col("c_varchar", "varchar(50)", "text"),
    Col("c_char", "char(5)", "text", "{c}"),  # as char: a cast to text drops the padding
    Col("c_bytea", "bytea", "hex", "encode({c}, 'hex')"),
    Col("c_json", "json", "text"),
    Col("c_jsonb", "jsonb", "text"),
    Col("c_uuid", "uuid", "text"),
    Col("c_bit", "bit(12)", "bitstring:12"),
    Col("c_date", "date", "date"),
    Col("c_time", "time(6)", "time"),
    Col("c_timetz", "timetz", "timetz"),
    Col("c_timestamp", "timestamp(6)", "datetime"),
    Col("c_timestamp0", "timestamp(0)", "datetime"),
    Col("c_timestamptz", "timestamptz", "timestamptz"),
    Col("c_interval", "interval", "interval"),
    Col("c_int_array", "integer[]", "json", "to_json({c})::text"),
    Col("c_text_array", "text[]", "json", "to_json({c})::text"),
    Col("c_mood", "mood", "text"),
]

PG_SETUP = (
    "SET ROLE salesdb_owner;\n"
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy 😀');\n"
    f"CREATE TABLE {TABLE} (\n  id integer PRIMARY KEY,\n  "
    + ",\n  ".join(f"{c.name} {c.sql_type}" for c in PG_COLUMNS)
    + "\n);\n"
    f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL;\n"
    f"ALTER PUBLICATION dbz_publication ADD TABLE {TABLE};\n"
)

PG_CHANGES = """SET ROLE salesdb_owner;
SET TimeZone = 'UTC';
INSERT INTO all_types VALUES
(1, -32768, -2147483648, -9223372036854775808, -3.4028235e38, -1.7976931348623157e308,
 -99999999.99, -9999999999999999999999999999.9999999999,
 -9999999999999999999999999999999999999999.99999999999999999999, -123456789012345678901234567890.123456789,
 false, '', '', '     ', '\\x'::bytea, '[]', '{}', '00000000-0000-0000-0000-000000000000', B'000000000000',
 '0001-01-01', '00:00:00', '00:00:00+14', '0001-01-01 00:00:00', '1900-01-01 00:00:00', '0001-01-01 00:00:00+00',
 '-178000000 years', '{}', '{}', 'sad'),
(2, 32767, 2147483647, 9223372036854775807, 3.4028235e38, 1.7976931348623157e308,
 99999999.99, 9999999999999999999999999999.9999999999,
 9999999999999999999999999999999999999999.99999999999999999999, 0.000000000000000000000000000000000000000000001,
 true, 'naïve ☃ 😀 日本', 'x😀', 'ab😀', '\\x00ff10'::bytea, '{"a": [1, 2.50, null], "😀": true}',
 '{"b": {"c": 1e3}, "a": 1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', B'111111111111',
 '9999-12-31', '23:59:59.999999', '23:59:59.999999-12', '9999-12-31 23:59:59.999999', '2262-04-11 23:47:16',
 '9999-12-31 23:59:59.999999+00', '178000000 years 11 mons 30 days 23:59:59.999999', '{1,NULL,-3}',
 '{"a,b","😀",NULL,""}', 'happy 😀'),
(3, 0, 0, 0, 1.5, 0.1, 0.01, -0.0000000001, 1, 0, true, 'x', 'x', 'x', '\\x01', '"text"', 'null',
 'ffffffff-ffff-ffff-ffff-ffffffffffff', B'100000000001', '2024-02-29', '12:34:56.123456', '12:34:56.123456+05:30',
 '2024-02-29 12:34:56.123456', '2024-02-29 12:34:56', '2024-02-29 12:34:56.000001+05:30',
 '-1 days -00:00:00.000001', '{7}', '{x}', 'ok'),
(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
(5, 1, 1, 1, 'NaN', 'Infinity', 1, 1, 1, -0.5, true, 'x', 'x', 'x', '\\x01', '1', '1',
 'ffffffff-ffff-ffff-ffff-ffffffffffff', B'000000000001', '2024-01-01', '24:00:00', '24:00:00+00',
 '2024-01-01 00:00:00', '2024-01-01 00:00:00', '2024-01-01 00:00:00+00', '0', '{}', '{}', 'ok'),
(6, 1, 1, 1, 'Infinity', '-Infinity', 1, 1, 1, 1, true, 'x', 'x', 'x', '\\x01', '1', '1',
 'ffffffff-ffff-ffff-ffff-ffffffffffff', B'000000000001', '2024-01-01', '00:00:00', '00:00:00+00',
 '2024-01-01 00:00:00', '2024-01-01 00:00:00', '2024-01-01 00:00:00+00', '0', '{}', '{}', 'ok');
UPDATE all_types SET c_double = -0.0, c_real = 1e-38, c_text = 'updated 😀', c_numeric_free = 12.50,
  c_interval = '1 mon -2 days 03:04:05.5', c_int_array = '{}' WHERE id = 3;
DELETE FROM all_types WHERE id = 6;
"""

# Values no lake column type can hold: PostgreSQL's infinite timestamps. Each change carrying one is
# dead-lettered with the column named; nothing else is affected.
PG_INFINITE = """SET ROLE salesdb_owner;
INSERT INTO all_types (id, c_timestamp, c_timestamptz) VALUES (90, 'infinity', '-infinity');
"""
PG_INFINITE_IDS = [90]


# ---- reading the source as text ------------------------------------------------------------------


def _expr(c: Col, dialect: str) -> str:
    if c.source_expr:
        return c.source_expr.format(c=c.name)
    if dialect == "mariadb":
        return f"HEX(CONVERT({c.name} USING utf8mb4))" if c.kind == "text" else f"CAST({c.name} AS CHAR)"
    return f"{c.name}::text"


def source_query(dialect: str) -> str:
    """One row per source row: the hex of a JSON object {column: text or null}, so that no client
    escaping or driver conversion is involved."""
    cols = MARIADB_COLUMNS if dialect == "mariadb" else PG_COLUMNS
    if dialect == "mariadb":
        pairs = ", ".join(f"'{c.name}', {_expr(c, dialect)}" for c in cols)
        return f"SET time_zone = '+00:00'; SELECT HEX(JSON_OBJECT('id', id, {pairs})) AS j FROM {TABLE} ORDER BY id;"
    pairs = ", ".join(f"'{c.name}', {_expr(c, dialect)}" for c in cols)
    return (
        "SET TimeZone = 'UTC'; SET intervalstyle = 'iso_8601'; "
        f"SELECT encode(convert_to(json_build_object('id', id, {pairs})::text, 'UTF8'), 'hex') AS j "
        f"FROM {TABLE} ORDER BY id;"
    )


def parse_source_output(dialect: str, out: str) -> dict[int, dict[str, str | None]]:
    """The client's tab-separated output of `source_query` -> {id: {column: text}}."""
    rows = {}
    for line in out.splitlines():
        line = line.strip()
        if not line or not re.fullmatch(r"[0-9A-Fa-f]+", line):
            continue  # header lines, SET results
        row = json.loads(bytes.fromhex(line).decode())
        if dialect == "mariadb":
            row = {
                k: (bytes.fromhex(v).decode() if v is not None and _kind(k, dialect) == "text" else v)
                for k, v in row.items()
            }
        rows[int(row["id"])] = {k: None if v is None else str(v) for k, v in row.items()}
    return rows


def _kind(name: str, dialect: str) -> str:
    cols = MARIADB_COLUMNS if dialect == "mariadb" else PG_COLUMNS
    return next((c.kind for c in cols if c.name == name), "int")


# ---- comparison ----------------------------------------------------------------------------------

_ISO_INTERVAL = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?"
)


def _interval(text: str) -> tuple[int, int, int]:
    """ISO 8601 duration (PostgreSQL's iso_8601 style and Debezium's) -> (months, days, microseconds)."""
    m = _ISO_INTERVAL.fullmatch(text)
    assert m, f"not an ISO 8601 interval: {text!r}"
    y, mo, w, d, h, mi, s = (g or "0" for g in m.groups())
    micros = (int(h) * 3600 + int(mi) * 60) * 1_000_000 + int(Decimal(s) * 1_000_000)
    return int(y) * 12 + int(mo), int(w) * 7 + int(d), micros


def _time_us(text: str) -> int:
    """[-]H+:MM:SS[.f] -> signed microseconds."""
    sign = -1 if text.startswith("-") else 1
    h, m, s = text.lstrip("-").split(":")
    return sign * ((int(h) * 3600 + int(m) * 60) * 1_000_000 + int(Decimal(s) * 1_000_000))


def _timetz_utc_us(text: str) -> int:
    """PostgreSQL timetz text (12:34:56.123456+05:30) or Debezium's ZonedTime (07:04:56.123456Z)
    -> microseconds after midnight UTC, modulo a day."""
    m = re.fullmatch(r"(\d+:\d+:\d+(?:\.\d+)?)(Z|[+-]\d{2}(?::?\d{2})?)", text)
    assert m, f"not a time with zone: {text!r}"
    us = _time_us(m.group(1))
    zone = m.group(2)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        hh, mm = zone[1:3], zone[3:].lstrip(":") or "0"
        us -= sign * (int(hh) * 3600 + int(mm) * 60) * 1_000_000
    return us % 86_400_000_000


def _as_bytes(v: Any) -> bytes:
    return bytes(v)


def _utc(v: datetime) -> datetime:
    return v.astimezone(UTC)  # a naive value (Spark's collect) is local time


def _source_ts(text: str) -> datetime:
    # PostgreSQL: 2024-02-29 07:04:56.000001+00; MariaDB in UTC: 2024-02-29 07:04:56.000001
    t = datetime.fromisoformat(text if re.search(r"[+-]\d\d(:?\d\d)?$", text) else text + "+00:00")
    return t.astimezone(UTC)


def same(kind: str, lake: Any, source: str | None) -> bool:
    """Is the lake value the source value? `source` is the database's own text of it."""
    if source is None or lake is None:
        return source is None and lake is None
    base, _, arg = kind.partition(":")
    if base == "int":
        return isinstance(lake, int) and lake == int(source)
    if base == "decimal":
        return isinstance(lake, Decimal) and lake == Decimal(source)
    if base == "decimal_text":  # exact text, beyond 38 digits
        return isinstance(lake, str) and Decimal(lake) == Decimal(source)
    if base in ("float32", "float64"):
        want = float(source.replace("Infinity", "inf"))
        if math.isnan(want):
            return math.isnan(lake)
        if base == "float32":  # the server prints FLOAT with 6 digits; compare as 32-bit floats
            return struct.pack("<f", lake) == struct.pack("<f", want) or (
                abs(lake - want) <= abs(want) * 1e-6 and not math.isinf(want)
            )
        return lake == want
    if base == "bool":
        return lake is (source in ("1", "t", "true"))
    if base == "bits":  # MariaDB HEX(bit): the number, in hex
        n = (int(arg) + 7) // 8
        return len(_as_bytes(lake)) == n and int.from_bytes(_as_bytes(lake), "big") == int(source, 16)
    if base == "bitstring":  # PostgreSQL bit(n) text: '0101...'
        n = (int(arg) + 7) // 8
        return len(_as_bytes(lake)) == n and int.from_bytes(_as_bytes(lake), "big") == int(source, 2)
    if base == "text":
        return lake == source
    if base == "hex":
        return _as_bytes(lake).hex() == source.lower()
    if base == "json":
        return json.loads(lake) == json.loads(source)
    if base == "date":
        return isinstance(lake, date) and lake == date.fromisoformat(source)
    if base == "datetime":
        return isinstance(lake, datetime) and lake.tzinfo is None and lake == datetime.fromisoformat(source)
    if base == "timestamptz":
        return isinstance(lake, datetime) and _utc(lake) == _source_ts(source)
    if base == "time":
        return isinstance(lake, str) and _time_us(lake) == _time_us(source)
    if base == "timetz":
        return isinstance(lake, str) and _timetz_utc_us(lake) == _timetz_utc_us(source)
    if base == "interval":
        return isinstance(lake, str) and _interval(lake) == _interval(source)
    if base == "geometry":  # lake: {"wkb": base64, "srid": n | null, ...}; source: "srid:HEX(WKB)"
        srid, wkb = source.split(":")
        g = json.loads(lake)
        return base64.b64decode(g["wkb"]).hex() == wkb.lower() and int(g.get("srid") or 0) == int(srid)
    raise AssertionError(f"unknown kind {kind}")


def differences(
    dialect: str, lake_rows: dict[int, dict[str, Any]], source_rows: dict[int, dict[str, str | None]]
) -> list[str]:
    """Every (row, column) whose lake value is not the source value, plus missing/extra rows."""
    cols = MARIADB_COLUMNS if dialect == "mariadb" else PG_COLUMNS
    out = [f"row {i} missing in the lake" for i in sorted(set(source_rows) - set(lake_rows))]
    out += [f"row {i} in the lake, not in the source" for i in sorted(set(lake_rows) - set(source_rows))]
    for i in sorted(set(source_rows) & set(lake_rows)):
        for c in cols:
            lake, src = lake_rows[i].get(c.name), source_rows[i].get(c.name)
            try:
                ok = same(c.kind, lake, src)
            except (ValueError, TypeError, KeyError, AssertionError) as exc:
                ok, lake = False, f"{lake!r} ({exc})"
            if not ok:
                out.append(f"row {i} {c.name} ({c.kind}): lake {lake!r} != source {src!r}")
    return out


# ---- fixtures ------------------------------------------------------------------------------------


def fixture_dir(dialect: str) -> Path:
    return FIXTURES / ("mariadb" if dialect == "mariadb" else "postgres")


def save_fixtures(dialect: str, messages: list[dict[str, Any]], source_rows: dict[int, dict[str, str | None]]) -> None:
    """Write the captured messages (one file each, in topic order) and the database's values."""
    folder = fixture_dir(dialect)
    for old in folder.glob(f"{TABLE}_*.json"):
        old.unlink()
    for i, msg in enumerate(messages):
        op = (msg["value"] or {}).get("payload", {}).get("op") if msg["value"] is not None else None
        name = f"{TABLE}_{i:02d}_{op or 'tombstone'}.json"
        (folder / name).write_text(json.dumps(msg, indent=1, ensure_ascii=False) + "\n")
    (folder / f"{TABLE}_source_rows.json").write_text(json.dumps(source_rows, indent=1, ensure_ascii=False) + "\n")


def load_fixtures(dialect: str) -> tuple[list[dict[str, Any]], dict[int, dict[str, str | None]]]:
    folder = fixture_dir(dialect)
    messages = [json.loads(p.read_text()) for p in sorted(folder.glob(f"{TABLE}_[0-9][0-9]_*.json"))]
    source = json.loads((folder / f"{TABLE}_source_rows.json").read_text())
    return messages, {int(k): v for k, v in source.items()}


def is_infinite_row(msg: dict[str, Any]) -> bool:
    p = (msg.get("value") or {}).get("payload") or {}
    image = p.get("after") or p.get("before") or {}
    return image.get("id") in PG_INFINITE_IDS


def kafka_records(topic: str, messages: list[dict]) -> list[dict]:
    """Captured messages as the Kafka records the job reads."""
    return [
        {
            "topic": topic,
            "partition": m["partition"],
            "offset": m["offset"],
            "timestamp": datetime.fromtimestamp(1795303971, UTC),
            "key": json.dumps(m["key"]) if m["key"] is not None else None,
            "value": json.dumps(m["value"]) if m["value"] is not None else None,
        }
        for m in messages
    ]
