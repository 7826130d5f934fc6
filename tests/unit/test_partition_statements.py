"""Which rows a MySQL/MariaDB DROP or TRUNCATE PARTITION removed, from the partitioning the table's
CREATE/ALTER TABLE statements define (events/partition_ddl.py); what cannot be said is said so."""

from __future__ import annotations

import pytest
from cdclake.events.partition_ddl import (
    Partitioning,
    PartitionStep,
    PgPartition,
    dump_state,
    follow,
    load_state,
    partition_steps,
    pg_partition_rows,
    pg_rows_of,
)

# As MariaDB's SHOW CREATE TABLE writes it (Debezium's snapshot statement), and as MySQL does.
RANGE = (
    "CREATE TABLE `t` (`id` int(11) NOT NULL, `d` date DEFAULT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB "
    "PARTITION BY RANGE (`id`)\n(PARTITION `p0` VALUES LESS THAN (10) ENGINE = InnoDB,\n PARTITION `p1` VALUES "
    "LESS THAN (20) ENGINE = InnoDB,\n PARTITION `pmax` VALUES LESS THAN MAXVALUE ENGINE = InnoDB)"
)
LIST_COLUMNS = (
    "CREATE TABLE l (id INT, c VARCHAR(3), PRIMARY KEY (id, c)) /*!50500 PARTITION BY LIST  COLUMNS(`c`)\n"
    "(PARTITION pa VALUES IN ('a','b') ENGINE = InnoDB,\n PARTITION pn VALUES IN (NULL,'it''s') ENGINE = InnoDB) */"
)


def partitioning(ddl: str) -> Partitioning | None:
    [step] = partition_steps(ddl, "db")
    assert step.defines
    return step.partitioning


def after(p: Partitioning | None, ddl: str) -> tuple[Partitioning | None, tuple[str, ...] | str]:
    [step] = partition_steps(ddl, "db")
    return follow(p, step)


def test_a_range_partition_holds_the_values_from_the_previous_bound_up_to_its_own():
    p = partitioning(RANGE)
    assert p is not None and p.followable()
    cols = {"id": "`id`"}
    assert p.rows_of(("p0",), cols) == "((TRUE) AND ((`id` IS NULL OR `id` < 10)))"
    assert p.rows_of(("p1",), cols) == "((NOT ((`id` IS NULL OR `id` < 10))) AND ((`id` IS NULL OR `id` < 20)))"
    assert p.rows_of(("pmax",), cols) == "((NOT ((`id` IS NULL OR `id` < 20))) AND (TRUE))"
    # Dropped, p0's range goes to p1; truncated, the partition stays.
    dropped, rows = after(p, "ALTER TABLE t DROP PARTITION p0")
    assert rows == ("p0",) and dropped is not None and [x.name for x in dropped.partitions] == ["p1", "pmax"]
    assert dropped.rows_of(("p1",), cols) == "((TRUE) AND ((`id` IS NULL OR `id` < 20)))"
    assert after(p, "ALTER TABLE `db`.`t` TRUNCATE PARTITION p1, pmax") == (p, ("p1", "pmax"))
    assert after(p, "ALTER TABLE t TRUNCATE PARTITION ALL")[1] == ("p0", "p1", "pmax")


def test_list_columns_in_a_versioned_comment_compare_nulls_and_escaped_strings():
    p = partitioning(LIST_COLUMNS)
    assert p is not None and p.kind == "LIST" and p.columns == ("c",)
    assert p.rows_of(("pn",), {"c": "`c`"}) == "(`c` IS NULL OR `c` = 'it\\'s')"


def test_added_and_reorganized_partitions_keep_rows_and_the_bounds_follow():
    p = partitioning(RANGE)
    p, rows = after(p, "ALTER TABLE t REORGANIZE PARTITION pmax INTO (PARTITION p2 VALUES LESS THAN (30), "
                       "PARTITION pmax VALUES LESS THAN MAXVALUE)")  # fmt: skip
    assert rows == () and p is not None
    assert [(x.name, x.less) for x in p.partitions][-2:] == [("p2", ("30",)), ("pmax", ("MAXVALUE",))]
    assert p.rows_of(("p2",), {"id": "id"}) == "((NOT ((id IS NULL OR id < 20))) AND ((id IS NULL OR id < 30)))"
    assert load_state(dump_state(p, 42)) == (p, 42)


@pytest.mark.parametrize(
    ("create", "statement", "why"),
    [
        ("CREATE TABLE h (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 4",
         "ALTER TABLE h TRUNCATE PARTITION p1", "HASH or KEY partitioning"),
        ("CREATE TABLE y (id INT, d DATE, PRIMARY KEY (id, d)) PARTITION BY RANGE (YEAR(d)) "
         "(PARTITION p0 VALUES LESS THAN (2020), PARTITION p1 VALUES LESS THAN MAXVALUE)",
         "ALTER TABLE y DROP PARTITION p0", "partitioning by an expression"),
        ("CREATE TABLE r (d DATE PRIMARY KEY) PARTITION BY RANGE COLUMNS (d) "
         "(PARTITION p0 VALUES LESS THAN (TO_DAYS('2024-01-01')))",
         "ALTER TABLE r DROP PARTITION p0", "a bound that is no constant"),
        (RANGE, "ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE t_new", "not in the change stream"),
        (None, "ALTER TABLE t DROP PARTITION p0", "partitioning was not read"),
    ],
)  # fmt: skip
def test_a_statement_whose_rows_cannot_be_told_says_why(create, statement, why):
    p = partitioning(create) if create else None
    _, rows = after(p, statement) if "EXCHANGE" not in statement else follow(p, partition_steps(statement, "db")[0])
    assert isinstance(rows, str) and why in rows


def test_an_exchange_changes_both_tables_and_other_statements_nothing():
    steps = partition_steps("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE other.t_new WITHOUT VALIDATION", "db")
    assert [(s.table, s.op) for s in steps] == [(("db", "t"), "EXCHANGE"), (("other", "t_new"), "EXCHANGE")]
    assert partition_steps("ALTER TABLE t ADD COLUMN `partition` INT", "db") == []
    assert [s.partitioning for s in partition_steps("CREATE TABLE t (id INT PRIMARY KEY)", "db")] == [None]
    assert [s.defines for s in partition_steps("ALTER TABLE t REMOVE PARTITIONING", "db")] == [True]


# ------------------------------------------------------------------ PostgreSQL (the DDL log's attach/detach)
def _matching(condition: str, rows: list[tuple]) -> list[tuple]:
    """The rows (a, b) a condition holds for, evaluated by SQLite (the condition's SQL is plain)."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a, b)")
    db.executemany("INSERT INTO t VALUES (?, ?)", rows)
    return db.execute(f"SELECT a, b FROM t WHERE {condition} ORDER BY rowid").fetchall()


def test_a_postgres_range_partition_holds_its_lower_bound_not_its_upper_one_and_default_holds_the_rest():
    rows = [(None, 1), (-5, 1), (9, 1), (10, 1), (10, 2), (19, 9), (20, 1), (500, 1)]
    cols = {"a": "a", "b": "b"}
    first = PgPartition("public.t_1", "RANGE (a)", "FOR VALUES FROM (MINVALUE) TO (10)")
    second = PgPartition("public.t_2", "RANGE (a)", "FOR VALUES FROM (10) TO (20)")
    assert _matching(pg_rows_of(first, cols), rows) == [(-5, 1), (9, 1)]
    assert _matching(pg_rows_of(second, cols), rows) == [(10, 1), (10, 2), (19, 9)]
    default = PgPartition("public.t_d", "RANGE (a)", "DEFAULT", (first.bound, second.bound))
    assert _matching(pg_rows_of(default, cols), rows) == [(None, 1), (20, 1), (500, 1)]
    # Two columns compare as a row: (10, 2) is at or above (10, 2), below (20, MINVALUE).
    two = PgPartition("public.t_2", "RANGE (a, b)", "FOR VALUES FROM (10, 2) TO (20, MINVALUE)")
    assert _matching(pg_rows_of(two, cols), rows) == [(10, 2), (19, 9)]


def test_a_postgres_list_partition_matches_its_values_and_null_and_a_default_list_the_others():
    rows = [("a", 1), ("it's", 1), (None, 1), ("z", 1)]
    cols = {"a": "a"}
    listed = PgPartition("public.l_1", 'LIST ("A")', "FOR VALUES IN ('a', NULL)")
    assert pg_rows_of(listed, {"a": "`A`"}) == "`A` = 'a' OR `A` IS NULL"
    quoted = PgPartition("public.l_2", "LIST (a)", "FOR VALUES IN ('it''s')")
    assert pg_rows_of(quoted, cols) == "a = 'it\\'s'"  # Spark's escape
    default = PgPartition("public.l_d", "LIST (a)", "DEFAULT", ("FOR VALUES IN ('a', NULL)",))
    assert _matching(pg_rows_of(default, cols), rows) == [("it's", 1), ("z", 1)]


@pytest.mark.parametrize(
    ("op", "partition", "why"),
    [
        ("DETACH", PgPartition("public.h_0", "HASH (a)", "FOR VALUES WITH (modulus 2, remainder 0)"), "HASH"),
        ("DETACH", PgPartition("public.e_1", "RANGE (lower(a))", "FOR VALUES FROM ('a') TO ('m')"), "expression"),
        ("DETACH", PgPartition("public.c_1", "RANGE (gone)", "FOR VALUES FROM (1) TO (2)"), "not in the lake"),
        ("ATTACH", PgPartition("public.r_3", "RANGE (a)", "FOR VALUES FROM (2) TO (3)", rows=True), "rows it brings"),
    ],
)
def test_a_postgres_partition_whose_rows_cannot_be_told_says_why(op, partition, why):
    step = PartitionStep(("public", "t"), op=op, names=(partition.name,), pg=partition)
    [said] = pg_partition_rows(step, {"a": "a"})
    assert why in said and partition.name in said


def test_an_empty_table_attached_changes_no_rows():
    empty = PgPartition("public.r_3", "RANGE (a)", "FOR VALUES FROM (2) TO (3)")
    assert pg_partition_rows(PartitionStep(("public", "t"), op="ATTACH", pg=empty), {"a": "a"}) == ()
