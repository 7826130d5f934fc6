"""Values the connector could not send: Debezium's `unavailable.value.placeholder`.

PostgreSQL logs an update's new row without the TOASTed (large, stored out of line) values the
update did not change, unless the table has REPLICA IDENTITY FULL. Debezium then puts a
placeholder in those columns, `__debezium_unavailable_value` by default: the text itself in a
text/json/xml/uuid column, its UTF-8 bytes in a bytea column. The value did not change, so the
lake must keep the one it has:

* within a batch, the newest change of a key takes the value from the newest earlier change of
  that key that carried one (an insert and an update in the same batch);
* the MERGE keeps the lake's current value when the change still has the placeholder.

An insert never carries the placeholder (PostgreSQL logs inserts whole); if a row is missing from
the lake and its first change seen is such an update, the placeholder is what the lake gets:
visible, rather than a made-up value.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import CDC_OFFSET, CDC_OP, CDC_SEQ
from ..common.sqltext import quote, sql_binary, sql_string


def placeholder_literal(dtype: T.DataType, placeholder: str) -> Column:
    """The placeholder as a value of a text or binary lake column."""
    if isinstance(dtype, T.BinaryType):
        return F.lit(placeholder.encode("utf-8"))
    return F.lit(placeholder)


def placeholder_sql(dtype: T.DataType, placeholder: str) -> str:
    """The same as a SQL literal (for the MERGE statement)."""
    if isinstance(dtype, T.BinaryType):
        return sql_binary(placeholder.encode("utf-8"))
    return sql_string(placeholder)


def placeholder_columns(columns: list[tuple[str, T.DataType]], placeholder: str) -> dict[str, T.DataType]:
    """Data columns that can carry the placeholder (text and binary lake columns)."""
    if not placeholder:
        return {}
    return {n: t for n, t in columns if isinstance(t, T.StringType | T.BinaryType)}


def carry_within_batch(
    newest: DataFrame, changes: DataFrame, keys: list[str], columns: dict[str, T.DataType], placeholder: str
) -> DataFrame:
    """Replace a placeholder in the newest change of a key by the value of the newest earlier
    change of that key in the same batch that had one (not a delete: its image has no values)."""
    order = F.struct(F.col(CDC_SEQ), F.col(CDC_OFFSET))
    aggs = []
    for i, (c, t) in enumerate(columns.items()):
        real = (F.col(CDC_OP) != "d") & ~F.coalesce(
            F.col(quote(c)) == placeholder_literal(t, placeholder), F.lit(False)
        )
        # max_by ignores rows whose ordering value is null: only changes with a real value count
        aggs.append(F.max_by(F.col(quote(c)), F.when(real, order)).alias(f"__carry{i}"))
        aggs.append(F.max(F.when(real, F.lit(True))).alias(f"__has{i}"))
    carried = changes.groupBy(*[F.col(quote(k)) for k in keys]).agg(*aggs)
    joined = newest.join(carried, on=keys, how="left")
    index = {c: i for i, c in enumerate(columns)}
    out = []
    for name in newest.columns:
        if name in index:
            i = index[name]
            use = (F.col(quote(name)) == placeholder_literal(columns[name], placeholder)) & F.coalesce(
                F.col(f"__has{i}"), F.lit(False)
            )
            out.append(F.when(use, F.col(f"__carry{i}")).otherwise(F.col(quote(name))).alias(name))
        else:
            out.append(F.col(quote(name)))
    return joined.select(*out)


def keep_existing(columns: dict[str, T.DataType], placeholder: str) -> dict[str, str]:
    """Column -> SQL literal: where the MERGE source holds it, the lake keeps its current value."""
    return {c: placeholder_sql(t, placeholder) for c, t in columns.items()}
