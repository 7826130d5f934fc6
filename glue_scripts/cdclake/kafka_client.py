"""Kafka through a plain Kafka client, for runs where Spark's Kafka source is not installed.

Spark's `kafka` data source ships with Glue but is not on PyPI, so a local run (`--kafka_reader
client`) consumes with confluent-kafka and feeds the *same* `BatchProcessor`. It keeps Spark's
checkpoint discipline, in its own small checkpoint folder:

    <checkpoint_location>/client/offsets/<batch_id>   planned offset ranges, written BEFORE the batch
    <checkpoint_location>/client/commits/<batch_id>   written AFTER every table's MERGE committed

After a crash, a planned batch without a commit is re-read from exactly the same ranges and
re-run with the same batch id (the MERGE guard makes that idempotent), so nothing is lost and
nothing is applied twice. Consumer-group offsets are not used.

Offsets only mean something within one incarnation of a topic, so each plan also records the
broker's topic id. A broker that lost its topics (the local tansu broker keeps them in memory)
comes back with new, empty topics that Kafka Connect refills with a fresh snapshot: a checkpoint
offset there would silently skip the first records of the new topic (tansu answers a fetch
beyond the end with nothing, not OFFSET_OUT_OF_RANGE), so a changed topic id makes the job read
the new topic from its beginning instead, with a warning. The re-snapshot's rows carry newer
source positions than anything applied before, so they win the MERGE; what a snapshot cannot
carry is a row deleted while the topics were gone (see docs/ARCHITECTURE.md).

Broker outages (connection refused, all brokers down, a topic missing while it is recreated)
are waited out with a log line every 30 s instead of ending the job.

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
TopicIds = dict[str, str]  # topic -> the broker's topic id when the batch was planned

READ_MIN_S = 0.5  # the shortest read of a new batch (see run_client_stream)
BEGINNING = -2  # librdkafka's OFFSET_BEGINNING: the first offset the partition still holds
_PARTITION_EOF = -191
# Errors of a broker that is away or a topic being recreated: wait, do not end the job.
_TRANSIENT = {
    -195,  # _TRANSPORT
    -187,  # _ALL_BROKERS_DOWN
    -185,  # _TIMED_OUT
    -188,  # _UNKNOWN_TOPIC
    -190,  # _UNKNOWN_PARTITION
    3,  # UNKNOWN_TOPIC_OR_PARTITION
    5,  # LEADER_NOT_AVAILABLE
    6,  # NOT_LEADER_OR_FOLLOWER
}


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

    def plan(self, batch_id: int, ranges: Ranges, topic_ids: TopicIds | None = None) -> None:
        body = {"version": 2, "ranges": ranges, "topic_ids": topic_ids or {}}
        _write_atomic(self.root / "offsets" / str(batch_id), json.dumps(body))

    def commit(self, batch_id: int, note: dict[str, str] | None = None) -> None:
        _write_atomic(self.root / "commits" / str(batch_id), json.dumps(note or {}))

    def planned(self, batch_id: int) -> tuple[Ranges, TopicIds]:
        body = json.loads((self.root / "offsets" / str(batch_id)).read_text())
        if body.get("version") == 2:
            return body["ranges"], body["topic_ids"]
        return body, {}  # a checkpoint written before topic ids were recorded

    def pending(self) -> tuple[int, Ranges, TopicIds] | None:
        """The last planned batch if it was never committed (the job died while applying it)."""
        planned = self._ids("offsets")
        if planned and planned[-1] not in set(self._ids("commits")):
            return planned[-1], *self.planned(planned[-1])
        return None

    def next_batch_id(self) -> int:
        planned = self._ids("offsets")
        return planned[-1] + 1 if planned else 0

    def positions(self) -> tuple[dict[tuple[str, int], int], TopicIds]:
        """Next offset to read per partition from all committed batches, and the topic id those
        offsets belong to. Offsets of an older incarnation of a topic are forgotten."""
        pos: dict[tuple[str, int], int] = {}
        ids: TopicIds = {}
        for b in self._ids("commits"):
            if not (self.root / "offsets" / str(b)).exists():
                continue
            ranges, topic_ids = self.planned(b)
            for topic, parts in ranges.items():
                tid = topic_ids.get(topic)
                if tid and ids.get(topic) not in (None, tid):
                    pos = {k: v for k, v in pos.items() if k[0] != topic}
                if tid:
                    ids[topic] = tid
                for p, (_first, last) in parts.items():
                    key = (topic, int(p))
                    pos[key] = max(pos.get(key, 0), last + 1)
        return pos, ids


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _admin(s: Settings) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": s.kafka_bootstrap_servers, "log_level": 3})


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
        # A batch reads for a fraction of a second from a fresh assignment: with the default 1 MB
        # per partition and fetch, a source changing 1,000 rows/s outran the reader.
        "max.partition.fetch.bytes": 64 * 1024 * 1024,
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

        self.admin = _admin(s)
        self._last_outage_log = 0.0

    def close(self) -> None:
        self.consumer.close()

    def outage(self, what: str) -> None:
        """A broker outage or a topic being recreated: log it (at most every 30 s) and carry on."""
        if time.monotonic() - self._last_outage_log > 30:
            self._last_outage_log = time.monotonic()
            log.warning("Kafka unavailable, waiting (the job keeps its checkpoint): %s", what)

    def partitions(self) -> list[tuple[str, int]]:
        """The wanted topics' partitions; none while the broker is unreachable."""
        from confluent_kafka import KafkaException

        try:
            md = self.consumer.list_topics(timeout=10)
        except KafkaException as exc:
            self.outage(str(exc))
            return []
        out = []
        for name, t in md.topics.items():
            wanted = name in self.s.kafka_topics if self.s.kafka_topics else bool(self.pattern.fullmatch(name))
            if wanted and not name.startswith("__") and t.error is None:
                out += [(name, p) for p in t.partitions]
        return sorted(out)

    def topic_ids(self, topics: set[str]) -> tuple[TopicIds, set[str]]:
        """The broker's current id of each topic (Kafka 2.8+, tansu), and the topics it says do
        not exist. A topic it cannot answer for right now (broker away) is in neither."""
        from confluent_kafka import KafkaException, TopicCollection

        ids: TopicIds = {}
        absent: set[str] = set()
        if not topics:
            return ids, absent
        for name, fut in self.admin.describe_topics(TopicCollection(sorted(topics)), request_timeout=10).items():
            try:
                desc = fut.result()
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == 3:  # UNKNOWN_TOPIC_OR_PARTITION
                    absent.add(name)
                else:
                    self.outage(f"describe {name}: {exc}")
                continue
            if desc.topic_id is not None:
                ids[name] = str(desc.topic_id)
        return ids, absent

    def _assign(self, starts: dict[tuple[str, int], int | None]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

        default = OFFSET_BEGINNING if self.s.starting_offsets == "earliest" else OFFSET_END
        self.consumer.assign([TopicPartition(t, p, default if o is None else o) for (t, p), o in starts.items()])

    def read(
        self,
        starts: dict[tuple[str, int], int | None],
        ends: dict[tuple[str, int], int] | None,
        idle_s: float,
        max_s: float | None = None,
    ) -> list[Any]:
        """Messages from `starts` until every partition hits EOF / its end offset, the batch is
        full, nothing arrives for `idle_s`, or (a new batch) it has read for `max_s`.

        `max_s` is the trigger's cut: while the source keeps changing, a partition may not reach
        EOF between two records, and without a cut the whole backlog would land in one late batch.
        (Spark's Kafka source cuts at the latest offsets; tansu under-reports those, so this reader
        cuts by time.)"""
        if not starts:
            return []
        self._assign(starts)
        done: set[tuple[str, int]] = set()
        out: list[Any] = []
        limit = self.s.max_offsets_per_trigger if ends is None else None
        last = began = time.monotonic()
        cut = float("inf") if ends is not None or max_s is None else began + max_s
        while len(done) < len(starts) and (limit is None or len(out) < limit) and time.monotonic() < cut:
            msg = self.consumer.poll(0.2)
            if msg is None:
                if time.monotonic() - last > idle_s:
                    break
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error():
                code = msg.error().code()
                if code == _PARTITION_EOF:
                    last = time.monotonic()
                    # Re-reading a planned range: the end of the partition past the range's last
                    # offset means the range is complete (its last records may be compacted away).
                    if ends is None or msg.offset() > ends.get(tp, -1):
                        done.add(tp)
                    continue
                if code in _TRANSIENT:
                    self.outage(f"{tp}: {msg.error()}")
                    continue
                raise RuntimeError(f"Kafka error on {tp}: {msg.error()}")
            last = time.monotonic()
            if ends is not None:
                if msg.offset() > ends.get(tp, -1):
                    done.add(tp)
                    continue
                if msg.offset() == ends[tp]:
                    done.add(tp)
            out.append(msg)
        self.consumer.unassign()
        if ends is not None and len(done) < len(starts):
            # Applying part of a planned batch and marking it committed would lose the rest.
            missing = sorted(f"{t}[{p}] up to {ends[(t, p)]}" for t, p in set(starts) - done)
            raise RuntimeError(
                f"could not re-read the planned records {', '.join(missing)} within {idle_s:.0f}s "
                "(broker unreachable?); the batch stays planned, restart the job to retry"
            )
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

    recreated_seen: set[tuple[str, str]] = set()

    def next_starts() -> tuple[dict[tuple[str, int], int | None], TopicIds]:
        """Where to read next per partition; a topic whose id changed is read from its beginning."""
        committed, known = ckpt.positions()
        parts = reader.partitions()
        current, _absent = reader.topic_ids({t for t, _ in parts})
        starts: dict[tuple[str, int], int | None] = {}
        read_before = {t for t, _p in committed}
        for tp in parts:
            topic = tp[0]
            was, now = known.get(topic), current.get(topic)
            if was and now and was != now:
                starts[tp] = BEGINNING
                if (topic, now) not in recreated_seen:
                    recreated_seen.add((topic, now))
                    last = max((o for (t, _p), o in committed.items() if t == topic), default=0)
                    log.warning(
                        "topic %s was recreated (topic id %s -> %s: the broker lost its topics?): the checkpoint's "
                        "offsets (up to %d) belong to the old topic; reading the new one from its beginning. Its "
                        "re-snapshot brings every current row, not rows deleted while the topic was gone: "
                        "reconcile (README: 'The broker lost its topics')",
                        topic, was, now, last,
                    )  # fmt: skip
            else:
                # --starting_offsets is for topics new to the job; a partition of a topic it has
                # read before (or of a recreated one) that had nothing yet starts at its beginning.
                starts[tp] = committed.get(tp, BEGINNING if topic in read_before else None)
        return starts, current

    try:
        pending = ckpt.pending()
        if pending:
            batch_id, ranges, planned_ids = pending
            while True:  # a broker that is away is waited for; a topic it no longer has is gone
                current, absent = reader.topic_ids(set(planned_ids))
                if set(current) | absent >= set(planned_ids) or should_stop():
                    break
                time.sleep(1)
            gone = sorted(t for t in planned_ids if t in absent or current.get(t, planned_ids[t]) != planned_ids[t])
            if gone:
                # The planned records are no longer in the broker; the recreated topics are read
                # from their beginning by the loop below (their re-snapshot replaces them).
                log.warning(
                    "batch %s was planned on topics that were since recreated or removed (%s): its records there "
                    "are gone; the new topics are read from their beginning",
                    batch_id,
                    ", ".join(gone),
                )
            ranges = {t: r for t, r in ranges.items() if t not in gone}
            starts = {(t, int(p)): r[0] for t, parts in ranges.items() for p, r in parts.items()}
            ends = {(t, int(p)): r[1] for t, parts in ranges.items() for p, r in parts.items()}
            log.warning("re-running batch %s from its planned offsets (the previous run stopped mid-batch)", batch_id)
            messages = reader.read(starts, ends, idle_s=30)
            if messages:
                apply(batch_id, messages)
            else:
                ckpt.commit(batch_id, {"skipped": "its records were on topics that were recreated: " + ", ".join(gone)})
        busy = 0.0  # how long the previous batch took to apply
        while not should_stop():
            t0 = time.monotonic()
            starts, topic_ids = next_starts()
            # A batch every trigger interval, as Spark's processingTime trigger: what arrives while
            # the previous batch was applied is already waiting, so read only for what is left of
            # the interval (at least READ_MIN_S, to take in what the broker holds).
            budget = max(READ_MIN_S, s.trigger_interval_seconds - busy)
            messages = reader.read(starts, None, idle_s=1.0, max_s=budget)
            busy = 0.0
            if messages:
                batch_id = ckpt.next_batch_id()
                ranges = _ranges(messages)
                ckpt.plan(batch_id, ranges, {t: topic_ids[t] for t in ranges if t in topic_ids})
                t1 = time.monotonic()
                apply(batch_id, messages)
                busy = time.monotonic() - t1
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
