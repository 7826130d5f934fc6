"""Which records of a batch wait for the rest of their source transaction (--transactions keep).

With the connector's `provide.transaction.metadata`, every change carries its transaction's id and
the transaction topic holds a BEGIN and an END record per transaction; the END counts the
transaction's changes per table (data collection). A transaction is complete when its END is read
and every table's changes read (this batch and those held before) match the END's counts.

Both MySQL's binlog and PostgreSQL's pgoutput emit a transaction whole, at its commit, so every
Kafka partition holds transactions in commit order, and so does the transaction topic (one
partition): the offset of a transaction's first record there is its commit rank. The first
transaction that is not complete is the cut: it and every transaction after it in commit rank are
held, and in every partition everything from the first offset of a held transaction on. One
offset per partition: per-key order is kept (a key lives in one partition), a transaction is never
split (its records in a partition follow the first held one there), and the filter is one
comparison per partition. Schema-change events (MySQL's DDL, no transaction) at or after the
first held change's position are held too.

Nothing is held while no BEGIN or END was read (metadata off, or the transaction topic not read:
holding would wait for ever); a BEGIN is enough, so a transaction longer than a batch is held from
its first batch on. A transaction open longer than the hold bound is applied as read, named in a
WARNING, and remembered so that its late END holds nothing. An END read without its BEGIN or any
of its changes (this batch or held) is one the connector sent again after a failure (its
transaction was applied with its first END: a held transaction's BEGIN is held with it): it holds
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Partition = tuple[str, int]  # (topic, partition)
# How many released transactions are remembered (their END may still come); older ones are forgotten.
REMEMBER_RELEASED = 1000


@dataclass(frozen=True)
class Part:
    """A row of the batch's transaction aggregate: one transaction's records in one partition, of one
    table (`collection`, `<db or schema>.<table>`), or of the transaction topic (`collection` None);
    or one schema-change event outside any transaction (`txid` None)."""

    txid: str | None
    collection: str | None
    topic: str
    partition: int
    events: int
    min_offset: int
    min_seq: int | None = None
    ended: bool = False  # the transaction's END is among these records
    end_counts: tuple[tuple[str, int], ...] = ()  # the END's changes per collection
    begun: bool = False  # the transaction's BEGIN is among these records


@dataclass(frozen=True)
class HoldState:
    """What the next batch needs beyond the held records: when each open transaction was first held
    (epoch seconds), and the transactions released open (their END may still come)."""

    since: Mapping[str, float] = field(default_factory=dict)
    released: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    starts: dict[Partition, int]  # per partition, the first offset held; empty: nothing is held
    state: HoldState
    open: tuple[str, ...] = ()  # transactions held because they are not complete
    released: tuple[str, ...] = ()  # transactions applied open in this batch (the hold bound)
    held: tuple[str, ...] = ()  # every transaction held (open or after the cut)


@dataclass
class _Txn:
    rank: int | None = None  # offset of its first record on the transaction topic
    ended: bool = False
    begun: bool = False
    expected: dict[str, int] = field(default_factory=dict)
    counted: dict[str, int] = field(default_factory=dict)
    min_seq: int | None = None

    def complete(self) -> bool:
        counted = {c: n for c, n in self.counted.items() if n}
        return self.ended and counted == {c: n for c, n in self.expected.items() if n}

    def resent(self) -> bool:
        """Only its END was read: sent again by the connector, its transaction applied before."""
        return self.ended and not self.begun and not any(self.counted.values())


def _transactions(parts: Iterable[Part]) -> dict[str, _Txn]:
    out: dict[str, _Txn] = {}
    for p in parts:
        if p.txid is None:
            continue
        t = out.setdefault(p.txid, _Txn())
        if p.collection is None:
            t.rank = p.min_offset if t.rank is None else min(t.rank, p.min_offset)
            t.begun = t.begun or p.begun
            if p.ended:
                t.ended, t.expected = True, dict(p.end_counts)
        else:
            t.counted[p.collection] = t.counted.get(p.collection, 0) + p.events
            if p.min_seq is not None:
                t.min_seq = p.min_seq if t.min_seq is None else min(t.min_seq, p.min_seq)
    return out


def decide(parts: list[Part], before: HoldState, now: float, hold_seconds: float, gating: bool) -> Decision:
    """What the batch holds. `before`: the state the previous batch left; `gating`: records were held
    before (so an END was read once: their transactions must not be applied half)."""
    txns = _transactions(parts)
    late = set(before.released)
    if not (gating or any(t.ended or t.begun for t in txns.values())):
        return Decision({}, HoldState(released=before.released))
    open_ = sorted(x for x, t in txns.items() if not (t.complete() or t.resent()) and x not in late)
    since = {x: before.since.get(x, now) for x in open_}
    released = tuple(x for x in open_ if now - since[x] > hold_seconds)
    # Remembered until their END is read (then nothing of them can come any more).
    waiting = [x for x in before.released if not (x in txns and txns[x].ended)]
    remembered = (*waiting, *released)[-REMEMBER_RELEASED:]
    still = [x for x in open_ if x not in released]
    if not still:
        return Decision({}, HoldState(released=remembered), released=released)
    cut = min(_rank(txns[x]) for x in still)
    held = {x for x, t in txns.items() if x in still or (_rank(t) >= cut and x not in late)}
    starts = _starts(parts, held, txns)
    state = HoldState({x: since[x] for x in open_ if x in held}, remembered)
    return Decision(starts, state, tuple(still), released, tuple(sorted(held)))


def _rank(t: _Txn) -> float:
    """A transaction whose first transaction-topic record is not read yet comes after every one read."""
    return float("inf") if t.rank is None else t.rank


def _starts(parts: list[Part], held: set[str], txns: dict[str, _Txn]) -> dict[Partition, int]:
    """Per partition, the first offset of a held transaction's record, or of a schema-change event
    at or after the first held change."""
    seqs = [txns[x].min_seq for x in held if txns[x].min_seq is not None]
    first_seq = min(seqs) if seqs else None
    starts: dict[Partition, int] = {}
    for p in parts:
        ddl = p.txid is None and first_seq is not None and p.min_seq is not None and p.min_seq >= first_seq
        if (p.txid is not None and p.txid in held) or ddl:
            key = (p.topic, p.partition)
            starts[key] = min(starts.get(key, p.min_offset), p.min_offset)
    return starts
