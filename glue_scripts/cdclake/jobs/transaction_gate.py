"""The transaction gate of a batch (--transactions keep): the records held over from the previous
batch go into this one's raw batch; one small aggregate over the batch's kept rows says, per
transaction and partition, what was read (events/transactions.decide); the records from each
partition's first held offset on are written to the held store (lake/held.py) and the rest of the
batch runs without them. With --transactions ignore the gate does nothing, except that the first
batch of a process applies records an earlier run with `keep` left held."""

from __future__ import annotations

import logging
import time
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.lake_contract import CDC_SEQ
from ..common.report import BatchReport
from ..common.settings import Settings, Transactions
from ..events.envelope import SCHEMA_CHANGE
from ..events.transactions import Decision, HoldState, Part, Partition, decide
from ..lake.held import Held, HeldStore

log = logging.getLogger("cdclake")


def transaction_parts(cached: DataFrame) -> list[Part]:
    """The batch's transaction aggregate (one Spark action over the kept rows): per transaction,
    table and partition, and per schema-change event outside any transaction."""
    txid = F.col("_txid")
    ddl = txid.isNull() & (F.col("_status") == SCHEMA_CHANGE)
    # A transaction-topic record that is not an END (no change's collection, no END's counts).
    begin = txid.isNotNull() & F.col("_txn_collection").isNull() & F.col("_txn_end").isNull()
    rows = (
        cached.where(txid.isNotNull() | ddl)
        .groupBy(txid, F.col("_txn_collection"), F.col("topic"), F.col("partition"), F.when(ddl, F.col("offset")))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min("offset").alias("min_offset"),
            F.min(CDC_SEQ).alias("min_seq"),
            F.first("_txn_end", ignorenulls=True).alias("end"),
            F.max(begin).alias("begun"),
        )
        .collect()
    )
    return [
        Part(
            r["_txid"], r["_txn_collection"], r["topic"], r["partition"], r["n"], r["min_offset"],
            None if r["min_seq"] is None else int(r["min_seq"]), r["end"] is not None,
            tuple((c["data_collection"], c["event_count"]) for c in r["end"] or ()), bool(r["begun"]),
        )
        for r in rows
    ]  # fmt: skip


def held_records(starts: dict[Partition, int]) -> Column:
    """Whether a record is held: at or after its partition's first held offset (false for a record
    without a topic)."""
    held = [(F.col("topic") == t) & (F.col("partition") == p) & (F.col("offset") >= o) for (t, p), o in starts.items()]
    return F.coalesce(reduce(Column.__or__, held), F.lit(False))


class TransactionGate:
    """Holds the records of incomplete source transactions from batch to batch."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.keep = settings.transactions == Transactions.KEEP
        self.hold_seconds = settings.transaction_hold_seconds
        self.store = HeldStore(spark, settings.checkpoint_location)
        self._first = True  # `ignore` looks at the store once, in the process's first batch
        self._before: Held | None = None

    def with_held(self, raw: DataFrame, batch_id: int) -> DataFrame:
        """The raw batch with the records the previous batch held."""
        look, self._first = self.keep or self._first, False
        self._before = self.store.previous(batch_id) if look else None
        if self._before is None or not self._before.records:
            return raw
        log.info("batch %d: %d record(s) held by batch %d", batch_id, self._before.records, self._before.batch_id)
        return raw.unionByName(self.store.records(self._before))

    def hold(self, cached: DataFrame, raw: DataFrame, batch_id: int, report: BatchReport) -> Column | None:
        """What the batch holds (written to the store before anything is applied), as a predicate
        over the batch's records; None: it holds nothing."""
        before = self._before
        if not self.keep:
            if before is not None and before.records:  # applied now: the next run must not again
                self.store.write(batch_id, None, HoldState())
            return None
        state = before.state if before is not None else HoldState()
        gating = before is not None and before.records > 0
        d = decide(transaction_parts(cached), state, time.time(), self.hold_seconds, gating)
        self._warn(d, batch_id)
        held = held_records(d.starts) if d.starts else None
        report.held_records = self.store.write(batch_id, raw.where(held) if held is not None else None, d.state)
        report.held_open, report.released_open = len(d.open), len(d.released)
        self.store.prune(batch_id)
        return held

    def _warn(self, d: Decision, batch_id: int) -> None:
        for txid in d.released:
            log.warning(
                "batch %d: source transaction %s held longer than --transaction_hold_seconds %d without all "
                "of it read: its changes are applied as read (its END or some of its changes never came)",
                batch_id, txid, self.hold_seconds,
            )  # fmt: skip
