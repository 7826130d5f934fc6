"""The planner's drops: a source TRUNCATE, and a DROP TABLE at the source (this batch's, or one the
lake table is marked with) settled once the batch's changes are applied."""

from __future__ import annotations

from dataclasses import replace

from ..common.lake_contract import (
    DropPolicy,
)
from .plan_draft import (
    Draft,
)
from .plan_steps import (
    DropTable,
    MarkDropped,
    Truncate,
    UnmarkDropped,
    newest_drop,
)


def truncate_table(d: Draft, seq: int) -> None:
    d.add(Truncate(seq))
    d.plan.truncated = True


def settle_drop(d: Draft, recreated: bool, newer_rows: bool) -> None:
    """A DROP TABLE at the source (this batch's, or one the lake table is marked with), once the
    batch's changes are applied. `recreated`: the batch wrote events of the table created again
    after the drop (the rows older than the drop are gone already)."""
    state, statements = d.state, d.statements
    drop = newest_drop(statements, state)
    if state is None or drop is None:
        return
    truncated = recreated
    if not recreated and statements is not None and statements.drop_seq is not None:
        recreated = newer_rows  # the new table's events may have been read before the statement
    if not recreated:
        recreated = statements is not None and (statements.create_seq or 0) > drop
    if recreated:
        if not truncated:
            truncate_table(d, drop)  # what remains of the dropped table goes: the new one started empty
        if state.dropped_seq is not None:
            d.add(UnmarkDropped())
            d.plan.state = replace(state, dropped_seq=None)
    elif statements is not None and statements.drop_seq is not None:
        if d.policies.dropped_table == DropPolicy.DROP:
            d.add(DropTable(statements.drop_seq))
            d.plan.state = None
            d.plan.memory = replace(d.plan.memory, dropped=statements.drop_seq)
            d.plan.source_dropped = "dropped"
        else:
            d.add(MarkDropped(statements.drop_seq, statements.drop_ts))
            d.plan.state = replace(state, dropped_seq=statements.drop_seq)
            d.plan.source_dropped = "kept, marked"
