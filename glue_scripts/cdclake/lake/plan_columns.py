"""The planner's column changes: the batch's column renames and drops (source DDL) of a table the lake
has, and a dropped column the lake kept set aside when the source names it again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..common.lake_contract import (
    DROP,
    KEPT,
    RENAME,
    ColumnChange,
)
from ..events import source_ddl
from .plan_draft import (
    Draft,
    has_column,
)
from .plan_steps import (
    ColumnsChanged,
    CopyThenDrop,
    DropColumn,
    GroupFacts,
    Level,
    Note,
    RememberEarly,
    RenameColumn,
    SetKey,
)


def remember_early(d: Draft) -> None:
    changes = tuple(d.recorded(d.statements.changes if d.statements else []))
    d.add(RememberEarly(changes))
    d.plan.memory = replace(d.plan.memory, early=d.plan.memory.early + changes)


def column_changes(d: Draft) -> None:
    """The batch's column renames and drops of a table the lake has, in source order, each
    against the table as the ones before it left it; those recorded already are done."""
    state = d.state
    if d.statements is None or not d.statements.changes or state is None:
        return
    todo = [c for c in sorted(d.recorded(d.statements.changes), key=lambda c: c.seq) if c not in state.column_changes]
    if not todo:
        return
    done: list[str] = []
    keys = list(state.keys)
    recorded = list(state.column_changes)
    if d.policies.fixed_key:
        todo = _unfollowed_key_renames(d, todo, keys)
        if not todo:
            return
    for ch in todo:
        # A column renamed onto the name of a dropped column the lake kept: the kept one moves aside.
        kept = source_ddl.kept_drop(recorded + todo, ch.new, before=ch.seq) if ch.kind == RENAME and ch.new else None
        if kept is not None:
            recorded.append(set_aside(d, kept, done))
        done += _column_change(d, ch, keys)
        if ch.kind == RENAME and ch.new:
            keys = [ch.new if k.lower() == ch.old.lower() else k for k in keys]
    if keys != state.keys:
        d.add(SetKey(tuple(keys)))
    d.record(recorded + todo, keys=keys)
    if done:
        d.add(ColumnsChanged(Level.INFO, f"source DDL applied: {', '.join(done)}"))
    d.report(", ".join(done))


def _unfollowed_key_renames(d: Draft, todo: list[ColumnChange], keys: list[str]) -> list[ColumnChange]:
    """A format that fixes a table's key (Hudi's record key fields) cannot rename a key column: the
    rename is not applied (the table's events under the new name go to the dead letters,
    `renamed_key`); the other changes are."""
    key_lower = {k.lower() for k in keys}
    skipped = [c for c in todo if c.kind == RENAME and c.new and c.old.lower() in key_lower]
    for c in skipped:
        d.add(Note(Level.ERROR, f"table {d.table}: primary key column {c.old!r} renamed at the source to "
                                   f"{c.new!r} is not followed (the table format fixes a table's key fields); "
                                   "the table's events under the new name go to the dead letters"))  # fmt: skip
    return [c for c in todo if c not in skipped]


def set_aside(d: Draft, kept: ColumnChange, done: list[str], groups: Sequence[GroupFacts] = ()) -> ColumnChange:
    """Rename the lake column of a kept dropped column out of the way (metadata only). A column the
    lake does not have yet, added and dropped within the batch (`groups` before the drop carry it),
    gets its aside name at once: those events fill it, the name stays free for the new column. Row
    events only: a statement's group (no events) leaves no values to set aside."""
    lake = d.lake()
    name = lake.get(kept.old.lower())
    if name is None:
        first = any(
            not g.error and not g.statement and g.max_seq < kept.seq and has_column(g, kept.old) for g in groups
        )
        # Renamed by a run that crashed before recording it: the newest aside name is the one.
        taken = {n for n in lake if n.startswith(kept.old.lower() + source_ddl.SET_ASIDE_SUFFIX)}
        if first and not taken:
            aside = source_ddl.set_aside_name(
                kept.old, set(lake) | {n.lower() for g in groups for n, _ in g.columns or ()}
            )
            done.append(
                f"{kept.old}->{aside} (added, dropped at the source and added again: the first one's values set aside)"
            )
            return ColumnChange(RENAME, kept.old, aside, kept.seq)
        if not taken:
            return ColumnChange(RENAME, kept.old, kept.old, kept.seq)  # no lake column: nothing to set aside
        name, aside = kept.old, lake[max(taken, key=lambda n: (len(n), n))]
    else:
        aside = source_ddl.set_aside_name(name, set(lake))
        d.add(RenameColumn(name, aside, "set aside"))
        d.rename(name, aside)
    done.append(f"{name}->{aside} (dropped at the source and added again: the old values set aside)")
    return ColumnChange(RENAME, name, aside, kept.seq)


def _column_change(d: Draft, ch: ColumnChange, keys: list[str]) -> list[str]:
    """One rename or drop, against the table as it is now; what was done, for the log."""
    lake = d.lake()
    old = lake.get(ch.old.lower())
    if ch.kind == RENAME and ch.new:
        new = lake.get(ch.new.lower())
        if old and not new:
            # Metadata only: Iceberg columns have ids, the data files follow.
            d.add(RenameColumn(old, ch.new, "renamed"))
            d.rename(old, ch.new)
            return [f"{old}->{ch.new} (renamed)"]
        if old and new:
            d.add(CopyThenDrop(old, new, ch.seq))
            d.drop(old)
            return [f"{old}->{new} (renamed after its new name had arrived)"]
    elif ch.kind == DROP and old and old.lower() not in {k.lower() for k in keys}:
        d.add(DropColumn(old))
        d.drop(old)
        return [f"-{old} (dropped)"]
    return []


def set_aside_readded(d: Draft, groups: list[GroupFacts]) -> None:
    """Columns dropped at the source and kept in the lake that the source has added again under
    the same name (a group of events after the drop carries the name): each kept column moves
    aside to `<name>__dropped` with its values, recorded as a rename at the drop's position (so
    events written before the drop still fill it), and the name is free for the new column."""
    state = d.state
    known = d.known()
    if state is None or not any(c.kind == KEPT for c in known):
        return
    recorded, done = list(state.column_changes), []
    for k in [c for c in state.column_changes if c.kind == KEPT]:
        carried = [g for g in groups if not g.error and (g.min_seq or g.max_seq) > k.seq]
        if source_ddl.kept_drop(recorded, k.old) == k and any(has_column(g, k.old) for g in carried):
            recorded.append(set_aside(d, k, done, groups))
    if len(recorded) == len(state.column_changes):
        return
    # Recorded also when the lake had no such column (the name's new column is added in this
    # batch): a later batch must not take that new column for the kept one.
    d.record(recorded)
    if done:
        d.add(ColumnsChanged(Level.WARNING, "; ".join(done)))
        d.report(", ".join(done))
    assert d.state is not None
    d.known_changes = list(d.state.column_changes)


def set_aside_before_creation(d: Draft, groups: list[GroupFacts]) -> None:
    """The same for a table the lake does not have yet: a column dropped (kept) and named again
    within the changes read before its creation (added again, or another column renamed onto
    it). Each generation's events fill its own `<name>__dropped[N]` column of the new table."""
    if d.state is not None:
        return
    known = d.known()
    taken = {n.lower() for g in groups for n, _ in g.columns or ()}
    asides = []
    for k in sorted((c for c in known if c.kind == KEPT), key=lambda c: c.seq):
        renamed_onto = any(
            c.kind == RENAME and (c.new or "").lower() == k.old.lower() and c.seq >= k.seq for c in known
        )
        added_again = any(not g.error and (g.min_seq or g.max_seq) > k.seq and has_column(g, k.old) for g in groups)
        if renamed_onto or added_again:
            aside = source_ddl.set_aside_name(k.old, taken)
            taken.add(aside.lower())
            asides.append(ColumnChange(RENAME, k.old, aside, k.seq))
    if asides:
        # Before the statement's other changes: `DROP COLUMN v, RENAME COLUMN w TO v` is one position.
        d.known_changes = sorted(known + asides, key=lambda c: (c.seq, c not in asides))
        done = [f"{c.old}->{c.new} (dropped at the source and named again in changes read before the lake had this table: the "
                "old values set aside)" for c in asides]  # fmt: skip
        d.add(Note(Level.WARNING, f"table {d.table}: {'; '.join(done)}"))
        d.report(", ".join(done))
