"""What a batch did, per batch and per table: the job's one log line per batch, and what tests
and the CloudWatch metric filters read."""

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
        return s + f" {self.seconds:.1f}s"


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

    def dead_letter_reasons(self) -> str:
        """Every reason of the batch's dead letters with its count: the batch's own (records that
        reach no table), then each table's, so the log says why without opening the files."""
        parts = [f"{k} ({v})" for k, v in sorted(self.dead_reasons.items())]
        for t in self.tables:
            parts += [f"{t.table.split('.')[-1]}: {k} ({v})" for k, v in sorted(t.dead_reasons.items())]
        return "; ".join(parts)

    def line(self) -> str:
        head = (
            f"batch {self.batch_id}: {self.records} records ({self.changes} changes, {self.tombstones} tombstones, "
            f"{self.schema_events} schema events, {self.dead} dead letters)"
        )
        tables = " | ".join(t.line() for t in self.tables)
        behind = f" | behind source {self.behind_seconds:.1f} s" if self.behind_seconds is not None else ""
        return f"{head}{' | ' + tables if tables else ''}{behind} | {self.seconds:.1f}s"
