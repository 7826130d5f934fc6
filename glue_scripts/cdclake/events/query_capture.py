"""Query-based capture (`--source jdbc`), its pure part: which rows a poll reads and how a source row
becomes the Debezium change event the rest of the job already applies.

A captured table has a modification column (a timestamp a trigger or `ON UPDATE CURRENT_TIMESTAMP(6)`
keeps, sql/query_capture_*.sql) and a primary key. A poll reads the rows whose modification value is
at or past the table's high-water mark and older than the safety lag, ordered by that value then the
key. Each row becomes an upsert (op `u`; a soft-deleted row a delete, op `d`) whose position
(`_cdc_seq`, through the record's offset: ordering.sequence_expr) is the modification value in
microseconds since 1970-01-01 UTC. The mark is the table's largest `_cdc_seq` in the lake, so it is
committed in the same commit as the rows (docs/ARCHITECTURE.md: Query-based capture); a row read
again at the mark is no newer than the lake's copy and changes nothing.

Types are sent as Debezium's MySQL and PostgreSQL connectors send them (decimal.handling.mode
precise as a decimal text with the source's precision, time.precision.mode
adaptive_time_microseconds), so connect_types.py maps them to the same lake types.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..common.query_tables import CaptureTable, Engine

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TOPIC_PREFIX = "jdbc"
SEQ_ALIAS = "_q_seq"  # the poll's column holding the row's position (modification value in us)


class CaptureRefused(ValueError):
    """A table query capture cannot read; the message says what to change at the source."""


class TableMissing(CaptureRefused):
    """A table of --jdbc_tables the source does not have (yet)."""


@dataclass(frozen=True)
class SourceColumn:
    """One column as the source's catalog describes it (catalog_query's row)."""

    name: str
    data_type: str  # information_schema DATA_TYPE, lower case
    column_type: str  # MySQL COLUMN_TYPE (e.g. `int(10) unsigned`), PostgreSQL udt_name
    precision: int | None
    scale: int | None
    nullable: bool
    key_position: int | None  # position in the primary key, None outside it
    default: str | None = None  # information_schema COLUMN_DEFAULT: the SQL text of the default


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def quote_identifier(engine: Engine, name: str) -> str:
    q = "`" if engine == Engine.MYSQL else '"'
    return q + name.replace(q, q + q) + q


def qualified(engine: Engine, t: CaptureTable) -> str:
    return f"{quote_identifier(engine, t.namespace)}.{quote_identifier(engine, t.table)}"


def catalog_query(engine: Engine, t: CaptureTable) -> str:
    """The table's columns in order, with their primary-key positions (standard information_schema)."""
    type_detail = "c.column_type" if engine == Engine.MYSQL else "c.udt_name"
    where = f"table_schema = {_literal(t.namespace)} AND table_name = {_literal(t.table)}"
    if engine == Engine.MYSQL:  # its primary key is the constraint named PRIMARY
        keys = f"SELECT column_name, ordinal_position FROM information_schema.key_column_usage WHERE constraint_name = 'PRIMARY' AND {where}"
    else:
        keys = (
            "SELECT kcu.column_name, kcu.ordinal_position FROM information_schema.table_constraints tc "
            "JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name "
            "AND kcu.table_schema = tc.table_schema AND kcu.table_name = tc.table_name "
            f"WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.{where.replace(' AND ', ' AND tc.')}"
        )
    return (
        f"SELECT c.column_name AS name, LOWER(c.data_type) AS data_type, LOWER({type_detail}) AS column_type, "
        "c.numeric_precision AS num_precision, c.numeric_scale AS num_scale, c.is_nullable AS is_nullable, "
        "c.column_default AS column_default, "
        f"k.ordinal_position AS key_position FROM information_schema.columns c LEFT JOIN ({keys}) k "
        f"ON k.column_name = c.column_name WHERE c.{where.replace(' AND ', ' AND c.')} ORDER BY c.ordinal_position"
    )


_TIMESTAMP_TYPES = {
    Engine.MYSQL: ("datetime", "timestamp"),
    Engine.POSTGRES: ("timestamp without time zone", "timestamp with time zone"),
}


def check_capturable(engine: Engine, t: CaptureTable, columns: list[SourceColumn]) -> None:
    """Refuse, naming the fix, a table without the modification column (or with one that is not a
    NOT NULL timestamp) or without a primary key (a row read again must replace, not add)."""
    name = f"{t.namespace}.{t.table}"
    if not columns:
        raise TableMissing(f"table {name} not found in the source's catalog (--jdbc_tables names <db>.<table>)")
    by_name = {c.name: c for c in columns}
    fix = f"{'sql' if engine == Engine.MYSQL else 'sql/postgres'}/query_capture.sql shows the DDL"
    col = by_name.get(t.modified)
    if col is None:
        raise CaptureRefused(
            f"table {name} has no modification column {t.modified!r}: add one that every insert and update "
            f"sets (a NOT NULL timestamp kept by ON UPDATE CURRENT_TIMESTAMP(6) or a trigger; {fix}), "
            "or capture the table from the log (--source kafka)"
        )
    if col.data_type not in _TIMESTAMP_TYPES[engine] or col.nullable:
        raise CaptureRefused(
            f"table {name}: modification column {t.modified!r} is {col.column_type or col.data_type}"
            f"{' NULL' if col.nullable else ''}; it must be a NOT NULL "
            f"{' or '.join(_TIMESTAMP_TYPES[engine])} ({fix})"
        )
    if not any(c.key_position is not None for c in columns):
        raise CaptureRefused(
            f"table {name} has no primary key: query capture upserts by key (a row read again must replace "
            "its lake copy, not add to it); add a primary key or capture the table from the log"
        )


# (Connect field without its name, source SQL of the value as JsonConverter would write it, Spark cast)
Field = tuple[dict[str, Any], str, str | None]


def _decimal_field(col: SourceColumn, expr: str, engine: Engine) -> Field:
    text = f"CAST({expr} AS CHAR)" if engine == Engine.MYSQL else f"({expr})::text"
    if col.precision is None or col.precision > 38:  # as Debezium: exact decimal text in a string column
        return {"type": "string"}, text, None
    params = {
        "__debezium.source.column.type": "DECIMAL",
        "__debezium.source.column.length": str(col.precision),
        "__debezium.source.column.scale": str(col.scale or 0),
    }
    return {"type": "string", "parameters": params}, text, None


# Debezium's Connect integer per MySQL type, (signed, unsigned)
_MYSQL_INTS = {
    "tinyint": ("int16", "int16"),
    "smallint": ("int16", "int32"),
    "mediumint": ("int32", "int32"),
    "int": ("int32", "int64"),
    "integer": ("int32", "int64"),
    "bigint": ("int64", "decimal"),
}


def _mysql_integer(col: SourceColumn, q: str) -> Field:
    connect = _MYSQL_INTS[col.data_type][1 if "unsigned" in col.column_type else 0]
    if connect == "decimal":  # BIGINT UNSIGNED, bigint.unsigned.handling.mode precise
        return _decimal_field(SourceColumn(col.name, "decimal", "", 20, 0, True, None), q, Engine.MYSQL)
    return {"type": connect}, f"CAST({q} AS SIGNED)", None


def _mysql_field(col: SourceColumn, q: str) -> Field | None:
    dt = col.data_type
    if dt in _MYSQL_INTS:
        return _mysql_integer(col, q)
    if dt in ("decimal", "numeric"):
        return _decimal_field(col, q, Engine.MYSQL)
    strings = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json")
    simple: dict[str, Field] = {
        "float": ({"type": "float"}, q, None),
        "double": ({"type": "double"}, q, None),
        "year": ({"type": "int32", "name": "io.debezium.time.Year"}, f"CAST({q} AS SIGNED)", None),
        "bit": ({"type": "boolean"}, f"CAST({q} AS UNSIGNED)", "boolean"),
        "date": ({"type": "int32", "name": "io.debezium.time.Date"}, f"DATEDIFF({q}, '1970-01-01')", None),
        "datetime": (
            {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
            f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {q})",
            None,
        ),
        # The poll's session runs in UTC (jdbc_source.session_init), so this is the UTC instant.
        "timestamp": (
            {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
            f"DATE_FORMAT({q}, '%Y-%m-%dT%H:%i:%s.%fZ')",
            None,
        ),
        "time": (
            {"type": "int64", "name": "io.debezium.time.MicroTime"},
            f"CAST(TIME_TO_SEC({q}) * 1000000 AS SIGNED)",
            None,
        ),
    }
    if dt in simple and not (dt == "bit" and col.column_type not in ("bit(1)", "bit")):
        return simple[dt]
    if dt in strings:  # CONCAT: a VARCHAR to the driver (Spark pads a CHAR, as an ENUM is typed)
        return {"type": "string"}, f"CONCAT({q})", None
    if dt in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return {"type": "bytes"}, f"REPLACE(TO_BASE64({q}), '\\n', '')", None
    return None


def _postgres_field(col: SourceColumn, q: str) -> Field | None:
    dt = col.data_type
    ints = {"smallint": "int16", "integer": "int32", "bigint": "int64"}
    if dt in ints:
        return {"type": ints[dt]}, q, None
    if dt == "numeric":
        return _decimal_field(col, q, Engine.POSTGRES)
    # user-defined: an ENUM type (or another type the connector sends as text), by its text form
    strings = ("character varying", "character", "text", "uuid", "json", "jsonb", "xml", "name", "user-defined")
    simple: dict[str, Field] = {
        "real": ({"type": "float"}, q, None),
        "double precision": ({"type": "double"}, q, None),
        "boolean": ({"type": "boolean"}, q, None),
        "bytea": ({"type": "bytes"}, f"replace(encode({q}, 'base64'), E'\\n', '')", None),
        "date": ({"type": "int32", "name": "io.debezium.time.Date"}, f"({q} - DATE '1970-01-01')", None),
        "timestamp without time zone": (
            {"type": "int64", "name": "io.debezium.time.MicroTimestamp"},
            f"(extract(epoch from {q}) * 1000000)::bigint",
            None,
        ),
        "timestamp with time zone": (
            {"type": "string", "name": "io.debezium.time.ZonedTimestamp"},
            f"""to_char({q} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""",
            None,
        ),
        "time without time zone": (
            {"type": "int64", "name": "io.debezium.time.MicroTime"},
            f"(extract(epoch from {q}) * 1000000)::bigint",
            None,
        ),
    }
    if dt in simple:
        return simple[dt]
    if dt in strings:
        return {"type": "string"}, f"{q}::text", None
    return None


def column_field(engine: Engine, col: SourceColumn) -> Field:
    """The Connect field Debezium would send for the column, the SQL that reads its value in that
    form, and a Spark cast of the read value (None: none needed). A type it does not map is refused."""
    q = quote_identifier(engine, col.name)
    found = (_mysql_field if engine == Engine.MYSQL else _postgres_field)(col, q)
    if found is None:
        raise CaptureRefused(
            f"column {col.name!r} has type {col.column_type or col.data_type}, which query capture does not "
            "read; capture the table from the log (--source kafka), or leave the column out in a view"
        )
    schema, expr, cast = found
    field = {**schema, "optional": col.nullable, "field": col.name}
    default = default_value(col.default, schema["type"]) if "name" not in schema else None
    if default is not None:  # the log path's Connect default: rows an ADD COLUMN filled get it in the lake
        field["default"] = default
    return field, expr, cast


_QUOTED = re.compile(r"^'((?:[^']|'')*)'(?:::[\w .\[\]\"]+)?$")  # 'text' or PostgreSQL's 'text'::type
_NUMBER = re.compile(r"^\(?(-?\d+(?:\.\d+)?)\)?(?:::[\w ]+)?$")


def default_value(text: str | None, connect_type: str) -> Any:
    """A column's constant default (information_schema's text) as the event carries a value of its
    type; None for no default, NULL, an expression (CURRENT_TIMESTAMP, nextval(...)) or a temporal
    column (the log path backfills no time-dependent default either)."""
    if text is None:
        return None
    quoted = _QUOTED.match(text.strip())
    literal = quoted.group(1).replace("''", "'") if quoted else None
    number = _NUMBER.match(text.strip())
    if connect_type == "string":
        return literal if literal is not None else (number.group(1) if number else None)
    value = literal if literal is not None else (number.group(1) if number else None)
    if value is None:
        return None
    try:
        if connect_type.startswith("int"):
            return int(value)
        if connect_type in ("float", "double"):
            return float(value)
    except ValueError:
        return None
    return None


def _source_schema() -> dict[str, Any]:
    fields = [("version", "string"), ("connector", "string"), ("name", "string"), ("ts_ms", "int64")]
    fields += [("snapshot", "string"), ("db", "string"), ("schema", "string"), ("table", "string")]
    return {
        "type": "struct",
        "optional": False,
        "name": "io.debezium.connector.query.Source",
        "field": "source",
        "fields": [{"type": ty, "optional": True, "field": n} for n, ty in fields],
    }


def value_schema(t: CaptureTable, fields: list[dict[str, Any]]) -> str:
    """The envelope's schema as JsonConverter text (before, after, source, op, ts_ms)."""
    row = {
        "type": "struct",
        "fields": fields,
        "optional": True,
        "name": f"{TOPIC_PREFIX}.{t.namespace}.{t.table}.Value",
    }
    envelope = {
        "type": "struct",
        "optional": False,
        "name": f"{TOPIC_PREFIX}.{t.namespace}.{t.table}.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            _source_schema(),
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    return json.dumps(envelope, separators=(",", ":"))


def key_schema(t: CaptureTable, key_fields: list[dict[str, Any]]) -> str:
    schema = {
        "type": "struct",
        "optional": False,
        "name": f"{TOPIC_PREFIX}.{t.namespace}.{t.table}.Key",
        "fields": [{**f, "optional": False} for f in key_fields],
    }
    return json.dumps(schema, separators=(",", ":"))


def source_block(engine: Engine, t: CaptureTable, database: str) -> str:
    """The envelope's `source` without its ts_ms (added per row): MySQL's `db` is the database,
    PostgreSQL's the connector's database with the table's schema in `schema` (as Debezium's)."""
    src: dict[str, Any] = {"version": "query", "connector": engine.value, "name": TOPIC_PREFIX, "snapshot": "false"}
    if engine == Engine.MYSQL:
        src.update(db=t.namespace, table=t.table)
    else:
        src.update(db=database, schema=t.namespace, table=t.table)
    return json.dumps(src, separators=(",", ":"))[:-1]


def mark_literal(seq_us: int) -> str:
    """A position (microseconds since 1970-01-01 UTC) as the SQL text of a timestamp in UTC."""
    return _literal((_EPOCH + timedelta(microseconds=seq_us)).strftime("%Y-%m-%d %H:%M:%S.%f"))


def seq_expression(engine: Engine, modified: str) -> str:
    """A row's position: its modification value in microseconds since 1970-01-01 UTC."""
    q = quote_identifier(engine, modified)
    if engine == Engine.MYSQL:
        return f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {q})"
    return f"(extract(epoch from {q}) * 1000000)::bigint"


@dataclass(frozen=True)
class Poll:
    """What one poll of a table reads: from the mark (None: from the start), or only the rows at one
    position (`at`: those a full poll cut at its last position, read whole so the mark moves past
    them; `strict`: only past the mark), never younger than `lag_seconds`, at most `limit` rows (0: no limit)."""

    mark: int | None
    lag_seconds: int
    limit: int
    at: int | None = None
    strict: bool = False  # past the mark only: the rows at it outnumber the limit


def poll_query(engine: Engine, t: CaptureTable, columns: list[SourceColumn], poll: Poll) -> str:
    """The SELECT of one poll: each column in its event form as c0..cN, the position as SEQ_ALIAS.
    `>=` the mark: rows at the mark's own timestamp that committed after the last poll are read
    (those read before change nothing), ordered by position then key."""
    mod = quote_identifier(engine, t.modified)
    exprs = [f"{column_field(engine, c)[1]} AS c{i}" for i, c in enumerate(columns)]
    now = "NOW(6)" if engine == Engine.MYSQL else "now()"
    lag = f"INTERVAL {poll.lag_seconds} SECOND" if engine == Engine.MYSQL else f"interval '{poll.lag_seconds} seconds'"
    where = [f"{mod} < {now} - {lag}"]
    if poll.at is not None:
        where.append(f"{mod} = {mark_literal(poll.at)}")
    elif poll.mark is not None:
        where.append(f"{mod} {'>' if poll.strict else '>='} {mark_literal(poll.mark)}")
    keys = sorted((c for c in columns if c.key_position is not None), key=lambda c: c.key_position or 0)
    order = ", ".join([mod, *(quote_identifier(engine, c.name) for c in keys)])
    sql = (
        f"SELECT {', '.join(exprs)}, {seq_expression(engine, t.modified)} AS {SEQ_ALIAS} "
        f"FROM {qualified(engine, t)} WHERE {' AND '.join(where)} ORDER BY {order}"
    )
    return f"{sql} LIMIT {poll.limit}" if poll.limit and poll.at is None else sql


def session_init(engine: Engine) -> str:
    """The poll's session time zone: UTC, so that timestamps, the mark and the lag agree."""
    return "SET time_zone = '+00:00'" if engine == Engine.MYSQL else "SET TIME ZONE 'UTC'"


def read_columns(rows: list[dict[str, Any]]) -> list[SourceColumn]:
    """catalog_query's rows as columns."""

    def number(v: Any) -> int | None:
        return None if v is None else int(v)

    return [
        SourceColumn(
            name=str(r["name"]),
            data_type=str(r["data_type"]),
            column_type=str(r["column_type"] or ""),
            precision=number(r["num_precision"]),
            scale=number(r["num_scale"]),
            nullable=str(r["is_nullable"]).upper() == "YES",
            key_position=number(r["key_position"]),
            default=None if r.get("column_default") is None else str(r["column_default"]),
        )
        for r in rows
    ]
