"""Which lake table a batch's events belong to once its RENAME TABLE statements are applied."""

from __future__ import annotations

import json

from cdclake.common.lake_contract import DROP, ColumnChange
from cdclake.events.decode import SchemaGroup
from cdclake.events.partition_ddl import PartitionStep, PgPartition
from cdclake.lake.lake_tables import TableRename, follow_renames, route_partitions
from cdclake.lake.table_plan import TableDDL


def group(table: str, max_seq: int) -> SchemaGroup:
    return SchemaGroup("db", table, 1, 1, None, None, None, 1, max_seq)


def test_events_before_a_rename_go_to_the_new_name_and_later_ones_stay():
    before, after = group("a", 10), group("b", 30)
    tables, _, _ = follow_renames(
        {("db", "a"): [before], ("db", "b"): [after]}, {}, [TableRename(("db", "a"), ("db", "b"), 20)]
    )
    assert tables == {("db", "b"): [before, after]}


def test_a_swap_sends_each_table_s_earlier_events_to_its_new_name():
    # RENAME TABLE t TO t_old, t_new TO t at position 20, then a change of the new t.
    old_t, copy, new_t = group("t", 10), group("t_new", 11), group("t", 30)
    renames = [TableRename(("db", "t"), ("db", "t_old"), 20), TableRename(("db", "t_new"), ("db", "t"), 20)]
    tables, _, _ = follow_renames({("db", "t"): [old_t, new_t], ("db", "t_new"): [copy]}, {}, renames)
    assert tables == {("db", "t_old"): [old_t], ("db", "t"): [new_t, copy]}


def test_a_truncate_before_a_rename_truncates_the_new_name():
    _, truncated, _ = follow_renames({}, {("db", "a"): 5, ("db", "c"): 7}, [TableRename(("db", "a"), ("db", "b"), 20)])
    assert truncated == {("db", "b"): 5, ("db", "c"): 7}


def test_statements_before_a_swap_go_with_their_table_and_later_ones_stay():
    # t: a column dropped at 10, then RENAME TABLE t TO t_old, t_new TO t at 20, then t's own drop at 30;
    # t_new was created at 5 (a copy tool's table).
    renames = [TableRename(("db", "t"), ("db", "t_old"), 20), TableRename(("db", "t_new"), ("db", "t"), 20)]
    t = TableDDL(changes=[ColumnChange(DROP, "v", None, 10), ColumnChange(DROP, "w", None, 30)], key_seqs=[10])
    statements = {("db", "t"): t, ("db", "t_new"): TableDDL(create_seq=5)}
    _, _, routed = follow_renames({}, {}, renames, statements)
    assert routed[("db", "t_old")] == TableDDL(changes=[ColumnChange(DROP, "v", None, 10)], key_seqs=[10])
    assert routed[("db", "t")] == TableDDL(changes=[ColumnChange(DROP, "w", None, 30)], create_seq=5)


def _attach(op: str, parent: str, child: str, seq: int) -> dict[tuple[str, str], TableDDL]:
    pg = PgPartition(f"public.{child}", "RANGE (id)", "FOR VALUES FROM (1) TO (2)")
    return {("public", parent): TableDDL(partitions=[(seq, PartitionStep(("public", parent), op=op, pg=pg))])}


def test_a_postgres_partition_s_changes_go_to_its_partitioned_table_while_it_is_attached():
    def grp(table: str, seq: int) -> SchemaGroup:
        return SchemaGroup("public", table, 1, 1, None, None, None, 1, seq)

    # p_1 attached to p at 10 (its CREATE ... PARTITION OF), detached at 40; p_2 known from an earlier batch.
    attached, detached, other = grp("p_1", 20), grp("p_1", 50), grp("p_2", 5)
    statements = _attach("ATTACH", "p", "p_1", 10)
    statements[("public", "p")].partitions += _attach("DETACH", "p", "p_1", 40)[("public", "p")].partitions
    known = {("public", "p_2"): ("public", "p")}
    tables, truncated, parents = route_partitions(
        {("public", "p_1"): [attached, detached], ("public", "p_2"): [other]},
        {("public", "p_2"): 7},
        statements,
        [TableRename(("public", "p"), ("public", "q"), 60)],
        known,
    )
    assert tables == {("public", "p"): [attached, other], ("public", "p_1"): [detached]}
    assert truncated == {("public", "p"): 7}
    # p_1 left; the parent's rename is followed for the batches after this one.
    assert parents == {("public", "p_2"): ("public", "q")}


def test_a_partition_of_a_partition_goes_to_the_root():
    g = SchemaGroup("public", "leaf", 1, 1, None, None, None, 1, 9)
    known = {("public", "leaf"): ("public", "mid"), ("public", "mid"): ("public", "root")}
    tables, _, _ = route_partitions({("public", "leaf"): [g]}, {}, {}, [], known)
    assert tables == {("public", "root"): [g]}


def test_the_ddl_log_s_snapshot_gives_the_partitions_of_a_partitioned_table_s_newest_row():
    from cdclake.common.lake_contract import CDC_SEQ
    from cdclake.lake.lake_tables import _postgres_snapshot_row
    from pyspark.sql import Row

    def row(row_id: int, parts: dict) -> Row:
        after = {"id": row_id, "schema_name": "public", "table_name": "p", "changes": "[]", "partitions": parts}
        return Row(**{"_snapshot_ddl": json.dumps(after), CDC_SEQ: 70})

    newest: dict = {}
    # Rows as the capture wrote them, read in any order: p_1 was detached after the first.
    _postgres_snapshot_row(newest, row(5, {"key": "RANGE (id)", "parts": {"2": ["public", "p_2", "DEFAULT"]}}))
    both = {"1": ["public", "p_1", "FOR VALUES FROM (1) TO (2)"], "2": ["public", "p_2", "DEFAULT"]}
    _postgres_snapshot_row(newest, row(3, {"key": "RANGE (id)", "parts": both}))
    assert newest == {("public", "p"): (70, 5, ("public.p_2",))}
