"""Column renames and drops from the source's DDL: the MySQL connector's schema-change events, and
the rows of PostgreSQL's DDL log table.

Debezium publishes each DDL statement it applies, with its binlog position, on the topic named by
`topic.prefix`. A data event carries only the table's current columns, so a renamed column looks
like a dropped one plus a new one; the statement tells the two apart. `column_changes` reads the
renames (`RENAME COLUMN a TO b`, `CHANGE [COLUMN] a b <type>`) and column drops of an
`ALTER TABLE` statement; everything else in it is left to the schema of the data events.

PostgreSQL's logical decoding carries no DDL. With sql/postgres/ddl_capture.sql installed, an event
trigger writes a row per DDL command and table to `<schema>.cdclake_ddl` in the command's
transaction; the connector streams it with the data changes, at its WAL position, and
`postgres_statement` reads one such row: the trigger has already compared the table's columns (by
attnum, which a rename keeps) with their previous state, so no SQL text is parsed.

Each change is kept with its source position (`_cdc_seq`, ordering.py) in the lake table's
property `cdc.column-changes`, so that a data event written *before* the change (older position)
but read later, from another topic or partition, is translated to the current lake columns
(`translation`). Applying a change twice is a no-op (batch.py): a rename whose old column is gone
and whose new one exists is done.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from pyspark.sql import types as T

from ..common.lake_contract import DROP, KEPT, RENAME, ColumnChange
from ..common.sqltext import sql_string
from .connect_types import mysql_string_default

SET_ASIDE_SUFFIX = "__dropped"


def set_aside_name(name: str, taken: set[str]) -> str:
    """The lake name a kept dropped column moves to when the source adds a column of its name again:
    `<name>__dropped`, numbered when that is taken too (`taken`: lower-case lake names)."""
    out, n = f"{name}{SET_ASIDE_SUFFIX}", 1
    while out.lower() in taken:
        n += 1
        out = f"{name}{SET_ASIDE_SUFFIX}{n}"
    return out


def kept_drop(changes: list[ColumnChange], column: str, before: int | None = None) -> ColumnChange | None:
    """The newest KEPT drop of `column` (at or before position `before`) whose lake column has not been set
    aside yet (no RENAME of it at the drop's position)."""
    aside = {(c.old.lower(), c.seq) for c in changes if c.kind == RENAME}
    found = [
        c
        for c in changes
        if c.kind == KEPT
        and c.old.lower() == column.lower()
        and (before is None or c.seq <= before)
        and (c.old.lower(), c.seq) not in aside
    ]
    return max(found, key=lambda c: c.seq, default=None)


_TOKEN = re.compile(
    r"""\s+|/\*.*?\*/|--[^\n]*|\#[^\n]*      # space and comments
    |(?P<q>`(?:[^`]|``)*`)                  # quoted identifier
    |(?P<s>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")  # string literal
    |(?P<w>[A-Za-z0-9_$\u0080-\uffff]+)     # word: keyword or bare identifier
    |(?P<p>.)""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class _Tok:
    text: str  # identifier text (unquoted) or the word / character; "'" for a string literal
    quoted: bool = False
    literal: str = ""  # a string literal's text, quotes included

    def kw(self, *words: str) -> bool:
        return not self.quoted and self.text.upper() in words


def _tokens(sql: str) -> list[_Tok]:
    out = []
    for m in _TOKEN.finditer(sql):
        if m.group("q"):
            out.append(_Tok(m.group("q")[1:-1].replace("``", "`"), quoted=True))
        elif m.group("s"):
            out.append(_Tok("'", literal=m.group("s")))  # a literal: its text never names a column
        elif m.group("w"):
            out.append(_Tok(m.group("w")))
        elif m.group("p"):
            out.append(_Tok(m.group("p")))
    return out


def _clauses(tokens: list[_Tok]) -> list[list[_Tok]]:
    """The statement's alter specifications: split at commas outside parentheses."""
    out: list[list[_Tok]] = [[]]
    depth = 0
    for t in tokens:
        if t.text == "(" and not t.quoted:
            depth += 1
        elif t.text == ")" and not t.quoted:
            depth -= 1
        elif t.text == "," and not t.quoted and depth == 0:
            out.append([])
            continue
        elif t.text == ";" and not t.quoted and depth == 0:
            break
        out[-1].append(t)
    return [c for c in out if c]


def _skip_if_exists(c: list[_Tok], i: int) -> int:
    if i + 1 < len(c) and c[i].kw("IF") and c[i + 1].kw("EXISTS"):
        return i + 2
    return i


_NOT_COLUMNS = ("INDEX", "KEY", "PRIMARY", "FOREIGN", "CONSTRAINT", "CHECK", "PARTITION", "UNIQUE", "FULLTEXT",
                "SPATIAL", "SYSTEM", "PERIOD", "DEFAULT")  # fmt: skip


def column_changes(ddl: str) -> list[tuple[str, str, str | None]]:
    """(kind, old, new) of every column rename and drop in an ALTER TABLE statement, in order;
    [] for any other statement."""
    tokens = _tokens(ddl)
    i = 0
    if i < len(tokens) and tokens[i].kw("ALTER"):
        i += 1
    else:
        return []
    while i < len(tokens) and tokens[i].kw("ONLINE", "IGNORE"):
        i += 1
    if not (i < len(tokens) and tokens[i].kw("TABLE")):
        return []
    i = _skip_if_exists(tokens, i + 1)
    # the table name: identifier [. identifier]
    i += 1
    if i + 1 < len(tokens) and tokens[i].text == "." and not tokens[i].quoted:
        i += 2
    out: list[tuple[str, str, str | None]] = []
    for c in _clauses(tokens[i:]):
        if len(c) >= 4 and c[0].kw("RENAME") and c[1].kw("COLUMN"):
            j = _skip_if_exists(c, 2)
            if j + 2 < len(c) and c[j + 1].kw("TO"):
                out.append((RENAME, c[j].text, c[j + 2].text))
        elif c[0].kw("CHANGE"):
            j = 1
            if j < len(c) and c[j].kw("COLUMN") and not (j + 2 < len(c) and c[j + 2].kw(*_TYPE_START)):
                j += 1
            j = _skip_if_exists(c, j)
            if j + 1 < len(c) and c[j].text.lower() != c[j + 1].text.lower():
                out.append((RENAME, c[j].text, c[j + 1].text))
        elif c[0].kw("DROP") and len(c) >= 2:
            j = 1
            if c[j].kw(*_NOT_COLUMNS):
                continue
            if c[j].kw("COLUMN"):
                j += 1
            j = _skip_if_exists(c, j)
            if j < len(c):
                out.append((DROP, c[j].text, None))
    return out


def set_redefinitions(ddl: str, table: dict[str, Any] | None) -> list[tuple[str, tuple[str, ...], str]]:
    """(column, its members in order, "SET" | "ENUM") of each SET or ENUM column an ALTER TABLE's
    MODIFY or CHANGE defines (`table`: `tableChanges[].table`, the table after it). MariaDB shows a
    SET value's members in definition order, and converts stored values by text (a member equal but
    for case takes the new spelling, one no longer defined is dropped or, for an ENUM, '' under ALTER
    IGNORE): every stored value reads that way without a row event."""
    named: set[str] = set()
    toks = _tokens(ddl)
    if not (len(toks) > 1 and toks[0].kw("ALTER")):
        return []
    for c in _clauses(toks):
        at = next((i for i, t in enumerate(c) if t.kw("MODIFY", "CHANGE")), None)
        if at is None or at + 1 >= len(c):
            continue
        j = at + 2 if c[at + 1].kw("COLUMN") and at + 2 < len(c) and not c[at + 2].kw(*_TYPE_START) else at + 1
        j = _skip_if_exists(c, j)
        if j < len(c):
            # MODIFY a <type>: the column is a; CHANGE a b <type>: it is b.
            named.add((c[j + 1].text if c[at].kw("CHANGE") and j + 1 < len(c) else c[j].text).lower())
    out = []
    for col in (table or {}).get("columns") or []:
        kind = str(col.get("typeName", "")).upper()
        if kind in ("SET", "ENUM") and str(col.get("name", "")).lower() in named:
            members = tuple(mysql_string_default(str(m)[1:-1]) for m in col.get("enumValues") or ())
            out.append((str(col["name"]), members, kind))
    return out


def changes_primary_key(ddl: str) -> bool:
    """Whether an ALTER TABLE statement adds or changes a primary key (ADD PRIMARY KEY, a column
    defined PRIMARY KEY); a quoted name or a string literal never counts."""
    tokens = _tokens(ddl)
    if not (len(tokens) > 1 and tokens[0].kw("ALTER")):
        return False
    return any(a.kw("PRIMARY") and b.kw("KEY") for a, b in itertools.pairwise(tokens))


def computed_columns(ddl: str) -> list[str]:
    """Columns an ALTER TABLE statement adds whose values the source computes for the rows it
    already has (AUTO_INCREMENT, generated `AS (…)` / `GENERATED ALWAYS AS`): binlog row events
    carry none of those values."""
    tokens = _tokens(ddl)
    if not (tokens and tokens[0].kw("ALTER")):
        return []
    out = []
    for c in _clauses(tokens):
        j = next((i + 1 for i, t in enumerate(c) if t.kw("ADD")), None)
        if j is None or j >= len(c) or c[j].kw(*_NOT_COLUMNS):
            continue
        if c[j].kw("COLUMN"):
            j += 1
        j = _skip_if_exists(c, j)
        if j + 1 >= len(c) or c[j].text == "(":
            continue  # ADD COLUMN (a INT, b INT): a list, not looked into
        rest = c[j + 1 :]
        if any(t.kw("AUTO_INCREMENT", "GENERATED") for t in rest) or any(
            a.kw("AS") and b.text == "(" and not b.quoted for a, b in itertools.pairwise(rest)
        ):
            out.append(c[j].text)
    return out


# Words that start a column type: `CHANGE column int ...` has a column named `column`.
_TYPE_START = ("INT", "INTEGER", "TINYINT", "SMALLINT", "MEDIUMINT", "BIGINT", "DECIMAL", "NUMERIC", "FLOAT",
               "DOUBLE", "REAL", "BIT", "BOOL", "BOOLEAN", "CHAR", "VARCHAR", "BINARY", "VARBINARY", "TEXT",
               "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "DATE",
               "DATETIME", "TIMESTAMP", "TIME", "YEAR", "ENUM", "SET", "JSON", "GEOMETRY", "POINT", "UUID",
               "INET4", "INET6", "SERIAL", "NATIONAL", "NCHAR", "NVARCHAR", "LONG")  # fmt: skip


def table_ids(ids: list[str] | None) -> list[tuple[str, str]]:
    """(db, table) of Debezium `tableChanges[].id` values such as `"salesdb"."customer"`."""
    out = []
    for text in ids or []:
        parts = re.findall(r'"((?:[^"]|"")*)"', text) or text.split(".")
        if len(parts) >= 2:
            out.append((parts[-2].replace('""', '"'), parts[-1].replace('""', '"')))
    return out


def translation(changes: list[ColumnChange], names: list[str], newest_seq: int) -> tuple[dict[str, str], set[str]]:
    """How a data event's columns `names` map to the lake's, for an event written at or before
    `newest_seq`: (renames old -> new, columns to ignore). Only changes after the event apply, in
    their order; a rename applies only while the event's schema lacks the new name (so a column
    re-added under the old name after a rename is not taken for the renamed one)."""
    current = {n.lower(): n for n in names}  # lower(name in the lake's terms) -> event column
    dropped: set[str] = set()
    for ch in sorted(changes, key=lambda c: c.seq):
        if ch.seq <= newest_seq:
            continue
        old = ch.old.lower()
        if ch.kind == RENAME and ch.new and old in current and ch.new.lower() not in current:
            current[ch.new.lower()] = current.pop(old)
        elif ch.kind == DROP and old in current:
            dropped.add(current.pop(old))
    # event column -> lake name, for the renamed ones
    renames = {}
    for lake_lower, event_name in current.items():
        if lake_lower != event_name.lower():
            renames[event_name] = _lake_name(changes, lake_lower)
    return renames, dropped


def _lake_name(changes: list[ColumnChange], lower: str) -> str:
    """The spelling of a rename's new name, as the statement wrote it."""
    for ch in sorted(changes, key=lambda c: c.seq, reverse=True):
        if ch.new and ch.new.lower() == lower:
            return ch.new
    return lower


def table_renames(ddl: str, database: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """((db, old), (db, new)) of every table a `RENAME TABLE a TO b[, c TO d]` or an
    `ALTER TABLE a ... RENAME [TO|AS] b` statement renames, in order; unqualified names are in
    `database` (the statement's). [] for any other statement."""
    tokens = _tokens(ddl)
    out = []
    if len(tokens) > 1 and tokens[0].kw("RENAME") and tokens[1].kw("TABLE", "TABLES"):
        for c in _clauses(tokens[2:]):
            old, i = _table_name(c, 0, database)
            if old and i < len(c) and c[i].kw("TO"):
                new, _ = _table_name(c, i + 1, database)
                if new:
                    out.append((old, new))
        return out
    i = 1 if tokens and tokens[0].kw("ALTER") else len(tokens)
    while i < len(tokens) and tokens[i].kw("ONLINE", "IGNORE"):
        i += 1
    if not (i < len(tokens) and tokens[i].kw("TABLE")):
        return []
    old, i = _table_name(tokens, _skip_if_exists(tokens, i + 1), database)
    for c in _clauses(tokens[i:]):
        if old and len(c) >= 2 and c[0].kw("RENAME") and not c[1].kw("COLUMN", "INDEX", "KEY"):
            new, _ = _table_name(c, 2 if c[1].kw("TO", "AS") else 1, database)
            if new:
                out.append((old, new))
    return out


def _table_name(tokens: list[_Tok], i: int, database: str) -> tuple[tuple[str, str] | None, int]:
    """A `[db.]table` name at tokens[i], and the index after it."""
    if i >= len(tokens) or (not tokens[i].quoted and not re.match(r"[\w$\u0080-\uffff]", tokens[i].text)):
        return None, i
    if i + 2 < len(tokens) and tokens[i + 1].text == "." and not tokens[i + 1].quoted:
        return (tokens[i].text, tokens[i + 2].text), i + 3
    return (database, tokens[i].text), i + 1


# The statement reader's parts, for partition_ddl.py.
Tok = _Tok
tokens, clauses, table_name, skip_if_exists = _tokens, _clauses, _table_name, _skip_if_exists


# ------------------------------------------------------------------ PostgreSQL's DDL log
# The table sql/postgres/ddl_capture.sql creates in a captured schema: its change events are DDL.
POSTGRES_DDL_TABLE = "cdclake_ddl"
# The one-row table sql/postgres/heartbeat.sql creates in a captured schema: the connector's
# heartbeat.action.query updates it; its change events are heartbeats, never a lake table.
POSTGRES_HEARTBEAT_TABLE = "cdclake_heartbeat"


@dataclass(frozen=True)
class PostgresStatement:
    """What one DDL command did to one table, as a row of the DDL log records it."""

    table: tuple[str, str]  # (schema, table) after the command
    renamed_from: tuple[str, str] | None  # before it, when the command renamed or moved the table
    changes: list[tuple[str, str, str | None]]  # (RENAME | DROP, old, new) of its columns, in order
    created: bool
    dropped: bool
    key_changed: bool
    statement: str  # the client's query string (may hold several statements): for people only
    # Columns ALTER TABLE ... TYPE ... USING rewrote at the source without row events.
    rewritten: list[str] = field(default_factory=list)
    # (column, old label, new label) of ALTER TYPE ... RENAME VALUE on an enum the column holds
    # (labels None: the capture could not tell which label became which).
    relabels: list[Relabel] = field(default_factory=list)
    # Generated columns the command created: pgoutput (PostgreSQL 15) never sends their values.
    generated: list[str] = field(default_factory=list)
    # Columns the command added whose value for the rows the table had is known: (column, its type as
    # format_type() writes it, the value's text or None), and the primary key after the command.
    added: list[tuple[str, str, str | None]] = field(default_factory=list)
    keys: tuple[str, ...] = ()
    # Partitions a command attached to or detached from this (partitioned) table: (ATTACH | DETACH,
    # "schema.partition", {key, bound, others, rows}), in order (partition_ddl.PgPartition).
    partitions: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    # A partitioned table's partitions after the command ("schema.partition"), from the row's `partitions`.
    children: tuple[str, ...] = ()


@dataclass(frozen=True)
class Relabel:
    """An enum label renamed at the source (ALTER TYPE ... RENAME VALUE), for one column."""

    column: str
    old: str | None
    new: str | None
    array: bool = False  # an array of the enum (the lake holds its JSON text)


def postgres_statement(after: str) -> PostgresStatement:
    """One DDL log row (the `after` image of its insert event, JSON text) as a statement. The row's
    `changes` is a list of [kind, old, new]: drop, rename, add, type, key, create, drop_table, using
    ([using, column, type]), generated ([generated, column, null]), relabel ([relabel, column,
    [old, new] or null]) and attach/detach ([attach, [schema, partition], {key, bound, others, rows}])."""
    try:
        row = json.loads(after)
        items = row["changes"]
        items = json.loads(items) if isinstance(items, str) else items  # jsonb arrives as JSON text
        kinds = {str(i[0]) for i in items}
        table = (str(row["schema_name"]), str(row["table_name"]))
        old = (row.get("old_schema_name"), row.get("old_table_name"))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"not a row of {POSTGRES_DDL_TABLE} ({type(exc).__name__}: {exc})") from None
    columns = [
        (RENAME if i[0] == "rename" else DROP, str(i[1]), str(i[2]) if i[0] == "rename" else None)
        for i in items
        if i[0] in ("rename", "drop")
    ]
    types = _column_types(row.get("columns"))
    relabels = [
        Relabel(str(i[1]), *_labels(i[2]), array=types.get(str(i[1]), "").endswith("]"))
        for i in items
        if i[0] == "relabel"
    ]
    return PostgresStatement(
        table=table,
        renamed_from=(str(old[0]), str(old[1])) if old[0] and old[1] else None,
        changes=columns,
        created="create" in kinds,
        dropped="drop_table" in kinds,
        key_changed="key" in kinds,
        statement=str(row.get("statement") or ""),
        rewritten=[str(i[1]) for i in items if i[0] == "using"],
        generated=[str(i[1]) for i in items if i[0] == "generated"],
        relabels=relabels,
        added=[(str(i[1]), types[str(i[1])], None if i[2] is None else str(i[2])) for i in items
               if i[0] == "default" and str(i[1]) in types],
        keys=tuple(str(k) for k in _json_list(row.get("primary_key"))),
        partitions=[(str(i[0]).upper(), ".".join(str(x) for x in i[1]), i[2]) for i in items
                    if i[0] in ("attach", "detach") and isinstance(i[2], dict)],
        children=_children(row.get("partitions")),
    )  # fmt: skip


def _children(partitions: Any) -> tuple[str, ...]:
    """The "schema.partition" names of a DDL log row's `partitions` ({key, parts: {oid: [schema, table,
    bound]}}); () for a table that is not partitioned."""
    try:
        partitions = json.loads(partitions) if isinstance(partitions, str) else partitions
        return tuple(sorted(f"{v[0]}.{v[1]}" for v in ((partitions or {}).get("parts") or {}).values()))
    except (ValueError, TypeError, IndexError, AttributeError):
        return ()


def _column_types(columns: Any) -> dict[str, str]:
    """Column name -> its type as format_type() writes it, from a DDL log row's `columns`."""
    try:
        columns = json.loads(columns) if isinstance(columns, str) else columns
        return {str(v[0]): str(v[1]) for v in (columns or {}).values()}
    except (ValueError, TypeError, IndexError, AttributeError):
        return {}


def _json_list(value: Any) -> list[Any]:
    """A jsonb array of a DDL log row (JSON text, or already a list); [] when it is none."""
    try:
        value = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _labels(pair: Any) -> tuple[str | None, str | None]:
    """A relabel entry's [old, new], or (None, None) when the capture could not tell them."""
    if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
        return pair[0], pair[1]
    return None, None


# ------------------------------------------------------------------ columns a MySQL statement defines
@dataclass(frozen=True)
class StatementColumn:
    """A column as a schema-change statement defines it: its lake type, and the SQL literal of the
    value the source gives rows it already has (None: no backfill, as for the row events)."""

    name: str
    spark_type: T.DataType
    default_sql: str | None


_INT16 = ("TINYINT", "TINYINT UNSIGNED", "SMALLINT")
_INT32 = ("SMALLINT UNSIGNED", "MEDIUMINT", "MEDIUMINT UNSIGNED", "INT", "INTEGER", "YEAR")
_INT64 = ("INT UNSIGNED", "INTEGER UNSIGNED", "BIGINT")
_TEXT = ("CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET", "JSON", "NCHAR",
         "NVARCHAR", "NATIONAL CHAR", "NATIONAL VARCHAR", "CHARACTER", "CHARACTER VARYING")  # fmt: skip
_BYTES = ("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")
_GEOMETRY = ("GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
             "GEOMETRYCOLLECTION", "GEOMCOLLECTION")  # fmt: skip


def mysql_lake_type(column: dict[str, Any]) -> T.DataType | None:
    """The lake type the MySQL connector's row events give a column with the shipped connector
    settings (cloudformation/connector/debezium-mysql.json: decimal.handling.mode precise,
    bigint.unsigned.handling.mode precise, time.precision.mode adaptive_time_microseconds;
    connect_types.py), from its definition in a schema-change event's `tableChanges`; None when the
    definition does not tell it exactly (the column is then left to the table's next row event)."""
    name = str(column.get("typeName") or "").upper()
    length, scale = column.get("length"), column.get("scale")
    if name in _INT16 + _INT32:
        return T.IntegerType()  # int16 and int32 are both int in the lake
    if name in _INT64:
        return T.LongType()
    if name in ("DECIMAL", "NUMERIC", "DEC", "FIXED", "BIGINT UNSIGNED", "DECIMAL UNSIGNED", "NUMERIC UNSIGNED"):
        if name != "BIGINT UNSIGNED" and not length:
            return None  # the precision the connector gives a DECIMAL without one is not checked
        precision, digits = (20, 0) if name == "BIGINT UNSIGNED" else (length, scale or 0)
        return T.StringType() if precision > 38 else T.DecimalType(max(precision, digits, 1), digits)
    if name in ("FLOAT",) and length is None:
        return T.FloatType()
    if name in ("DOUBLE", "DOUBLE PRECISION"):
        return T.DoubleType()
    if name in ("BOOLEAN", "BOOL") or (name == "BIT" and (length or 1) == 1):
        return T.BooleanType()
    if name == "BIT" or name in _BYTES:
        return T.BinaryType()
    if name in _TEXT or name in _GEOMETRY or name == "TIME":
        return T.StringType()
    if name == "DATE":
        return T.DateType()
    if name == "DATETIME":
        return T.TimestampNTZType()
    if name == "TIMESTAMP":
        return T.TimestampType()
    return None


_EPOCH = ("1970-01-01", "1970-01-01 00:00:00", "1970-01-01T00:00:00Z")
_DATE_TEXT = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DATETIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?")
_TIME_TEXT = re.compile(r"(-?)(\d{1,3}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")
NO_BACKFILL = "no backfill"  # a default the source gives rows it has, that the job does not backfill


def mysql_default_sql(column: dict[str, Any], lake_type: T.DataType) -> str | None:
    """The SQL literal of the value rows the table had get when the statement adds `column`, as
    the first row event's Connect default would give it (evolution.default_sql): NO_BACKFILL for
    none (no default, binary values, a CURRENT_TIMESTAMP-like default the connector sends as the
    epoch), None when the statement's text does not tell the value exactly."""
    text = column.get("defaultValueExpression")
    if text is None or isinstance(lake_type, T.BinaryType):
        return NO_BACKFILL
    text, kind = str(text), lake_type.simpleString()
    if isinstance(lake_type, T.DateType | T.TimestampNTZType | T.TimestampType) and text in _EPOCH:
        return NO_BACKFILL
    try:
        if isinstance(lake_type, T.IntegerType | T.LongType):
            return f"CAST({int(text)} AS {kind})"
        if isinstance(lake_type, T.DecimalType):
            return f"CAST({sql_string(format(Decimal(text), 'f'))} AS {kind})"
    except (ValueError, InvalidOperation):
        return None
    if isinstance(lake_type, T.FloatType | T.DoubleType) and re.fullmatch(r"-?\d+(\.\d*)?([eE][-+]?\d+)?", text):
        return f"CAST({sql_string(text)} AS {kind})"
    if isinstance(lake_type, T.BooleanType):
        value = {"1": True, "TRUE": True, "B'1'": True, "0": False, "FALSE": False, "B'0'": False}.get(text.upper())
        return None if value is None else f"CAST({'TRUE' if value else 'FALSE'} AS boolean)"
    if isinstance(lake_type, T.DateType) and _DATE_TEXT.fullmatch(text) and not text.startswith("0000"):
        return f"DATE {sql_string(text)}"
    if isinstance(lake_type, T.TimestampNTZType) and _DATETIME_TEXT.fullmatch(text) and not text.startswith("0000"):
        return f"CAST({sql_string(text)} AS timestamp_ntz)"
    name = str(column.get("typeName") or "").upper()
    if name == "TIME":
        m = _TIME_TEXT.fullmatch(text)
        if m is None:
            return None
        sign, h, mi, s, frac = m.groups()
        return sql_string(f"{sign}{int(h):02d}:{mi}:{s}.{(frac or '').ljust(6, '0')}")
    if isinstance(lake_type, T.StringType) and (name in _TEXT):
        return sql_string(mysql_string_default(text))
    return None  # a zoned TIMESTAMP's literal (the server's time zone), a geometry, a decimal as text


def mysql_statement_columns(table: dict[str, Any]) -> tuple[list[StatementColumn], list[str]]:
    """The columns of a `tableChanges[].table` whose lake type and default the definition tells
    exactly, and the names of the others (left to the table's next row event). Columns the source
    computes (AUTO_INCREMENT, generated) are among the others: their values come with row events."""
    known, unknown = [], []
    for c in table.get("columns") or []:
        name = str(c.get("name"))
        lake_type = None if c.get("generated") or c.get("autoIncremented") else mysql_lake_type(c)
        default = None if lake_type is None else mysql_default_sql(c, lake_type)
        if lake_type is None or default is None:
            unknown.append(name)
        else:
            known.append(StatementColumn(name, lake_type, None if default == NO_BACKFILL else default))
    return known, unknown


# ------------------------------------------------------------------ columns a PostgreSQL statement adds
_PG_TIMESTAMP = re.compile(r"timestamp(\(\d\))? without time zone")
_PG_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")


def postgres_lake_type(pg_type: str) -> T.DataType | None:
    """The lake type the PostgreSQL connector's row events give a column of this type (format_type's
    text) with the shipped settings (decimal.handling.mode precise, time.precision.mode
    adaptive_time_microseconds); None for any other type (left to the table's next row event)."""
    simple = {"smallint": T.IntegerType(), "integer": T.IntegerType(), "bigint": T.LongType(),
              "boolean": T.BooleanType(), "text": T.StringType(), "real": T.FloatType(),
              "double precision": T.DoubleType(), "date": T.DateType()}  # fmt: skip
    if pg_type in simple:
        return simple[pg_type]
    if re.fullmatch(r"character varying(\(\d+\))?", pg_type):
        return T.StringType()
    if _PG_TIMESTAMP.fullmatch(pg_type):
        return T.TimestampNTZType()
    m = _PG_NUMERIC.fullmatch(pg_type)
    if m and int(m[1]) <= 38:
        return T.DecimalType(int(m[1]), int(m[2]))
    return None


def postgres_default_sql(text: str | None, lake_type: T.DataType) -> str | None:
    """The SQL literal of a PostgreSQL column's missing value (the capture's text: ISO dates, full
    float digits); NO_BACKFILL for none, None when the text is not one the lake type holds exactly
    (an infinite date, a BC one)."""
    if text is None:
        return NO_BACKFILL
    kind = lake_type.simpleString()
    if isinstance(lake_type, T.IntegerType | T.LongType) and re.fullmatch(r"-?\d+", text):
        return f"CAST({int(text)} AS {kind})"
    if isinstance(lake_type, T.DecimalType) and re.fullmatch(r"-?\d+(\.\d+)?", text):
        return f"CAST({sql_string(text)} AS {kind})"
    if isinstance(lake_type, T.FloatType | T.DoubleType) and re.fullmatch(
        r"-?\d+(\.\d*)?([eE][-+]?\d+)?|NaN|-?Infinity", text
    ):
        return f"CAST({sql_string(text)} AS {kind})"
    if isinstance(lake_type, T.BooleanType) and text in ("t", "f"):
        return f"CAST({'TRUE' if text == 't' else 'FALSE'} AS boolean)"
    if isinstance(lake_type, T.DateType) and _DATE_TEXT.fullmatch(text):
        return f"DATE {sql_string(text)}"
    if isinstance(lake_type, T.TimestampNTZType) and _DATETIME_TEXT.fullmatch(text):
        return f"CAST({sql_string(text)} AS timestamp_ntz)"
    if isinstance(lake_type, T.StringType):
        return sql_string(text)
    return None


def postgres_statement_columns(s: PostgresStatement) -> list[StatementColumn]:
    """The columns a PostgreSQL command added whose lake type and value for the rows the table had the
    DDL log tells exactly (the others wait for the table's next row event)."""
    out = []
    for name, pg_type, text in s.added:
        lake_type = postgres_lake_type(pg_type)
        default = None if lake_type is None else postgres_default_sql(text, lake_type)
        if lake_type is not None and default is not None:
            out.append(StatementColumn(name, lake_type, None if default == NO_BACKFILL else default))
    return out
