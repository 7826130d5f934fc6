"""The all-types check on a running stack + job (tests/type_matrix.py has the tables and the
comparison): create the table in the real database, change it, wait until the lake holds exactly
what the database holds, value by value, and (CDC_CAPTURE_FIXTURES=1) keep the connector's
messages as test fixtures."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import type_matrix as tm
from stack_helpers import Stack


def lake_rows(stack: Stack, lake_table: str, con: Any) -> dict[int, dict[str, Any]] | None:
    """The lake table read by DuckDB (Athena's role) on `con`, by id; None while it does not exist."""
    from cdctools import lake_reader as lake

    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", lake_table)
    if lake.current_metadata(location) is None:
        return None
    return {r["id"]: r for r in lake.rows(con, location)}


def source_rows(stack: Stack, dialect: str, skip: tuple[int, ...] = ()) -> dict[int, dict[str, str | None]]:
    rows = tm.parse_source_output(dialect, stack.sql(tm.source_query(dialect)))
    return {k: v for k, v in rows.items() if k not in skip}


def wait_until_equal(
    stack: Stack, dialect: str, lake_table: str, skip: tuple[int, ...] = (), timeout: float = 180
) -> list[str]:
    """Compare until the lake equals the source (the job applies asynchronously), leaving out the
    source rows `skip`; the last differences when time is up. One lake connection for every poll
    (connecting loads DuckDB's extensions), and a poll compares again only once the lake table has
    a new metadata file, or 10 s after the last comparison (the source is read again then too)."""
    from cdctools import lake_reader as lake

    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", lake_table)
    deadline = time.monotonic() + timeout
    con = lake.connect()
    compared: tuple[Any, float] | None = None
    try:
        while True:
            meta, now = lake.current_metadata(location), time.monotonic()
            if compared is None or meta != compared[0] or now - compared[1] >= 10 or now >= deadline:
                compared = (meta, now)
                rows = lake_rows(stack, lake_table, con)
                source = source_rows(stack, dialect, skip)
                diff = ["no lake table yet"] if rows is None else tm.differences(dialect, rows, source)
                if not diff or now >= deadline:
                    return diff
            time.sleep(1.0)
    finally:
        con.close()


def raw_messages(stack: Stack, topic: str, until: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """The topic's records as fixtures store them: {partition, offset, key, value} (parsed JSON; Avro
    records read as JsonConverter would have written them)."""

    def raw(msg: Any) -> dict[str, Any]:
        return {
            "partition": msg.partition(),
            "offset": msg.offset(),
            "key": stack.decode(msg.key()) if msg.key() else None,
            "value": stack.decode(msg.value()),
        }

    return stack.consume(topic, raw, until, timeout)


def dead_letters(stack: Stack, topic: str) -> list[dict[str, Any]]:
    folder = stack.state / "lake" / "dead-letters"
    out = []
    for f in sorted(folder.glob("batch=*/*.json")):
        out += [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    return [d for d in out if d.get("topic") == topic]


def capture(dialect: str, messages: list[dict[str, Any]], source: dict[int, dict[str, str | None]]) -> None:
    if os.environ.get("CDC_CAPTURE_FIXTURES") == "1":
        tm.save_fixtures(dialect, messages, source)


def topic_messages(stack: Stack, topic: str, timeout: float = 60) -> list[dict[str, Any]]:
    """Every record of the topic now, as fixtures store them (raw_messages), up to its end offsets."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "stack-test-probe"})
    try:
        parts = probe.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        probe.close()

    def done(ms: list[dict[str, Any]]) -> bool:
        seen = {p: max((m["offset"] + 1 for m in ms if m["partition"] == p), default=0) for p in ends}
        return all(seen[p] >= end for p, end in ends.items())

    return [] if not any(ends.values()) else raw_messages(stack, topic, done, timeout)
