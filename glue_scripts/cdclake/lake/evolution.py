"""Schema evolution, decided before the MERGE (Spark 3.5's MERGE cannot evolve a schema).

Pure planning over (name, Spark type) lists; `alter_sql` and the format's `rewrite_sql`
(formats/) turn the plan into DDL, which executor.py runs.

Rules (same spirit as Iceberg's own promotion rules):
* a new source column is added at the end (rows written earlier read it as null);
* safe widening is applied to the lake column: int -> bigint, float -> double,
  decimal(p, s) -> decimal(p', s) with p' > p;
* a narrower incoming type is stored into the wider lake column (bigint column, int value);
* a column dropped at the source stays in the lake and is null from then on;
* a type change Iceberg cannot promote in place but that converts every possible stored value
  exactly (`exact_change`: decimal scale up with enough integer digits, int/bigint -> decimal
  with enough integer digits, int -> bigint/double/string, ...) is, under the `evolve` schema
  change policy (the default), a *rewrite*: the job replaces the table with its rows converted
  to the new type in one commit (formats.Format.rewrite_sql) before the batch is applied;
* anything else (string -> int, scale down, date -> timestamp, ...) is *incompatible*: the
  events carrying that schema are rejected to the dead-letter location with the reason, and
  the table and every other table go on (`fail` policy: the batch fails instead; `dead_letter`
  policy: every change that is not an in-place promotion is incompatible).
Column names match case-insensitively, as in Spark and Athena.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import SchemaChangePolicy, backfill_property
from ..common.sqltext import properties_sql, quote, sql_string, table_properties
from ..events.connect_types import ColumnSpec

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
    # Not exact_change: a source column narrowed (decimal(16,4) -> (12,2)) had its stored values
    # rounded by the source without change events, so the lake must not take it silently.
    return value_type == column_type or can_widen(value_type, column_type)


# Largest number of decimal digits a value of each integral type has.
_INT_DIGITS = {T.ByteType: 3, T.ShortType: 5, T.IntegerType: 10, T.LongType: 19}


def _int_digits(t: T.DataType) -> int | None:
    return _INT_DIGITS.get(type(t))


def exact_change(old: T.DataType, new: T.DataType) -> bool:
    """Every value a column of type `old` can hold converts to `new` exactly (and back), but
    Iceberg cannot promote the column in place (`can_widen` is False): the table must be rewritten."""
    if old == new or can_widen(old, new):
        return False
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    digits = _int_digits(old)
    if digits is not None:
        if isinstance(new, T.DecimalType):
            return new.precision - new.scale >= digits
        if _int_digits(new) is not None:
            return _int_digits(new) >= digits
        if isinstance(new, T.DoubleType):
            return digits <= 15  # every int fits a double's 53-bit mantissa; a bigint does not
        return isinstance(new, T.StringType)
    return False


@dataclass
class SchemaPlan:
    create: bool
    add: Columns = field(default_factory=list)
    widen: list[tuple[str, T.DataType, T.DataType]] = field(default_factory=list)
    final: Columns = field(default_factory=list)
    rewrite: list[tuple[str, T.DataType, T.DataType]] = field(default_factory=list)  # exact_change
    rejected: dict[int, str] = field(default_factory=dict)  # group index -> reason
    lossy: dict[int, str] = field(default_factory=dict)  # group index -> reason, type changes only

    @property
    def changed(self) -> bool:
        return self.create or bool(self.add or self.widen or self.rewrite)

    def describe(self) -> str:
        parts = [f"+{n} {t.simpleString()}" for n, t in self.add]
        parts += [f"{n} {a.simpleString()}->{b.simpleString()}" for n, a, b in self.widen]
        parts += [f"{n} {a.simpleString()}->{b.simpleString()} (rewritten)" for n, a, b in self.rewrite]
        return "; ".join((["created"] if self.create else []) + ([", ".join(parts)] if parts else []))


def lossy_reason(
    table: str, column: str, lake_type: T.DataType, new_type: T.DataType, policy: SchemaChangePolicy
) -> str:
    """Why a type change is not applied, naming the table, the column, both types and the fix."""
    old, new = lake_type.simpleString(), new_type.simpleString()
    if policy == SchemaChangePolicy.DEAD_LETTER:
        why = "only in-place promotions are applied (--schema_change_policy dead_letter)"
        fix = "run the job with --schema_change_policy evolve if every stored value converts exactly,"
    else:
        why = f"not every {old} value converts to {new} exactly"
        fix = f"widen the source column to a type that holds every {old} value exactly,"
    return (
        f"incompatible schema change: table {table} column {column!r} is {old} in the lake but {new} in "
        f"the event; {why}. Fix: {fix} or rewrite the lake table yourself with CAST({column} AS {new}) (Iceberg: "
        f"REPLACE TABLE ... AS SELECT; Delta: CREATE OR REPLACE TABLE ... AS SELECT; Hudi: ALTER COLUMN TYPE if "
        f"its schema evolution has the change, else a new table from CREATE TABLE ... AS SELECT), then replay "
        f"these dead letters"
    )


def plan_schema(
    existing: Columns | None,
    groups: list[Columns],
    policy: SchemaChangePolicy = SchemaChangePolicy.EVOLVE,
    table: str = "the table",
) -> SchemaPlan:
    """Plan the lake schema for incoming schema groups (ordered oldest first).

    `existing` is the current lake table's data columns (None: the table does not exist yet).
    `policy`: the schema change policy (module doc); `table` names the table in reasons.
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
                if can_widen(lake_type, typ) or (
                    policy != SchemaChangePolicy.DEAD_LETTER and exact_change(lake_type, typ)
                ):
                    staged[key] = (lake_name, typ)
                else:
                    problem = lossy_reason(table, name, lake_type, typ, policy)
                    break
        if problem:
            plan.rejected[i] = problem
            plan.lossy[i] = problem
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
                if can_widen(base[key], typ):
                    plan.widen.append((name, base[key], typ))
                else:
                    plan.rewrite.append((name, base[key], typ))
    return plan


def alter_sql(table: str, plan: SchemaPlan, defaults: dict[str, str] | None = None, widen: bool = True) -> list[str]:
    """The statements that ALTER an existing table to the plan (creation: formats.Format.create_table_sql).

    `defaults` (column -> SQL literal) are recorded as pending backfills before the columns are added.
    `widen` False: no ALTER COLUMN TYPE (a format that cannot promote in place rewrites instead).
    """
    out = []
    if defaults:
        props = properties_sql({backfill_property(n): e for n, e in defaults.items()})
        out.append(f"ALTER TABLE {table} SET TBLPROPERTIES ({props})")
    # New columns go after the last data column, before the _cdc_* metadata columns.
    added = {n.lower() for n, _ in plan.add}
    data_cols = [n for n, _ in plan.final if n.lower() not in added]
    after = data_cols[-1] if data_cols else None
    for name, typ in plan.add:
        position = f" AFTER {quote(after)}" if after else " FIRST"
        out.append(f"ALTER TABLE {table} ADD COLUMN {quote(name)} {typ.simpleString()}{position}")
        after = name
    for name, _old, new in plan.widen if widen else []:
        out.append(f"ALTER TABLE {table} ALTER COLUMN {quote(name)} TYPE {new.simpleString()}")
    return out


def carried_properties(spark: SparkSession, table: str, reserved: frozenset[str]) -> dict[str, str]:
    """The table's properties for a table made from it by `... AS SELECT`, without the `reserved`
    ones (formats.Format.reserved_properties: the catalog reports them, TBLPROPERTIES refuses them)."""
    return {k: v for k, v in table_properties(spark, table).items() if k not in reserved}


# Binary defaults are not backfilled. A temporal default at the epoch is not either: Debezium sends
# CURRENT_TIMESTAMP-style defaults as the epoch, so the value existing source rows got is unknown
# (any other date or time default is a constant, which they got).
_NO_BACKFILL = (T.BinaryType,)
_TEMPORAL = (T.DateType, T.TimestampType, T.TimestampNTZType)


def default_sql(spark: SparkSession, spec: ColumnSpec) -> str | None:
    """SQL literal of a new column's source default, or None when rows need no backfill.

    MySQL gives existing rows the default of an added column without writing a binlog event
    for them, so the lake has to do the same to stay equal to the source."""
    if spec.default is None or isinstance(spec.spark_type, _NO_BACKFILL):
        return None
    v = spec.convert(_default_value(spec)).cast(spec.spark_type)
    epoch = F.unix_micros(v.cast("timestamp")) == 0 if isinstance(spec.spark_type, _TEMPORAL) else F.lit(False)
    # A temporal value as the session's text: read back by the same session, so zone-independent.
    row = spark.range(1).select(v.alias("v"), v.cast("string").alias("text"), epoch.alias("epoch")).first()
    if row["v"] is None or row["epoch"]:
        return None
    value = row["text"] if isinstance(spec.spark_type, _TEMPORAL) else row["v"]
    return f"CAST({_literal(value)} AS {spec.spark_type.simpleString()})"


def _default_value(spec: ColumnSpec) -> Column:
    """The Connect schema's default as the spec's conversion takes its values: bytes (a Decimal's
    unscaled value) are base64 text in the schema, and a spec of the wire format avro takes bytes."""
    if isinstance(spec.parse_type, T.BinaryType) and isinstance(spec.default, str):
        return F.try_to_binary(F.lit(spec.default), F.lit("base64"))
    return F.lit(spec.default)


def _literal(value: object) -> str:
    """SQL text of a Python value Spark returned. Floats and decimals go as quoted text: a bare
    `nan` or `inf` is no SQL literal, and a cast from text is exact (repr is the shortest text
    that reads back as the same float; a decimal keeps every digit)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return sql_string({"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(repr(value), repr(value)))
    if isinstance(value, Decimal):
        return sql_string(format(value, "f"))
    return sql_string(str(value))


def backfill_sql(table: str, name: str, expr: str) -> list[str]:
    """Give rows written before column `name` existed its source default (`expr`, a SQL literal).

    Crash-safe: the pending default is recorded as a table property before the ADD COLUMN (see
    alter_sql) and removed only after the UPDATE committed, so a restart finishes the job."""
    return [
        f"UPDATE {table} SET {quote(name)} = {expr} WHERE {quote(name)} IS NULL",
        f"ALTER TABLE {table} UNSET TBLPROPERTIES IF EXISTS ({sql_string(backfill_property(name))})",
    ]
