"""--source jdbc's arguments (common/settings.py validates them): the source engine from the JDBC URL,
the captured tables with their modification column, the soft-delete marker. The polls themselves:
events/query_capture.py."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Engine(StrEnum):
    """The source database, from the JDBC URL."""

    MYSQL = "mysql"  # MySQL and MariaDB
    POSTGRES = "postgresql"


def engine_of(url: str) -> Engine:
    for prefix, engine in (("jdbc:mysql:", Engine.MYSQL), ("jdbc:mariadb:", Engine.MYSQL)):
        if url.startswith(prefix):
            return engine
    if url.startswith("jdbc:postgresql:"):
        return Engine.POSTGRES
    raise ValueError(f"--jdbc_url must start with jdbc:mysql:, jdbc:mariadb: or jdbc:postgresql:, got {url!r}")


@dataclass(frozen=True)
class CaptureTable:
    """`<db or schema>.<table>:<modification column>` of --jdbc_tables."""

    namespace: str
    table: str
    modified: str


def parse_capture_tables(text: str) -> tuple[CaptureTable, ...]:
    """--jdbc_tables: comma-separated `<db>.<table>:<column>` (PostgreSQL: `<schema>.<table>:<column>`)."""
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        name, _, column = item.partition(":")
        namespace, _, table = name.partition(".")
        if not (namespace and table and column.strip()):
            raise ValueError(f"--jdbc_tables takes <db>.<table>:<modification column>, got {item!r}")
        out.append(CaptureTable(namespace, table, column.strip()))
    return tuple(out)


@dataclass(frozen=True)
class SoftDelete:
    """--jdbc_soft_delete `<column>=<value>`: a row whose column holds the value is a delete."""

    column: str
    value: str


def parse_soft_delete(text: str) -> SoftDelete | None:
    if not text:
        return None
    column, eq, value = text.partition("=")
    if not eq or not column.strip():
        raise ValueError(f"--jdbc_soft_delete takes <column>=<value>, e.g. is_deleted=1; got {text!r}")
    return SoftDelete(column.strip(), value.strip())
