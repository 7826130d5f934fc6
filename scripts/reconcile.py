"""Reconcile the source database with the lake: row count and a per-row checksum over all columns.

    scripts/reconcile [--table customer ...] [--wait SECONDS]     compare every captured table
    scripts/apply-sql FILE [--wait SECONDS]                        run SQL, wait until the lake caught up
    (--source postgres, or CDC_STACK_SOURCE=postgres: the local PostgreSQL source instead of MariaDB)

Exit code 0 when every table matches, 1 on any difference (the report says which keys and
columns differ), 2 on a usage or connection error. With --wait, comparison is repeated until the
tables match or the time is up: the lake is "caught up" exactly when it equals the source.

Values are compared after one normalisation per type, so that a DECIMAL, a DATETIME(6), a TIME
or a TIMESTAMP read from MariaDB and from Iceberg (through DuckDB, Athena's role here) agree
when they are the same value.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import lake
import local_job
import local_stack as stack
import pymysql


def normalise(value: Any) -> Any:
    """One canonical JSON-able form per value, whichever side it was read from."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return None if math.isnan(value) else f"{value:.6g}"
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


def checksum(row: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(row, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class TableResult:
    table: str
    source_rows: int = 0
    lake_rows: int = 0
    missing: list[Any] = field(default_factory=list)  # in the source, not in the lake
    extra: list[Any] = field(default_factory=list)  # in the lake, not in the source
    different: list[tuple[Any, list[str]]] = field(default_factory=list)  # key, columns
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different or self.problem)

    def report(self) -> str:
        head = f"{self.table:<28} source {self.source_rows:>7}  lake {self.lake_rows:>7}  "
        if self.problem:
            return head + f"DIFFERENT: {self.problem}"
        if self.ok:
            return head + "OK (count and per-row checksums equal)"
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} missing in lake {self.missing[:5]}")
        if self.extra:
            parts.append(f"{len(self.extra)} extra in lake {self.extra[:5]}")
        if self.different:
            parts.append(
                f"{len(self.different)} rows differ, e.g. " + "; ".join(f"{k}: {c}" for k, c in self.different[:3])
            )
        return head + "DIFFERENT: " + ", ".join(parts)


class Source:
    """The local MariaDB, as the administrator over its Unix socket (UTC session)."""

    def __init__(self, s: stack.Settings, database: str) -> None:
        if stack.live_record(s, "mariadb") is None:
            raise stack.StackError("MariaDB is not running: scripts/local-stack up")
        self.database = database
        self.lake_prefix = database  # lake tables are <namespace>.<database>_<table>
        self.conn = pymysql.connect(
            unix_socket=str(s.socket),
            user=stack.mariadb_admin_user(),
            database=database,
            init_command="SET time_zone='+00:00'",
        )

    def tables(self) -> dict[str, list[str]]:
        """Tables with a primary key -> key columns in key order (tables without one are not captured)."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT table_name, column_name FROM information_schema.key_column_usage "
                "WHERE table_schema = %s AND constraint_name = 'PRIMARY' ORDER BY table_name, ordinal_position",
                (self.database,),
            )
            out: dict[str, list[str]] = {}
            for t, c in cur.fetchall():
                out.setdefault(t, []).append(c)
            return out

    def rows(self, table: str) -> tuple[list[str], list[dict[str, Any]]]:
        self.conn.commit()  # a fresh snapshot for every read under REPEATABLE READ
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{table}`")
            names = [d[0] for d in cur.description]
            return names, [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


class PostgresSource:
    """The local PostgreSQL, as the administrator over its Unix socket (UTC session), schema `public`.
    Its lake tables are <namespace>.<schema>_<table>, as the job names PostgreSQL tables."""

    def __init__(self, s: stack.Settings, database: str) -> None:
        import local_stack_pg as pg
        import psycopg

        if stack.live_record(s, pg.COMPONENT) is None:
            raise stack.StackError("PostgreSQL is not running: scripts/local-stack up --source postgres")
        self.database = database
        self.schema = pg.SCHEMA
        self.lake_prefix = pg.SCHEMA
        try:
            # autocommit: every read sees the latest committed data
            self.conn = psycopg.connect(
                host=str(pg.pg_dir(s)),
                port=pg.current_port(s),
                user=pg.admin_role(),
                dbname=database,
                autocommit=True,
                options="-c TimeZone=UTC",
            )
        except psycopg.Error as exc:
            raise stack.StackError(f"PostgreSQL: {exc}") from None

    def tables(self) -> dict[str, list[str]]:
        """Tables with a primary key -> key columns in key order (tables without one are not captured)."""
        rows = self.conn.execute(
            "SELECT c.relname, a.attname FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
            "WHERE i.indisprimary AND n.nspname = %s ORDER BY c.relname, k.ord",
            (self.schema,),
        ).fetchall()
        out: dict[str, list[str]] = {}
        for t, c in rows:
            out.setdefault(t, []).append(c)
        return out

    def rows(self, table: str) -> tuple[list[str], list[dict[str, Any]]]:
        from psycopg import sql

        cur = self.conn.execute(
            sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(self.schema), sql.Identifier(table))
        )
        names = [d.name for d in cur.description or []]
        return names, [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def compare(
    source: Source | PostgresSource, con: Any, paths: local_job.LakePaths, table: str, keys: list[str]
) -> TableResult:
    lake_name = f"{source.lake_prefix}_{table}".lower()
    res = TableResult(table)
    columns, src_rows = source.rows(table)
    res.source_rows = len(src_rows)
    location = lake.table_location(paths.warehouse, local_job.NAMESPACE, lake_name)
    if lake.current_metadata(location) is None:
        res.problem = f"no lake table {local_job.NAMESPACE}.{lake_name} yet"
        return res
    lake_rows = lake.rows(con, location)
    res.lake_rows = len(lake_rows)
    by_lower = {n.lower(): n for n in (lake_rows[0].keys() if lake_rows else [])}
    lake_cols = {c.lower() for c in by_lower} or {c.lower() for c in columns}
    absent = [c for c in columns if c.lower() not in lake_cols]
    if lake_rows and absent:
        res.problem = f"column(s) {absent} not in the lake table"
        return res

    def canon(row: dict[str, Any], from_lake: bool) -> dict[str, Any]:
        if from_lake:
            return {c: normalise(row[by_lower[c.lower()]]) for c in columns}
        return {c: normalise(row[c]) for c in columns}

    def key_of(row: dict[str, Any]) -> tuple:
        return tuple(row[k] for k in keys)

    src = {key_of(r := canon(x, False)): r for x in src_rows}
    dst = {key_of(r := canon(x, True)): r for x in lake_rows}
    res.missing = sorted(set(src) - set(dst))
    res.extra = sorted(set(dst) - set(src))
    for k in sorted(set(src) & set(dst)):
        if checksum(src[k]) != checksum(dst[k]):
            res.different.append((k, [c for c in columns if src[k][c] != dst[k][c]]))
    return res


def reconcile(s: stack.Settings, tables: list[str] | None, database: str) -> list[TableResult]:
    source = PostgresSource(s, database) if s.source == "postgres" else Source(s, database)
    try:
        keyed = source.tables()
        wanted = tables or sorted(keyed)
        unknown = [t for t in wanted if t not in keyed]
        if unknown:
            raise stack.StackError(f"not a table with a primary key in {database}: {', '.join(unknown)}")
        con = lake.connect()
        paths = local_job.LakePaths.of(s)
        return [compare(source, con, paths, t, keyed[t]) for t in wanted]
    finally:
        source.conn.close()


def reconcile_until(s: stack.Settings, tables: list[str] | None, database: str, wait: float) -> list[TableResult]:
    deadline = time.monotonic() + wait
    while True:
        results = reconcile(s, tables, database)
        if all(r.ok for r in results) or time.monotonic() >= deadline:
            return results
        time.sleep(1.0)


def _postgres_errors() -> tuple[type[Exception], ...]:
    try:
        import psycopg
    except ImportError:  # only the PostgreSQL source needs it
        return ()
    return (psycopg.Error,)


def main(argv: list[str] | None = None, apply_sql: bool = False) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/apply-sql" if apply_sql else "scripts/reconcile", description=__doc__.split("\n\n")[0]
    )
    if apply_sql:
        parser.add_argument("file", help="SQL file to run against the local MariaDB or PostgreSQL (database salesdb)")
    parser.add_argument("--table", action="append", help="only this source table (repeatable)")
    parser.add_argument("--database", default=stack.DATABASE)
    parser.add_argument(
        "--source", choices=sorted(stack.SOURCES), help="mysql (default) or postgres; default $CDC_STACK_SOURCE"
    )
    parser.add_argument("--wait", type=float, default=120.0 if apply_sql else 0.0, help="seconds to wait for the lake")
    args = parser.parse_args(argv)
    try:
        s = stack.Settings.from_env(args.source)
        if apply_sql:
            t0 = time.monotonic()
            stack.cmd_sql(s, args.file, None, args.database)
            print(
                f"[reconcile] ran {args.file} in {time.monotonic() - t0:.1f}s; waiting for the lake (up to {args.wait:.0f}s)"
            )
        t0 = time.monotonic()
        results = reconcile_until(s, args.table, args.database, args.wait)
    except (stack.StackError, pymysql.MySQLError, *_postgres_errors()) as exc:
        print(f"[reconcile] ERROR: {exc}", file=sys.stderr)
        return 2
    for r in results:
        print(f"[reconcile] {r.report()}")
    ok = all(r.ok for r in results)
    verdict = "MATCH" if ok else "DIFFERENCE"
    print(f"[reconcile] {verdict}: {len(results)} table(s) compared in {time.monotonic() - t0:.1f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
