"""The planner's re-keying: the runs of one primary key, a key changed at the source (the lake table
takes it, or the events go to the dead letters with why), a table created again with another key
(replaced at its creation), and the groups a key problem rejects."""

from __future__ import annotations

from dataclasses import replace

from ..common.lake_contract import (
    KeylessTablePolicy,
    TableState,
)
from .evolution import Columns
from .plan_draft import (
    Draft,
    LakeGroup,
    has_lake_columns,
    key_text,
    lower_keys,
)
from .plan_steps import (
    NO_KEY,
    GroupFacts,
    Level,
    Note,
    Rekey,
    ReplaceOnCreate,
    newest_drop,
)


def key_epochs(groups: list[LakeGroup]) -> list[list[LakeGroup]]:
    """The groups (oldest schema first) in runs that share one primary key, in source order: a
    key changed at the source splits the table's events into the part before and after it."""
    runs: list[list[LakeGroup]] = []
    for g in groups:
        if runs and lower_keys(runs[-1][-1].lake_keys()) == lower_keys(g.lake_keys()):
            runs[-1].append(g)
        else:
            runs.append([g])
    return runs


def replace_if_recreated(d: Draft, groups: list[GroupFacts]) -> None:
    """The batch has events of the table created again after a DROP TABLE with another primary
    key (or without one, or with one now): the lake table cannot take them, it is replaced."""
    state = d.state
    drop = newest_drop(d.statements, state)
    newer = [g for g in groups if not g.error and drop is not None and g.max_seq > drop]
    if state is None or not newer or drop is None:
        return
    keys = max(newer, key=lambda g: g.max_seq).keys or ()
    if lower_keys(list(keys)) == lower_keys(state.keys):
        return
    d.add(ReplaceOnCreate(drop))
    d.plan.state = None
    d.plan.memory = replace(d.plan.memory, replacing=True, dropped=drop)


def key_problem(d: Draft, g: GroupFacts, groups: list[GroupFacts]) -> str | None:
    """Why the group cannot be applied for its key (None: it can)."""
    if g.keys:
        return None
    # Keyless events beside keyed ones of a table the lake does not have yet: written before an
    # ALTER TABLE that added the key (in this batch), or else broken records; in a keyed lake table,
    # broken records too (key_changed), whatever the keyless policy.
    key_added_later = d.statements is not None and any(s > g.max_seq for s in d.statements.key_seqs)
    keyed = bool(d.state.keys) if d.state is not None else any(x.keys for x in groups) and not key_added_later
    if d.policies.keyless_table == KeylessTablePolicy.DEAD_LETTER:
        return (
            NO_KEY
            if keyed
            else "record has no JSON key: the table has no primary key (--keyless_table_policy dead_letter)"
        )
    return NO_KEY if keyed and d.state is None else None


def key_changed(d: Draft, state: TableState, run: list[LakeGroup]) -> tuple[list[str] | None, str | None]:
    """Schema groups whose primary key is not the lake table's: the key to write them with
    (None: not written) and why they go to the dead letters (None: they do not). Newer than the
    lake's key, they carry a key changed at the source (ALTER TABLE), which the lake table
    takes; older, they were written before the lake table took its key."""
    keys = run[-1].lake_keys()
    if state.key_position is not None and max(g.facts.max_seq for g in run) < state.key_position:
        if state.key_batch and state.key_batch == d.batch:
            # This batch ran before (a restart) and wrote these events before changing the key.
            n = sum(g.facts.events for g in run)
            d.add(Note(Level.INFO, f"table {d.table}: {n} event(s) older than its key change were "
                                      "applied before it"))  # fmt: skip
            return None, None
        if keys and state.keys and all(has_lake_columns(g, state.keys) for g in run):
            return state.keys, None  # found by the lake's key; the position guard decides
        return None, (
            f"written under the primary key {keys or 'none'} before it changed at the source to "
            f"{state.keys or 'none'}, read after the lake table took the new key: apply it by hand"
        )
    if not keys:
        # A record without a key in a keyed table is far likelier broken than a dropped key.
        return None, NO_KEY
    missing = [k for k in keys if k.lower() not in {c.lower() for c, _ in state.columns}]
    renamed = renamed_key(state, run[-1].lake_columns(), keys) if d.policies.fixed_key else []
    if renamed:
        text = ", ".join(f"{old!r} -> {new!r}" for old, new in renamed)
        return None, (
            f"primary key column renamed at the source ({text}); the table format fixes a table's key "
            "fields at its creation (Hudi's record key), so the lake table keeps the old name and cannot "
            "take events under the new one: drop the lake table, take a new Debezium snapshot of the table, "
            "then replay these dead letters"
        )
    if missing:
        return None, (
            f"primary key changed at the source from {state.keys or 'none'} to {keys}, but {missing} are not "
            "columns of the lake table, so it cannot match its rows by them (a key column added by ALTER TABLE "
            "gets its values at the source without change events; or the table was dropped and created again "
            "and the DROP is not read yet): drop the lake table and take a new Debezium snapshot of the table"
        )
    if d.policies.fixed_key:
        return None, (
            f"primary key changed at the source from {state.keys or 'none'} to {keys}; the table format fixes "
            "a table's key at its creation (Hudi's record key): drop the lake table, take a new Debezium "
            "snapshot of the table, then replay these dead letters"
        )
    position = min(g.facts.max_seq for g in run)
    d.add(Rekey(tuple(state.keys), tuple(keys), position, d.batch))
    d.plan.state = replace(state, keys=list(keys), key_position=position, key_batch=d.batch)
    d.report(f"primary key {key_text(state.keys)} -> {key_text(keys)}")
    return keys, None


def renamed_key(state: TableState, columns: Columns, keys: list[str]) -> list[tuple[str, str]]:
    """The key columns an event's schema renamed, as (lake name, new name): the event's key has as
    many columns as the lake's, and each one that differs is a column the lake does not have, in
    place of a key column the event does not carry. Empty when the key changed otherwise."""
    lake = {c.lower() for c, _ in state.columns}
    carried = {c.lower() for c, _ in columns}
    if len(keys) != len(state.keys):
        return []
    pairs = [(old, new) for old, new in zip(state.keys, keys, strict=True) if old.lower() != new.lower()]
    if pairs and all(new.lower() not in lake and old.lower() not in carried for old, new in pairs):
        return pairs
    return []
