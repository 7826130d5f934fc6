"""Schema planning is pure: decided on (name, type) lists before any DDL runs."""

from __future__ import annotations

from cdclake.common.lake_contract import SchemaChangePolicy
from cdclake.lake.evolution import can_widen, lossy_reason, plan_schema
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


D = T.DecimalType


def test_exact_changes_are_those_every_stored_value_survives():
    from cdclake.lake.evolution import exact_change

    assert exact_change(D(12, 2), D(16, 4))  # scale up, integer digits kept (10)
    assert exact_change(D(12, 2), D(13, 3)) and not exact_change(D(12, 2), D(12, 3))  # 9 integer digits < 10
    assert exact_change(INT, D(10, 0)) and not exact_change(INT, D(10, 1))
    assert exact_change(L, D(19, 0)) and not exact_change(L, D(20, 2))
    assert exact_change(INT, S) and exact_change(L, S) and exact_change(INT, T.DoubleType())
    assert not exact_change(L, T.DoubleType()), "a bigint beyond 2^53 is rounded by a double"
    assert exact_change(T.ShortType(), INT)


def test_lossy_and_unsupported_changes_are_not_exact_and_promotions_are_not_rewrites():
    from cdclake.lake.evolution import exact_change

    assert not exact_change(D(16, 4), D(12, 2))  # scale and precision down
    assert not exact_change(D(16, 4), D(14, 4))  # precision down
    assert not exact_change(S, INT) and not exact_change(L, INT) and not exact_change(T.DoubleType(), T.FloatType())
    assert not exact_change(D(12, 2), S), "decimal text differs between engines: not claimed exact"
    assert not exact_change(T.DateType(), T.TimestampType()) and not exact_change(T.BooleanType(), S)
    assert not exact_change(INT, L) and not exact_change(D(10, 2), D(12, 2)), "in-place promotions"


def test_policy_decides_between_rewrite_and_rejection():
    existing = [("id", INT), ("bal", D(12, 2))]
    evolve = plan_schema(existing, [[("id", INT), ("bal", D(16, 4))]], "evolve", "cat.ns.t")
    assert evolve.rewrite == [("bal", D(12, 2), D(16, 4))] and not evolve.widen and not evolve.rejected
    assert evolve.final == [("id", INT), ("bal", D(16, 4))] and evolve.changed

    dead = plan_schema(existing, [[("id", INT), ("bal", D(16, 4))]], "dead_letter", "cat.ns.t")
    assert list(dead.rejected) == [0] and not dead.rewrite and "--schema_change_policy evolve" in dead.rejected[0]

    lossy = plan_schema([("id", INT), ("bal", D(16, 4))], [[("id", INT), ("bal", D(12, 2))]], "evolve", "cat.ns.t")
    reason = lossy.lossy[0]
    assert lossy.rejected == lossy.lossy and not lossy.rewrite
    for part in ("cat.ns.t", "'bal'", "decimal(16,4)", "decimal(12,2)", "Fix:"):
        assert part in reason, part


def test_a_widening_and_a_rewrite_in_one_batch_are_told_apart():
    plan = plan_schema([("n", INT), ("c", INT)], [[("n", L), ("c", S)]])
    assert plan.widen == [("n", INT, L)] and plan.rewrite == [("c", INT, S)]
    assert plan.describe() == "n int->bigint, c int->string (rewritten)"


def test_an_incompatible_type_change_names_the_column_both_types_and_a_rewrite_for_each_table_format() -> None:
    reason = lossy_reason("db.t", "price", T.DecimalType(10, 2), T.IntegerType(), SchemaChangePolicy.EVOLVE)
    assert "db.t" in reason and "'price'" in reason and "decimal(10,2)" in reason and " int " in reason
    assert "CAST(price AS int)" in reason
    # Hudi 0.15 has no REPLACE TABLE: the fix must not send a Hudi user to a statement that does not exist.
    for fix in ("Iceberg: REPLACE TABLE", "Delta: CREATE OR REPLACE TABLE", "Hudi: ALTER COLUMN TYPE"):
        assert fix in reason
