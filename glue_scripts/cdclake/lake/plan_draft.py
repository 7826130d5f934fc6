"""A table's plan being drafted (`Draft`), shared by the planner's parts (plan_columns.py, plan_keys.py,
plan_evolve.py, plan_drops.py), and a schema group in the lake's column names (`LakeGroup`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ..common.lake_contract import (
    DROP,
    KEPT,
    ColumnChange,
    DropPolicy,
    TableState,
    dumps,
    loads,
)
from .evolution import Columns
from .plan_steps import (
    GroupFacts,
    GroupView,
    Memory,
    Policies,
    RecordColumnChanges,
    Step,
    TableDDL,
    TablePlan,
)


@dataclass(frozen=True)
class LakeGroup:
    """A group in the lake's names (after the batch's and the lake's recorded column changes)."""

    facts: GroupFacts
    renamed: Mapping[str, str] = field(default_factory=dict)
    ignored: frozenset[str] = frozenset()

    def lake_columns(self) -> Columns:
        cols = self.facts.columns or ()
        return [(self.renamed.get(n, n), t) for n, t in cols if n not in self.ignored]  # type: ignore[misc]

    def lake_keys(self) -> list[str]:
        return [self.renamed.get(k, k) for k in self.facts.keys or ()]

    def view(self) -> GroupView:
        return GroupView(self.facts.index, self.renamed, self.ignored)


class Draft:
    """One table's plan as it is drafted: the steps so far, the state and memory they leave, and
    what planning reads (the statements, the policies). The plan_*.py parts add steps through it."""

    def __init__(
        self,
        state: TableState | None,
        statements: TableDDL | None,
        policies: Policies,
        memory: Memory,
        table: str = "the table",
        batch: str = "",
    ) -> None:
        self.statements, self.policies, self.table, self.batch = statements, policies, table, batch
        self.plan = TablePlan(state=state, memory=memory)
        self.known_changes: list[ColumnChange] | None = None

    @property
    def state(self) -> TableState | None:
        return self.plan.state

    def add(self, *steps: Step) -> None:
        self.plan.steps.extend(steps)

    def report(self, what: str) -> None:
        if what:
            self.plan.schema.append(what)

    def recorded(self, changes: list[ColumnChange]) -> list[ColumnChange]:
        """The changes the lake records: renames, and drops (as KEPT when the lake keeps the column)."""
        if self.policies.dropped_column == DropPolicy.DROP:
            return list(changes)
        return [replace(c, kind=KEPT) if c.kind == DROP else c for c in changes]

    def known(self) -> list[ColumnChange]:
        """Renames and drops after an event was written, for events read after the statement: the
        table's recorded ones, or for a table not created yet the ones read so far (taken)."""
        if self.known_changes is None:
            if self.state is not None:
                self.known_changes = list(self.state.column_changes)
            else:
                self.known_changes = list(self.plan.memory.early) + self.recorded(
                    self.statements.changes if self.statements else []
                )
                self.plan.memory = replace(self.plan.memory, early=())
        return self.known_changes

    def record(self, changes: list[ColumnChange], keys: list[str] | None = None) -> None:
        """Record the column changes; the state then holds them as the catalog gives them back."""
        self.add(RecordColumnChanges(tuple(changes)))
        assert self.state is not None
        kept = loads(dumps(changes))
        self.plan.state = replace(
            self.state, column_changes=kept, keys=list(keys if keys is not None else self.state.keys)
        )

    def lake(self) -> dict[str, str]:
        assert self.state is not None
        return {n.lower(): n for n, _ in self.state.columns}

    def rename(self, old: str, new: str) -> None:
        assert self.state is not None
        cols = [(new if n == old else n, t) for n, t in self.state.columns]
        self.plan.state = replace(self.state, columns=cols)

    def drop(self, name: str) -> None:
        assert self.state is not None
        self.plan.state = replace(self.state, columns=[(n, t) for n, t in self.state.columns if n != name])


def lower_keys(keys: list[str] | None) -> list[str]:
    return [k.lower() for k in keys or []]


def has_column(g: GroupFacts, name: str) -> bool:
    return name.lower() in {n.lower() for n, _ in g.columns or ()}


def has_lake_columns(g: LakeGroup, names: list[str]) -> bool:
    have = {n.lower() for n, _ in g.lake_columns()}
    return all(n.lower() in have for n in names)


def key_text(keys: list[str]) -> str:
    return "(" + ", ".join(keys) + ")" if keys else "none"
