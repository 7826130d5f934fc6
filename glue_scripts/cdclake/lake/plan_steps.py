"""What the planner (table_plan.py) reads and writes: its inputs (a table's DDL statements, its schema
groups as facts, the policies, what the process remembers) and the steps of a `TablePlan`, one type
each, which the executor (executor.py) dispatches on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ..common.lake_contract import (
    ColumnChange,
    DropPolicy,
    KeylessTablePolicy,
    SchemaChangePolicy,
    TableState,
)
from ..events import partition_ddl, source_ddl
from .evolution import Columns, SchemaPlan

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
    # PostgreSQL's ALTER TYPE ... RENAME VALUE, per column of the enum, with its position.
    relabels: list[tuple[int, source_ddl.Relabel]] = field(default_factory=list)
    # What CREATE/ALTER TABLE statements do to its partitioning and rows (position, step)
    partitions: list[tuple[int, partition_ddl.PartitionStep]] = field(default_factory=list)
    # SET/ENUM columns redefined: (position, column, members, "SET" | "ENUM")
    set_orders: list[tuple[int, str, tuple[str, ...], str]] = field(default_factory=list)


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
    # Partitioning read before the lake table existed (Partitioning.to_json, "" none), its partition
    # deletes and what made it unequal: recorded when it is created.
    partitioning: str | None = None
    partition_deletes: tuple[tuple[int, str], ...] = ()
    diverged: str | None = None


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
class DeletePartitionRows:
    """A source DROP/TRUNCATE PARTITION at `seq`: the lake rows the partition held (`condition`, on
    the lake's columns) written from changes older than it go, in one commit."""

    seq: int
    condition: str
    what: str


@dataclass(frozen=True)
class RecordPartitioning:
    """The table's source partitioning and partition deletes, as table properties."""

    partitioning: str | None
    deletes: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class ReorderSet:
    """A SET or ENUM column (`kind`) redefined at `seq`: its stored values written before then read
    as the source reads them under the new members (a SET's in their order), the definitions
    recorded (`record`)."""

    column: str
    members: tuple[str, ...]
    seq: int
    record: tuple[tuple[str, int, tuple[str, ...], str], ...] = ()
    kind: str = "SET"


@dataclass(frozen=True)
class MarkDiverged:
    """The source changed rows without change events in a way the job cannot follow: marked and
    named in an error with the fix."""

    what: str


@dataclass(frozen=True)
class RememberEarly:
    """Column changes of a table the lake does not have yet: applied when it is created."""

    changes: tuple[ColumnChange, ...]


Step = (
    Note | RenameColumn | CopyThenDrop | DropColumn | SetKey | RecordColumnChanges | ColumnsChanged | ReplaceOnCreate
    | Rekey | ColumnDefaults | CreateTable | AlterSchema | RewriteType | BackfillDefaults | Truncate | DeadLetter
    | Write | UnmarkDropped | MarkDropped | DropTable | RememberEarly | DeletePartitionRows | RecordPartitioning
    | MarkDiverged | ReorderSet
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
    diverged: str = ""  # why the table no longer equals the source (MarkDiverged, or its mark)

    def of(self, kind: type) -> list:
        return [s for s in self.steps if isinstance(s, kind)]
