"""MySQL/MariaDB partition maintenance that changes rows without row events, read from the statements
on the connector's schema-change topic.

`ALTER TABLE t DROP PARTITION p` and `TRUNCATE PARTITION p` remove p's rows at the source and the
binlog carries the statement only. Which rows those are follows from the table's partitioning, which
its `CREATE TABLE` (also the one Debezium sends at snapshot) and later `ALTER TABLE … PARTITION BY /
ADD / REORGANIZE PARTITION` statements define: for RANGE and LIST partitioning on plain columns each
partition's bounds are known, and `Partitioning.rows_of` says which rows a partition holds as a
Spark SQL condition. Anything else (HASH or KEY partitioning, an expression such as `YEAR(d)`, a
bound that is not a constant, partitioning the job never read, `EXCHANGE PARTITION`, `IMPORT
PARTITION`) cannot be followed: the statement makes the table unequal to the source
(`PartitionStep.unfollowed`), and the job says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from ..common.sqltext import sql_string
from .connect_types import mysql_string_default
from .source_ddl import Tok, clauses, skip_if_exists, table_name, tokens

MAXVALUE = "MAXVALUE"
_NUMBER = re.compile(r"\d+(\.\d+)?([eE][-+]?\d+)?")


@dataclass(frozen=True)
class Partition:
    name: str
    less: tuple[str, ...] | None = None  # RANGE: the VALUES LESS THAN bound (Spark literals or MAXVALUE)
    values: tuple[tuple[str, ...], ...] | None = None  # LIST: the VALUES IN tuples ("NULL" for null)


@dataclass(frozen=True)
class Partitioning:
    """A table's partitioning as its statements define it; `columns` empty when it is an expression
    (or HASH/KEY), `known` False when a bound is no constant the job can compare with."""

    kind: str  # RANGE, LIST or OTHER
    columns: tuple[str, ...] = ()
    partitions: tuple[Partition, ...] = ()
    known: bool = True

    def followable(self) -> bool:
        return self.kind in ("RANGE", "LIST") and bool(self.columns) and self.known

    def to_json(self) -> str:
        parts = [{"name": p.name, "less": p.less, "values": p.values} for p in self.partitions]
        return json.dumps({"kind": self.kind, "columns": self.columns, "partitions": parts, "known": self.known})

    @classmethod
    def from_json(cls, text: str) -> Partitioning:
        d = json.loads(text)
        parts = tuple(
            Partition(p["name"], tuple(p["less"]) if p["less"] is not None else None,
                      tuple(tuple(v) for v in p["values"]) if p["values"] is not None else None)
            for p in d["partitions"]
        )  # fmt: skip
        return cls(d["kind"], tuple(d["columns"]), parts, d["known"])

    def rows_of(self, names: tuple[str, ...], columns: dict[str, str]) -> str | None:
        """The condition on the lake's columns (`columns`: lower-case source name -> quoted lake
        column) that holds for the rows of partitions `names`; None when it cannot be said."""
        by_name = {p.name.lower(): i for i, p in enumerate(self.partitions)}
        cols = [columns.get(c.lower()) for c in self.columns]
        if not self.followable() or None in cols or any(n.lower() not in by_name for n in names):
            return None
        out = []
        for i in sorted(by_name[n.lower()] for n in names):
            p = self.partitions[i]
            if self.kind == "LIST":
                out.append(" OR ".join(_tuple_eq(cols, v) for v in p.values or ()) or "FALSE")  # type: ignore[arg-type]
            else:
                upper = _less(cols, p.less or ())  # type: ignore[arg-type]
                lower = "TRUE" if i == 0 else f"NOT ({_less(cols, self.partitions[i - 1].less or ())})"  # type: ignore[arg-type]
                out.append(f"({lower}) AND ({upper})")
        return " OR ".join(f"({c})" for c in out)


def _less(cols: list[str], bound: tuple[str, ...]) -> str:
    """(cols) < (bound) as MySQL compares RANGE [COLUMNS] partitions: column by column, MAXVALUE
    above every value, NULL below every value."""
    if not bound or bound[0] == MAXVALUE:
        return "TRUE"
    c, b = cols[0], bound[0]
    head = f"({c} IS NULL OR {c} < {b})"
    if len(cols) == 1:
        return head
    return f"{head} OR ({c} = {b} AND ({_less(cols[1:], bound[1:])}))"


def _tuple_eq(cols: list[str], values: tuple[str, ...]) -> str:
    return " AND ".join(f"{c} IS NULL" if v == "NULL" else f"{c} = {v}" for c, v in zip(cols, values, strict=False))


# ------------------------------------------------------------------ reading the statements
@dataclass(frozen=True)
class PartitionStep:
    """What one statement does to a table's partitioning and rows."""

    table: tuple[str, str]
    defines: bool = False  # the statement sets the partitioning (`partitioning`, None: none)
    partitioning: Partitioning | None = None
    op: str = ""  # ADD, DROP, TRUNCATE, REORGANIZE, COALESCE, EXCHANGE, IMPORT (ALTER TABLE … PARTITION)
    names: tuple[str, ...] = ()  # the partitions it names (ALL: every one)
    into: tuple[Partition, ...] = ()  # ADD's and REORGANIZE's new partitions
    known: bool = True  # the new partitions' bounds are constants
    # PostgreSQL's ATTACH/DETACH (a partition created or dropped too), from the DDL log: the parent's
    # key and the partition's bound as the catalog writes them, the other partitions' bounds, whether
    # an attached table brought rows.
    pg: PgPartition | None = None

    @property
    def removes_rows(self) -> bool:
        return self.op in ("DROP", "TRUNCATE", "EXCHANGE", "IMPORT", "DETACH")

    def what(self) -> str:
        if self.pg is not None:
            return f"{self.op} PARTITION {self.pg.name}"
        return f"{self.op} PARTITION {', '.join(self.names)}".strip()


def _unversioned(ddl: str) -> str:
    """MySQL writes the partitioning of SHOW CREATE TABLE in a versioned comment (/*!50100 … */)."""
    return re.sub(r"/\*!\d*(.*?)\*/", r" \1 ", ddl, flags=re.DOTALL)


def partition_steps(ddl: str, database: str) -> list[PartitionStep]:
    """What a CREATE TABLE or ALTER TABLE statement does to partitioning (tables named by `[db.]t`,
    unqualified ones in `database`); [] when it does nothing to it. An `EXCHANGE PARTITION … WITH
    TABLE t2` is a step of both tables."""
    toks = tokens(_unversioned(ddl))
    i = 1 if toks and toks[0].kw("CREATE", "ALTER") else len(toks)
    while i < len(toks) and toks[i].kw("ONLINE", "IGNORE", "OR", "REPLACE", "TEMPORARY"):
        i += 1
    if not (i < len(toks) and toks[i].kw("TABLE")):
        return []
    if i + 2 < len(toks) and toks[i + 1].kw("IF") and toks[i + 2].kw("NOT"):
        i += 3  # CREATE TABLE IF NOT EXISTS
    table, i = table_name(toks, skip_if_exists(toks, i + 1), database)
    if table is None:
        return []
    by = next((j for j in range(i, len(toks) - 1) if _depth(toks, i, j) == 0 and toks[j].kw("PARTITION")
               and toks[j + 1].kw("BY")), None)  # fmt: skip
    if by is not None:
        return [PartitionStep(table, defines=True, partitioning=_partitioning(toks[by + 2 :]))]
    if toks[0].kw("CREATE"):
        return [PartitionStep(table, defines=True)]  # created without partitioning
    return _alter_steps(table, clauses(toks[i:]), database)


def _depth(toks: list[Tok], start: int, end: int) -> int:
    depth = 0
    for t in toks[start:end]:
        depth += (t.text == "(" and not t.quoted) - (t.text == ")" and not t.quoted)
    return depth


def _alter_steps(table: tuple[str, str], cs: list[list[Tok]], database: str) -> list[PartitionStep]:
    out: list[PartitionStep] = []
    for n, c in enumerate(cs):
        if len(c) >= 2 and c[0].kw("REMOVE") and c[1].kw("PARTITIONING"):
            out.append(PartitionStep(table, defines=True))
        if len(c) < 2 or not c[1].kw("PARTITION"):
            continue
        op = c[0].text.upper()
        if op == "ADD":
            into, known = _definitions(c[2:])
            out.append(PartitionStep(table, op=op, into=into, known=known))
        elif op in ("DROP", "TRUNCATE", "REORGANIZE", "EXCHANGE", "IMPORT", "COALESCE") and len(c) >= 3:
            # DROP PARTITION p1, p2: the split at commas leaves each further name a clause of its own.
            rest = [x[0].text for x in _while_names(cs[n + 1 :])]
            at = next((j for j, t in enumerate(c) if t.kw("INTO")), None)
            into, known = _definitions(c[at + 1 :]) if at is not None else ((), True)
            names = (c[2].text, *rest) if at is None else (c[2].text, *rest, *_names_before_into(cs[n + 1 :]))
            out.append(PartitionStep(table, op=op, names=names, into=into, known=known))
            if op == "EXCHANGE":
                w = next((j for j in range(3, len(c) - 1) if c[j].kw("WITH") and c[j + 1].kw("TABLE")), None)
                other, _ = table_name(c, w + 2, database) if w is not None else (None, 0)
                if other:
                    out.append(PartitionStep(other, op=op, names=(f"{c[2].text} of {table[1]}",)))
    return out


def _while_names(cs: list[list[Tok]]) -> list[list[Tok]]:
    out = []
    for x in cs:
        if len(x) != 1:
            break
        out.append(x)
    return out


def _names_before_into(cs: list[list[Tok]]) -> list[str]:
    """REORGANIZE PARTITION a, b INTO (…): the names after the first, up to the one with INTO."""
    out = []
    for x in cs:
        out.append(x[0].text)
        if any(t.kw("INTO") for t in x):
            break
    return out


def _partitioning(toks: list[Tok]) -> Partitioning:
    """PARTITION BY … (its tokens after BY): the kind, the columns and the partitions."""
    i = 1 if toks and toks[0].kw("LINEAR") else 0
    kind = toks[i].text.upper() if i < len(toks) else ""
    if kind not in ("RANGE", "LIST"):
        return Partitioning("OTHER")
    i += 1
    columns_syntax = i < len(toks) and toks[i].kw("COLUMNS")
    i += columns_syntax
    end = _close(toks, i)
    inner = toks[i + 1 : end]
    # RANGE (col) and RANGE COLUMNS (a, b) name columns; RANGE (YEAR(d)) is an expression.
    names = [t.text for t in inner if t.text != "," or t.quoted]
    plain = all(t.quoted or t.text == "," or re.fullmatch(r"[\w$]+", t.text) for t in inner) and bool(names)
    columns = tuple(names) if plain and (columns_syntax or len(names) == 1) else ()
    start = next(
        (j for j in range(end + 1, len(toks) - 1) if toks[j].text == "(" and toks[j + 1].kw("PARTITION")), None
    )
    partitions, known = _definitions(toks[start:]) if start is not None else ((), False)
    return Partitioning(kind, columns, partitions, known)


def _close(toks: list[Tok], i: int) -> int:
    """The index of the parenthesis closing the one at toks[i] (len(toks) when none)."""
    depth = 0
    for j in range(i, len(toks)):
        depth += (toks[j].text == "(" and not toks[j].quoted) - (toks[j].text == ")" and not toks[j].quoted)
        if depth == 0:
            return j
    return len(toks)


def _definitions(toks: list[Tok]) -> tuple[tuple[Partition, ...], bool]:
    """`(PARTITION p VALUES LESS THAN (…) …, PARTITION q VALUES IN (…) …)`: the partitions, and
    whether every bound is a constant."""
    out: list[Partition] = []
    known = True
    j = 0
    while j < len(toks):
        if toks[j].kw("PARTITION") and j + 1 < len(toks) and not toks[j].quoted:
            name, k = toks[j + 1].text, j + 2
            if k + 2 < len(toks) and toks[k].kw("VALUES") and toks[k + 1].kw("LESS") and toks[k + 2].kw("THAN"):
                k += 3
                if k >= len(toks):
                    bound, ok = (), False
                elif toks[k].kw(MAXVALUE):
                    bound, ok = (MAXVALUE,), True
                else:
                    bound, ok = _values(toks[k + 1 : _close(toks, k)])
                out.append(Partition(name, less=bound))
            elif k + 1 < len(toks) and toks[k].kw("VALUES") and toks[k + 1].kw("IN"):
                body = toks[k + 3 : _close(toks, k + 2)]
                tuples = [x for x in _split(body)]
                parsed = [_values(x[1:-1] if x and x[0].text == "(" else x) for x in tuples]
                ok = all(o for _, o in parsed)
                out.append(Partition(name, values=tuple(v for v, _ in parsed)))
            else:
                ok = False  # no bound: HASH/KEY, or a syntax not read here
                out.append(Partition(name))
            known = known and ok
            j = k
        j += 1
    return tuple(out), known


def _split(toks: list[Tok]) -> list[list[Tok]]:
    out: list[list[Tok]] = [[]]
    depth = 0
    for t in toks:
        if t.text == "," and not t.quoted and depth == 0:
            out.append([])
            continue
        depth += (t.text == "(" and not t.quoted) - (t.text == ")" and not t.quoted)
        out[-1].append(t)
    return [x for x in out if x]


def _values(toks: list[Tok]) -> tuple[tuple[str, ...], bool]:
    """Constants separated by commas as Spark SQL literals (MAXVALUE kept); False when one is not."""
    out: list[str] = []
    for v in _split(toks):
        sign = "-" if v[0].text == "-" and not v[0].quoted else ""
        v = v[1:] if sign else v
        if len(v) != 1:
            return tuple(out), False
        t = v[0]
        if t.literal:
            out.append(sql_string(mysql_string_default(t.literal[1:-1])))
        elif t.kw(MAXVALUE, "NULL"):
            out.append(t.text.upper())
        elif not t.quoted and _NUMBER.fullmatch(t.text):
            out.append(sign + t.text)
        else:
            return tuple(out), False
    return tuple(out), bool(out)


# ------------------------------------------------------------------ PostgreSQL's partitions
@dataclass(frozen=True)
class PgPartition:
    """A partition a PostgreSQL command attached to or detached from a partitioned table (the DDL log's
    attach/detach entry): pg_get_partkeydef's key (`RANGE (id)`), pg_get_expr's bound (`FOR VALUES FROM
    (1) TO (100)`, `FOR VALUES IN ('a', NULL)`, `DEFAULT`), the bounds of the partitions left."""

    name: str
    key: str
    bound: str
    others: tuple[str, ...] = ()
    rows: bool = False  # an attached table brought rows


_PG_KEY = re.compile(r"(RANGE|LIST|HASH) \((.*)\)", re.DOTALL)
_PG_IDENT = re.compile(r'[a-z_][a-z0-9_$]*|"(?:[^"]|"")+"')


def pg_key_columns(key: str) -> tuple[str, tuple[str, ...]]:
    """(RANGE | LIST | HASH, the key's columns) of a partition key; columns () when a part of it is an
    expression."""
    m = _PG_KEY.fullmatch(key.strip())
    if m is None:
        return "OTHER", ()
    parts = [x.strip() for x in _split_top(m[2])]
    if not all(_PG_IDENT.fullmatch(x) for x in parts):
        return m[1], ()
    return m[1], tuple(x[1:-1].replace('""', '"') if x.startswith('"') else x for x in parts)


def _split_top(text: str) -> list[str]:
    """`text` split at commas outside parentheses and quotes."""
    out, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    return [*out, "".join(cur)]


def _pg_literal(text: str) -> str | None:
    """A bound value as a Spark SQL literal (MINVALUE/MAXVALUE/NULL kept as words); None for another
    expression."""
    t = text.strip()
    if t.upper() in ("MINVALUE", "MAXVALUE", "NULL", "TRUE", "FALSE") or re.fullmatch(r"-?\d+(\.\d+)?", t):
        return t.upper() if not t[0].isdigit() and t[0] != "-" else t
    if len(t) >= 2 and t[0] == t[-1] == "'":
        return sql_string(t[1:-1].replace("''", "'"))
    return None


def _pg_less(cols: list[str], bound: list[str]) -> str:
    """(cols) < (bound) as PostgreSQL compares a range partition's bounds: MINVALUE below and MAXVALUE
    above every value, equal tuples not less."""
    if not bound or bound[0] == "MINVALUE":
        return "FALSE"
    if bound[0] == "MAXVALUE":
        return "TRUE"
    c, b = cols[0], bound[0]
    return f"{c} < {b} OR ({c} = {b} AND ({_pg_less(cols[1:], bound[1:])}))"


def _pg_bound_rows(kind: str, cols: list[str], bound: str) -> str | None:
    """The condition for the rows of one non-default bound; None when it is not a constant."""
    m = re.fullmatch(r"FOR VALUES (?:FROM \((.*)\) TO \((.*)\)|IN \((.*)\))", bound.strip(), re.DOTALL)
    if m is None:
        return None
    if m[3] is not None and kind == "LIST" and len(cols) == 1:
        values = [_pg_literal(v) for v in _split_top(m[3])]
        if None in values:
            return None
        listed = [f"{cols[0]} IS NULL" if v == "NULL" else f"{cols[0]} = {v}" for v in values]  # type: ignore[misc]
        return " OR ".join(listed)
    if m[1] is None or kind != "RANGE":
        return None
    lower, upper = ([_pg_literal(v) for v in _split_top(x)] for x in (m[1], m[2]))
    if None in lower or None in upper or len(lower) != len(cols) or len(upper) != len(cols):
        return None
    present = " AND ".join(f"{c} IS NOT NULL" for c in cols)  # a range partition holds no null key
    return f"{present} AND NOT ({_pg_less(cols, lower)}) AND ({_pg_less(cols, upper)})"  # type: ignore[arg-type]


def pg_rows_of(p: PgPartition, columns: dict[str, str]) -> str | None:
    """The condition on the lake's columns (`columns`: lower-case source name -> quoted lake column)
    for the rows partition `p` held; None when it cannot be said (HASH, an expression, a column not
    in the lake, a bound that is no constant)."""
    kind, names = pg_key_columns(p.key)
    cols = [columns.get(n.lower()) for n in names]
    if kind not in ("RANGE", "LIST") or not names or None in cols:
        return None
    if p.bound.strip().upper() != "DEFAULT":
        return _pg_bound_rows(kind, cols, p.bound)  # type: ignore[arg-type]
    others = [_pg_bound_rows(kind, cols, b) for b in p.others if b.strip().upper() != "DEFAULT"]  # type: ignore[arg-type]
    if None in others:
        return None
    return "NOT (" + " OR ".join(["FALSE", *(f"coalesce({o}, FALSE)" for o in others)]) + ")"


def pg_partition_rows(step: PartitionStep, columns: dict[str, str]) -> str | tuple[str, ...] | None:
    """What a PostgreSQL ATTACH/DETACH step does to the parent's rows: the condition of the rows it
    took out, () when it changed none, or why the job cannot follow it (text in a tuple)."""
    p = step.pg
    if p is None:
        return ()
    if step.op == "ATTACH":
        return (f"ATTACH PARTITION {p.name}: the rows it brings are not in the change stream",) if p.rows else ()
    condition = pg_rows_of(p, columns)
    if condition is None:
        kind, names = pg_key_columns(p.key)
        why = ("HASH partitioning" if kind == "HASH" else "partitioning by an expression" if not names
               else "a partitioning column not in the lake table or a bound that is no constant")  # fmt: skip
        return (f"DETACH PARTITION {p.name} (or its DROP): {why}, which rows it held is not known",)
    return condition


# ------------------------------------------------------------------ following the steps
def follow(partitioning: Partitioning | None, step: PartitionStep) -> tuple[Partitioning | None, tuple[str, ...] | str]:
    """The partitioning after `step`, and the partitions whose rows it removed (or, when which rows
    cannot be said, why). () when it removed none."""
    p = partitioning
    if step.defines:
        return step.partitioning, ()
    if p is None:
        return None, (f"{step.what()}: the table's partitioning was not read (its CREATE TABLE or PARTITION BY "
                      "came before the job's first batch)") if step.removes_rows else ()  # fmt: skip
    names = tuple(x.name for x in p.partitions) if step.names and step.names[0].upper() == "ALL" else step.names
    if step.op in ("EXCHANGE", "IMPORT"):
        return p, f"{step.what()}: the rows it brings are not in the change stream"
    if step.op in ("DROP", "TRUNCATE"):
        after = replace(
            p, partitions=tuple(x for x in p.partitions if x.name.lower() not in {n.lower() for n in names})
        )
        if not p.followable():
            why = "HASH or KEY partitioning" if p.kind == "OTHER" else (
                "partitioning by an expression" if not p.columns else "a bound that is no constant")  # fmt: skip
            return (after if step.op == "DROP" else p), f"{step.what()}: {why}, which rows it held is not known"
        return (after if step.op == "DROP" else p), names
    if step.op == "ADD":
        return replace(p, partitions=p.partitions + step.into, known=p.known and step.known), ()
    if step.op == "REORGANIZE" and step.into:
        lower = {n.lower() for n in names}
        at = next((i for i, x in enumerate(p.partitions) if x.name.lower() in lower), len(p.partitions))
        kept = [x for x in p.partitions if x.name.lower() not in lower]
        return replace(p, partitions=tuple(kept[:at] + list(step.into) + kept[at:]), known=p.known and step.known), ()
    return p, ()  # COALESCE and the others keep every row where it is


def dump_state(partitioning: Partitioning | None, position: int) -> str:
    """The table property's value: the partitioning after the statements up to `position`."""
    return json.dumps(
        {"position": position, "partitioning": json.loads(partitioning.to_json()) if partitioning else None}
    )


def load_state(text: str | None) -> tuple[Partitioning | None, int]:
    """(partitioning, the position of the newest statement it follows); (None, 0) when none was read."""
    if not text:
        return None, 0
    d = json.loads(text)
    p = d.get("partitioning")
    return (Partitioning.from_json(json.dumps(p)) if p else None), int(d.get("position") or 0)
