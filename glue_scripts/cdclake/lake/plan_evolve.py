"""The planner's schema and defaults: which groups the table takes (in the lake's names), the columns
an ALTER TABLE statement defines, the schema plan (create, add, widen, rewrite), the source
defaults to backfill, and the write step."""

from __future__ import annotations

from dataclasses import replace

from ..common.lake_contract import (
    DROP,
    KEPT,
    SchemaChangePolicy,
    TableState,
)
from ..events import source_ddl
from .evolution import Columns, SchemaPlan, can_widen, exact_change, fits, plan_schema
from .plan_draft import (
    Draft,
    LakeGroup,
    lower_keys,
)
from .plan_keys import key_changed, key_problem
from .plan_steps import (
    AlterSchema,
    BackfillDefaults,
    ColumnDefaults,
    CreateTable,
    DeadLetter,
    GroupFacts,
    Level,
    Note,
    RewriteType,
    Write,
)


def screen(d: Draft, groups: list[GroupFacts]) -> list[LakeGroup]:
    """The groups the table can take, in the lake's column names; the others are dead-lettered
    (or ignored: events older than the table's drop by this process)."""
    known = d.known()
    good: list[LakeGroup] = []
    for f in groups:
        g = LakeGroup(f)
        if not f.error:
            renamed, ignored = source_ddl.translation(known, [n for n, _ in f.columns or ()], f.max_seq)
            g = LakeGroup(f, renamed, frozenset(ignored))
            dropped = d.plan.memory.dropped
            if dropped is not None and f.max_seq <= dropped:
                # --dropped_table_policy drop: events of the table older than its DROP, read late.
                msg = f"table {d.table}: {f.events} event(s) older than the table's drop at the source ignored"
                d.add(Note(Level.WARNING, msg))
                continue
        if f.statement:
            g = _statement_view(d, g, good)
            if g is not None:
                good.append(g)
            continue
        reason = f.error or key_problem(d, f, groups)
        if reason:
            d.add(DeadLetter(f.index, reason))
        else:
            good.append(g)
    return in_source_order(good)


def statement_groups(d: Draft, first: int) -> list[GroupFacts]:
    """The batch's ALTER TABLE statements of a table, each as a schema group of no events (numbered
    from `first`): the columns they add or retype reach the lake in this batch, also when no row
    event of the table follows. A table the lake does not have yet takes them only beside its row
    events (created in this batch: the events' columns make it). Not around a DROP TABLE, nor a
    CREATE of a table the lake has (the row events decide)."""
    st, state = d.statements, d.state
    if st is None or st.drop_seq:
        return []
    if (state is None and first == 0) or (state is not None and (st.create_seq or state.dropped_seq)):
        return []
    return [
        GroupFacts(
            index=first + i,
            max_seq=x.seq,
            events=0,
            min_seq=x.seq,
            columns=tuple((c.name, c.spark_type) for c in x.columns),
            keys=x.keys,
            defaults=frozenset(c.name for c in x.columns if c.default_sql is not None),
            statement=True,
            fills=tuple((c.name, c.default_sql) for c in x.columns if c.default_sql is not None),
        )
        for i, x in enumerate(sorted(st.schemas, key=lambda x: x.seq))
    ]


def _statement_view(d: Draft, g: LakeGroup, events: list[LakeGroup]) -> LakeGroup | None:
    """What a statement's group may change: the lake's key must be its key (a key change is left
    to the row events), and a column the lake has only to a type its events would widen or
    rewrite it to (any other is left to the events, which dead-letter a lossy change). A table the
    lake does not have yet: the batch's groups of events before it (or its first) stand for the lake."""
    if d.state is not None:
        keys, lake = d.state.keys, {n.lower(): t for n, t in d.state.columns}
    else:
        older = [e for e in events if not e.facts.statement and e.facts.max_seq < g.facts.max_seq]
        near = older[-1:] or [e for e in events if not e.facts.statement][:1]
        if not near:
            return None
        keys = near[0].lake_keys()
        lake = {n.lower(): t for e in older or near for n, t in e.lake_columns()}
    if lower_keys(g.lake_keys()) != lower_keys(keys):
        return None
    evolve = d.policies.schema_change != SchemaChangePolicy.DEAD_LETTER
    # A column the source dropped after the statement is not added (also when the lake keeps drops);
    # one it dropped and added again in the statement itself is left to the row events.
    gone = {c.old.lower() for c in d.known() if c.kind in (DROP, KEPT) and c.seq >= g.facts.max_seq}
    keep = {
        n
        for n, t in g.facts.columns or ()
        if n not in g.ignored
        and (n.lower() not in gone or n in g.renamed)
        and (
            (old := lake.get(g.renamed.get(n, n).lower())) is None
            or fits(t, old)  # type: ignore[arg-type]
            or can_widen(old, t)  # type: ignore[arg-type]
            or (evolve and exact_change(old, t))  # type: ignore[arg-type]
        )
    }
    facts = replace(g.facts, columns=tuple((n, t) for n, t in g.facts.columns or () if n in keep))
    return LakeGroup(facts, g.renamed, g.ignored)


def _schema(d: Draft, run: list[LakeGroup]) -> tuple[SchemaPlan, list[LakeGroup]]:
    """The lake schema for the run; the groups it takes (a lossy change dead-letters the others)."""
    state = d.state
    policy = d.policies.schema_change
    plan = plan_schema(state.columns if state else None, [g.lake_columns() for g in run], policy, d.table)
    if plan.lossy:
        # One loud line per table, however many schema versions carried the change.
        n = sum(run[i].facts.events for i in plan.lossy)
        reasons = "; ".join(sorted(set(plan.lossy.values())))
        d.add(Note(Level.ERROR, f"table {d.table}: {n} event(s) rejected to dead letters, the table stops "
                                   f"following: {reasons}"))  # fmt: skip
        if state is not None:
            d.plan.lossy += sorted(set(plan.lossy.values()))
    d.add(*[DeadLetter(run[i].facts.index, r, loud=i not in plan.lossy) for i, r in plan.rejected.items()
               if not run[i].facts.statement])  # fmt: skip
    return plan, [g for i, g in enumerate(run) if i not in plan.rejected]


def _defaults(d: Draft, plan: SchemaPlan, good: list[LakeGroup]) -> set[str]:
    """Source defaults of columns that some of the groups lack because they were added at the
    source meanwhile: the existing rows got the default of the ADD COLUMN, which the oldest group
    of the newest stretch that has the column knows (a later SET/DROP DEFAULT or MODIFY changed
    no stored row)."""
    if plan.create:
        names = {n.lower() for n, _ in plan.final}
        new = {n for n in names if any(n not in {c.lower() for c, _ in g.lake_columns()} for g in good)}
    else:
        new = {n.lower() for n, _ in plan.add}
    out: dict[str, tuple[str, int, str]] = {}
    literals: dict[str, str] = {}
    for g, spec in _as_added(good, new):
        name = g.renamed.get(spec, spec)
        if spec in g.facts.defaults:
            out[name] = (name, g.facts.index, spec)
            if g.facts.statement:
                literals[name] = dict(g.facts.fills)[spec]
    if out:
        candidates = tuple(c for n, c in out.items() if n not in literals)
        d.add(ColumnDefaults(candidates, tuple(literals.items())))
    return {n.lower() for n in out}


def _as_added(good: list[LakeGroup], new: set[str]) -> list[tuple[LakeGroup, str]]:
    """Per column of `new` (lower-case lake names): the group, and its name there, that added it
    last (the oldest of the groups since the newest one without it)."""
    found: dict[str, tuple[LakeGroup, str]] = {}
    closed: set[str] = set()
    for g in reversed(good):
        has = {g.renamed.get(n, n).lower(): n for n, _ in g.facts.columns or () if n not in g.ignored}
        for n in new - closed:
            if n in has:
                found[n] = (g, has[n])
            elif n in found:
                closed.add(n)
    return list(found.values())


def _evolve(d: Draft, plan: SchemaPlan, keys: list[str], defaults: set[str]) -> None:
    """Bring the table to `plan` (CREATE, or ALTER and rewrite) and give existing rows the
    source defaults of added columns (`defaults`: the columns that may have one) and of a
    backfill a crash left pending."""
    state = d.state
    pending = dict(state.pending_backfill) if state is not None else {}
    added = frozenset(n.lower() for n, _ in plan.add) & defaults
    if plan.create:
        known = tuple(d.known())
        d.add(CreateTable(plan.final, tuple(keys), d.plan.memory.replacing, known))
        d.plan.memory = replace(d.plan.memory, replacing=False)
    elif plan.changed:
        d.add(AlterSchema(plan))
        if plan.rewrite:
            d.add(RewriteType(plan))
    if pending or added:
        d.add(BackfillDefaults(pending, added))
    if not (plan.changed or pending or added):
        return
    if state is None:
        d.plan.state = TableState(plan.final, list(keys), column_changes=d.known())
    else:
        # What else the table records (its drop mark, key position, partitioning) stays.
        d.plan.state = replace(state, columns=plan.final, keys=list(keys), pending_backfill={},
                               column_changes=d.known(), set_aside=None)  # fmt: skip
    if plan.changed:
        d.report(plan.describe())


def in_source_order(good: list[LakeGroup]) -> list[LakeGroup]:
    """The groups of events in their order, each statement's group before the first of them newer."""
    out = [g for g in good if not g.facts.statement]
    for st in sorted((g for g in good if g.facts.statement), key=lambda g: g.facts.max_seq):
        newer = (i for i, g in enumerate(out) if not g.facts.statement and g.facts.max_seq > st.facts.max_seq)
        out.insert(next(newer, len(out)), st)
    return out


def write_step(good: list[LakeGroup], columns: Columns, keys: list[str], truncate: int | None) -> Write:
    """The write of the groups; from the group aggregate, whether it has deletes (or, without a
    key, updates: an update removes a copy of its `before` image) and TOAST placeholders."""
    match: tuple[str, ...] = ()
    if not keys:
        # A row is identified by the columns every event of the batch carries (a column dropped at
        # the source and kept in the lake is not compared).
        shared = set.intersection(*[{n.lower() for n, _ in g.lake_columns()} for g in good])
        match = tuple(n for n, _ in columns if n.lower() in shared)
    return Write(
        tuple(g.view() for g in good),
        columns,
        tuple(keys),
        truncate,
        toasted=any(g.facts.toasted for g in good),
        deletes=any(g.facts.deletes or (not keys and g.facts.updates) for g in good),
        match=match,
    )


def apply_run(d: Draft, run: list[LakeGroup], truncate: int | None) -> bool:
    """Plan, evolve and write schema groups that share one primary key; whether anything is written."""
    state = d.state
    keys: list[str] | None = run[-1].lake_keys()
    if state is not None and state.columns and lower_keys(keys) != lower_keys(state.keys):
        keys, reason = key_changed(d, state, run)
        if reason is not None:
            d.add(*[DeadLetter(g.facts.index, reason) for g in run])
        if keys is None:
            return False
    assert keys is not None
    plan, good = _schema(d, run)
    if not good:
        return False
    defaults = _defaults(d, plan, good)
    _evolve(d, plan, keys, defaults)
    good = [g for g in good if not g.facts.statement]
    if not good:
        return False
    d.add(write_step(good, plan.final, keys, truncate))
    if truncate is not None:
        d.plan.truncated = True
    return True
