"""Source names as the lake holds them, and back: pure functions the job and the readers share.

MySQL and PostgreSQL allow any character in a quoted column name. Iceberg, and Delta with column
mapping by name (formats.delta.DELTA_COLUMN_MAPPING), hold such names as they are. Hudi writes through
Avro, whose names are `[A-Za-z_][A-Za-z0-9_]*`: a column whose name Avro refuses (a space, other
punctuation, a leading digit, a letter outside ASCII) is stored under `escaped_name`'s form:

    ESCAPE_PREFIX + the name, letters and digits of ASCII as they are, `_` doubled, any other
    character `_<its code point in lower-case hex>_`:   `unit price` -> `_x_unit_20_price`,
    `1st` -> `_x_1st`, `café` -> `_x_caf_e9_`

A name that already starts with the prefix is escaped too, so `source_name` reverses exactly
(an escaped name starts with the prefix, a name that does not is a source name as it is). Hudi's
own columns (`_hoodie_*`) are escaped likewise when a source column carries one of their names.
"""

from __future__ import annotations

import re

ESCAPE_PREFIX = "_x_"
# Avro's name rule (the specification's, which every Avro library applies).
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLAIN = re.compile(r"[A-Za-z0-9]")
_ESCAPED_CHAR = re.compile(r"__|_([0-9a-f]+)_|[A-Za-z0-9]")
# The Glue Data Catalog's limit on a column name (Athena reads the catalog): longer ones cannot be held.
MAX_COLUMN_NAME = 255


def lake_table_name(name: str) -> str:
    """A lake table's name from the source's (`--table_name_template` filled in): lower case, any
    character but an ASCII letter, digit or `_` as `_` (the Glue Data Catalog's and Athena's rule).
    Source tables whose names differ only there share one lake name (lake_tables.LakeTables.claim)."""
    return re.sub(r"[^0-9A-Za-z_]", "_", name).lower()


class UnsupportedName(ValueError):
    """A source name the lake's table format cannot hold, even escaped: the table cannot follow its
    source until the name changes there (a permanent failure, not one a retry cures)."""


def is_avro_name(name: str) -> bool:
    return bool(_AVRO_NAME.match(name))


def escaped_name(name: str) -> str:
    """`name` in the escaped form (module doc), whatever it holds."""
    body = "".join(c if _PLAIN.match(c) else "__" if c == "_" else f"_{ord(c):x}_" for c in name)
    return ESCAPE_PREFIX + body


def source_name(lake_name: str) -> str:
    """The source's name of a lake column: `escaped_name` reversed; any other name as it is."""
    if not lake_name.startswith(ESCAPE_PREFIX):
        return lake_name
    body, out, i = lake_name[len(ESCAPE_PREFIX) :], [], 0
    while i < len(body):
        m = _ESCAPED_CHAR.match(body, i)
        if m is None:  # not an escaped name after all: a name the job did not write
            return lake_name
        out.append("_" if m.group(0) == "__" else chr(int(m.group(1), 16)) if m.group(1) else m.group(0))
        i = m.end()
    return "".join(out)


def avro_column_name(name: str, reserved: frozenset[str] = frozenset()) -> str:
    """The lake name of source column `name` in a table written through Avro (Hudi): as it is when
    Avro takes it, else escaped; `reserved` (lower case) names are the format's own columns."""
    if is_avro_name(name) and not name.startswith(ESCAPE_PREFIX) and name.lower() not in reserved:
        return name
    lake = escaped_name(name)
    if len(lake) > MAX_COLUMN_NAME:
        raise UnsupportedName(
            f"column {name!r} is {len(lake)} characters long once escaped for Avro ({lake[:40]}...), over the "
            f"catalog's {MAX_COLUMN_NAME}: rename it at the source to a shorter name (or fewer characters "
            "outside ASCII letters and digits)"
        )
    return lake


def duplicate_by_case(names: list[str]) -> tuple[str, str] | None:
    """Two of `names` that differ only by case, if any: Spark, the catalogs and Athena match column
    names case-insensitively, so one lake table cannot hold both."""
    seen: dict[str, str] = {}
    for n in names:
        other = seen.setdefault(n.lower(), n)
        if other != n:
            return other, n
    return None
