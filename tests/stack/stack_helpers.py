"""Helpers for the local pipeline stack tests: drive local-stack, read Debezium events."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from avro_topic import TopicDecoder, registry_definitions

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
# The tools' commands, installed into the venv by make setup (pyproject.toml).
COMMANDS = Path(sys.executable).parent
CLI = COMMANDS / "local-stack"
SQL = ROOT / "sql"
CUSTOMER_TOPIC = "salesdb.salesdb.customer"
ORDERS_TOPIC = "salesdb.salesdb.orders"


@dataclass(frozen=True)
class Event:
    """One Kafka record written by Debezium (JSON converter with schemas, or Avro read as that)."""

    topic: str
    partition: int
    offset: int
    key: dict | None  # the key's payload, e.g. {"cust_id": 3}
    key_fields: tuple[str, ...]  # the key schema's field names, in order
    value: dict | None  # the whole envelope {"schema": ..., "payload": ...}; None for a tombstone

    @property
    def payload(self) -> dict:
        return (self.value or {}).get("payload") or {}

    @property
    def op(self) -> str | None:
        return self.payload.get("op") if self.value is not None else None

    @property
    def before(self) -> dict | None:
        return self.payload.get("before")

    @property
    def after(self) -> dict | None:
        return self.payload.get("after")

    def row_fields(self, which: str = "after") -> dict[str, dict]:
        """Field schemas of the before/after struct, by column name."""
        for f in (self.value or {}).get("schema", {}).get("fields", []):
            if f["field"] == which:
                return {c["field"]: c for c in f["fields"]}
        return {}


def decimal_value(encoded: str, scale: int) -> Decimal:
    """Debezium's precise decimals: big-endian two's-complement unscaled value, base64 encoded."""
    unscaled = int.from_bytes(base64.b64decode(encoded), "big", signed=True)
    return Decimal(unscaled).scaleb(-scale)


class Stack:
    """Drives local-stack with this session's environment and reads the topics."""

    def __init__(self, env: dict[str, str], state: Path, ports: dict[str, int]) -> None:
        self.env = env
        self.state = state
        self.ports = ports
        self.bootstrap = f"127.0.0.1:{ports['kafka']}"
        # A record's key or value as JsonConverter's {schema, payload}, whichever format wrote it.
        self.decode = TopicDecoder(registry_definitions(f"http://127.0.0.1:{ports.get('registry', 0)}"))

    def cli(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        res = subprocess.run(
            [str(CLI), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"local-stack {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        return res

    def sql(self, statement: str) -> str:
        return self.cli("sql", "-e", statement).stdout

    def sql_file(self, name: str) -> None:
        self.cli("sql", str(SQL / name))

    def insert_customer(self, cust_id: int) -> None:
        self.sql(
            "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, created_at, updated_at) "
            f"VALUES ({cust_id}, 'Test {cust_id}', 't{cust_id}@example.com', 'BUILDING', 'GB', NOW(), NOW(6))"
        )

    def pids(self) -> dict[str, int]:
        return {p.stem: json.loads(p.read_text())["pid"] for p in (self.state / "run").glob("*.json")}

    def consume(
        self,
        topic: str,
        convert: Callable[[Any], T],
        until: Callable[[list[T]], bool],
        timeout: float = 60,
        summary: Callable[[list[T]], str] = lambda items: f"{len(items)} records",
    ) -> list[T]:
        """Reads the topic from the beginning (a new consumer group), each record through
        `convert`, until `until(items)` holds."""
        from confluent_kafka import Consumer, KafkaError

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"stack-test-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        items: list[T] = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    items.append(convert(msg))
                elif msg is not None and msg.error().code() not in (
                    KafkaError._PARTITION_EOF,
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                ):
                    raise AssertionError(f"consumer error: {msg.error()}")
                if items and until(items):
                    return items
        finally:
            consumer.close()
        raise AssertionError(f"condition not met on {topic} within {timeout:.0f}s; {summary(items)}")

    def events(self, topic: str, until: Callable[[list[Event]], bool], timeout: float = 60) -> list[Event]:
        """The topic's records as Debezium events, from the beginning, until `until(events)` holds."""

        def event(msg: Any) -> Event:
            key = self.decode(msg.key()) if msg.key() else {}
            value = self.decode(msg.value())
            fields = tuple(f["field"] for f in (key.get("schema") or {}).get("fields", []))
            return Event(msg.topic(), msg.partition(), msg.offset(), key.get("payload"), fields, value)

        return self.consume(
            topic, event, until, timeout, summary=lambda ev: f"last events: {[(e.key, e.op) for e in ev][-20:]}"
        )


def count(events: list[Event], op: str | None, **key: Any) -> int:
    """How many events of one row have this op (None: tombstones)."""
    return sum(1 for e in events if e.key == key and e.op == op)


def by_key(events: list[Event], **key: Any) -> list[Event]:
    """The events of one row, in partition order (all events of a key share one partition)."""
    return sorted((e for e in events if e.key == key), key=lambda e: e.offset)


def short_dir(prefix: str) -> Path:
    """A state directory directly under the system's temporary folder. pytest's own directories
    get long under xdist (`.../pytest-N/popen-gw1/test_name0/`), and a stack's Unix sockets must fit
    in 107 bytes. Traversable (0755): PostgreSQL runs as the OS user postgres and must reach it."""
    state = Path(tempfile.mkdtemp(prefix=prefix))
    state.chmod(0o755)
    return state


def run_script(
    stack: Stack, *cmd: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The command cmd[0] with the rest of `cmd` as its arguments, in the stack's environment (plus `env`)."""
    return subprocess.run(
        [str(COMMANDS / cmd[0]), *cmd[1:]],
        env={**stack.env, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def reconciled(stack: Stack, *args: str, wait: float = 180) -> str:
    """reconcile's report, asserted to MATCH within `wait` seconds; `args` are its own (--source, --table)."""
    res = run_script(stack, "reconcile", "--wait", str(wait), *args)
    assert res.returncode == 0, f"lake differs from source:\n{res.stdout}\n{res.stderr}"
    assert "MATCH" in res.stdout
    return res.stdout


def apply_sql(stack: Stack, sql_file: Path) -> str:
    """apply-sql's report, asserted: the file ran and the lake then equals the source."""
    res = run_script(stack, "apply-sql", str(sql_file), "--wait", "180")
    assert res.returncode == 0, f"{sql_file.name}: lake differs from source:\n{res.stdout}\n{res.stderr}"
    return res.stdout
