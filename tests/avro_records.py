"""Avro records of the AWS Glue Schema Registry, captured from the local stack with the wire format
avro (tests/fixtures/debezium/avro/), and a registry on moto that knows their schema versions.

A fixture file holds one topic's records as Kafka Connect wrote them (key and value base64, framed
by the converter) and the definition of every schema version they name. moto gives a version a new
id when it is registered, so `Registry.register` registers each definition and rewrites the 16-byte
id in each record's header to the new one; the Avro bodies stay the captured bytes.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdcbench.avrowire import REGION as REGION
from cdcbench.avrowire import glue_client, register, version_of, with_version
from cdclake.events import schema_registry
from cdclake.events.schema_registry import MARKER as MARKER  # how the job's raw batch carries a framed record

AVRO_FIXTURES = Path(__file__).parent / "fixtures" / "debezium" / "avro"


def load(name: str) -> dict[str, Any]:
    """{"topic", "messages": [{partition, offset, key, value}], "schema_versions": {id: definition}}."""
    return json.loads((AVRO_FIXTURES / name).read_text())


@dataclass
class Registry:
    """A Glue API (moto server) with the captured schema versions registered."""

    endpoint: str
    ids: dict[str, str] = field(default_factory=dict)  # captured id -> this registry's id

    def client(self) -> Any:
        return glue_client(self.endpoint)

    def register(self, fixture: dict[str, Any], registry: str = "cdc-lake") -> None:
        glue = self.client()
        for old, definition in sorted(fixture["schema_versions"].items()):
            if old not in self.ids:
                self.ids[old] = register(glue, registry, fixture["topic"], definition)

    def framed(self, b64: str | None) -> bytes | None:
        """A captured key or value with this registry's id of its schema version."""
        if b64 is None:
            return None
        data = base64.b64decode(b64)
        return with_version(data, self.ids.get(version_of(data), version_of(data)))


def as_text(data: bytes | None) -> str | None:
    """A framed record as the job's raw batch carries it (sources.record_text)."""
    return None if data is None else schema_registry.as_text(data)


def records(fixture: dict[str, Any], registry: Registry, topic: str | None = None) -> list[dict[str, Any]]:
    """The fixture's messages as the raw records the job reads."""
    return [
        {
            "topic": topic or fixture["topic"],
            "partition": m["partition"],
            "offset": m["offset"],
            "timestamp": datetime.fromtimestamp(1795303971, UTC),
            "key": as_text(registry.framed(m["key"])),
            "value": as_text(registry.framed(m["value"])),
        }
        for m in fixture["messages"]
    ]
