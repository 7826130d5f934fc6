"""The SQL text helpers read back as the same value through Spark's own parser."""

from __future__ import annotations

from cdclake.common.sqltext import quote, sql_binary, sql_string
from pyspark.sql import functions as F

TRICKY = ["it's", "back\\slash", "\\'", "''", "tab\there", "new\nline", "\\u0041", "%_*", "ünï €", "`tick`", ""]


def test_string_and_binary_literals_and_identifiers_round_trip_through_spark_sql(spark):
    row = spark.sql("SELECT " + ", ".join(f"{sql_string(v)} AS c{i}" for i, v in enumerate(TRICKY))).first()
    assert [row[f"c{i}"] for i in range(len(TRICKY))] == TRICKY
    raw = b"\x00\xffab"
    assert spark.sql("SELECT " + sql_binary(raw) + " AS b").first()["b"] == bytearray(raw)
    names = ["a`b", "first name", "x.y", "``"]
    df = spark.sql("SELECT " + ", ".join(f"{i} AS {quote(n)}" for i, n in enumerate(names)))
    assert df.columns == names
    assert df.select(*[F.col(quote(n)) for n in names]).first() == tuple(range(len(names)))
