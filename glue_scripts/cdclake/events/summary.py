"""What a micro-batch holds, from one group aggregate over its classified records.

`group_aggregate` is the batch's first Spark action: one row per (status, reason, source table,
value schema, key schema, topic, partition) with counts and positions. `summarize` turns the
collected rows into a `BatchSummary` without Spark: counts per status, the schema groups of each
table (what is decoded and applied), truncates per table, the offsets fingerprint that names the
batch's dead-letter and raw-zone folders, and the newest source and Kafka times.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..common.lake_contract import CDC_OP, CDC_SEQ, CDC_SOURCE_TS
from .decode import SchemaGroup
from .envelope import CHANGE, DEAD, HEARTBEAT, SCHEMA_CHANGE, TOMBSTONE, TRUNCATE

TableId = tuple[str, str]  # (source db or schema, source table)
# (value schema id, the schema's text or None) -> the text: from this batch's row when it has one
# (the batch caches schemas it has not seen before only), else from an earlier batch.
KnownSchema = Callable[[int, str | None], str | None]

GROUP_KEYS = ("_status", "_reason", "_src_db", "_src_table", "_schema_id", "_key_schema_id", "topic", "partition")


class SummaryRow(Protocol):
    """A collected row of `group_aggregate` (a Spark Row, or a dict in tests)."""

    def __getitem__(self, key: str) -> Any: ...


def group_aggregate(classified: DataFrame, placeholder: str = "") -> DataFrame:
    """The batch's group aggregate (lazy: the caller collects it). Per group also whether it has
    deletes and whether an update's new image may hold the TOAST `placeholder` (unavailable.py):
    the table writer needs no action of its own to know."""
    return classified.groupBy(*GROUP_KEYS).agg(
        F.count(F.lit(1)).alias("n"),
        F.max(F.col(CDC_OP) == "d").alias("deletes"),
        F.max(F.col(CDC_OP) == "u").alias("updates"),
        F.max((F.col(CDC_OP) == "u") & may_hold(F.col("_after_json"), placeholder)).alias("toasted"),
        F.first("_value_schema", ignorenulls=True).alias("value_schema"),
        F.first("_key_schema", ignorenulls=True).alias("key_schema"),
        F.first("_key_json", ignorenulls=True).alias("sample_key"),
        F.max(CDC_SEQ).alias("max_seq"),
        F.min(CDC_SEQ).alias("min_seq"),
        # epoch seconds: collected datetimes would be in the driver's local time zone
        F.max(F.col(CDC_SOURCE_TS).cast("double")).alias("max_source_ts"),
        F.min("offset").alias("min_offset"),
        F.max("offset").alias("max_offset"),
        F.max(F.col("timestamp").cast("double")).alias("max_timestamp"),
    )


def may_hold(image_json: Column, placeholder: str) -> Column:
    """Whether a row image's JSON text may hold the placeholder as a value: its text (as JSON
    writes it, escaped or not) or, for a bytes column, the base64 of its UTF-8 bytes. True for more
    images than hold it (the text inside a longer value): those only pay for the carrying."""
    if not placeholder:
        return F.lit(False)
    needles = {
        json.dumps(placeholder, ensure_ascii=False)[1:-1],
        json.dumps(placeholder)[1:-1],
        base64.b64encode(placeholder.encode("utf-8")).decode("ascii"),
    }
    return reduce(Column.__or__, [F.instr(image_json, n) > 0 for n in sorted(needles)])


@dataclass
class BatchSummary:
    records: int = 0
    changes: int = 0
    tombstones: int = 0
    schema_events: int = 0
    truncates: int = 0
    heartbeats: int = 0  # the connector's heartbeats: counted, never applied
    dead: int = 0  # records that reach no table (classification), by reason below
    dead_reasons: dict[str, int] = field(default_factory=dict)
    # Change events per table, one group per (value schema, key schema), in order of first sight.
    tables: dict[TableId, list[SchemaGroup]] = field(default_factory=dict)
    truncated: dict[TableId, int] = field(default_factory=dict)  # newest truncate position per table
    fingerprint: str = ""  # topic:partition:offset ranges: names the batch's folders, stable on re-run
    newest_source_ts: float | None = None  # of change events, epoch seconds
    newest_timestamp: float | None = None  # Kafka record timestamp, epoch seconds


def summarize(rows: Iterable[SummaryRow], known_schema: KnownSchema) -> BatchSummary:
    """The summary of a batch from its collected group aggregate rows (any order)."""
    rows = list(rows)
    out = BatchSummary(
        fingerprint=";".join(
            sorted({f"{r['topic']}:{r['partition']}:{r['min_offset']}-{r['max_offset']}" for r in rows})
        ),
        newest_timestamp=max((r["max_timestamp"] for r in rows if r["max_timestamp"] is not None), default=None),
    )
    groups: dict[tuple[str, str, int, int], SchemaGroup] = {}
    for r in rows:
        _count(out, r)
        if r["_status"] == TRUNCATE:
            table = (r["_src_db"], r["_src_table"])
            out.truncated[table] = max(out.truncated.get(table, 0), int(r["max_seq"]))
        elif r["_status"] == CHANGE:
            _add_change(groups, r, known_schema)
            ts = r["max_source_ts"]
            if ts is not None:
                out.newest_source_ts = ts if out.newest_source_ts is None else max(out.newest_source_ts, ts)
    for g in groups.values():
        out.tables.setdefault((g.db, g.table), []).append(g)
    return out


def _count(out: BatchSummary, r: SummaryRow) -> None:
    n = r["n"]
    out.records += n
    status = r["_status"]
    if status == CHANGE:
        out.changes += n
    elif status == TOMBSTONE:
        out.tombstones += n
    elif status == SCHEMA_CHANGE:
        out.schema_events += n
    elif status == TRUNCATE:
        out.truncates += n
    elif status == HEARTBEAT:
        out.heartbeats += n
    elif status == DEAD:
        out.dead += n
        out.dead_reasons[r["_reason"]] = out.dead_reasons.get(r["_reason"], 0) + n


def _add_change(groups: dict[tuple[str, str, int, int], SchemaGroup], r: SummaryRow, known: KnownSchema) -> None:
    """Count a row of change events into its schema group (one per topic and partition of it)."""
    key = (r["_src_db"], r["_src_table"], r["_schema_id"], r["_key_schema_id"])
    g = groups.get(key)
    if g is not None:
        g.events += r["n"]
        g.deletes = g.deletes or bool(r["deletes"])
        g.updates = g.updates or bool(r["updates"])
        g.toasted = g.toasted or bool(r["toasted"])
        g.max_seq = max(g.max_seq, int(r["max_seq"]))
        g.min_seq = min(g.min_seq if g.min_seq is not None else g.max_seq, int(r["min_seq"]))
        return
    groups[key] = SchemaGroup(
        db=r["_src_db"],
        table=r["_src_table"],
        schema_id=r["_schema_id"],
        key_schema_id=r["_key_schema_id"],
        value_schema=known(r["_schema_id"], r["value_schema"]),
        key_schema=r["key_schema"],
        sample_key=r["sample_key"],
        events=r["n"],
        max_seq=int(r["max_seq"]),
        min_seq=int(r["min_seq"]),
        deletes=bool(r["deletes"]),
        updates=bool(r["updates"]),
        toasted=bool(r["toasted"]),
    )
