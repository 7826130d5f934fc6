"""The Apache Iceberg Kafka Connect sink on its own Kafka Connect worker (the local Kafka release's,
as MSK Connect would run it as a second connector), reading the same Debezium topics with
`DebeziumTransform`, writing append-only tables, plus the dedup view that gives the current state.

Its own worker, not the stack's: the CPU and memory measured are the sink's alone, not Debezium's.
The sink never applies an update or a delete (every release through 1.12): each change is a row with
`_cdc.op` / `_cdc.offset`; `current` keeps the latest row per key by the record's offset (one
partition per topic: the offset orders a table's changes) and drops keys whose latest change is a
delete. Commit interval 1 s (default 5 min), like the job's trigger."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

from cdcstack.connect import worker_properties
from cdcstack.plumbing import free_port

from . import install
from .base import DATABASE, TOPIC_PREFIX, Context, System, jvm_options

ROOT = Path(__file__).resolve().parents[3]
CONNECTOR = "iceberg-sink"


def connector_config(ctx: Context, namespace: str, prefix: str) -> dict[str, str]:
    return {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "tasks.max": "1",
        "topics.regex": rf"{TOPIC_PREFIX}\.{DATABASE}\.{prefix}_.*",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "debezium",
        "transforms.debezium.type": "org.apache.iceberg.connect.transforms.DebeziumTransform",
        "transforms.debezium.cdc.target.pattern": f"{namespace}.{{db}}_{{table}}",
        "iceberg.tables.dynamic-enabled": "true",
        "iceberg.tables.route-field": "_cdc.target",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.tables.auto-create-props.format-version": "2",
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": ctx.warehouse.as_uri(),
        "iceberg.control.topic": f"control-iceberg-{namespace}",
        "iceberg.control.commit.interval-ms": "1000",
        "iceberg.control.commit.timeout-ms": "30000",
    }


def _http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def _worker_files(d: Path, kafka: str, port: int, plugin: Path) -> tuple[Path, Path]:
    """The sink's Kafka Connect worker: its properties and its log4j configuration, written into `d`."""
    props = d / "worker.properties"
    # offset.flush.interval.ms (default 60 s) bounds how long Connect's poll waits when the topics
    # are idle, and the sink answers the coordinator's commit requests only when Connect calls it:
    # at the default, the changes after a workload's last commit request waited 60-120 s (a commit
    # timeout of 30 s included). MSK Connect accepts the setting in a custom worker configuration.
    worker = worker_properties(kafka, port, f"bench-iceberg-sink-{port}", f"_bench-sink-{port}", plugin.parent)
    props.write_text(f"{worker}consumer.auto.offset.reset=earliest\noffset.flush.interval.ms=1000\n")
    log4j = d / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=INFO, out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c{1})%n\n"
        "log4j.logger.org.apache.kafka.connect.runtime.isolation=WARN\n"
        "log4j.logger.org.apache.kafka.clients=WARN\nlog4j.logger.org.apache.iceberg=WARN\n"
        # the commit protocol's steps (commit initiated / data written / complete): where a stall is
        "log4j.logger.org.apache.iceberg.connect.channel=INFO\n"
    )
    return props, log4j


class IcebergSink(System):
    name = "sink"
    label = "Iceberg Kafka Connect sink + dedup view"

    def __init__(self) -> None:
        super().__init__()
        self.plugin: Path | None = None
        self.port = 0

    def install(self) -> None:
        self.plugin = install.install_iceberg_sink()

    def start(self, ctx: Context, tables: list[str]) -> None:
        if self.plugin is None:
            self.install()
        assert self.plugin is not None
        self.port = free_port()
        d = ctx.work
        d.mkdir(parents=True, exist_ok=True)
        props, log4j = _worker_files(d, ctx.kafka, self.port, self.plugin)
        libs = install.runtime.local_dir() / "kafka" / "libs"
        cmd = [
            "java", "-Xmx1g", *jvm_options(), "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{libs}/*",
            "org.apache.kafka.connect.cli.ConnectDistributed", str(props),
        ]  # fmt: skip
        self.launch(cmd, d / "connect.log", os.environ.copy())
        base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while _http("GET", f"{base}/connectors")[0] != 200:
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the sink's Kafka Connect did not answer within 120 s: {self.log_path}")
            time.sleep(0.5)
        config = connector_config(ctx, namespace=self.name, prefix=self.name)
        status, body = _http("PUT", f"{base}/connectors/{CONNECTOR}/config", config)
        if status not in (200, 201):
            # Connect answers config validation failures with an opaque 500; the validate call says why
            _, why = _http("PUT", f"{base}/connector-plugins/{config['connector.class']}/config/validate", config)
            raise RuntimeError(f"registering the Iceberg sink failed: HTTP {status} {body}; validation: {why}")

    def check(self) -> None:
        super().check()
        if not self.port:
            return
        status, body = _http("GET", f"http://127.0.0.1:{self.port}/connectors/{CONNECTOR}/status")
        if status == 200 and isinstance(body, dict):
            for t in body.get("tasks", []):
                if t.get("state") == "FAILED":
                    raise RuntimeError(f"the Iceberg sink's task failed: {t.get('trace', '')[:800]}")

    def description(self) -> str:
        v = install.runtime.versions()
        return (
            f"Iceberg Kafka Connect sink {v['iceberg-sink']} with DebeziumTransform on its own Connect "
            f"{v['kafka']} worker, commit interval 1 s, schema evolution on, JSON converter"
        )

    def current(self, spark, table: str):
        return dedup_view(spark, self.lake_table(table), "id")


def dedup_view(spark, table: str, key: str):
    """The current state of an append-only table the sink wrote with DebeziumTransform: per key the
    row with the highest `_cdc.offset`, unless that change is a delete (`_cdc.op` = 'D')."""
    spark.catalog.refreshTable(table)
    return spark.sql(
        f"""SELECT * FROM (
              SELECT *, row_number() OVER (PARTITION BY `{key}` ORDER BY _cdc.offset DESC) AS _rn FROM {table})
            WHERE _rn = 1 AND _cdc.op <> 'D'"""
    ).drop("_cdc", "_rn")
