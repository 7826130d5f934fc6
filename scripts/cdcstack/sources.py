"""The source engines by their --source name: the one module that names them all. The stack's
configuration picks one here, once; everything after that goes through `StackConfig.engine`."""

from __future__ import annotations

from cdcstack import mariadb, postgres
from cdcstack.plumbing import SourceEngine, StackConfig

ENGINES: dict[str, SourceEngine] = {"mysql": mariadb, "postgres": postgres}


def stack_config(source: str | None = None, wire_format: str | None = None) -> StackConfig:
    """The stack's configuration from the environment; `source` None: $CDC_STACK_SOURCE, else the source
    running in the state directory, else mysql; `wire_format` None: $CDC_STACK_FORMAT, else avro when
    the state directory's schema registry runs, else json."""
    return StackConfig.from_env(ENGINES, source, wire_format)


def of_component(component: str) -> SourceEngine | None:
    """The engine whose server is `component` (None for kafka, connect and the job)."""
    return next((e for e in ENGINES.values() if component == e.COMPONENT), None)
