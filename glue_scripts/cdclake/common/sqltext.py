"""Spark SQL text: identifiers and literals spliced into statements the job builds as strings.

Names and values come from the source database (column names, defaults, key names) and may hold
any character, so every statement quotes them through these helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def quote(name: str) -> str:
    """A Spark SQL identifier (also a column reference for `F.col`): backticks, doubled inside."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    """A Spark SQL string literal. Spark's parser reads backslash escapes in literals
    (spark.sql.parser.escapedStringLiterals=false, the default), so backslashes are escaped too."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def properties_sql(props: dict[str, str]) -> str:
    """The `'key'='value', ...` list of a TBLPROPERTIES clause."""
    return ", ".join(f"{sql_string(k)}={sql_string(v)}" for k, v in props.items())


def table_properties(spark: SparkSession, table: str) -> dict[str, str]:
    """A table's properties, as SHOW TBLPROPERTIES lists them."""
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def sql_binary(value: bytes) -> str:
    """A Spark SQL binary literal, X'<hex>'."""
    return f"X'{value.hex().upper()}'"
