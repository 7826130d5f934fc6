"""Schema planning is pure: decided on (name, type) lists before any DDL runs."""

from __future__ import annotations

from cdclake.evolution import can_widen, plan_schema
from pyspark.sql import types as T

INT, L, S = T.IntegerType(), T.LongType(), T.StringType()


def test_new_table_takes_the_union_of_columns_in_order():
    plan = plan_schema(None, [[("id", INT), ("a", S)], [("id", INT), ("a", S), ("b", L)]])
    assert plan.create and plan.final == [("id", INT), ("a", S), ("b", L)] and not plan.rejected


def test_added_and_widened_columns_are_planned():
    plan = plan_schema([("id", INT), ("n", INT)], [[("id", INT), ("n", L), ("new", S)]])
    assert plan.add == [("new", S)] and plan.widen == [("n", INT, L)]


def test_names_match_case_insensitively_and_keep_the_lake_spelling():
    plan = plan_schema([("Email", S)], [[("email", S)]])
    assert not plan.changed and plan.final == [("Email", S)]


def test_incompatible_group_is_rejected_and_the_others_still_evolve():
    plan = plan_schema(
        [("id", INT), ("email", S)], [[("id", INT), ("email", INT)], [("id", INT), ("email", S), ("x", S)]]
    )
    assert list(plan.rejected) == [0] and "email" in plan.rejected[0]
    assert plan.add == [("x", S)]


def test_only_safe_promotions_widen():
    assert can_widen(INT, L) and can_widen(T.FloatType(), T.DoubleType())
    assert can_widen(T.DecimalType(10, 2), T.DecimalType(12, 2))
    assert not can_widen(T.DecimalType(10, 2), T.DecimalType(12, 3))
    assert not can_widen(L, INT) and not can_widen(S, INT) and not can_widen(T.DateType(), T.TimestampType())


def test_plan_description_names_a_creation_without_a_dangling_separator() -> None:
    created = plan_schema(None, [[("id", T.IntegerType())]])
    assert created.describe() == "created"
    widened = plan_schema([("id", T.IntegerType())], [[("id", T.LongType()), ("n", T.StringType())]])
    assert widened.describe() == "+n string, id int->bigint"
