"""Reconcile the source database with the lake, exactly: every table, as multisets of rows.

    reconcile [--table customer ...] [--wait SECONDS]     compare every source table
    apply-sql FILE [--wait SECONDS]                        run SQL, wait until the lake caught up
    (--source postgres, or CDC_STACK_SOURCE=postgres: the local PostgreSQL source instead of MariaDB;
    --table-format iceberg|delta|hudi: the lake's format, found from the lake when not given)

The lake is read outside Spark, in Athena's role (scripts/cdctools/lake_reader.py): Iceberg and Delta tables by
DuckDB's extensions, Hudi copy-on-write tables by hudi-rs. A lake table the reader cannot read
correctly (a Hudi table whose columns were renamed or dropped under Hudi's schema evolution on
read, which hudi-rs does not apply) cannot be compared, and says so: a difference, never a match.

Counts decide: a table matches only when the lake holds exactly the source's rows, each as many
times as the source does. For a table with a primary key the report names keys missing from the
lake, extra keys, keys stored more than once (with both counts) and keys whose row differs (with
the columns, by a checksum over all columns). A table without a primary key is compared as a
multiset of whole rows (the job keeps such a table as one, duplicates included). A lake table whose
source table is gone is listed too: on MySQL it matches when the job marked it dropped at the
source (`cdc.source-dropped`), on PostgreSQL (no DDL in its events) it is listed as kept. A table
that cannot be compared says why (no lake table yet, a column missing in the lake, a lake table
that cannot be read). Exit code 0 when every table matches, 1 on any difference, 2 on a usage or
connection error, and for apply-sql also when a statement of the file fails at the source (nothing
is compared then). With --wait, comparison is repeated until the tables match or the time is up:
the lake is "caught up" exactly when it equals the source. A poll (once a second) compares again
when the source's log position or a file under the lake's warehouse moved, and every 10 s anyway.

Values are compared after one normalisation per type, so that a DECIMAL, a DATETIME(6), a TIME
or a TIMESTAMP read from MariaDB and from Iceberg (through DuckDB, Athena's role here) agree
when they are the same value (a Hudi timestamp, which holds a DATETIME's wall-clock time in UTC,
included). A PostgreSQL column whose Python value cannot stand for the lake's is read as text and
compared in its kind's canonical form (`normalise_as`: intervals, times, bit strings, arrays, an
unconstrained numeric), and money as numeric. `compare_rows` is the whole comparison, on rows
already read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pymysql
from cdclake.common.lake_contract import SOURCE_DROPPED_PROPERTY as SOURCE_DROPPED
from cdclake.common.names import lake_table_name
from cdclake.events.source_ddl import POSTGRES_DDL_TABLE, POSTGRES_HEARTBEAT_TABLE
from cdcstack import commands, mariadb, postgres, sources
from cdcstack.plumbing import DATABASE, StackConfig, StackError, live_record, os_user

from cdctools import cli, local_job
from cdctools import lake_reader as lake


def normalise(value: Any) -> Any:
    """One canonical JSON-able form per value, whichever side it was read from."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(int(value))  # as the source's 0/1 (MySQL BOOLEAN, BIT(1)) normalises
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.6g}"  # NaN is a value, never NULL
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):  # MySQL TIME; the lake keeps [-]HH:MM:SS.ffffff
        us = value // timedelta(microseconds=1)
        sign, us = ("-" if us < 0 else ""), abs(us)
        return f"{sign}{us // 3_600_000_000:02d}:{us // 60_000_000 % 60:02d}:{us // 1_000_000 % 60:02d}.{us % 1_000_000:06d}"
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


# A column read in a form that needs more than `normalise` to compare exactly: the source read
# says so per column (PostgreSQL's interval and array columns), and both sides' values of the column
# go through the same function.
INTERVAL, JSON, TIME, TIMETZ, BITS, NUMBER = "interval", "json", "time", "timetz", "bits", "number"
# A source column the connector never sends (PostgreSQL's generated columns: pgoutput leaves them out).
UNSENT = "unsent"
GEOMETRY = "geometry"

_ISO_DURATION = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?"
)


def iso_duration(text: str) -> str:
    """An ISO 8601 duration (PostgreSQL's `iso_8601` interval style, or Debezium's text of an interval)
    as `months,days,microseconds`: one text per duration, whichever fields the writer left out.
    Text that is no duration stays as it is (and differs)."""
    m = _ISO_DURATION.fullmatch(text)
    if not m or text in ("P", "PT"):
        return text
    y, mo, w, d, h, mi, sec = (g or "0" for g in m.groups())
    micros = (int(h) * 3600 + int(mi) * 60) * 1_000_000 + int(Decimal(sec) * 1_000_000)
    return f"{int(y) * 12 + int(mo)},{int(w) * 7 + int(d)},{micros}"


def json_text(value: Any) -> Any:
    """A JSON document (text, or a value already parsed) in one text: keys sorted, no spacing, each
    number by its value (1.50 is 1.5), each date-time or time text by its instant (PostgreSQL's
    to_json writes `12:34:56` and `...+00:00` where the lake's text has `12:34:56.000000` and `Z`)."""
    try:
        doc = json.loads(value, parse_float=Decimal, parse_int=Decimal) if isinstance(value, str) else value
    except ValueError:
        return value
    return json.dumps(_json_canon(doc), sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=normalise)


_ISO_DATETIME = re.compile(r"\d{4,}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d(:?\d\d)?)?")


def _json_canon(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _json_canon(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_json_canon(v) for v in node]
    if isinstance(node, Decimal):
        return f"#number:{number(node)}"
    if isinstance(node, str) and _ISO_DATETIME.fullmatch(node):
        try:
            return f"#datetime:{normalise(datetime.fromisoformat(node.replace('Z', '+00:00')))}"
        except ValueError:
            return node
    if isinstance(node, str) and re.fullmatch(r"\d\d:\d\d:\d\d(\.\d+)?", node):
        return f"#time:{time_micros(node)}"
    return node


def time_micros(text: str) -> str:
    """`[-]H+:MM:SS[.f]` (a PostgreSQL time's text, up to 24:00:00; the lake's text) -> microseconds."""
    m = re.fullmatch(r"(-?)(\d+):(\d\d):(\d\d(?:\.\d*)?)", text)
    if not m:
        return text
    us = (int(m[2]) * 3600 + int(m[3]) * 60) * 1_000_000 + int(Decimal(m[4]) * 1_000_000)
    return str(-us if m[1] else us)


def utc_time_micros(text: str) -> str:
    """A time with zone (PostgreSQL's `12:34:56.1+05:30`, Debezium's `07:04:56.1Z`) -> microseconds
    after midnight UTC, modulo a day: the same instant of the day in either text."""
    m = re.fullmatch(r"(\d+:\d\d:\d\d(?:\.\d*)?)(Z|[+-]\d\d(?::?\d\d)?(?::?\d\d)?)", text)
    if not m:
        return text
    us = int(time_micros(m[1]))
    if m[2] != "Z":
        parts = [int(x) for x in re.findall(r"\d\d", m[2])] + [0, 0]
        sign = 1 if m[2][0] == "+" else -1
        us -= sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]) * 1_000_000
    return str(us % 86_400_000_000)


def bit_string(value: Any) -> Any:
    """A bit string (PostgreSQL's text of '0'/'1') as the lake holds it: big-endian bytes, in hex."""
    if isinstance(value, str) and value and set(value) <= {"0", "1"}:
        return int(value, 2).to_bytes((len(value) + 7) // 8, "big").hex()
    return normalise(value)


_AS_KIND = {INTERVAL: lambda v: iso_duration(str(v)), JSON: json_text, TIME: lambda v: time_micros(str(v))}
_AS_KIND |= {TIMETZ: lambda v: utc_time_micros(str(v)), BITS: bit_string, NUMBER: lambda v: number(v)}


def number(value: Any) -> Any:
    """A numeric without a declared scale by its value: the connector sends it with trailing zeros
    dropped (12.50 arrives as 12.5), so its display scale is not the lake's to keep."""
    try:
        d = Decimal(str(value))
    except ArithmeticError:
        return normalise(value)
    return format(d.normalize(), "f") if d.is_finite() else str(d)


def geometry(value: Any) -> Any:
    """A spatial value as `srid:wkb-hex`: the source's `ST_SRID:HEX(ST_AsWKB)` text, or the lake's
    JSON (`{"wkb": base64, "srid": n | null, ...}`, a point's x and y beside them)."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            doc = json.loads(value)
            return f"{int(doc.get('srid') or 0)}:{base64.b64decode(doc['wkb']).hex()}"
        except (ValueError, KeyError, TypeError):
            return value
    if isinstance(value, str) and ":" in value:
        srid, _, wkb = value.partition(":")
        return f"{int(srid or 0)}:{wkb.lower()}"
    return normalise(value)


_AS_KIND[GEOMETRY] = geometry


def normalise_as(kind: str | None, value: Any) -> Any:
    """`normalise`, or the column kind's own canonical form (`_AS_KIND`), applied to either side."""
    if value is None or kind is None:
        return normalise(value)
    if kind not in _AS_KIND:
        raise ValueError(f"unknown column kind {kind!r}")
    return _AS_KIND[kind](value)


def checksum(row: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class TableResult:
    """One table's verdict. Counts decide: the lake must hold exactly the source's rows, as a
    multiset, so a row stored twice is a difference even when every stored value is right.

    Keyed tables: `missing`/`extra` are keys on one side only (once per row), `different` keys whose
    single row differs (with the columns), `duplicates` keys held a different number of times on
    the two sides (a primary key stored twice in the lake). Keyless tables are compared as
    multisets of whole rows: `missing`/`extra` are rows (one entry per missing or extra copy) and
    `duplicates` rows the lake holds more often than the source."""

    table: str
    source_rows: int = 0
    lake_rows: int = 0
    keys: list[str] = field(default_factory=list)  # empty: a keyless table, compared by whole rows
    missing: list[Any] = field(default_factory=list)  # in the source, not in the lake
    extra: list[Any] = field(default_factory=list)  # in the lake, not in the source
    different: list[tuple[Any, list[str]]] = field(default_factory=list)  # key, columns
    duplicates: list[tuple[Any, int, int]] = field(default_factory=list)  # key or row, source count, lake count
    values: list[tuple[str, Any, Any]] = field(default_factory=list)  # the first different row: column, source, lake
    problem: str = ""
    note: str = ""
    gone: bool = False  # no source table: the lake keeps the table of a dropped source table

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different or self.duplicates or self.problem) and (
            self.gone or self.source_rows == self.lake_rows
        )

    def report(self) -> str:
        head = f"{self.table:<28} source {self.source_rows:>7}  lake {self.lake_rows:>7}  "
        if self.problem:
            return head + f"DIFFERENT: {self.problem}"
        if self.ok:
            what = (
                "OK (count and per-row checksums equal)"
                if self.keys
                else "OK (no key: count and every whole row equal)"
            )
            return head + (self.note or what)
        parts = []
        if self.duplicates:
            what = "key(s) stored more than once" if self.keys else "row(s) stored more often than at the source"
            examples = "; ".join(f"{_show(k)} source {s} lake {n}" for k, s, n in self.duplicates[:3])
            parts.append(f"{len(self.duplicates)} {what}, e.g. {examples}")
        if self.missing:
            parts.append(f"{len(self.missing)} missing in lake [{', '.join(_show(k) for k in self.missing[:5])}]")
        if self.extra:
            parts.append(f"{len(self.extra)} extra in lake [{', '.join(_show(k) for k in self.extra[:5])}]")
        if self.different:
            parts.append(
                f"{len(self.different)} rows differ, e.g. "
                + "; ".join(f"{_show(k)}: {c}" for k, c in self.different[:3])
                + " (first: "
                + ", ".join(f"{c} source {_short(a)} lake {_short(b)}" for c, a, b in self.values[:4])
                + ")"
            )
        if not parts:  # cannot happen with rows compared by compare_rows; counts still decide
            parts.append("row counts differ")
        return head + "DIFFERENT: " + ", ".join(parts)


def _short(value: Any) -> str:
    """A compared (normalised) value for the report, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _show(item: Any) -> str:
    """A key `(("id", "3"),)` as `id=3`, a keyless row as `{col=value, ...}` (first columns)."""
    pairs = list(item)
    text = ", ".join(f"{c}={v}" for c, v in pairs[:6]) + (", ..." if len(pairs) > 6 else "")
    return text if len(pairs) == 1 else "{" + text + "}"


def _order(item: tuple) -> tuple:
    """Sort keys/rows naturally: numbers by value, None last; never compares str with None."""

    def one(v: Any) -> tuple:
        if v is None:
            return (2, 0, "")
        s = str(v)
        try:
            return (0, float(s), s)
        except ValueError:
            return (1, 0, s)

    return tuple(one(v) for _, v in item)


def _item(row: dict[str, Any], cols: list[str]) -> tuple:
    return tuple((c, row[c]) for c in cols)


def _compare_keyless(res: TableResult, columns: list[str], src: list[dict], dst: list[dict]) -> None:
    """Whole rows as multisets: a row the lake holds more often than the source is a duplicate."""
    s_count = Counter(_item(r, columns) for r in src)
    d_count = Counter(_item(r, columns) for r in dst)
    for row in sorted(s_count.keys() | d_count.keys(), key=_order):
        s, d = s_count[row], d_count[row]
        if d > s and s:
            res.duplicates.append((row, s, d))
        elif d > s:
            res.extra += [row] * (d - s)
        elif s > d:
            res.missing += [row] * (s - d)


def _compare_keyed(res: TableResult, columns: list[str], keys: list[str], src: list[dict], dst: list[dict]) -> None:
    """Rows matched by key: missing, extra, repeated keys, and the columns that differ."""
    s_by: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    d_by: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in src:
        s_by[_item(r, keys)].append(r)
    for r in dst:
        d_by[_item(r, keys)].append(r)
    for k in sorted(s_by.keys() | d_by.keys(), key=_order):
        s, d = s_by.get(k, []), d_by.get(k, [])
        if not d:
            res.missing += [k] * len(s)
        elif not s:
            res.extra += [k] * len(d)
            if len(d) > 1:
                res.duplicates.append((k, 0, len(d)))
        elif len(s) != len(d) or len(d) > 1:
            res.duplicates.append((k, len(s), len(d)))
        elif checksum(s[0]) != checksum(d[0]):
            res.different.append((k, [c for c in columns if s[0][c] != d[0][c]]))
            if not res.values:
                res.values = [(c, s[0][c], d[0][c]) for c in res.different[0][1]]


def compare_rows(
    table: str,
    columns: list[str],
    keys: list[str],
    source_rows: list[dict[str, Any]],
    lake_rows: list[dict[str, Any]],
    kinds: dict[str, str] | None = None,
) -> TableResult:
    """Compare the rows read from the source and from the lake, exactly, as multisets.

    `columns` are the source table's columns (the lake's `_cdc_*` metadata is not compared),
    `keys` its primary key (empty: keyless, whole rows are compared). Lake column names may differ
    in case. Values are normalised (`normalise`, or `normalise_as` the column's kind in `kinds`)
    before they are compared. Pure: no database."""
    kinds = kinds or {}
    res = TableResult(table, len(source_rows), len(lake_rows), list(keys))
    unsent = [c for c in columns if kinds.get(c) == UNSENT and c not in keys]
    columns = [c for c in columns if c not in unsent]
    by_lower = {n.lower(): n for n in (lake_rows[0].keys() if lake_rows else [])}
    absent = [c for c in columns if c.lower() not in by_lower]
    if lake_rows and absent:
        res.problem = f"column(s) {absent} not in the lake table"
        return res

    def canon(row: dict[str, Any], names: dict[str, str] | None) -> dict[str, Any]:
        return {c: normalise_as(kinds.get(c), row[names[c.lower()] if names else c]) for c in columns}

    src = [canon(r, None) for r in source_rows]
    dst = [canon(r, by_lower) for r in lake_rows]
    if keys:
        _compare_keyed(res, columns, list(keys), src, dst)
    else:
        _compare_keyless(res, columns, src, dst)
    if unsent and res.ok:
        res.note = (
            f"OK ({'count and per-row checksums' if keys else 'no key: count and every whole row'} equal; "
            f"not compared: generated column(s) {unsent}, which PostgreSQL's pgoutput does not send)"
        )
    return res


def gone_from_source(table: str, properties: dict[str, str], lake_rows: int, sends_ddl: bool) -> TableResult:
    """The verdict on a lake table whose source table no longer exists (pure).

    The job reads the DROP TABLE (MySQL: the schema-change topic; PostgreSQL: the DDL log of
    sql/postgres/ddl_capture.sql) and marks the table it keeps (`--dropped_table_policy keep`);
    unmarked means the job has not applied the drop (yet). A PostgreSQL source without the DDL
    capture sends no DDL, so the job cannot know: the lake table stays as it was."""
    res = TableResult(table, 0, lake_rows, gone=True)
    if SOURCE_DROPPED in properties:
        res.note = (
            f"OK (dropped at the source at {properties[SOURCE_DROPPED]}; lake table kept, marked {SOURCE_DROPPED})"
        )
    elif not sends_ddl:
        res.note = (
            "OK (not at the source; PostgreSQL without the DDL capture (sql/postgres/ddl_capture.sql) sends no "
            "DROP TABLE, so the lake table stays as it was)"
        )
    else:
        res.problem = (
            f"not at the source, and the lake table is not marked {SOURCE_DROPPED}: the job has not applied "
            "the DROP TABLE (behind, or not reading the connector's schema-change topic or the PostgreSQL DDL log)"
        )
    return res


_SPATIAL = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"}
_SPATIAL |= {"geometrycollection"}


class Source:
    """The local MariaDB, as the administrator over its Unix socket (UTC session)."""

    def __init__(self, s: StackConfig, database: str) -> None:
        if live_record(s, mariadb.COMPONENT) is None:
            raise StackError("MariaDB is not running: local-stack up")
        self.database = database
        self.lake_prefix = database  # lake tables are <namespace>.<database>_<table>
        self.conn = pymysql.connect(
            unix_socket=str(mariadb.socket_path(s)),
            user=os_user(),
            database=database,
            init_command="SET time_zone='+00:00'",
        )

    def sends_ddl(self) -> bool:
        return True  # the connector's schema-change topic

    def tables(self) -> dict[str, list[str]]:
        """Every base table -> its primary key columns in key order ([] for a table without one)."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT t.table_name, k.column_name FROM information_schema.tables t "
                "LEFT JOIN information_schema.key_column_usage k ON k.table_schema = t.table_schema "
                "AND k.table_name = t.table_name AND k.constraint_name = 'PRIMARY' "
                "WHERE t.table_schema = %s AND t.table_type = 'BASE TABLE' ORDER BY t.table_name, k.ordinal_position",
                (self.database,),
            )
            out: dict[str, list[str]] = {}
            for t, c in cur.fetchall():
                out.setdefault(t, [])
                if c is not None:
                    out[t].append(c)
            return out

    def rows(self, table: str) -> tuple[list[str], list[dict[str, Any]], dict[str, str]]:
        """The table's rows, BIT(1) as its number (the lake's boolean) and spatial values as their
        SRID and WKB (`GEOMETRY`); with the columns that need `normalise_as` to compare."""
        self.conn.commit()  # a fresh snapshot for every read under REPEATABLE READ
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT column_name, data_type, column_type FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                (self.database, table),
            )
            exprs, kinds = [], {}
            for name, data_type, column_type in cur.fetchall():
                col = "`" + name.replace("`", "``") + "`"
                if column_type.lower() == "bit(1)":
                    exprs.append(f"{col} + 0 AS {col}")
                elif data_type.lower() in _SPATIAL:
                    exprs.append(f"CONCAT(ST_SRID({col}), ':', HEX(ST_AsWKB({col}))) AS {col}")
                    kinds[name] = GEOMETRY
                else:
                    exprs.append(col)
            cur.execute(f"SELECT {', '.join(exprs)} FROM `{table}`")
            names = [d[0] for d in cur.description]
            return names, [dict(zip(names, r, strict=True)) for r in cur.fetchall()], kinds


# PostgreSQL types read as their text and compared in a kind's canonical form.
_TEXT_KINDS = {"interval": INTERVAL, "time": TIME, "timetz": TIMETZ, "bit": BITS, "varbit": BITS}


def _infinity_loaders(conn: Any) -> None:
    """Dates and timestamps load as Python values, and PostgreSQL's +-infinity as its text (Python's
    types have no infinity; the job dead-letters such a change, so the row is missing in the lake)."""
    from psycopg.types import datetime as pgdt

    for name, base in (("date", pgdt.DateLoader), ("timestamp", pgdt.TimestampLoader)):
        conn.adapters.register_loader(name, _finite_or_text(base))
    conn.adapters.register_loader("timestamptz", _finite_or_text(pgdt.TimestamptzLoader))


def _finite_or_text(base: type) -> type:
    class Loader(base):  # type: ignore[misc, valid-type]
        def load(self, data: Any) -> Any:
            text = bytes(data).decode()
            return text if text in ("infinity", "-infinity") else super().load(data)

    return Loader


class PostgresSource:
    """The local PostgreSQL, as the administrator over its Unix socket (UTC session), schema `public`.
    Its lake tables are <namespace>.<schema>_<table>, as the job names PostgreSQL tables."""

    def __init__(self, s: StackConfig, database: str) -> None:
        import psycopg

        if live_record(s, postgres.COMPONENT) is None:
            raise StackError("PostgreSQL is not running: local-stack up --source postgres")
        self.database = database
        self.schema = postgres.SCHEMA
        self.lake_prefix = postgres.SCHEMA
        try:
            # autocommit: every read sees the latest committed data
            self.conn = psycopg.connect(
                host=str(postgres.pg_dir(s)),
                port=postgres.current_port(s),
                user=os_user(),
                dbname=database,
                autocommit=True,
                options="-c TimeZone=UTC -c intervalstyle=iso_8601",
            )
        except psycopg.Error as exc:
            raise StackError(f"PostgreSQL: {exc}") from None
        # json and jsonb as PostgreSQL writes them out, which is the text the connector sends and the
        # lake holds (psycopg would parse them into Python objects, whose text is not JSON).
        from psycopg.types.string import TextLoader

        for name in ("json", "jsonb"):
            self.conn.adapters.register_loader(name, TextLoader)
        _infinity_loaders(self.conn)

    def sends_ddl(self) -> bool:
        """Whether the DDL capture's triggers are installed (then the job follows drops and renames)."""
        row = self.conn.execute(
            "SELECT count(*) FROM pg_event_trigger WHERE evtname IN ('cdclake_ddl_end', 'cdclake_ddl_drop') "
            "AND evtenabled <> 'D'"
        ).fetchone()
        return bool(row and row[0] == 2)

    def tables(self) -> dict[str, list[str]]:
        """Every table of the schema -> its primary key columns in key order ([] for a table without
        one); not the DDL capture's log, whose rows are statements, nor the heartbeat table: no lake tables."""
        rows = self.conn.execute(
            "SELECT c.relname, a.attname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
            "LEFT JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true "
            "LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT IN (%s, %s) "
            "ORDER BY c.relname, k.ord",
            (self.schema, POSTGRES_DDL_TABLE, POSTGRES_HEARTBEAT_TABLE),
        ).fetchall()
        out: dict[str, list[str]] = {}
        for t, c in rows:
            out.setdefault(t, [])
            if c is not None:
                out[t].append(c)
        return out

    def rows(self, table: str) -> tuple[list[str], list[dict[str, Any]], dict[str, str]]:
        """The table's rows, each column read in the form the connector's value takes in the lake:
        money as numeric (not the locale's `$1,234.56`), arrays and hstore as JSON, intervals as
        ISO 8601 text; with the columns that need `normalise_as` to compare (`kinds`)."""
        from psycopg import sql

        types = self.conn.execute(
            "SELECT a.attname, b.typname, b.typcategory, a.atttypmod, a.attgenerated <> '' "
            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (sql.Identifier(self.schema, table).as_string(self.conn),),
        ).fetchall()
        exprs, kinds = [], {}
        for name, typname, category, typmod, generated in types:
            col = sql.Identifier(name)
            if generated:
                expr, kinds[name] = col, UNSENT
            elif typname == "money":
                expr = sql.SQL("{}::numeric").format(col)
            elif category == "A" or typname == "hstore":
                expr, kinds[name] = sql.SQL("to_json({})::text").format(col), JSON
            elif typname == "numeric" and typmod == -1:
                expr, kinds[name] = col, NUMBER
            elif typname in _TEXT_KINDS:  # Python's types cannot hold them all (24:00:00)
                expr, kinds[name] = sql.SQL("{}::text").format(col), _TEXT_KINDS[typname]
            else:
                expr = col
            exprs.append(sql.SQL("{} AS {}").format(expr, col))
        cur = self.conn.execute(
            sql.SQL("SELECT {} FROM {}.{}").format(
                sql.SQL(", ").join(exprs), sql.Identifier(self.schema), sql.Identifier(table)
            )
        )
        names = [d.name for d in cur.description or []]
        return names, [dict(zip(names, r, strict=True)) for r in cur.fetchall()], kinds


def read_lake_table(con: Any, location: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """The lake table's rows, or None and why it cannot be read (by DuckDB, or by hudi-rs, which
    refuses a Hudi table it would read wrongly): a table that cannot be read is never compared."""
    try:
        return lake.rows(con, location), ""
    except (duckdb.Error, OSError, lake.LakeReadError) as exc:
        return None, f"cannot be read ({exc})"


def compare(
    source: Source | PostgresSource,
    con: Any,
    paths: local_job.LakePaths,
    table: str,
    keys: list[str],
    table_format: str = lake.ICEBERG,
) -> TableResult:
    lake_name = lake_table_name(f"{source.lake_prefix}_{table}")
    columns, src_rows, kinds = source.rows(table)
    location = lake.table_location(paths.warehouse, local_job.NAMESPACE, lake_name, table_format)
    if not lake.exists(location):
        res = TableResult(table, len(src_rows), 0, list(keys))
        if src_rows:
            res.problem = f"no lake table {local_job.NAMESPACE}.{lake_name} yet"
        else:
            res.note = "OK (empty at the source, no lake table)"
        return res
    lake_rows, why = read_lake_table(con, location)
    if lake_rows is None:
        res = TableResult(table, len(src_rows), 0, list(keys))
        res.problem = f"cannot be compared: the lake table {local_job.NAMESPACE}.{lake_name} {why}"
        return res
    return compare_rows(table, columns, keys, src_rows, lake_rows, kinds)


def lake_only(
    source: Source | PostgresSource,
    con: Any,
    paths: local_job.LakePaths,
    names: list[str],
    table_format: str = lake.ICEBERG,
) -> list[TableResult]:
    """Lake tables of the source database whose source table does not exist (dropped at the source)."""
    prefix = f"{source.lake_prefix}_".lower()
    expected = {lake_table_name(f"{prefix}{t}") for t in names}
    out = []
    for name in lake.list_tables(paths.warehouse, local_job.NAMESPACE, table_format):
        if not name.startswith(prefix) or name in expected:
            continue
        location = lake.table_location(paths.warehouse, local_job.NAMESPACE, name, table_format)
        if not lake.exists(location):
            continue
        lake_rows, why = read_lake_table(con, location)
        if lake_rows is None:
            res = TableResult(name[len(prefix) :], gone=True)
            res.problem = f"not at the source, and its lake table {why}"
            out.append(res)
            continue
        out.append(gone_from_source(name[len(prefix) :], lake.properties(location), len(lake_rows), source.sends_ddl()))
    return out


# How each source engine's database is read, by the engine's component.
READERS: dict[str, type[Source | PostgresSource]] = {mariadb.COMPONENT: Source, postgres.COMPONENT: PostgresSource}


def reconcile(
    s: StackConfig, tables: list[str] | None, database: str, table_format: str | None = None, con: Any = None
) -> list[TableResult]:
    """Every table compared; `table_format` None: the format found in the lake (lake.lake_format);
    `con` a lake connection to read with (lake.connect()), a new one when None."""
    paths = local_job.LakePaths.of(s)
    try:
        fmt = table_format or lake.lake_format(paths.warehouse, local_job.NAMESPACE)
    except lake.LakeReadError as exc:
        raise StackError(str(exc)) from None
    source = READERS[s.engine.COMPONENT](s, database)
    try:
        keyed = source.tables()
        con = con or lake.connect()
        gone = {r.table: r for r in lake_only(source, con, paths, sorted(keyed), fmt)}
        wanted = tables or sorted(keyed) + sorted(gone)
        unknown = [t for t in wanted if t not in keyed and t not in gone]
        if unknown:
            raise StackError(f"no such table in {database}: {', '.join(unknown)}")
        return [compare(source, con, paths, t, keyed[t], fmt) if t in keyed else gone[t] for t in wanted]
    finally:
        source.conn.close()


# A poll compares again only when the source or the lake moved, and at least this often anyway.
RECOMPARE_SECONDS = 10.0


def source_position(s: StackConfig, database: str) -> str | None:
    """Where the source's log ends (MariaDB's binlog GTID position, PostgreSQL's WAL insert point):
    it moves with every committed change, DDL included. None when it cannot be read."""
    try:
        source = READERS[s.engine.COMPONENT](s, database)
    except (StackError, pymysql.MySQLError, *_postgres_errors()):
        return None
    query = "SELECT @@global.gtid_binlog_pos" if isinstance(source, Source) else "SELECT pg_current_wal_insert_lsn()"
    try:
        with source.conn.cursor() as cur:
            cur.execute(query)
            row = cur.fetchone()
        return str(row[0]) if row else None
    except (pymysql.MySQLError, *_postgres_errors()):
        return None
    finally:
        source.conn.close()


def lake_files(warehouse: Path) -> frozenset[tuple[str, int, int]]:
    """Every file under the warehouse with its modification time and size: what a comparison reads
    of the lake (tables, their metadata and properties) cannot change without this changing."""
    found: set[tuple[str, int, int]] = set()
    folders = [warehouse]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:  # not made yet, or removed while listed: the next poll sees the change
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    folders.append(Path(e.path))
                else:
                    st = e.stat(follow_symlinks=False)
                    found.add((e.path, st.st_mtime_ns, st.st_size))
            except OSError:
                continue
    return frozenset(found)


LakeState = tuple[str | None, frozenset[tuple[str, int, int]]]


def compare_again(state: LakeState, compared: tuple[LakeState, float] | None, now: float) -> bool:
    """Whether a poll must compare: nothing compared yet, a source whose position is unknown, either
    side moved since the last comparison (`compared`: its state and time), or RECOMPARE_SECONDS passed
    (a commit becomes visible just after its log position moves: a comparison in between missed it)."""
    if compared is None or state[0] is None:
        return True
    return state != compared[0] or now - compared[1] >= RECOMPARE_SECONDS


def reconcile_until(
    s: StackConfig, tables: list[str] | None, database: str, wait: float, table_format: str | None = None
) -> list[TableResult]:
    deadline = time.monotonic() + wait
    # One lake connection for every poll: connecting loads DuckDB's three lake extensions, ~0.7 CPU-s
    # (eight times the reading of four small tables), and each poll's scans read the files anew.
    con = lake.connect()
    warehouse = local_job.LakePaths.of(s).warehouse
    compared: tuple[LakeState, float] | None = None
    results: list[TableResult] = []
    while True:
        # Taken before comparing: a change made during the comparison is seen by the next poll. While
        # neither side moves the result cannot change, and a comparison (every table read from both
        # sides) costs many times this look, CPU taken from the job being waited for.
        state: LakeState = (source_position(s, database), lake_files(warehouse))
        now = time.monotonic()
        fresh = compare_again(state, compared, now)
        if fresh:
            results, compared = reconcile(s, tables, database, table_format, con), (state, now)
        if all(r.ok for r in results):
            return results
        if time.monotonic() >= deadline:  # the report given is of a comparison made at the end
            return results if fresh else reconcile(s, tables, database, table_format, con)
        time.sleep(1.0)


def _postgres_errors() -> tuple[type[Exception], ...]:
    try:
        import psycopg
    except ImportError:  # only the PostgreSQL source needs it
        return ()
    return (psycopg.Error,)


def main(argv: list[str] | None = None, apply_sql: bool = False) -> int:
    parser = cli.Parser(prog="apply-sql" if apply_sql else "reconcile", description=__doc__.split("\n\n")[0])
    if apply_sql:
        parser.add_argument("file", help="SQL file to run against the local MariaDB or PostgreSQL (database salesdb)")
    parser.add_argument("--table", action="append", help="only this source table (repeatable)")
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument(
        "--source", choices=sorted(sources.ENGINES), help="mysql (default) or postgres; default $CDC_STACK_SOURCE"
    )
    parser.add_argument("--wait", type=float, default=120.0 if apply_sql else 0.0, help="seconds to wait for the lake")
    parser.add_argument(
        "--table-format",
        choices=lake.FORMATS,
        help="the lake tables' format (the job's --table_format); default: found from the lake",
    )
    args = parser.parse_args(argv)
    try:
        s = sources.stack_config(args.source)
        if apply_sql:
            t0 = time.monotonic()
            code = commands.cmd_sql(s, args.file, None, args.database)
            if code != 0:
                # The client printed the statement's error; what ran before it stays committed.
                print(
                    f"[reconcile] ERROR: {args.file}: a statement failed at the source (the {s.engine.NAME} "
                    f"client exited {code}, its error is above); the statements after it did not run and the "
                    "lake was not compared. Fix the statement and run the file (or the rest of it) again",
                    file=sys.stderr,
                )
                return 2
            print(
                f"[reconcile] ran {args.file} in {time.monotonic() - t0:.1f}s; waiting for the lake (up to {args.wait:.0f}s)"
            )
        t0 = time.monotonic()
        results = reconcile_until(s, args.table, args.database, args.wait, args.table_format)
    except (StackError, pymysql.MySQLError, *_postgres_errors()) as exc:
        print(f"[reconcile] ERROR: {exc}", file=sys.stderr)
        return 2
    for r in results:
        print(f"[reconcile] {r.report()}")
    ok = all(r.ok for r in results)
    verdict = "MATCH" if ok else "DIFFERENCE"
    print(f"[reconcile] {verdict}: {len(results)} table(s) compared in {time.monotonic() - t0:.1f}s")
    return 0 if ok else 1


def apply_sql(argv: list[str] | None = None) -> int:
    """The command apply-sql: runs a SQL file at the source, waits for the lake, reconciles."""
    return main(argv, apply_sql=True)


if __name__ == "__main__":
    sys.exit(main())
