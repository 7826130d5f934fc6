"""One table's batch as a plan: an ordered list of typed steps, decided without Spark.

    lake table state + the batch's schema groups (summarized) + its DDL statements + the policies
    + what this process remembers of the table ──plan_table──> TablePlan (steps, the new state)

Every decision of a table's batch is made here, on plain data: which column renames and drops the
source's statements still need, a kept dropped column set aside when the source adds its name
again, a table created again with another key (replaced at its creation), the schema groups
rejected (schema errors, no key, the keyless policy, a lossy type change), the runs of one primary
key and what each does to the lake's key, the schema plan (create, add, widen, rewrite), source
defaults to backfill, the truncate, the write, and a DROP TABLE at the source settled afterwards.
`executor.py` runs the steps against the catalog.

Two facts only Spark can give are computed before planning, each asked for by a pure function
here: `cut_positions` (where schema groups holding events on both sides of a statement must be cut,
decode.cut_at makes the cuts) and `drop_probe` (whether the lake holds rows newer than a DROP
TABLE the batch reads, one query).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ..common.lake_contract import (
    DROP,
    KEPT,
    RENAME,
    ColumnChange,
    DropPolicy,
    KeylessTablePolicy,
    SchemaChangePolicy,
    TableState,
    dumps,
    loads,
)
from ..events import source_ddl
from .evolution import Columns, SchemaPlan, can_widen, exact_change, fits, plan_schema

NO_KEY = "record has no JSON key (does the table have a primary key?)"


@dataclass
class TableDDL:
    """What the batch's schema-change events say about one table."""

    changes: list[ColumnChange] = field(default_factory=list)
    drop_seq: int | None = None
    drop_ts: float | None = None
    create_seq: int | None = None
    key_seqs: list[int] = field(default_factory=list)  # ALTER TABLE statements that set a primary key
    schemas: list[StatementSchema] = field(default_factory=list)  # the table after each ALTER TABLE


@dataclass(frozen=True)
class StatementSchema:
    """The table's columns after an ALTER TABLE statement (MySQL's `tableChanges`), those whose lake
    type and default the statement tells exactly: applied when the statement is read, as the first
    row event after it would (a schema group of no events, `GroupFacts.statement`)."""

    seq: int
    columns: tuple[source_ddl.StatementColumn, ...]
    keys: tuple[str, ...]  # the primary key after it


def newest_drop(statements: TableDDL | None, state: TableState | None) -> int | None:
    """Position of the newest DROP TABLE at the source: this batch's, or one the table is marked with."""
    return max(
        (x for x in (statements.drop_seq if statements else None, state.dropped_seq if state else None) if x),
        default=None,
    )


# ------------------------------------------------------------------ inputs
@dataclass(frozen=True)
class GroupFacts:
    """What the planner needs of one schema group (decode.SchemaGroup, without Spark): `index` is
    its place in the table's list of groups, which the steps name it by."""

    index: int
    max_seq: int
    events: int = 1
    min_seq: int | None = None
    columns: tuple[tuple[str, object], ...] | None = None  # (name, Spark type) as the events carry them
    keys: tuple[str, ...] | None = None  # () for a table without a primary key
    error: str | None = None
    defaults: frozenset[str] = frozenset()  # columns that have a source default
    deletes: bool = False
    updates: bool = False
    toasted: bool = False
    statement: bool = False  # no events: the table's columns after a statement (StatementSchema)
    fills: tuple[tuple[str, str], ...] = ()  # a statement's columns: the SQL literal existing rows get


@dataclass(frozen=True)
class Policies:
    schema_change: SchemaChangePolicy = SchemaChangePolicy.EVOLVE
    dropped_column: DropPolicy = DropPolicy.KEEP
    dropped_table: DropPolicy = DropPolicy.KEEP
    keyless_table: KeylessTablePolicy = KeylessTablePolicy.MULTISET
    fixed_key: bool = False  # the table format cannot change a table's key (formats.Format.fixed_key)


@dataclass(frozen=True)
class Memory:
    """What this process remembers of a table beyond its catalog state (lake_tables.LakeTables)."""

    dropped: int | None = None  # this process dropped it at this position: older events are ignored
    early: tuple[ColumnChange, ...] = ()  # column changes read before the lake table existed
    replacing: bool = False  # created again at the source with another key: its CREATE replaces it


@dataclass(frozen=True)
class GroupView:
    """A schema group in the lake's column names (source_ddl.translation)."""

    index: int
    renamed: Mapping[str, str] = field(default_factory=dict)  # event column -> lake column
    ignored: frozenset[str] = frozenset()  # event columns dropped since


# ------------------------------------------------------------------ steps
class Level(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Note:
    """A decision worth a log line, that changes nothing."""

    level: Level
    message: str


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str
    what: str  # for the log and the report


@dataclass(frozen=True)
class CopyThenDrop:
    """A rename whose new name's column exists already (events of the new name were applied before
    the statement was read): rows written before the rename get the old column's value, then it goes."""

    old: str
    new: str
    seq: int


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class SetKey:
    """The key property after a key column was renamed."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class RecordColumnChanges:
    changes: tuple[ColumnChange, ...]


@dataclass(frozen=True)
class ColumnsChanged:
    """Renames, drops and set-asides done: one log line (and the cached state is read again)."""

    level: Level
    what: str


@dataclass(frozen=True)
class ReplaceOnCreate:
    """Dropped at the source (`drop_seq`) and created again with another key: the table's next
    CREATE replaces it, events of the dropped table read late are ignored."""

    drop_seq: int


@dataclass(frozen=True)
class Rekey:
    old_keys: tuple[str, ...]
    keys: tuple[str, ...]
    position: int
    batch: str


@dataclass(frozen=True)
class ColumnDefaults:
    """Source defaults of columns some groups lack (added at the source meanwhile): column -> (group
    index, the group's column). The executor turns each into a SQL literal (one row through Spark)."""

    candidates: tuple[tuple[str, int, str], ...]
    literals: tuple[tuple[str, str], ...] = ()  # column -> SQL literal, from a statement (StatementSchema)


@dataclass(frozen=True)
class CreateTable:
    columns: Columns
    keys: tuple[str, ...]
    replace: bool = False  # created again with another key: replace it, forget the dropped one
    record: tuple[ColumnChange, ...] = ()  # column changes read before it existed


@dataclass(frozen=True)
class AlterSchema:
    """Add and widen columns (the added ones' source defaults recorded as pending backfills first)."""

    plan: SchemaPlan


@dataclass(frozen=True)
class RewriteType:
    """Type changes Iceberg cannot promote but every value survives: REPLACE TABLE … AS SELECT."""

    plan: SchemaPlan


@dataclass(frozen=True)
class BackfillDefaults:
    """Give existing rows the source defaults: those pending from a crash and those of `added`."""

    pending: Mapping[str, str]
    added: frozenset[str]  # lower-case names of the columns added by the plan


@dataclass(frozen=True)
class Truncate:
    """Delete the rows older than `seq` and remember it (a source TRUNCATE, a table created again)."""

    seq: int


@dataclass(frozen=True)
class DeadLetter:
    """A schema group's events go to the dead letters with the reason (`loud`: one error line for it)."""

    group: int
    reason: str
    loud: bool = True


@dataclass(frozen=True)
class Write:
    """Decode the groups, conform them to `columns` and write them in one commit (merge.py,
    keyless.py); `truncate`: the rows older than it go first, and so do such changes."""

    groups: tuple[GroupView, ...]
    columns: Columns
    keys: tuple[str, ...]
    truncate: int | None
    toasted: bool
    deletes: bool
    match: tuple[str, ...] = ()  # a keyless table: the columns that identify a row image


@dataclass(frozen=True)
class UnmarkDropped:
    pass


@dataclass(frozen=True)
class MarkDropped:
    drop_seq: int
    drop_ts: float | None


@dataclass(frozen=True)
class DropTable:
    drop_seq: int


@dataclass(frozen=True)
class RememberEarly:
    """Column changes of a table the lake does not have yet: applied when it is created."""

    changes: tuple[ColumnChange, ...]


Step = (
    Note | RenameColumn | CopyThenDrop | DropColumn | SetKey | RecordColumnChanges | ColumnsChanged | ReplaceOnCreate
    | Rekey | ColumnDefaults | CreateTable | AlterSchema | RewriteType | BackfillDefaults | Truncate | DeadLetter
    | Write | UnmarkDropped | MarkDropped | DropTable | RememberEarly
)  # fmt: skip


@dataclass
class TablePlan:
    """One table's batch: the steps in order, the state and memory they leave, what to report."""

    steps: list[Step] = field(default_factory=list)
    state: TableState | None = None
    memory: Memory = field(default_factory=Memory)
    schema: list[str] = field(default_factory=list)  # what changed, for the report
    truncated: bool = False
    source_dropped: str = ""
    lossy: list[str] = field(default_factory=list)  # lossy type changes of a table the lake has

    def of(self, kind: type) -> list:
        return [s for s in self.steps if isinstance(s, kind)]


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
    p = _Planner(state, statements, policies, memory)
    p.column_changes()
    p.replace_if_recreated(groups)
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
    p = _Planner(state, statements, policies, memory, table, batch)
    if not groups and statements is not None and state is None:
        p.remember_early()
        return p.plan
    if not groups and truncate is not None:
        if state is not None:
            p.truncate(truncate)
        truncate = None
    p.column_changes()
    p.replace_if_recreated(groups)
    groups = groups + p.statement_groups(len(groups))
    p.set_aside_readded(groups)
    p.set_aside_before_creation(groups)
    good = p.screen(groups)
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
        written = p.apply_run(run, truncate) or written
    p.settle_drop(recreated and written, newer_rows)
    return p.plan


@dataclass(frozen=True)
class _Group:
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


def key_epochs(groups: list[_Group]) -> list[list[_Group]]:
    """The groups (oldest schema first) in runs that share one primary key, in source order: a
    key changed at the source splits the table's events into the part before and after it."""
    runs: list[list[_Group]] = []
    for g in groups:
        if runs and _lower(runs[-1][-1].lake_keys()) == _lower(g.lake_keys()):
            runs[-1].append(g)
        else:
            runs.append([g])
    return runs


class _Planner:
    """Plans one table's batch step by step, keeping the state and memory the steps leave."""

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
        self._known: list[ColumnChange] | None = None

    @property
    def state(self) -> TableState | None:
        return self.plan.state

    def add(self, *steps: Step) -> None:
        self.plan.steps.extend(steps)

    def report(self, what: str) -> None:
        if what:
            self.plan.schema.append(what)

    # -------------------------------------------------------------- column renames and drops
    def recorded(self, changes: list[ColumnChange]) -> list[ColumnChange]:
        """The changes the lake records: renames, and drops (as KEPT when the lake keeps the column)."""
        if self.policies.dropped_column == DropPolicy.DROP:
            return list(changes)
        return [replace(c, kind=KEPT) if c.kind == DROP else c for c in changes]

    def remember_early(self) -> None:
        changes = tuple(self.recorded(self.statements.changes if self.statements else []))
        self.add(RememberEarly(changes))
        self.plan.memory = replace(self.plan.memory, early=self.plan.memory.early + changes)

    def column_changes(self) -> None:
        """The batch's column renames and drops of a table the lake has, in source order, each
        against the table as the ones before it left it; those recorded already are done."""
        state = self.state
        if self.statements is None or not self.statements.changes or state is None:
            return
        todo = [
            c
            for c in sorted(self.recorded(self.statements.changes), key=lambda c: c.seq)
            if c not in state.column_changes
        ]
        if not todo:
            return
        done: list[str] = []
        keys = list(state.keys)
        recorded = list(state.column_changes)
        if self.policies.fixed_key:
            todo = self._unfollowed_key_renames(todo, keys)
            if not todo:
                return
        for ch in todo:
            # A column renamed onto the name of a dropped column the lake kept: the kept one moves aside.
            kept = (
                source_ddl.kept_drop(recorded + todo, ch.new, before=ch.seq) if ch.kind == RENAME and ch.new else None
            )
            if kept is not None:
                recorded.append(self._set_aside(kept, done))
            done += self._column_change(ch, keys)
            if ch.kind == RENAME and ch.new:
                keys = [ch.new if k.lower() == ch.old.lower() else k for k in keys]
        if keys != state.keys:
            self.add(SetKey(tuple(keys)))
        self._record(recorded + todo, keys=keys)
        if done:
            self.add(ColumnsChanged(Level.INFO, f"source DDL applied: {', '.join(done)}"))
        self.report(", ".join(done))

    def _unfollowed_key_renames(self, todo: list[ColumnChange], keys: list[str]) -> list[ColumnChange]:
        """A format that fixes a table's key (Hudi's record key fields) cannot rename a key column: the
        rename is not applied (the table's events under the new name go to the dead letters,
        `renamed_key`); the other changes are."""
        key_lower = {k.lower() for k in keys}
        skipped = [c for c in todo if c.kind == RENAME and c.new and c.old.lower() in key_lower]
        for c in skipped:
            self.add(Note(Level.ERROR, f"table {self.table}: primary key column {c.old!r} renamed at the source to "
                                       f"{c.new!r} is not followed (the table format fixes a table's key fields); "
                                       "the table's events under the new name go to the dead letters"))  # fmt: skip
        return [c for c in todo if c not in skipped]

    def _record(self, changes: list[ColumnChange], keys: list[str] | None = None) -> None:
        """Record the column changes; the state then holds them as the catalog gives them back."""
        self.add(RecordColumnChanges(tuple(changes)))
        assert self.state is not None
        kept = loads(dumps(changes))
        self.plan.state = replace(
            self.state, column_changes=kept, keys=list(keys if keys is not None else self.state.keys)
        )

    def _lake(self) -> dict[str, str]:
        assert self.state is not None
        return {n.lower(): n for n, _ in self.state.columns}

    def _rename(self, old: str, new: str) -> None:
        assert self.state is not None
        cols = [(new if n == old else n, t) for n, t in self.state.columns]
        self.plan.state = replace(self.state, columns=cols)

    def _drop(self, name: str) -> None:
        assert self.state is not None
        self.plan.state = replace(self.state, columns=[(n, t) for n, t in self.state.columns if n != name])

    def _set_aside(self, kept: ColumnChange, done: list[str]) -> ColumnChange:
        """Rename the lake column of a kept dropped column out of the way (metadata only)."""
        lake = self._lake()
        name = lake.get(kept.old.lower())
        if name is None:
            # Renamed by a run that crashed before recording it: the newest aside name is the one.
            taken = {n for n in lake if n.startswith(kept.old.lower() + source_ddl.SET_ASIDE_SUFFIX)}
            if not taken:
                return ColumnChange(RENAME, kept.old, kept.old, kept.seq)  # no lake column: nothing to set aside
            name, aside = kept.old, lake[max(taken, key=lambda n: (len(n), n))]
        else:
            aside = source_ddl.set_aside_name(name, set(lake))
            self.add(RenameColumn(name, aside, "set aside"))
            self._rename(name, aside)
        done.append(f"{name}->{aside} (dropped at the source and added again: the old values set aside)")
        return ColumnChange(RENAME, name, aside, kept.seq)

    def _column_change(self, ch: ColumnChange, keys: list[str]) -> list[str]:
        """One rename or drop, against the table as it is now; what was done, for the log."""
        lake = self._lake()
        old = lake.get(ch.old.lower())
        if ch.kind == RENAME and ch.new:
            new = lake.get(ch.new.lower())
            if old and not new:
                # Metadata only: Iceberg columns have ids, the data files follow.
                self.add(RenameColumn(old, ch.new, "renamed"))
                self._rename(old, ch.new)
                return [f"{old}->{ch.new} (renamed)"]
            if old and new:
                self.add(CopyThenDrop(old, new, ch.seq))
                self._drop(old)
                return [f"{old}->{new} (renamed after its new name had arrived)"]
        elif ch.kind == DROP and old and old.lower() not in {k.lower() for k in keys}:
            self.add(DropColumn(old))
            self._drop(old)
            return [f"-{old} (dropped)"]
        return []

    def known(self) -> list[ColumnChange]:
        """Renames and drops after an event was written, for events read after the statement: the
        table's recorded ones, or for a table not created yet the ones read so far (taken)."""
        if self._known is None:
            if self.state is not None:
                self._known = list(self.state.column_changes)
            else:
                self._known = list(self.plan.memory.early) + self.recorded(
                    self.statements.changes if self.statements else []
                )
                self.plan.memory = replace(self.plan.memory, early=())
        return self._known

    # -------------------------------------------------------------- a table created again with another key
    def replace_if_recreated(self, groups: list[GroupFacts]) -> None:
        """The batch has events of the table created again after a DROP TABLE with another primary
        key (or without one, or with one now): the lake table cannot take them, it is replaced."""
        state = self.state
        drop = newest_drop(self.statements, state)
        newer = [g for g in groups if not g.error and drop is not None and g.max_seq > drop]
        if state is None or not newer or drop is None:
            return
        keys = max(newer, key=lambda g: g.max_seq).keys or ()
        if _lower(list(keys)) == _lower(state.keys):
            return
        self.add(ReplaceOnCreate(drop))
        self.plan.state = None
        self.plan.memory = replace(self.plan.memory, replacing=True, dropped=drop)

    # -------------------------------------------------------------- a dropped column added again
    def set_aside_readded(self, groups: list[GroupFacts]) -> None:
        """Columns dropped at the source and kept in the lake that the source has added again under
        the same name (a group of events after the drop carries the name): each kept column moves
        aside to `<name>__dropped` with its values, recorded as a rename at the drop's position (so
        events written before the drop still fill it), and the name is free for the new column."""
        state = self.state
        known = self.known()
        if state is None or not any(c.kind == KEPT for c in known):
            return
        recorded, done = list(state.column_changes), []
        for k in [c for c in state.column_changes if c.kind == KEPT]:
            carried = [g for g in groups if not g.error and (g.min_seq or g.max_seq) > k.seq]
            if source_ddl.kept_drop(recorded, k.old) == k and any(_has_column(g, k.old) for g in carried):
                recorded.append(self._set_aside(k, done))
        if len(recorded) == len(state.column_changes):
            return
        # Recorded also when the lake had no such column (the name's new column is added in this
        # batch): a later batch must not take that new column for the kept one.
        self._record(recorded)
        if done:
            self.add(ColumnsChanged(Level.WARNING, "; ".join(done)))
            self.report(", ".join(done))
        assert self.state is not None
        self._known = list(self.state.column_changes)

    def set_aside_before_creation(self, groups: list[GroupFacts]) -> None:
        """The same for a table the lake does not have yet: a column dropped (kept) and named again
        within the changes read before its creation (added again, or another column renamed onto
        it). Each generation's events fill its own `<name>__dropped[N]` column of the new table."""
        if self.state is not None:
            return
        known = self.known()
        taken = {n.lower() for g in groups for n, _ in g.columns or ()}
        asides = []
        for k in sorted((c for c in known if c.kind == KEPT), key=lambda c: c.seq):
            renamed_onto = any(
                c.kind == RENAME and (c.new or "").lower() == k.old.lower() and c.seq >= k.seq for c in known
            )
            added_again = any(
                not g.error and (g.min_seq or g.max_seq) > k.seq and _has_column(g, k.old) for g in groups
            )
            if renamed_onto or added_again:
                aside = source_ddl.set_aside_name(k.old, taken)
                taken.add(aside.lower())
                asides.append(ColumnChange(RENAME, k.old, aside, k.seq))
        if asides:
            # Before the statement's other changes: `DROP COLUMN v, RENAME COLUMN w TO v` is one position.
            self._known = sorted(known + asides, key=lambda c: (c.seq, c not in asides))
            done = [f"{c.old}->{c.new} (dropped at the source and named again in changes read before the lake had this table: the "
                    "old values set aside)" for c in asides]  # fmt: skip
            self.add(Note(Level.WARNING, f"table {self.table}: {'; '.join(done)}"))
            self.report(", ".join(done))

    # -------------------------------------------------------------- which groups the table takes
    def screen(self, groups: list[GroupFacts]) -> list[_Group]:
        """The groups the table can take, in the lake's column names; the others are dead-lettered
        (or ignored: events older than the table's drop by this process)."""
        known = self.known()
        good: list[_Group] = []
        for f in groups:
            g = _Group(f)
            if not f.error:
                renamed, ignored = source_ddl.translation(known, [n for n, _ in f.columns or ()], f.max_seq)
                g = _Group(f, renamed, frozenset(ignored))
                dropped = self.plan.memory.dropped
                if dropped is not None and f.max_seq <= dropped:
                    # --dropped_table_policy drop: events of the table older than its DROP, read late.
                    msg = f"table {self.table}: {f.events} event(s) older than the table's drop at the source ignored"
                    self.add(Note(Level.WARNING, msg))
                    continue
            if f.statement:
                g = self._statement_view(g)
                if g is not None:
                    good.append(g)
                continue
            reason = f.error or self._key_problem(f, groups)
            if reason:
                self.add(DeadLetter(f.index, reason))
            else:
                good.append(g)
        return _in_source_order(good)

    # -------------------------------------------------------------- columns a statement defines
    def statement_groups(self, first: int) -> list[GroupFacts]:
        """The batch's ALTER TABLE statements of a table the lake has, each as a schema group of no
        events (numbered from `first`): the columns they add or retype reach the lake in this batch,
        also when no row event of the table follows. Not around a DROP TABLE (the row events decide)."""
        st, state = self.statements, self.state
        if st is None or state is None or st.drop_seq or st.create_seq or state.dropped_seq:
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

    def _statement_view(self, g: _Group) -> _Group | None:
        """What a statement's group may change: the lake's key must be its key (a key change is left
        to the row events), and a column the lake has only to a type its events would widen or
        rewrite it to (any other is left to the events, which dead-letter a lossy change)."""
        state = self.state
        assert state is not None
        if _lower(g.lake_keys()) != _lower(state.keys):
            return None
        lake = {n.lower(): t for n, t in state.columns}
        evolve = self.policies.schema_change != SchemaChangePolicy.DEAD_LETTER
        # A column the source dropped after the statement is not added (also when the lake keeps drops);
        # one it dropped and added again in the statement itself is left to the row events.
        gone = {c.old.lower() for c in self.known() if c.kind in (DROP, KEPT) and c.seq >= g.facts.max_seq}
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
        return _Group(facts, g.renamed, g.ignored)

    def _key_problem(self, g: GroupFacts, groups: list[GroupFacts]) -> str | None:
        """Why the group cannot be applied for its key (None: it can)."""
        if self.policies.keyless_table == KeylessTablePolicy.DEAD_LETTER and not g.keys:
            return "record has no JSON key: the table has no primary key (--keyless_table_policy dead_letter)"
        # Keyless events beside keyed ones of a table the lake does not have yet: written before an
        # ALTER TABLE that added the key (in this batch), or else broken records.
        key_added_later = self.statements is not None and any(s > g.max_seq for s in self.statements.key_seqs)
        if self.state is None and not g.keys and any(x.keys for x in groups) and not key_added_later:
            return NO_KEY
        return None

    # -------------------------------------------------------------- one run of groups with one key
    def apply_run(self, run: list[_Group], truncate: int | None) -> bool:
        """Plan, evolve and write schema groups that share one primary key; whether anything is written."""
        state = self.state
        keys: list[str] | None = run[-1].lake_keys()
        if state is not None and state.columns and _lower(keys) != _lower(state.keys):
            keys, reason = self._key_changed(state, run)
            if reason is not None:
                self.add(*[DeadLetter(g.facts.index, reason) for g in run])
            if keys is None:
                return False
        assert keys is not None
        plan, good = self._schema(run)
        if not good:
            return False
        defaults = self._defaults(plan, good)
        self._evolve(plan, keys, defaults)
        good = [g for g in good if not g.facts.statement]
        if not good:
            return False
        self.add(_write(good, plan.final, keys, truncate))
        if truncate is not None:
            self.plan.truncated = True
        return True

    def _key_changed(self, state: TableState, run: list[_Group]) -> tuple[list[str] | None, str | None]:
        """Schema groups whose primary key is not the lake table's: the key to write them with
        (None: not written) and why they go to the dead letters (None: they do not). Newer than the
        lake's key, they carry a key changed at the source (ALTER TABLE), which the lake table
        takes; older, they were written before the lake table took its key."""
        keys = run[-1].lake_keys()
        if state.key_position is not None and max(g.facts.max_seq for g in run) < state.key_position:
            if state.key_batch and state.key_batch == self.batch:
                # This batch ran before (a restart) and wrote these events before changing the key.
                n = sum(g.facts.events for g in run)
                self.add(Note(Level.INFO, f"table {self.table}: {n} event(s) older than its key change were "
                                          "applied before it"))  # fmt: skip
                return None, None
            if keys and state.keys and all(_has_lake_columns(g, state.keys) for g in run):
                return state.keys, None  # found by the lake's key; the position guard decides
            return None, (
                f"written under the primary key {keys or 'none'} before it changed at the source to "
                f"{state.keys or 'none'}, read after the lake table took the new key: apply it by hand"
            )
        if not keys:
            # A record without a key in a keyed table is far likelier broken than a dropped key.
            return None, NO_KEY
        missing = [k for k in keys if k.lower() not in {c.lower() for c, _ in state.columns}]
        renamed = renamed_key(state, run[-1].lake_columns(), keys) if self.policies.fixed_key else []
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
        if self.policies.fixed_key:
            return None, (
                f"primary key changed at the source from {state.keys or 'none'} to {keys}; the table format fixes "
                "a table's key at its creation (Hudi's record key): drop the lake table, take a new Debezium "
                "snapshot of the table, then replay these dead letters"
            )
        position = min(g.facts.max_seq for g in run)
        self.add(Rekey(tuple(state.keys), tuple(keys), position, self.batch))
        self.plan.state = replace(state, keys=list(keys), key_position=position, key_batch=self.batch)
        self.report(f"primary key {_key_text(state.keys)} -> {_key_text(keys)}")
        return keys, None

    def _schema(self, run: list[_Group]) -> tuple[SchemaPlan, list[_Group]]:
        """The lake schema for the run; the groups it takes (a lossy change dead-letters the others)."""
        state = self.state
        policy = self.policies.schema_change
        plan = plan_schema(state.columns if state else None, [g.lake_columns() for g in run], policy, self.table)
        if plan.lossy:
            # One loud line per table, however many schema versions carried the change.
            n = sum(run[i].facts.events for i in plan.lossy)
            reasons = "; ".join(sorted(set(plan.lossy.values())))
            self.add(Note(Level.ERROR, f"table {self.table}: {n} event(s) rejected to dead letters, the table stops "
                                       f"following: {reasons}"))  # fmt: skip
            if state is not None:
                self.plan.lossy += sorted(set(plan.lossy.values()))
        self.add(*[DeadLetter(run[i].facts.index, r, loud=i not in plan.lossy) for i, r in plan.rejected.items()
                   if not run[i].facts.statement])  # fmt: skip
        return plan, [g for i, g in enumerate(run) if i not in plan.rejected]

    def _defaults(self, plan: SchemaPlan, good: list[_Group]) -> set[str]:
        """Source defaults of columns that some of the groups lack because they were added at the
        source meanwhile: the newest group that has the column knows its current default."""
        if plan.create:
            names = {n.lower() for n, _ in plan.final}
            new = {n for n in names if any(n not in {c.lower() for c, _ in g.lake_columns()} for g in good)}
        else:
            new = {n.lower() for n, _ in plan.add}
        out: dict[str, tuple[str, int, str]] = {}
        literals: dict[str, str] = {}
        for g in reversed(good):
            fills = dict(g.facts.fills)
            for spec, _ in g.facts.columns or ():
                name = g.renamed.get(spec, spec)
                if name.lower() in new and name not in out and spec not in g.ignored and spec in g.facts.defaults:
                    out[name] = (name, g.facts.index, spec)
                    if g.facts.statement:
                        literals[name] = fills[spec]
            new -= {n.lower() for n, _ in g.lake_columns()}
        if out:
            candidates = tuple(c for n, c in out.items() if n not in literals)
            self.add(ColumnDefaults(candidates, tuple(literals.items())))
        return {n.lower() for n in out}

    def _evolve(self, plan: SchemaPlan, keys: list[str], defaults: set[str]) -> None:
        """Bring the table to `plan` (CREATE, or ALTER and rewrite) and give existing rows the
        source defaults of added columns (`defaults`: the columns that may have one) and of a
        backfill a crash left pending."""
        state = self.state
        pending = dict(state.pending_backfill) if state is not None else {}
        added = frozenset(n.lower() for n, _ in plan.add) & defaults
        if plan.create:
            known = tuple(self.known())
            self.add(CreateTable(plan.final, tuple(keys), self.plan.memory.replacing, known))
            self.plan.memory = replace(self.plan.memory, replacing=False)
        elif plan.changed:
            self.add(AlterSchema(plan))
            if plan.rewrite:
                self.add(RewriteType(plan))
        if pending or added:
            self.add(BackfillDefaults(pending, added))
        if not (plan.changed or pending or added):
            return
        self.plan.state = TableState(
            plan.final,
            list(keys),
            column_changes=self.known(),
            dropped_seq=state.dropped_seq if state else None,
            key_position=state.key_position if state else None,
            key_batch=state.key_batch if state else None,
        )
        if plan.changed:
            self.report(plan.describe())

    # -------------------------------------------------------------- a DROP TABLE at the source
    def truncate(self, seq: int) -> None:
        self.add(Truncate(seq))
        self.plan.truncated = True

    def settle_drop(self, recreated: bool, newer_rows: bool) -> None:
        """A DROP TABLE at the source (this batch's, or one the lake table is marked with), once the
        batch's changes are applied. `recreated`: the batch wrote events of the table created again
        after the drop (the rows older than the drop are gone already)."""
        state, statements = self.state, self.statements
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
                self.truncate(drop)  # what remains of the dropped table goes: the new one started empty
            if state.dropped_seq is not None:
                self.add(UnmarkDropped())
                self.plan.state = replace(state, dropped_seq=None)
        elif statements is not None and statements.drop_seq is not None:
            if self.policies.dropped_table == DropPolicy.DROP:
                self.add(DropTable(statements.drop_seq))
                self.plan.state = None
                self.plan.memory = replace(self.plan.memory, dropped=statements.drop_seq)
                self.plan.source_dropped = "dropped"
            else:
                self.add(MarkDropped(statements.drop_seq, statements.drop_ts))
                self.plan.state = replace(state, dropped_seq=statements.drop_seq)
                self.plan.source_dropped = "kept, marked"


def _in_source_order(good: list[_Group]) -> list[_Group]:
    """The groups of events in their order, each statement's group before the first of them newer."""
    out = [g for g in good if not g.facts.statement]
    for st in sorted((g for g in good if g.facts.statement), key=lambda g: g.facts.max_seq):
        newer = (i for i, g in enumerate(out) if not g.facts.statement and g.facts.max_seq > st.facts.max_seq)
        out.insert(next(newer, len(out)), st)
    return out


def _write(good: list[_Group], columns: Columns, keys: list[str], truncate: int | None) -> Write:
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


def _lower(keys: list[str] | None) -> list[str]:
    return [k.lower() for k in keys or []]


def _has_column(g: GroupFacts, name: str) -> bool:
    return name.lower() in {n.lower() for n, _ in g.columns or ()}


def _has_lake_columns(g: _Group, names: list[str]) -> bool:
    have = {n.lower() for n, _ in g.lake_columns()}
    return all(n.lower() in have for n in names)


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


def _key_text(keys: list[str]) -> str:
    return "(" + ", ".join(keys) + ")" if keys else "none"
