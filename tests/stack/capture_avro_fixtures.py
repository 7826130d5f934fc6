"""Capture the Avro fixtures of tests/fixtures/debezium/avro/<engine>/ from a live local stack.

    PYTHONPATH=tests .local/venv/bin/python tests/stack/capture_avro_fixtures.py --source postgres

(tests/ holds the suite's helpers it imports; pytest puts that folder on the path by itself)

starts a stack of its own (free ports, own state directory, torn down at the end) with the wire
format avro, registers a JSON twin of the connector (topic prefix `twin`, its own replication slot
or server id) on the same database, runs the all-types changes of tests/type_matrix.py and then the
customer table's scenario (sql/<engine>/02_changes.sql, 03_add_status_column.sql), and writes:

- all_types.json: the Avro records as the AWS Glue Schema Registry converter wrote them (key and
  value base64), the definition of every schema version they name (from the stack's registry), the
  same changes from the JSON twin (json_twin: same source positions) and the database's values;
- customer.json: the customer table's snapshot and changes, naming two versions of the value schema.

Run it under the shared lock (`flock /tmp/cdc-heavy.lock ...`): it starts a whole stack.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

import stack_types as st  # noqa: E402
import type_matrix as tm  # noqa: E402
from stack_helpers import SQL, Stack  # noqa: E402

OUT = HERE.parent / "fixtures" / "debezium" / "avro"
TWIN = "twin"
DIALECT = {"mysql": "mariadb", "postgres": "postgres"}
NAMESPACE = {"mysql": "salesdb", "postgres": "public"}


def twin_config(stack: Stack, source: str) -> dict[str, Any]:
    """The running connector's settings with JSON converters, another topic prefix and its own
    position at the source, so both read the same changes."""
    from cdcstack import connect

    status, config = connect.http(
        "GET", f"http://127.0.0.1:{stack.ports['connect']}/connectors/{connector(source)}/config"
    )
    assert status == 200, (status, config)
    config = {k: v for k, v in config.items() if not k.startswith(("key.converter", "value.converter"))}
    config |= {
        "name": f"{connector(source)}-{TWIN}",
        "topic.prefix": TWIN,
        "topic.heartbeat.prefix": f"{TWIN}-heartbeat",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
    }
    if source == "postgres":
        config["slot.name"] = f"{config['slot.name']}_{TWIN}"
    else:
        config["database.server.id"] = str(int(config["database.server.id"]) + 1)
        config["schema.history.internal.kafka.topic"] = f"{TWIN}.schema-history"
    return config


def connector(source: str) -> str:
    from cdcstack import sources

    return sources.stack_config(source).connector


def start_twin(stack: Stack, source: str) -> None:
    from cdcstack import connect

    config = twin_config(stack, source)
    base = f"http://127.0.0.1:{stack.ports['connect']}/connectors/{config['name']}"
    status, body = connect.http("PUT", f"{base}/config", config, timeout=30)
    assert status in (200, 201), (status, body)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, body = connect.http("GET", f"{base}/status")
        tasks = body.get("tasks", []) if status == 200 else []
        if tasks and all(t["state"] == "RUNNING" for t in tasks):
            return
        assert not any(t["state"] == "FAILED" for t in tasks), body
        time.sleep(1)
    raise AssertionError(f"twin connector not running: {body}")


def settled(stack: Stack, topics: list[str], quiet: float = 8, timeout: float = 180) -> list[int]:
    """Wait until the topics' end offsets stopped moving for `quiet` seconds; each topic's record count."""
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "capture-probe"})
    try:
        last, since, deadline = None, time.monotonic(), time.monotonic() + timeout
        while time.monotonic() < deadline:
            ends = []
            for t in topics:
                parts = probe.list_topics(t, timeout=10).topics[t].partitions
                ends.append(tuple(probe.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1] for p in parts))
            if ends != last:
                last, since = ends, time.monotonic()
            elif time.monotonic() - since >= quiet and all(any(e) for e in ends):
                return [sum(e) for e in ends]
            time.sleep(1)
    finally:
        probe.close()
    raise AssertionError(f"{topics} did not settle within {timeout:.0f}s")


def framed_messages(stack: Stack, topic: str, n: int) -> list[dict[str, Any]]:
    """The topic's `n` records with their key and value base64, as the converter wrote them."""
    b64 = lambda b: None if b is None else base64.b64encode(b).decode()  # noqa: E731
    return stack.consume(
        topic,
        lambda m: {"partition": m.partition(), "offset": m.offset(), "key": b64(m.key()), "value": b64(m.value())},
        lambda ms: len(ms) >= n,
    )


def schema_versions(stack: Stack, messages: list[dict[str, Any]]) -> dict[str, str]:
    """The definition of every schema version the records name, from the stack's registry."""
    import uuid

    import boto3
    from cdcstack import registry, sources

    env = registry.client_env(sources.stack_config())
    glue = boto3.client(
        "glue", endpoint_url=env["AWS_ENDPOINT_URL_GLUE"], region_name=env["AWS_REGION"],
        aws_access_key_id="local", aws_secret_access_key="local",
    )  # fmt: skip
    ids = {str(uuid.UUID(bytes=base64.b64decode(m[p])[2:18])) for m in messages for p in ("key", "value") if m[p]}
    return {i: glue.get_schema_version(SchemaVersionId=i)["SchemaDefinition"] for i in sorted(ids)}


def write(name: Path, doc: dict[str, Any]) -> None:
    name.parent.mkdir(parents=True, exist_ok=True)
    name.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {name.relative_to(HERE.parents[1])}: {len(doc['messages'])} records")


def capture(stack: Stack, source: str) -> None:
    dialect, ns = DIALECT[source], NAMESPACE[source]
    start_twin(stack, source)
    pg = source == "postgres"
    stack.sql((tm.PG_SETUP + tm.PG_CHANGES + tm.PG_INFINITE) if pg else (tm.MARIADB_SETUP + tm.MARIADB_CHANGES))
    topic, twin_topic = f"salesdb.{ns}.{tm.TABLE}", f"{TWIN}.{ns}.{tm.TABLE}"
    n, _ = settled(stack, [topic, twin_topic])
    messages = framed_messages(stack, topic, n)
    twin = st.topic_messages(stack, twin_topic)
    assert len(twin) == len(messages), (len(twin), len(messages))
    infinite = tuple(tm.PG_INFINITE_IDS) if pg else ()
    write(OUT / dialect / "all_types.json", {
        "_comment": (
            f"Captured from the local stack with the wire format avro (tests/stack/capture_avro_fixtures.py "
            f"--source {source}): the all-types table's changes (tests/type_matrix.py) as the AWS Glue Schema "
            "Registry converter wrote them (key and value base64), the definition of every schema version they "
            "name, the same changes from a JSON twin of the connector on the same database (json_twin) and the "
            "database's values after them (source_rows" + (", without the rows of infinite timestamps" if pg else "")
            + ")."
        ),
        "topic": topic,
        "messages": messages,
        "schema_versions": schema_versions(stack, messages),
        "json_twin": {"topic": topic, "messages": twin},
        "source_rows": {str(k): v for k, v in st.source_rows(stack, dialect, infinite).items()},
    })  # fmt: skip
    folder = SQL / "postgres" if pg else SQL
    for step in ("02_changes.sql", "03_add_status_column.sql"):
        stack.cli("sql", str(folder / step))
    topic = f"salesdb.{ns}.customer"
    [n] = settled(stack, [topic])
    messages = framed_messages(stack, topic, n)
    write(OUT / dialect / "customer.json", {
        "_comment": (
            f"Captured from the local stack with the wire format avro (tests/stack/capture_avro_fixtures.py "
            f"--source {source}): the customer table's snapshot, sql/{'postgres/' if pg else ''}02_changes.sql and "
            f"sql/{'postgres/' if pg else ''}03_add_status_column.sql (ADD COLUMN status ... DEFAULT 'Green', "
            "then changes), so its records name two schema versions of the value."
        ),
        "topic": topic,
        "messages": messages,
        "schema_versions": schema_versions(stack, messages),
    })  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=sorted(DIALECT), required=True)
    args = parser.parse_args()
    from conftest import private_stack

    init = SQL / "postgres" / "01_create_customer.sql" if args.source == "postgres" else SQL / "01_create_customer.sql"
    with private_stack("cdc-capture-", args.source, init, "avro") as stack:
        os.environ.update({k: v for k, v in stack.env.items() if k.startswith("CDC_STACK_")})
        capture(stack, args.source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
