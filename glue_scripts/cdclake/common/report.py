"""What a batch did, per batch and per table: the job's one log line per batch, what tests read,
and what metrics.py turns into the CloudWatch metrics the stack's alarms and dashboard watch."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TableReport:
    table: str
    events: int = 0
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    keys: int = 0
    dead: int = 0
    dead_reasons: dict[str, int] = field(default_factory=dict)
    schema: str = ""
    truncated: bool = False
    source_dropped: str = ""  # what a DROP TABLE at the source did: "kept, marked" or "dropped"
    stopped_batches: int = 0  # batches in a row whose every change of the table was dead-lettered
    diverged: str = ""  # why the table no longer equals the source (a statement the job cannot follow)
    # Set aside (jobs/batch.py): why, since which batch, and the folder its changes went to.
    set_aside: str = ""
    set_aside_since: int | None = None
    set_aside_folder: str = ""
    seconds: float = 0.0

    def line(self) -> str:
        s = f"{self.table.split('.')[-1]}: {self.events} ev -> c/r {self.inserts} u {self.updates} d {self.deletes}"
        if self.schema:
            s += f" schema[{self.schema}]"
        if self.truncated:
            s += " TRUNCATED"
        if self.source_dropped:
            s += f" SOURCE-DROPPED[{self.source_dropped}]"
        if self.dead:
            s += f" dead {self.dead}"
        if self.diverged:
            s += f" NOT-EQUAL-TO-SOURCE[{self.diverged[:120]}]"
        if self.stopped_batches:
            s += f" STOPPED-FOLLOWING[every change dead-lettered in {self.stopped_batches} batches in a row]"
        if self.set_aside:
            s += f" STOPPED-FOLLOWING[set aside since batch {self.set_aside_since}: {self.set_aside[:120]}]"
        return s + f" {self.seconds:.1f}s"

    def set_aside_line(self, batch_id: int) -> str:
        """The ERROR line of a table set aside (`STOPPED_PHRASE`), in every batch it stays so."""
        name = self.table.split(".")[-1]
        now = "set aside" if self.set_aside_since == batch_id else f"set aside since batch {self.set_aside_since}"
        return (
            f"table {self.table} {STOPPED_PHRASE}: {now}; running its batch again would fail again: "
            f"{self.set_aside}. Its {self.dead} change(s) of batch {batch_id} went to the dead letters at "
            f"{self.set_aside_folder}, and so will its later ones, while every other table goes on. Fix the cause, "
            f"then resume it: replay --resume {name} (locally: local-job resume {name}; docs/OPERATIONS.md, "
            '"A table set aside")'
        )

    def stopped_line(self) -> str:
        """The ERROR line of a table that stopped following the source (`STOPPED_PHRASE`)."""
        reasons = "; ".join(f"{k} ({v})" for k, v in sorted(self.dead_reasons.items()))
        return (
            f"table {self.table} {STOPPED_PHRASE}: every change of it in the last {self.stopped_batches} batches "
            f"went to the dead letters, so the lake table no longer changes. Reason: {reasons}. Fix that cause "
            '(docs/SCHEMA_CHANGES.md, "DDL at the source"), then replay those batches\' dead-letter folders (docs/OPERATIONS.md, '
            '"Replaying dead letters")'
        )


# Phrases of the job's lines that the alarms' descriptions and the README tell operators to look for.
DEAD_LETTERS_PHRASE = "written to dead letters"
STOPPED_PHRASE = "stopped following the source"
# A table whose every change is dead-lettered this many batches in a row has stopped following the
# source: one batch may hold only a few stray records, a run of them is a table the lake lost.
STOPPED_AFTER_BATCHES = 3


class FollowWatch:
    """Counts, per table, the batches in a row in which every change of the table went to the dead
    letters (in memory: a restarted job counts again from zero)."""

    def __init__(self, after: int = STOPPED_AFTER_BATCHES) -> None:
        self.after = after
        self._streak: dict[str, int] = {}

    def note(self, tr: TableReport) -> bool:
        """Record the table's batch; True (and `tr.stopped_batches` set) when it has stopped following."""
        if not tr.events:
            return False  # no change of the table in the batch: nothing learnt
        if tr.dead < tr.events:
            self._streak.pop(tr.table, None)
            return False
        n = self._streak[tr.table] = self._streak.get(tr.table, 0) + 1
        if n < self.after:
            return False
        tr.stopped_batches = n
        return True


@dataclass
class BatchReport:
    batch_id: int
    records: int = 0
    changes: int = 0
    tombstones: int = 0
    schema_events: int = 0
    truncates: int = 0
    dead: int = 0
    dead_reasons: dict[str, int] = field(default_factory=dict)
    dead_letter_folder: str | None = None
    tables: list[TableReport] = field(default_factory=list)
    behind_seconds: float | None = None
    seconds: float = 0.0
    set_aside: int = 0  # of `dead`: changes of tables set aside (their own folders, not the batch's)
    # --transactions keep (jobs/transaction_gate.py): records held for the rest of their source
    # transaction, the transactions held because not all of them is read, and those applied open
    # after --transaction_hold_seconds. None: transactions ignored.
    held_records: int | None = None
    held_open: int = 0
    released_open: int = 0

    def dead_letter_reasons(self) -> str:
        """Every reason of the batch's dead letters with its count: the batch's own (records that
        reach no table), then each table's, so the log says why without opening the files."""
        parts = [f"{k} ({v})" for k, v in sorted(self.dead_reasons.items())]
        for t in self.tables:
            if not t.set_aside:
                parts += [f"{t.table.split('.')[-1]}: {k} ({v})" for k, v in sorted(t.dead_reasons.items())]
        return "; ".join(parts)

    def dead_letter_line(self) -> str:
        """The WARNING line of a batch that wrote dead letters (`DEAD_LETTERS_PHRASE`)."""
        return (
            f"batch {self.batch_id}: {self.dead - self.set_aside} record(s) {DEAD_LETTERS_PHRASE} at "
            f"{self.dead_letter_folder}: "
            f"{self.dead_letter_reasons()}"
        )

    def line(self) -> str:
        head = (
            f"batch {self.batch_id}: {self.records} records ({self.changes} changes, {self.tombstones} tombstones, "
            f"{self.schema_events} schema events, {self.dead} dead letters)"
        )
        tables = " | ".join(t.line() for t in self.tables)
        behind = f" | behind source {self.behind_seconds:.1f} s" if self.behind_seconds is not None else ""
        return f"{head}{' | ' + tables if tables else ''}{behind}{self.held_part()} | {self.seconds:.1f}s"

    def held_part(self) -> str:
        if not self.held_records and not self.released_open:
            return ""
        s = f" | held {self.held_records} records ({self.held_open} open transactions)"
        return s + (f" | {self.released_open} transactions applied open" if self.released_open else "")
