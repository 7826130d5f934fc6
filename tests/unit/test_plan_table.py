"""A table's batch is planned without Spark: every decision, from plain data to typed steps."""

from __future__ import annotations

from pathlib import Path

from cdclake.common.lake_contract import (
    DROP,
    KEPT,
    RENAME,
    ColumnChange,
    DropPolicy,
    KeylessTablePolicy,
    SchemaChangePolicy,
    TableState,
)
from cdclake.lake.table_plan import (
    NO_KEY,
    AlterSchema,
    BackfillDefaults,
    ColumnDefaults,
    CopyThenDrop,
    CreateTable,
    DeadLetter,
    DropColumn,
    DropTable,
    GroupFacts,
    MarkDropped,
    Memory,
    Policies,
    Rekey,
    RenameColumn,
    SetKey,
    TableDDL,
    Truncate,
    UnmarkDropped,
    Write,
    cut_positions,
    drop_probe,
    plan_table,
)
from pyspark.sql import types as T

INT, LONG, STR = T.IntegerType(), T.LongType(), T.StringType()
DEC = T.DecimalType
KEEP = Policies()


def group(i: int, seq: int, cols: dict[str, T.DataType], keys: tuple[str, ...] = ("id",), **kw) -> GroupFacts:
    return GroupFacts(index=i, max_seq=seq, events=kw.pop("events", 2), columns=tuple(cols.items()), keys=keys, **kw)


def table(cols: dict[str, T.DataType], keys: tuple[str, ...] = ("id",), **kw) -> TableState:
    return TableState(list(cols.items()), list(keys), **kw)


def kinds(plan) -> list[str]:
    return [type(s).__name__ for s in plan.steps]


def test_a_steady_batch_is_one_write_and_nothing_else():
    state = table({"id": INT, "name": STR})
    plan = plan_table(state, [group(0, 10, {"id": INT, "name": STR})], None, KEEP, Memory())
    assert kinds(plan) == ["Write"] and plan.state is state
    [w] = plan.of(Write)
    assert w.keys == ("id",) and w.truncate is None and [g.index for g in w.groups] == [0]


def test_a_new_table_is_created_with_the_union_of_its_groups_and_the_newest_key():
    groups = [group(0, 10, {"id": INT}), group(1, 20, {"id": INT, "n": LONG}, defaults=frozenset({"n"}))]
    plan = plan_table(None, groups, None, KEEP, Memory())
    assert kinds(plan) == ["ColumnDefaults", "CreateTable", "Write"]
    [create] = plan.of(CreateTable)
    assert create.columns == [("id", INT), ("n", LONG)] and create.keys == ("id",) and not create.replace
    # The older group lacks `n`: its rows take the source default of the newest group that has it.
    assert plan.of(ColumnDefaults)[0].candidates == (("n", 1, "n"),)
    assert plan.state is not None and plan.state.columns == create.columns and plan.schema == ["created"]


def test_added_and_widened_columns_and_their_defaults_and_a_pending_backfill():
    state = table({"id": INT, "n": INT}, pending_backfill={"old": "1"})
    g = group(0, 10, {"id": INT, "n": LONG, "x": STR}, defaults=frozenset({"x"}))
    plan = plan_table(state, [g], None, KEEP, Memory())
    assert kinds(plan) == ["ColumnDefaults", "AlterSchema", "BackfillDefaults", "Write"]
    assert plan.of(AlterSchema)[0].plan.add == [("x", STR)] and plan.of(AlterSchema)[0].plan.widen == [("n", INT, LONG)]
    backfill = plan.of(BackfillDefaults)[0]
    assert backfill.pending == {"old": "1"} and backfill.added == {"x"}
    assert plan.state.pending_backfill == {} and plan.schema == ["+x string, n int->bigint"]


def test_an_exact_type_change_is_a_rewrite_and_a_lossy_one_dead_letters_the_group():
    state = table({"id": INT, "b": DEC(12, 2)})
    plan = plan_table(state, [group(0, 10, {"id": INT, "b": DEC(16, 4)})], None, KEEP, Memory(), table="t")
    assert kinds(plan) == ["AlterSchema", "RewriteType", "Write"]
    lossy = plan_table(table({"id": INT, "b": DEC(16, 4)}), [group(0, 10, {"id": INT, "b": DEC(12, 2)})], None,
                       KEEP, Memory(), table="t")  # fmt: skip
    assert kinds(lossy) == ["Note", "DeadLetter"] and "not every decimal(16,4) value" in lossy.steps[1].reason
    assert not lossy.steps[1].loud, "one error line for the table (the note), not one per group"
    assert lossy.lossy == [lossy.steps[1].reason], "the fail policy reads it off the plan"


def test_under_dead_letter_even_an_exact_change_goes_to_the_dead_letters():
    policies = Policies(schema_change=SchemaChangePolicy.DEAD_LETTER)
    plan = plan_table(table({"id": INT, "b": DEC(12, 2)}), [group(0, 10, {"id": INT, "b": DEC(16, 4)})], None,
                      policies, Memory())  # fmt: skip
    assert "DeadLetter" in kinds(plan) and "Write" not in kinds(plan)


def test_the_fail_policy_counts_only_tables_the_lake_has():
    policies = Policies(schema_change=SchemaChangePolicy.FAIL)
    groups = [group(0, 10, {"id": INT, "b": STR}), group(1, 20, {"id": INT, "b": INT})]
    new = plan_table(None, groups, None, policies, Memory())
    assert not new.lossy and "DeadLetter" in kinds(new), "a new table's own conflict is dead-lettered, as before"


def test_a_column_renamed_at_the_source_is_renamed_and_older_events_are_translated():
    state = table({"id": INT, "a": STR})
    statements = TableDDL(changes=[ColumnChange(RENAME, "a", "b", 15)])
    groups = [group(0, 10, {"id": INT, "a": STR}), group(1, 20, {"id": INT, "b": STR})]
    assert cut_positions(state, groups, statements, KEEP, Memory()) == [15]
    plan = plan_table(state, groups, statements, KEEP, Memory())
    assert kinds(plan)[:2] == ["RenameColumn", "RecordColumnChanges"] and kinds(plan)[-1] == "Write"
    assert plan.of(RenameColumn)[0].old == "a" and plan.of(RenameColumn)[0].new == "b"
    [w] = plan.of(Write)
    assert dict(w.groups[0].renamed) == {"a": "b"} and w.columns == [("id", INT), ("b", STR)]
    assert plan.schema == ["a->b (renamed)"]


def test_a_renamed_key_column_moves_the_key_property():
    state = table({"id": INT, "a": STR})
    statements = TableDDL(changes=[ColumnChange(RENAME, "id", "pk", 15)])
    plan = plan_table(state, [], statements, KEEP, Memory())
    assert plan.of(SetKey)[0].keys == ("pk",) and plan.state.keys == ["pk"]


def test_a_rename_whose_new_name_arrived_first_copies_then_drops():
    state = table({"id": INT, "a": STR, "b": STR})
    statements = TableDDL(changes=[ColumnChange(RENAME, "a", "b", 15)])
    plan = plan_table(state, [], statements, KEEP, Memory())
    assert plan.of(CopyThenDrop) == [CopyThenDrop("a", "b", 15)] and [n for n, _ in plan.state.columns] == ["id", "b"]


def test_a_dropped_column_stays_under_keep_and_goes_under_drop_but_never_a_key_column():
    state = table({"id": INT, "a": STR})
    statements = TableDDL(changes=[ColumnChange(DROP, "a", None, 15), ColumnChange(DROP, "id", None, 16)])
    kept = plan_table(state, [], statements, KEEP, Memory())
    assert kinds(kept) == ["RecordColumnChanges"] and {c.kind for c in kept.state.column_changes} == {KEPT}
    dropped = plan_table(state, [], statements, Policies(dropped_column=DropPolicy.DROP), Memory())
    assert dropped.of(DropColumn) == [DropColumn("a")], "the key column stays"


def test_changes_recorded_already_are_not_applied_again():
    change = ColumnChange(RENAME, "a", "b", 15)
    state = table({"id": INT, "b": STR}, column_changes=[change])
    assert plan_table(state, [], TableDDL(changes=[change]), KEEP, Memory()).steps == []


def test_a_dropped_column_added_again_sets_the_kept_one_aside():
    kept = ColumnChange(KEPT, "tag", None, 15)
    state = table({"id": INT, "tag": STR}, column_changes=[kept])
    groups = [group(0, 10, {"id": INT, "tag": STR}), group(1, 20, {"id": INT, "tag": INT})]
    assert cut_positions(state, groups, None, KEEP, Memory()) == [15]
    plan = plan_table(state, groups, None, KEEP, Memory())
    assert plan.of(RenameColumn) == [RenameColumn("tag", "tag__dropped", "set aside")]
    [w] = plan.of(Write)
    # Older events fill the set-aside column; newer ones the new column, whatever its type.
    assert dict(w.groups[0].renamed) == {"tag": "tag__dropped"} and not w.groups[1].renamed
    assert ("tag", INT) in w.columns and ("tag__dropped", STR) in w.columns


def test_a_column_renamed_onto_a_dropped_columns_name_takes_its_place():
    kept = ColumnChange(KEPT, "v", None, 10)
    state = table({"id": INT, "v": STR, "w": STR}, column_changes=[kept])
    statements = TableDDL(changes=[ColumnChange(RENAME, "w", "v", 20)])
    plan = plan_table(state, [], statements, KEEP, Memory())
    renames = [(s.old, s.new) for s in plan.of(RenameColumn)]
    assert renames == [("v", "v__dropped"), ("w", "v")]
    assert [n for n, _ in plan.state.columns] == ["id", "v__dropped", "v"]


def test_a_new_tables_column_dropped_and_added_again_with_another_type_in_its_first_batch_sets_the_old_one_aside():
    # CREATE TABLE, rows, DROP COLUMN note, ADD COLUMN note DECIMAL: all read in the table's first batch.
    stmt = TableDDL(changes=[ColumnChange(DROP, "note", None, 15)])
    groups = [group(0, 10, {"id": INT, "note": STR}), group(1, 20, {"id": INT, "note": DEC(6, 1)})]
    plan = plan_table(None, groups, stmt, KEEP, Memory())
    assert not plan.of(DeadLetter)
    [create] = plan.of(CreateTable)
    assert create.columns == [("id", INT), ("note__dropped", STR), ("note", DEC(6, 1))]
    assert ColumnChange(RENAME, "note", "note__dropped", 15) in create.record, "later-read old events fill it too"
    [w] = plan.of(Write)
    assert dict(w.groups[0].renamed) == {"note": "note__dropped"} and not w.groups[1].renamed


def test_a_new_tables_column_dropped_twice_and_renamed_onto_in_its_first_batch_keeps_each_generation_apart():
    # The last two in one statement: ALTER TABLE t DROP COLUMN v, RENAME COLUMN w TO v.
    stmt = TableDDL(changes=[ColumnChange(DROP, "v", None, 15), ColumnChange(DROP, "v", None, 25),
                             ColumnChange(DROP, "v", None, 35), ColumnChange(RENAME, "w", "v", 35)])  # fmt: skip
    groups = [
        group(0, 10, {"id": INT, "v": STR, "w": STR}),
        group(1, 20, {"id": INT, "v": INT, "w": STR}),
        group(2, 30, {"id": INT, "w": STR}),
        group(3, 31, {"id": INT, "v": INT, "w": STR}),
        group(4, 40, {"id": INT, "v": STR}),
    ]
    plan = plan_table(None, groups, stmt, KEEP, Memory())
    assert not plan.of(DeadLetter)
    [w] = plan.of(Write)
    assert [dict(g.renamed) for g in w.groups] == [
        {"v": "v__dropped", "w": "v"}, {"v": "v__dropped2", "w": "v"}, {"w": "v"}, {"v": "v__dropped3", "w": "v"}, {},
    ]  # fmt: skip
    assert sorted(n for n, _ in plan.of(CreateTable)[0].columns) == [
        "id",
        "v",
        "v__dropped",
        "v__dropped2",
        "v__dropped3",
    ]


def test_a_new_tables_column_dropped_and_not_named_again_stays_as_a_kept_column():
    stmt = TableDDL(changes=[ColumnChange(DROP, "note", None, 15)])
    groups = [group(0, 10, {"id": INT, "note": STR}), group(1, 20, {"id": INT})]
    plan = plan_table(None, groups, stmt, KEEP, Memory())
    assert plan.of(CreateTable)[0].columns == [("id", INT), ("note", STR)]
    assert not any(c.kind == RENAME for c in plan.of(CreateTable)[0].record)


def test_a_column_dropped_and_another_renamed_onto_its_name_in_one_statement_sets_the_kept_one_aside():
    # ALTER TABLE t DROP COLUMN v, RENAME COLUMN w TO v: both at the statement's position.
    state = table({"id": INT, "v": STR, "w": STR})
    stmt = TableDDL(changes=[ColumnChange(DROP, "v", None, 20), ColumnChange(RENAME, "w", "v", 20)])
    plan = plan_table(state, [group(0, 10, {"id": INT, "v": STR, "w": STR})], stmt, KEEP, Memory())
    assert [(s.old, s.new) for s in plan.of(RenameColumn)] == [("v", "v__dropped"), ("w", "v")]
    assert not plan.of(CopyThenDrop), "the kept column's values stay, set aside"
    [w] = plan.of(Write)
    assert dict(w.groups[0].renamed) == {"v": "v__dropped", "w": "v"}


def test_a_swap_of_two_columns_through_a_temporary_name():
    state = table({"id": INT, "a": STR, "b": INT})
    statements = TableDDL(changes=[ColumnChange(RENAME, "a", "t", 11), ColumnChange(RENAME, "b", "a", 12),
                             ColumnChange(RENAME, "t", "b", 13)])  # fmt: skip
    plan = plan_table(state, [group(0, 5, {"id": INT, "a": STR, "b": INT})], statements, KEEP, Memory())
    assert [n for n, _ in plan.state.columns] == ["id", "b", "a"]
    [w] = plan.of(Write)
    assert dict(w.groups[0].renamed) == {"a": "b", "b": "a"}, "old events land in the swapped columns"


def test_a_primary_key_change_goes_to_the_dead_letters_when_the_format_fixes_the_key():
    # Hudi's record key is set at the table's creation: the events under the new key are refused
    # with the reason, the events before the change are written.
    state = table({"id": INT, "code": STR})
    groups = [group(0, 10, {"id": INT, "code": STR}), group(1, 20, {"id": INT, "code": STR}, keys=("code",))]
    plan = plan_table(state, groups, None, Policies(fixed_key=True), Memory(), batch="b1")
    assert kinds(plan) == ["Write", "DeadLetter"] and not plan.of(Rekey)
    assert plan.of(DeadLetter)[0].reason.startswith(
        "primary key changed at the source from ['id'] to ['code']; the table"
    )
    assert plan.state.keys == ["id"]


def test_renames_of_a_table_not_created_yet_wait_in_memory_and_are_recorded_at_its_creation():
    change = ColumnChange(RENAME, "a", "b", 15)
    early = plan_table(None, [], TableDDL(changes=[change]), KEEP, Memory())
    assert kinds(early) == ["RememberEarly"] and early.memory.early == (change,)
    plan = plan_table(None, [group(0, 10, {"id": INT, "a": STR})], None, KEEP, early.memory)
    assert plan.of(CreateTable)[0].record == (change,) and plan.memory.early == ()
    assert plan.of(CreateTable)[0].columns == [("id", INT), ("b", STR)]


def test_a_primary_key_changed_at_the_source_rekeys_the_table_and_splits_the_batch():
    state = table({"id": INT, "code": STR})
    groups = [
        group(0, 10, {"id": INT, "code": STR}),
        group(1, 20, {"id": INT, "code": STR}, keys=("code",)),
        group(2, 30, {"id": INT, "code": STR, "x": INT}, keys=("code",)),
    ]
    plan = plan_table(state, groups, None, KEEP, Memory(), batch="b1")
    assert kinds(plan) == ["Write", "Rekey", "AlterSchema", "Write"]
    # The key changed no later than the oldest event that carries the new one.
    assert plan.of(Rekey) == [Rekey(("id",), ("code",), 20, "b1")]
    assert [w.keys for w in plan.of(Write)] == [("id",), ("code",)]
    assert plan.state.keys == ["code"] and plan.state.key_position == 20 and plan.state.key_batch == "b1"


def test_events_older_than_the_key_change_read_later_are_matched_by_the_new_key_or_dead_lettered():
    state = table({"id": INT, "code": STR}, keys=("code",), key_position=20, key_batch="b1")
    old = [group(0, 10, {"id": INT, "code": STR})]
    found = plan_table(state, old, None, KEEP, Memory(), batch="b2")
    assert found.of(Write)[0].keys == ("code",), "the lake's key finds them; the position guard decides"
    lacking = plan_table(state, [group(0, 10, {"id": INT})], None, KEEP, Memory(), batch="b2")
    assert "before it changed at the source" in lacking.of(DeadLetter)[0].reason
    again = plan_table(state, old, None, KEEP, Memory(), batch="b1")
    assert kinds(again) == ["Note"], "the batch ran before and wrote them before the key change"


def test_a_new_key_that_is_not_a_lake_column_or_no_key_dead_letters_the_run():
    state = table({"id": INT})
    missing = plan_table(state, [group(0, 10, {"id": INT, "x": INT}, keys=("x",))], None, KEEP, Memory())
    assert "are not columns of the lake table" in missing.of(DeadLetter)[0].reason
    keyless = plan_table(state, [group(0, 10, {"id": INT}, keys=())], None, KEEP, Memory())
    assert keyless.of(DeadLetter)[0].reason == NO_KEY


def test_a_table_created_again_with_another_key_is_replaced_and_late_events_of_the_old_one_ignored():
    state = table({"id": INT, "a": STR})
    statements = TableDDL(drop_seq=15)
    groups = [group(0, 10, {"id": INT, "a": STR}), group(1, 20, {"a": STR, "k": INT}, keys=("k",))]
    plan = plan_table(state, groups, statements, KEEP, Memory())
    assert kinds(plan)[:3] == ["ReplaceOnCreate", "Note", "CreateTable"]
    assert plan.of(CreateTable)[0].replace and plan.of(CreateTable)[0].keys == ("k",)
    assert [g.index for g in plan.of(Write)[0].groups] == [1] and plan.of(Write)[0].truncate == 15
    assert plan.memory == Memory(dropped=15), "a late event older than the drop stays out"
    late = plan_table(plan.state, [group(0, 12, {"id": INT, "a": STR})], None, KEEP, plan.memory)
    assert kinds(late) == ["Note"]


def test_a_table_created_again_with_the_same_key_is_truncated_at_the_drop():
    state = table({"id": INT}, dropped_seq=15)
    plan = plan_table(state, [group(0, 20, {"id": INT})], None, KEEP, Memory())
    assert plan.of(Write)[0].truncate == 15 and plan.of(UnmarkDropped) and plan.truncated
    assert "ReplaceOnCreate" not in kinds(plan) and plan.state.dropped_seq is None


def test_a_drop_table_at_the_source_marks_the_table_or_drops_it():
    state = table({"id": INT})
    statements = TableDDL(drop_seq=15, drop_ts=1.0)
    assert drop_probe(state, statements) == 15
    marked = plan_table(state, [], statements, KEEP, Memory())
    assert marked.steps == [MarkDropped(15, 1.0)] and marked.state.dropped_seq == 15
    dropped = plan_table(state, [], statements, Policies(dropped_table=DropPolicy.DROP), Memory())
    assert dropped.steps == [DropTable(15)] and dropped.state is None and dropped.memory.dropped == 15
    # The new table's events were applied before the statement was read: it was created again.
    recreated = plan_table(state, [], statements, KEEP, Memory(), newer_rows=True)
    assert recreated.steps == [Truncate(15)]
    assert drop_probe(state, TableDDL(drop_seq=15, create_seq=16)) is None, "created again: no need to look"


def test_a_truncate_goes_with_the_write_or_alone_for_a_table_without_changes():
    state = table({"id": INT})
    plan = plan_table(state, [group(0, 20, {"id": INT})], None, KEEP, Memory(), truncate=15)
    assert plan.of(Write)[0].truncate == 15 and plan.truncated and not plan.of(Truncate)
    alone = plan_table(state, [], None, KEEP, Memory(), truncate=15)
    assert alone.steps == [Truncate(15)] and alone.truncated
    assert plan_table(None, [], None, KEEP, Memory(), truncate=15).steps == [], "no lake table: nothing to do"


def test_a_keyless_table_is_matched_by_the_columns_every_event_carries():
    groups = [group(0, 10, {"a": STR, "b": INT}, keys=(), deletes=False, updates=True),
              group(1, 20, {"a": STR, "b": INT, "c": STR}, keys=())]  # fmt: skip
    plan = plan_table(None, groups, None, KEEP, Memory())
    [w] = plan.of(Write)
    assert w.keys == () and w.match == ("a", "b") and w.deletes, "a keyless update removes a copy"
    dead = plan_table(None, groups, None, Policies(keyless_table=KeylessTablePolicy.DEAD_LETTER), Memory())
    assert [s.group for s in dead.of(DeadLetter)] == [0, 1] and not dead.of(Write)


def test_keyless_events_beside_keyed_ones_of_a_new_table_are_broken_unless_a_key_was_added_after():
    groups = [group(0, 10, {"id": INT}, keys=()), group(1, 20, {"id": INT})]
    assert plan_table(None, groups, None, KEEP, Memory()).of(DeadLetter)[0].reason == NO_KEY
    added = plan_table(None, groups, TableDDL(key_seqs=[15]), KEEP, Memory())
    assert not added.of(DeadLetter) and [w.keys for w in added.of(Write)] == [(), ("id",)]


def test_keyless_events_of_a_keyed_table_are_broken_records_also_under_the_keyless_dead_letter_policy():
    # Not "the table has no primary key": it has one (Hudi's only keyless policy is dead_letter).
    dead_letter = Policies(keyless_table=KeylessTablePolicy.DEAD_LETTER)
    new = [group(0, 10, {"id": INT}, keys=()), group(1, 20, {"id": INT})]
    assert [d.reason for d in plan_table(None, new, None, dead_letter, Memory()).of(DeadLetter)] == [NO_KEY]
    stored = plan_table(table({"id": INT}), [group(0, 10, {"id": INT}, keys=())], None, dead_letter, Memory())
    assert [d.reason for d in stored.of(DeadLetter)] == [NO_KEY]


def test_a_group_with_a_schema_error_is_dead_lettered_with_it():
    bad = GroupFacts(index=0, max_seq=10, error="key column(s) ['x'] are not in the row schema")
    plan = plan_table(table({"id": INT}), [bad, group(1, 20, {"id": INT})], None, KEEP, Memory())
    assert plan.of(DeadLetter) == [DeadLetter(0, bad.error)] and [g.index for g in plan.of(Write)[0].groups] == [1]


def test_toast_placeholders_and_deletes_come_from_the_group_aggregate():
    plan = plan_table(table({"id": INT}), [group(0, 10, {"id": INT}, toasted=True, deletes=True)], None, KEEP,
                      Memory())  # fmt: skip
    [w] = plan.of(Write)
    assert w.toasted and w.deletes


def test_planning_changes_neither_its_inputs_nor_needs_a_session():
    state = table({"id": INT, "a": STR})
    statements = TableDDL(changes=[ColumnChange(RENAME, "a", "b", 15)])
    memory = Memory()
    plan_table(state, [group(0, 20, {"id": INT, "b": STR})], statements, KEEP, memory)
    assert state.columns == [("id", INT), ("a", STR)] and state.column_changes == [] and memory == Memory()
    assert plan_table(state, [], None, KEEP, memory).steps == []


def handled_steps(source: str) -> list[str]:
    """The step types `Executor.step`'s `match` has a case for, by name (`case table_plan.X():`)."""
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "step":
            matches = [m for m in ast.walk(node) if isinstance(m, ast.Match)]
            return [
                c.pattern.cls.attr if isinstance(c.pattern.cls, ast.Attribute) else c.pattern.cls.id
                for m in matches
                for c in m.cases
                if isinstance(c.pattern, ast.MatchClass) and c.guard is None
            ]
    return []


def test_the_executor_runs_every_kind_of_step():
    import typing

    from cdclake.lake import executor
    from cdclake.lake.table_plan import Step

    kinds = [k.__name__ for k in typing.get_args(Step)]
    assert len(kinds) >= 20
    handled = handled_steps(Path(executor.__file__).read_text(encoding="utf-8"))
    assert [k for k in kinds if k not in handled] == []


def test_the_dispatch_check_names_a_step_type_without_a_case():
    source = "class E:\n    def step(self, s):\n        match s:\n            case table_plan.Note():\n" \
             "                pass\n            case Write():\n                pass\n            case _:\n" \
             "                raise TypeError\n"  # fmt: skip
    assert handled_steps(source) == ["Note", "Write"]


def test_a_renamed_key_column_is_not_followed_and_its_later_events_are_dead_letters_when_the_format_fixes_the_key():
    # Hudi's record key fields are fixed at the table's creation: the key column keeps its lake name,
    # the rename is noted, and the events under the new name go to the dead letters with the fix.
    state = table({"id": INT, "a": STR})
    hudi = Policies(fixed_key=True)
    statements = TableDDL(changes=[ColumnChange(RENAME, "id", "pk", 15), ColumnChange(RENAME, "a", "b", 16)])
    plan = plan_table(state, [], statements, hudi, Memory())
    assert not plan.of(SetKey) and plan.of(RenameColumn) == [RenameColumn("a", "b", "renamed")]
    assert plan.state.keys == ["id"] and [n for n, _ in plan.state.columns] == ["id", "b"]
    assert [c.new for c in plan.state.column_changes] == ["b"]
    assert len([s for s in plan.steps if type(s).__name__ == "Note" and "'id' renamed" in s.message]) == 1
    after = plan_table(plan.state, [group(0, 20, {"pk": INT, "b": STR}, keys=("pk",))], None, hudi, Memory())
    assert kinds(after) == ["DeadLetter"] and after.state.keys == ["id"]
    assert after.of(DeadLetter)[0].reason.startswith(
        "primary key column renamed at the source ('id' -> 'pk'); the table format fixes a table's key fields"
    )
    # A key changed to another column of the lake is the other case (a key change), named as such.
    other = plan_table(state, [group(0, 20, {"id": INT, "a": STR}, keys=("a",))], None, hudi, Memory())
    assert other.of(DeadLetter)[0].reason.startswith("primary key changed at the source from ['id'] to ['a']")
