"""Debezium change streams for the benchmarks, and the lake state they must produce.

Every record is built on the real MariaDB messages in tests/fixtures/debezium/mariadb/
(Debezium's envelope, source block, key and value schemas as JsonConverter wrote them); only the
row images, op, binlog position, timestamps and offsets change. The row struct is widened from
the fixture's 6 columns to 10 with Connect field schemas of the kinds Debezium emits for MySQL
(int32, int64, string, Decimal bytes, ZonedTimestamp, MicroTimestamp).

The stream models a database: updates and deletes hit live rows, inserts take new keys, a
delete is followed by its tombstone (`tombstones.on.delete=true`, as in our connector config).
A batch holds an exact 70/20/10 mix of updates/inserts/deletes. They concentrate on a "hot" set
of keys so that keys change several times per batch, and 10% of updates/deletes follow the
previous change of the same key in the same transaction (same connector millisecond, the case
where ordering by the envelope `ts_ms` is ambiguous).
"""

from __future__ import annotations

import base64
import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "debezium" / "mariadb"
TOPIC = "bench.benchdb.customers"
DB, TABLE = "benchdb", "customers"
MIX = {"u": 0.7, "c": 0.2, "d": 0.1}
# Debezium processing pace used for the envelope ts_ms (events per millisecond).
EVENTS_PER_MS = 20
BINLOG_EVENT_BYTES = 600  # a FULL-image rows event of this table, roughly
MAX_BINLOG_SIZE = 1 << 30  # MySQL's default max_binlog_size: then the file index rotates
BASE_MS = 1_795_303_971_000  # the fixtures' source.ts_ms

_FIRST = ["Sally", "George", "Edward", "Anne", "Priya", "Jonas", "Mia", "Kenji", "Zoë", "Liam"]
_LAST = ["Thomas", "Bailey", "Walker", "Kretchmar", "Raman", "Becker", "Novak", "Watanabe"]
_CITY = ["Leeds", "Stuttgart", "Chennai", "Lyon", "Milan", "Valencia", "Malmö", "Osaka", None]


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def _row_fields(fixture_fields: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The 10-column row struct: the fixture's six field schemas plus four of the same kinds."""

    def renamed(src: str, name: str, **changes: Any) -> dict[str, Any]:
        f = copy.deepcopy(fixture_fields[src])
        f.update(field=name, **changes)
        return f

    return [
        fixture_fields["id"],
        fixture_fields["first_name"],
        fixture_fields["last_name"],
        fixture_fields["email"],
        fixture_fields["balance"],  # Decimal(10,2) as base64 bytes
        fixture_fields["created_at"],  # ZonedTimestamp (MySQL TIMESTAMP)
        renamed("first_name", "city", optional=True),
        renamed("id", "loyalty_points"),
        {"type": "int64", "optional": False, "field": "lifetime_orders"},  # BIGINT
        # DATETIME(6): time.precision.mode=adaptive_time_microseconds
        {
            "type": "int64",
            "optional": False,
            "name": "io.debezium.time.MicroTimestamp",
            "version": 1,
            "field": "updated_at",
        },
    ]


class Template:
    """Key and value schemas (serialised once) and source blocks from the fixtures, of the table
    `db`.`table` on its own topic (the many-tables benchmark makes one per table)."""

    def __init__(self, db: str = DB, table: str = TABLE) -> None:
        topic = f"bench.{db}.{table}"
        update = _fixture("u_update.json")
        snapshot = _fixture("r_snapshot.json")
        schema = copy.deepcopy(update["value"]["schema"])
        after = next(f for f in schema["fields"] if f["field"] == "after")
        fields = _row_fields({f["field"]: f for f in after["fields"]})
        for f in schema["fields"]:
            if f["field"] in ("before", "after"):
                f["fields"] = copy.deepcopy(fields)
                f["name"] = f"{topic}.Value"
        schema["name"] = f"{topic}.Envelope"
        key_schema = copy.deepcopy(update["key"]["schema"])
        key_schema["name"] = f"{topic}.Key"
        self.topic = topic
        self.value_schema, self.key_schema = schema, key_schema  # Connect schemas (the Avro form's source)
        self.columns = [f["field"] for f in fields]
        self.value_prefix = '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'
        self.key_prefix = '{"schema":' + json.dumps(key_schema, separators=(",", ":")) + ',"payload":'
        self.source = {**update["value"]["payload"]["source"], "db": db, "table": table}
        self.snapshot_source = {**snapshot["value"]["payload"]["source"], "db": db, "table": table}


def _decimal_b64(unscaled: int) -> str:
    """Connect Decimal: base64 of the two's-complement big-endian unscaled value."""
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def email(key: int, version: int) -> str:
    """The email of row `key` at `version`: the checker reads the version back from it."""
    return f"user{key}.v{version}@example.com"


def row_image(key: int, version: int) -> dict[str, Any]:
    """Row `key` at `version` (0 = the initial table), as JsonConverter encodes it."""
    return {
        "id": key,
        "first_name": _FIRST[key % len(_FIRST)],
        "last_name": _LAST[key % len(_LAST)],
        "email": email(key, version),
        "balance": _decimal_b64((key * 37 + version * 1013) % 10_000_000 - 2_000_000),
        "created_at": "2024-01-03T09:15:00Z",
        "city": _CITY[(key + version) % len(_CITY)],
        "loyalty_points": version,
        "lifetime_orders": key % 1000 + version,
        "updated_at": 1_704_273_300_000_000 + version * 1_000_000 + key % 1_000_000,
    }


@dataclass(frozen=True)
class Change:
    """One change event: `version` is the row version after it (for a delete: the deleted one)."""

    op: str
    key: int
    version: int
    binlog_index: int
    pos: int
    ts_ms: int  # envelope ts_ms: when the connector processed the event
    source_ts_ms: int  # source.ts_ms: the binlog event time, second resolution on MySQL
    offset: int


@dataclass
class ExpectedState:
    """The lake table a correct apply must produce. Keys in `initial` ranges hold version 0 unless
    `versions` says otherwise; `versions[k] is None` means deleted."""

    initial: list[range] = field(default_factory=list)
    versions: dict[int, int | None] = field(default_factory=dict)

    def row_count(self) -> int:
        base = sum(len(r) for r in self.initial)
        for k, v in self.versions.items():
            in_base = any(k in r for r in self.initial)
            if in_base and v is None:
                base -= 1
            elif not in_base and v is not None:
                base += 1
        return base

    def apply(self, change: Change) -> None:
        self.versions[change.key] = None if change.op == "d" else change.version


class ChangeStream:
    """A deterministic stream of changes to one table that starts with `initial_rows` rows
    (keys 0..initial_rows-1, version 0)."""

    def __init__(self, initial_rows: int, seed: int = 5, follow_probability: float = 0.1) -> None:
        self.rng = random.Random(seed)
        self.follow_probability = follow_probability
        self.next_key = initial_rows
        self.expected = ExpectedState([range(initial_rows)])
        self._live_version: dict[int, int] = {}  # touched live keys -> current version
        self._deleted: set[int] = set()
        self._offset = initial_rows  # the snapshot records come first in the topic
        self._binlog_index = 4
        self._pos = 4
        self._events = 0

    def bulk_insert(self, count: int) -> range:
        """Rows added outside the stream (the growth benchmark's bulk loads): version 0."""
        keys = range(self.next_key, self.next_key + count)
        self.next_key += count
        self.expected.initial.append(keys)
        return keys

    def _random_live(self) -> int:
        while True:
            k = self.rng.randrange(self.next_key)
            if k not in self._deleted:
                return k

    def _position(self) -> tuple[int, int]:
        if self._pos + BINLOG_EVENT_BYTES > MAX_BINLOG_SIZE:
            self._binlog_index += 1
            self._pos = 4
        pos = self._pos
        self._pos += BINLOG_EVENT_BYTES
        return self._binlog_index, pos

    def batch(self, n: int) -> list[Change]:
        """`n` changes: exactly round(70%) updates, round(20%) inserts, the rest deletes."""
        n_u, n_c = round(n * MIX["u"]), round(n * MIX["c"])
        ops = ["u"] * n_u + ["c"] * n_c + ["d"] * (n - n_u - n_c)
        self.rng.shuffle(ops)
        hot: list[int] = []
        hot_index: dict[int, int] = {}

        def add_hot(k: int) -> None:
            if k not in hot_index:
                hot_index[k] = len(hot)
                hot.append(k)

        def drop_hot(k: int) -> None:
            i = hot_index.pop(k)
            last = hot.pop()
            if i < len(hot):
                hot[i] = last
                hot_index[last] = i

        for _ in range(max(1, n // 4)):
            add_hot(self._random_live())
        out: list[Change] = []
        prev: Change | None = None
        for op in ops:
            follows = op != "c" and prev is not None and prev.op != "d" and self.rng.random() < self.follow_probability
            if op == "c":
                key, version = self.next_key, 1
                self.next_key += 1
                add_hot(key)
            else:
                if follows:
                    key = prev.key  # type: ignore[union-attr]
                else:
                    if not hot:
                        add_hot(self._random_live())
                    key = hot[self.rng.randrange(len(hot))]
                current = self._live_version.get(key, 0)
                version = current + 1 if op == "u" else current
            ms = BASE_MS + self._events // EVENTS_PER_MS
            if follows:  # same transaction: processed by the connector in the same millisecond
                ms = prev.ts_ms  # type: ignore[union-attr]
            index, pos = self._position()
            change = Change(op, key, version, index, pos, ms, ms // 1000 * 1000, self._offset)
            self._offset += 2 if op == "d" else 1  # a delete's tombstone takes the next offset
            self._events += 1
            if op == "d":
                self._live_version.pop(key, None)
                self._deleted.add(key)
                drop_hot(key)
            else:
                self._live_version[key] = version
            self.expected.apply(change)
            out.append(change)
            prev = change
        return out


def op_mix(changes: list[Change]) -> dict[str, int]:
    counts = {"u": 0, "c": 0, "d": 0}
    for c in changes:
        counts[c.op] += 1
    return counts


def messages(changes: list[Change], template: Template | None = None) -> Iterator[tuple[Change, int, Any]]:
    """(change, offset, value payload) of `changes` and of the tombstone (payload None) after every
    delete: the Debezium values the wire formats encode."""
    t = template or Template()
    for ch in changes:
        source = {
            **(t.snapshot_source if ch.op == "r" else t.source),
            "ts_ms": ch.source_ts_ms,
            "ts_us": ch.source_ts_ms * 1000,
            "ts_ns": ch.source_ts_ms * 1_000_000,
            "file": f"mysql-bin.{ch.binlog_index:06d}",
            "pos": ch.pos,
            "row": 0,
        }
        image = row_image(ch.key, ch.version)
        before = None if ch.op in ("c", "r") else (image if ch.op == "d" else row_image(ch.key, ch.version - 1))
        payload = {
            "before": before,
            "after": None if ch.op == "d" else image,
            "source": source,
            "transaction": None,
            "op": ch.op,
            "ts_ms": ch.ts_ms,
            "ts_us": ch.ts_ms * 1000,
            "ts_ns": ch.ts_ms * 1_000_000,
        }
        yield ch, ch.offset, payload
        if ch.op == "d":
            yield ch, ch.offset + 1, None


def kafka_timestamp(ch: Change) -> datetime:
    """The record's Kafka timestamp: when the connector produced it, a few ms after processing."""
    return datetime.fromtimestamp((ch.ts_ms + 3) / 1000, UTC)


def records(changes: list[Change], template: Template | None = None) -> Iterator[tuple[Any, ...]]:
    """Kafka records (topic, partition, offset, timestamp, key, value) of `changes` in JsonConverter's
    wire format, with a tombstone after every delete."""
    t = template or Template()
    for ch, offset, payload in messages(changes, t):
        key = t.key_prefix + '{"id":' + str(ch.key) + "}}"
        value = None
        if payload is not None:
            value = t.value_prefix + json.dumps(payload, separators=(",", ":"), ensure_ascii=False) + "}"
        yield (t.topic, 0, offset, kafka_timestamp(ch), key, value)


def write_jsonl(path: Path, rows: Iterator[tuple[Any, ...]]) -> int:
    """Write records in the job's `files` format (one Kafka record per line). Returns the count."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for topic, partition, offset, ts, key, value in rows:
            rec = {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "timestamp": int(ts.timestamp() * 1000),
                "key": key,
                "value": value,
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n
