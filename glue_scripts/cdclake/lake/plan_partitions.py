"""The planner's partition maintenance at the source (events/partition_ddl.py): a DROP or TRUNCATE
PARTITION of a RANGE/LIST partitioned table deletes the partition's rows in the lake (again when
changes older than it are read later); one the job cannot follow marks the table as no longer
equal to the source, with an error that names the fix."""

from __future__ import annotations

from dataclasses import replace

from ..common.sqltext import quote
from ..events.partition_ddl import (
    Partitioning,
    PartitionStep,
    dump_state,
    follow,
    load_state,
    pg_key_columns,
    pg_partition_rows,
)
from .plan_draft import Draft
from .plan_steps import DeletePartitionRows, GroupFacts, Level, MarkDiverged, Note, RecordPartitioning, ReorderSet

FIX = (
    "rebuild it from a new snapshot: drop the lake table, then take a new Debezium snapshot of the source table "
    '(docs/SCHEMA_CHANGES.md, "Partition maintenance at the source")'
)


def follow_partitions(d: Draft, groups: list[GroupFacts]) -> None:
    """The batch's partition statements of the table, after its writes, in source order."""
    state, memory = d.state, d.plan.memory
    # A table created in this batch takes what was read before it existed.
    text = (state.partitioning if state is not None else None) or memory.partitioning
    current, position = load_state(text)
    deletes = list(state.partition_deletes if state is not None else []) + list(memory.partition_deletes)
    steps = sorted((x for x in (d.statements.partitions if d.statements else []) if x[0] > position),
                   key=lambda x: x[0])  # fmt: skip
    new: list[DeletePartitionRows] = []
    unfollowed: list[str] = []
    for seq, step in steps:
        current, condition, why = _step(d, current, step)
        position = seq
        if why:
            unfollowed.append(f"{why} (source position {seq})")
        elif condition:
            new.append(DeletePartitionRows(seq, condition, step.what()))
    deletes += [(x.seq, x.condition) for x in new]
    # Changes older than a partition delete read after it (another topic read ahead): their rows go again.
    oldest = min((g.min_seq or g.max_seq for g in groups if g.events and not g.error), default=None)
    late = [DeletePartitionRows(seq, c, "changes read after it") for seq, c in deletes[: len(deletes) - len(new)]
            if oldest is not None and oldest < seq]  # fmt: skip
    _settle(d, dump_state(current, position) if steps else text, tuple(deletes), unfollowed, new + late)


def _step(d: Draft, current: Partitioning | None, step: PartitionStep) -> tuple[Partitioning | None, str, str]:
    """The partitioning after `step`, the condition of the rows it took out ('' for none), and why it
    cannot be followed ('' when it can)."""
    if step.pg is not None:  # PostgreSQL: the DDL log says the partition's bound
        got = pg_partition_rows(step, _columns(d, pg_key_columns(step.pg.key)[1]))
        return current, got if isinstance(got, str) else "", got[0] if isinstance(got, tuple) and got else ""
    after, rows = follow(current, step)
    if isinstance(rows, str):
        return after, "", rows
    if not rows:
        return after, "", ""
    condition = current.rows_of(rows, _columns(d, current.columns)) if current is not None else None
    if condition is None:
        return after, "", f"{step.what()}: a partitioning column is not in the lake table"
    return after, condition, ""


def _columns(d: Draft, names: tuple[str, ...]) -> dict[str, str]:
    """The partitioning columns' lake columns (by name: a table not in the lake yet takes the source's)."""
    if d.state is None:
        return {c.lower(): quote(c) for c in names}
    return {n.lower(): quote(n) for n, _ in d.state.columns}


def _settle(d: Draft, text: str | None, deletes: tuple[tuple[int, str], ...], unfollowed: list[str],
            steps: list[DeletePartitionRows]) -> None:  # fmt: skip
    state, memory = d.state, d.plan.memory
    what = "; ".join(unfollowed)
    if what:
        # The phrase the alarm <stack>-table-not-equal-to-source counts in the job's log.
        d.add(Note(Level.ERROR, f"source table of {d.table} no longer equals the lake: the source changed its rows "
                                f"without change events ({what}); {FIX}"))  # fmt: skip
    if state is None:
        diverged = "; ".join(x for x in (memory.diverged, what) if x) or None
        d.plan.memory = replace(memory, partitioning=text, partition_deletes=deletes, diverged=diverged)
        d.plan.diverged = diverged or ""
        return
    diverged = "; ".join(x for x in (memory.diverged, what) if x)
    d.add(*steps)
    if text != state.partitioning or deletes != tuple(state.partition_deletes):
        d.add(RecordPartitioning(text, deletes))
    if diverged:
        d.add(MarkDiverged(diverged if not state.diverged else f"{state.diverged}; {diverged}"))
    d.plan.diverged = "; ".join(x for x in (state.diverged, diverged) if x)
    if memory.partitioning or memory.partition_deletes or memory.diverged:
        d.plan.memory = replace(memory, partitioning=None, partition_deletes=(), diverged=None)
    if (text, list(deletes), d.plan.diverged or None) != (state.partitioning, state.partition_deletes, state.diverged):
        d.plan.state = replace(state, partitioning=text, partition_deletes=list(deletes),
                               diverged=d.plan.diverged or None)  # fmt: skip


def reorder_sets(d: Draft, groups: list[GroupFacts]) -> None:
    """SET and ENUM columns redefined by the batch's statements: the lake's values written before
    each read as under its members (again after a batch of changes older than it, read late)."""
    state = d.state
    if state is None:
        return
    lake = {n.lower(): n for n, _ in state.columns}
    orders = dict(state.set_orders)
    for seq, column, members, kind in sorted(d.statements.set_orders if d.statements else []):
        if column.lower() in lake and seq > orders.get(lake[column.lower()], (0, (), ""))[0]:
            orders[lake[column.lower()]] = (seq, members, kind)
    oldest = min((g.min_seq or g.max_seq for g in groups if g.events and not g.error), default=None)
    redo = [c for c, (seq, _, _) in orders.items() if c in lake.values() and (
        orders[c] != state.set_orders.get(c) or (oldest is not None and oldest < seq))]  # fmt: skip
    record = tuple((c, seq, m, k) for c, (seq, m, k) in sorted(orders.items()))
    d.add(*[ReorderSet(c, orders[c][1], orders[c][0], record, orders[c][2]) for c in sorted(redo)])
    if orders != state.set_orders:
        d.plan.state = replace(state, set_orders=orders)
