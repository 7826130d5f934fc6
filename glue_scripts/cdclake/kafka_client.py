"""Kafka through a plain Kafka client, for runs where Spark's Kafka source is not installed.

Spark's `kafka` data source ships with Glue but is not on PyPI, so a local run (`--kafka_reader
client`) consumes with confluent-kafka and feeds the *same* `BatchProcessor`. It keeps Spark's
checkpoint discipline, in its own small checkpoint folder:

    <checkpoint_location>/client/offsets/<batch_id>   planned offset ranges, written BEFORE the batch
    <checkpoint_location>/client/commits/<batch_id>   written AFTER every table's MERGE committed

After a crash, a planned batch without a commit is re-read from exactly the same ranges and
re-run with the same batch id (the MERGE guard makes that idempotent), so nothing is lost and
nothing is applied twice. Consumer-group offsets are not used.

A batch is staged as a JSON-lines file in the `files` format and read back through the files
parser, which is much faster than sending a large Python list through Py4J.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from .envelope import RAW_COLUMNS
from .settings import Settings
from .sources import parse_lines

log = logging.getLogger("cdclake")

Ranges = dict[str, dict[str, list[int]]]  # topic -> partition -> [first, last] (inclusive)


class ClientCheckpoint:
    """Planned and committed offset ranges per batch id, in a local folder."""

    def __init__(self, root: str) -> None:
        if "://" in root:
            raise ValueError("--kafka_reader client keeps its checkpoint on a local path, not " + root)
        self.root = Path(root) / "client"
        (self.root / "offsets").mkdir(parents=True, exist_ok=True)
        (self.root / "commits").mkdir(parents=True, exist_ok=True)

    def _ids(self, kind: str) -> list[int]:
        return sorted(int(p.name) for p in (self.root / kind).iterdir() if p.name.isdigit())

    def plan(self, batch_id: int, ranges: Ranges) -> None:
        _write_atomic(self.root / "offsets" / str(batch_id), json.dumps(ranges))

    def commit(self, batch_id: int) -> None:
        _write_atomic(self.root / "commits" / str(batch_id), "{}")

    def pending(self) -> tuple[int, Ranges] | None:
        """The last planned batch if it was never committed (the job died while applying it)."""
        planned = self._ids("offsets")
        if planned and planned[-1] not in set(self._ids("commits")):
            return planned[-1], json.loads((self.root / "offsets" / str(planned[-1])).read_text())
        return None

    def next_batch_id(self) -> int:
        planned = self._ids("offsets")
        return planned[-1] + 1 if planned else 0

    def positions(self) -> dict[tuple[str, int], int]:
        """Next offset to read per partition, from all committed batches."""
        pos: dict[tuple[str, int], int] = {}
        for b in self._ids("commits"):
            f = self.root / "offsets" / str(b)
            if f.exists():
                for topic, parts in json.loads(f.read_text()).items():
                    for p, (_first, last) in parts.items():
                        key = (topic, int(p))
                        pos[key] = max(pos.get(key, 0), last + 1)
        return pos


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _consumer(s: Settings) -> Any:
    from confluent_kafka import Consumer  # only needed for this reader

    conf = {
        "bootstrap.servers": s.kafka_bootstrap_servers,
        "group.id": f"cdc-iceberg-{s.namespace}",  # required by the client; offsets are ours
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": s.starting_offsets,
        "enable.partition.eof": True,
        "fetch.max.bytes": 64 * 1024 * 1024,
    }
    if s.kafka_auth == "iam":
        raise ValueError("--kafka_reader client supports --kafka_auth none only (MSK IAM needs Spark's Kafka source)")
    return Consumer(conf)


class ClientKafkaReader:
    """Reads micro-batches from Kafka with explicit partition assignment and our own offsets."""

    def __init__(self, s: Settings, stage_dir: str) -> None:
        self.s = s
        self.consumer = _consumer(s)
        self.stage_dir = Path(stage_dir)
        self.stage_dir.mkdir(parents=True, exist_ok=True)
        self.pattern = re.compile(s.kafka_topic_pattern) if s.kafka_topic_pattern else None

    def close(self) -> None:
        self.consumer.close()

    def partitions(self) -> list[tuple[str, int]]:
        md = self.consumer.list_topics(timeout=10)
        out = []
        for name, t in md.topics.items():
            wanted = name in self.s.kafka_topics if self.s.kafka_topics else bool(self.pattern.fullmatch(name))
            if wanted and not name.startswith("__") and t.error is None:
                out += [(name, p) for p in t.partitions]
        return sorted(out)

    def _assign(self, starts: dict[tuple[str, int], int | None]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

        default = OFFSET_BEGINNING if self.s.starting_offsets == "earliest" else OFFSET_END
        self.consumer.assign([TopicPartition(t, p, default if o is None else o) for (t, p), o in starts.items()])

    def read(
        self, starts: dict[tuple[str, int], int | None], ends: dict[tuple[str, int], int] | None, idle_s: float
    ) -> list[Any]:
        """Messages from `starts` until every partition hits EOF / its end offset, the batch is
        full, or nothing arrives for `idle_s`."""
        if not starts:
            return []
        self._assign(starts)
        done: set[tuple[str, int]] = set()
        out: list[Any] = []
        limit = self.s.max_offsets_per_trigger if ends is None else None
        last = time.monotonic()
        while len(done) < len(starts) and (limit is None or len(out) < limit):
            msg = self.consumer.poll(0.2)
            if msg is None:
                if time.monotonic() - last > idle_s:
                    break
                continue
            last = time.monotonic()
            tp = (msg.topic(), msg.partition())
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    if ends is None or ends.get(tp, -1) < 0:
                        done.add(tp)
                    continue
                raise RuntimeError(f"Kafka error on {tp}: {msg.error()}")
            if ends is not None:
                if msg.offset() > ends.get(tp, -1):
                    done.add(tp)
                    continue
                if msg.offset() == ends[tp]:
                    done.add(tp)
            out.append(msg)
        self.consumer.unassign()
        return out

    def stage(self, batch_id: int, messages: list[Any]) -> Path:
        """Write a batch as JSON lines in the `files` format."""
        path = self.stage_dir / f"batch-{batch_id}.jsonl"
        with open(path, "w") as f:
            for m in messages:
                _ts_type, ts = m.timestamp()
                key, value = m.key(), m.value()
                rec = {
                    "topic": m.topic(),
                    "partition": m.partition(),
                    "offset": m.offset(),
                    "timestamp": ts,
                    "key": key.decode("utf-8", "replace") if key is not None else None,
                    "value": value.decode("utf-8", "replace") if value is not None else None,
                }
                f.write(json.dumps(rec) + "\n")
        return path


def _ranges(messages: list[Any]) -> Ranges:
    r: Ranges = {}
    for m in messages:
        parts = r.setdefault(m.topic(), {})
        first, last = parts.get(str(m.partition()), [m.offset(), m.offset()])
        parts[str(m.partition())] = [min(first, m.offset()), max(last, m.offset())]
    return r


def run_client_stream(
    spark: SparkSession, s: Settings, process: Callable[[DataFrame, int], Any], should_stop: Callable[[], bool]
) -> None:
    """The client-side equivalent of `writeStream.foreachBatch(...).trigger(...)`."""
    ckpt = ClientCheckpoint(s.checkpoint_location)
    reader = ClientKafkaReader(s, str(Path(s.checkpoint_location) / "client" / "staging"))

    def apply(batch_id: int, messages: list[Any]) -> None:
        path = reader.stage(batch_id, messages)
        raw = parse_lines(spark.read.text(str(path))).select(*RAW_COLUMNS)
        process(raw, batch_id)
        ckpt.commit(batch_id)
        path.unlink(missing_ok=True)

    try:
        pending = ckpt.pending()
        if pending:
            batch_id, ranges = pending
            starts = {(t, int(p)): r[0] for t, parts in ranges.items() for p, r in parts.items()}
            ends = {(t, int(p)): r[1] for t, parts in ranges.items() for p, r in parts.items()}
            log.warning("re-running batch %s from its planned offsets (the previous run stopped mid-batch)", batch_id)
            apply(batch_id, reader.read(starts, ends, idle_s=30))
        while not should_stop():
            t0 = time.monotonic()
            committed = ckpt.positions()
            starts = {tp: committed.get(tp) for tp in reader.partitions()}
            messages = reader.read(starts, None, idle_s=1.0)
            if messages:
                batch_id = ckpt.next_batch_id()
                ckpt.plan(batch_id, _ranges(messages))
                apply(batch_id, messages)
            elif s.run_once:
                return
            if s.run_once:
                continue
            time.sleep(max(0.0, s.trigger_interval_seconds - (time.monotonic() - t0)))
    finally:
        reader.close()


def stop_flag() -> Callable[[], bool]:
    """SIGTERM/SIGINT finish the current batch, then stop."""
    state = {"stop": False}

    def handler(_sig: int, _frame: Any) -> None:
        log.info("stop requested: finishing the current batch")
        state["stop"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return lambda: state["stop"]
