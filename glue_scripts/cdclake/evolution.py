"""Schema evolution, decided before the MERGE (Spark 3.5's MERGE cannot evolve a schema).

Pure planning over (name, Spark type) lists; `apply_plan` turns the plan into Iceberg DDL.

Rules (same spirit as Iceberg's own promotion rules):
* a new source column is added at the end (rows written earlier read it as null);
* safe widening is applied to the lake column: int -> bigint, float -> double,
  decimal(p, s) -> decimal(p', s) with p' > p;
* a narrower incoming type is stored into the wider lake column (bigint column, int value);
* a column dropped at the source stays in the lake and is null from then on;
* anything else (string -> int, scale change, date -> timestamp, ...) is *incompatible*: the
  events carrying that schema are rejected to the dead-letter location with the reason, and
  the table and every other table go on.
Column names match case-insensitively, as in Spark and Athena.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .connect_types import ColumnSpec

Columns = list[tuple[str, T.DataType]]


def can_widen(old: T.DataType, new: T.DataType) -> bool:
    """Iceberg can promote a column of type `old` to `new` in place."""
    if isinstance(old, T.IntegerType) and isinstance(new, T.LongType):
        return True
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    return (
        isinstance(old, T.DecimalType)
        and isinstance(new, T.DecimalType)
        and old.scale == new.scale
        and new.precision > old.precision
    )


def fits(value_type: T.DataType, column_type: T.DataType) -> bool:
    """A value of `value_type` can be stored losslessly in a column of `column_type`."""
    return value_type == column_type or can_widen(value_type, column_type)


@dataclass
class SchemaPlan:
    create: bool
    add: Columns = field(default_factory=list)
    widen: list[tuple[str, T.DataType, T.DataType]] = field(default_factory=list)
    final: Columns = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)  # group index -> reason

    @property
    def changed(self) -> bool:
        return self.create or bool(self.add or self.widen)

    def describe(self) -> str:
        parts = [f"+{n} {t.simpleString()}" for n, t in self.add]
        parts += [f"{n} {a.simpleString()}->{b.simpleString()}" for n, a, b in self.widen]
        return "; ".join((["created"] if self.create else []) + ([", ".join(parts)] if parts else []))


def plan_schema(existing: Columns | None, groups: list[Columns]) -> SchemaPlan:
    """Plan the lake schema for incoming schema groups (ordered oldest first).

    `existing` is the current lake table's data columns (None: the table does not exist yet).
    """
    plan = SchemaPlan(create=existing is None)
    current: dict[str, tuple[str, T.DataType]] = {n.lower(): (n, t) for n, t in existing or []}
    order = [n.lower() for n, _ in existing or []]
    for i, cols in enumerate(groups):
        staged = dict(current)
        staged_order = list(order)
        problem = None
        for name, typ in cols:
            key = name.lower()
            if key not in staged:
                staged[key] = (name, typ)
                staged_order.append(key)
            else:
                lake_name, lake_type = staged[key]
                if fits(typ, lake_type):
                    continue
                if can_widen(lake_type, typ):
                    staged[key] = (lake_name, typ)
                else:
                    problem = (
                        f"incompatible schema change: column {name!r} is {lake_type.simpleString()} "
                        f"in the lake but {typ.simpleString()} in the event"
                    )
                    break
        if problem:
            plan.rejected[i] = problem
            continue
        current, order = staged, staged_order
    base = {n.lower(): t for n, t in existing or []}
    plan.final = [current[k] for k in order]
    if existing is not None:
        for key in order:
            name, typ = current[key]
            if key not in base:
                plan.add.append((name, typ))
            elif typ != base[key]:
                plan.widen.append((name, base[key], typ))
    return plan


def sql_string(value: str) -> str:
    """A Spark SQL string literal (backslash escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def apply_plan(spark: SparkSession, table: str, plan: SchemaPlan, defaults: dict[str, str] | None = None) -> None:
    """ALTER an existing table to the plan (creation is done by merge.create_table).

    `defaults` (column -> SQL literal) are recorded as pending backfills before the columns are added.
    """
    if defaults:
        props = ", ".join(f"{sql_string(BACKFILL_PREFIX + n)}={sql_string(e)}" for n, e in defaults.items())
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({props})")
    # New columns go after the last data column, before the _cdc_* metadata columns.
    added = {n.lower() for n, _ in plan.add}
    data_cols = [n for n, _ in plan.final if n.lower() not in added]
    after = data_cols[-1] if data_cols else None
    for name, typ in plan.add:
        position = f" AFTER {quote(after)}" if after else " FIRST"
        spark.sql(f"ALTER TABLE {table} ADD COLUMN {quote(name)} {typ.simpleString()}{position}")
        after = name
    for name, _old, new in plan.widen:
        spark.sql(f"ALTER TABLE {table} ALTER COLUMN {quote(name)} TYPE {new.simpleString()}")


# Temporal defaults are not backfilled: Debezium cannot send CURRENT_TIMESTAMP-style defaults
# (it sends the epoch instead), so the value existing source rows got is unknown.
_NO_BACKFILL = (T.DateType, T.TimestampType, T.TimestampNTZType, T.BinaryType)


def default_sql(spark: SparkSession, spec: ColumnSpec) -> str | None:
    """SQL literal of a new column's source default, or None when rows need no backfill.

    MySQL gives existing rows the default of an added column without writing a binlog event
    for them, so the lake has to do the same to stay equal to the source."""
    if spec.default is None or isinstance(spec.spark_type, _NO_BACKFILL):
        return None
    value = spark.range(1).select(spec.convert(F.lit(spec.default)).cast(spec.spark_type).alias("v")).first()["v"]
    if value is None:
        return None
    if isinstance(value, str):
        literal = sql_string(value)
    elif isinstance(value, bool):
        literal = "TRUE" if value else "FALSE"
    else:
        literal = repr(value) if isinstance(value, float) else str(value)
    return f"CAST({literal} AS {spec.spark_type.simpleString()})"


BACKFILL_PREFIX = "cdc.backfill."


def backfill_defaults(spark: SparkSession, table: str, defaults: dict[str, str]) -> None:
    """Give rows written before a column existed that column's source default.

    Crash-safe: the pending defaults are recorded as table properties before the ADD COLUMN
    (see apply_plan) and removed only after the UPDATE committed, so a restart finishes the job."""
    for name, expr in defaults.items():
        spark.sql(f"UPDATE {table} SET {quote(name)} = {expr} WHERE {quote(name)} IS NULL")
        spark.sql(f"ALTER TABLE {table} UNSET TBLPROPERTIES IF EXISTS ({sql_string(BACKFILL_PREFIX + name)})")
