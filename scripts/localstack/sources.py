"""The source engines by their --source name: the one module that names them all. The stack's
settings pick one here, once; everything after that goes through `Settings.engine`."""

from __future__ import annotations

from localstack import mariadb, postgres
from localstack.plumbing import Settings, SourceEngine

ENGINES: dict[str, SourceEngine] = {"mysql": mariadb, "postgres": postgres}


def settings(source: str | None = None, wire_format: str | None = None) -> Settings:
    """The stack's settings from the environment; `source` None: $CDC_STACK_SOURCE, else the source
    running in the state directory, else mysql; `wire_format` None: $CDC_STACK_FORMAT, else avro when
    the state directory's schema registry runs, else json."""
    return Settings.from_env(ENGINES, source, wire_format)


def of_component(component: str) -> SourceEngine | None:
    """The engine whose server is `component` (None for kafka, connect and the job)."""
    return next((e for e in ENGINES.values() if component == e.COMPONENT), None)
