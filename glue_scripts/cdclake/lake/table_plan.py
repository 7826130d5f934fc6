"""One table's batch as a plan: an ordered list of typed steps, decided without Spark.

    lake table state + the batch's schema groups (summarized) + its DDL statements + the policies
    + what this process remembers of the table ──plan_table──> TablePlan (steps, the new state)

Every decision of a table's batch is made here, on plain data: which column renames and drops the
source's statements still need, a kept dropped column set aside when the source adds its name
again, a table created again with another key (replaced at its creation), the schema groups
rejected (schema errors, no key, the keyless policy, a lossy type change), the runs of one primary
key and what each does to the lake's key, the schema plan (create, add, widen, rewrite), source
defaults to backfill, the truncate, the write, and a DROP TABLE at the source settled afterwards.
`plan_table` walks those decisions in order; each concern is a module of pure functions adding steps
to a `Draft` (plan_draft.py): column changes (plan_columns.py), re-keying (plan_keys.py), schema and
defaults (plan_evolve.py), drops (plan_drops.py); the inputs and step types are plan_steps.py.
`executor.py` runs the steps against the catalog.

Two facts only Spark can give are computed before planning, each asked for by a pure function
here: `cut_positions` (where schema groups holding events on both sides of a statement must be cut,
decode.cut_at makes the cuts) and `drop_probe` (whether the lake holds rows newer than a DROP
TABLE the batch reads, one query).
"""

from __future__ import annotations

from ..common.lake_contract import (
    TableState,
)
from .plan_columns import column_changes, remember_early, set_aside_before_creation, set_aside_readded
from .plan_draft import (
    Draft,
)
from .plan_drops import settle_drop, truncate_table
from .plan_evolve import apply_run, screen, statement_groups
from .plan_keys import key_epochs, renamed_key, replace_if_recreated
from .plan_partitions import follow_partitions, reorder_sets
from .plan_steps import (
    NO_KEY,
    AlterSchema,
    BackfillDefaults,
    ColumnDefaults,
    ColumnsChanged,
    CopyThenDrop,
    CreateTable,
    DeadLetter,
    DeletePartitionRows,
    DropColumn,
    DropTable,
    GroupFacts,
    GroupView,
    Level,
    MarkDiverged,
    MarkDropped,
    Memory,
    Note,
    Policies,
    RecordColumnChanges,
    RecordPartitioning,
    Rekey,
    RememberEarly,
    RenameColumn,
    ReorderSet,
    ReplaceOnCreate,
    RewriteType,
    SetKey,
    StatementSchema,
    Step,
    TableDDL,
    TablePlan,
    Truncate,
    UnmarkDropped,
    Write,
    newest_drop,
)

# The plan's inputs and steps (plan_steps.py) are named from here too: the executor and the tests
# read `table_plan.Write`.
__all__ = [
    "NO_KEY",
    "AlterSchema",
    "BackfillDefaults",
    "ColumnDefaults",
    "ColumnsChanged",
    "CopyThenDrop",
    "CreateTable",
    "DeadLetter",
    "DeletePartitionRows",
    "DropColumn",
    "DropTable",
    "GroupFacts",
    "GroupView",
    "Level",
    "MarkDiverged",
    "MarkDropped",
    "Memory",
    "Note",
    "Policies",
    "RecordColumnChanges",
    "RecordPartitioning",
    "Rekey",
    "RememberEarly",
    "RenameColumn",
    "ReorderSet",
    "ReplaceOnCreate",
    "RewriteType",
    "SetKey",
    "StatementSchema",
    "Step",
    "TableDDL",
    "TablePlan",
    "Truncate",
    "UnmarkDropped",
    "Write",
    "cut_positions",
    "drop_probe",
    "key_epochs",
    "newest_drop",
    "plan_table",
    "renamed_key",
]


# ------------------------------------------------------------------ phase one: what Spark must find out
def cut_positions(
    state: TableState | None,
    groups: list[GroupFacts],
    statements: TableDDL | None,
    policies: Policies,
    memory: Memory,
) -> list[int]:
    """Positions of the column renames and drops the table's events are translated by: a schema
    group with events on both sides of one is cut there (decode.cut_at) before `plan_table`."""
    p = Draft(state, statements, policies, memory)
    column_changes(p)
    replace_if_recreated(p, groups)
    return [c.seq for c in p.known()]


def drop_probe(state: TableState | None, statements: TableDDL | None) -> int | None:
    """The position of a DROP TABLE the batch reads, when whether the lake table holds rows newer
    than it (the new table's events read before the statement) decides what the drop does."""
    if state is None or statements is None or statements.drop_seq is None:
        return None
    drop = newest_drop(statements, state)
    return None if drop is None or (statements.create_seq or 0) > drop else drop


# ------------------------------------------------------------------ phase two: the plan
def plan_table(
    state: TableState | None,
    groups: list[GroupFacts],
    statements: TableDDL | None,
    policies: Policies,
    memory: Memory,
    *,
    table: str = "the table",
    batch: str = "",
    truncate: int | None = None,
    newer_rows: bool = False,
) -> TablePlan:
    """The steps that apply one table's batch. `groups`: its schema groups, oldest first, cut at
    `cut_positions`; `batch`: the batch's fingerprint; `truncate`: the position of the newest source
    TRUNCATE; `newer_rows`: the lake table holds rows newer than `drop_probe`'s position."""
    p = Draft(state, statements, policies, memory, table, batch)
    if not groups and statements is not None and state is None:
        remember_early(p)
        follow_partitions(p, [])
        return p.plan
    if not groups and truncate is not None:
        if state is not None:
            truncate_table(p, truncate)
        truncate = None
    column_changes(p)
    replace_if_recreated(p, groups)
    groups = groups + statement_groups(p, len(groups))
    set_aside_readded(p, groups)
    set_aside_before_creation(p, groups)
    good = screen(p, groups)
    drop_seq = newest_drop(statements, p.state)
    recreated = drop_seq is not None and (
        any(g.facts.max_seq > drop_seq for g in good)
        or (statements is not None and (statements.create_seq or 0) > drop_seq)
    )
    if recreated and drop_seq is not None:
        truncate = max(truncate or 0, drop_seq)
    written = False
    # Almost always one run: more only when the source's primary key changed in the batch.
    for run in key_epochs(good):
        written = apply_run(p, run, truncate) or written
    follow_partitions(p, groups)
    reorder_sets(p, groups)
    settle_drop(p, recreated and written, newer_rows)
    return p.plan
