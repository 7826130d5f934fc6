"""The table formats the job writes, one module each (iceberg.py, delta.py, hudi.py: a subclass of
base.Format with its DDL, its maintenance, its catalog, jars and Glue versions, and what it refuses,
capabilities.py), and this registry: the one place that lists them.

`FORMATS` maps `--table_format` to its format; `table_format(settings)` gives the one a job uses
(Iceberg at `--iceberg_format_version`). No other module names a format
(tests/unit/test_table_formats.py).
"""

from __future__ import annotations

from ...common.names import UnsupportedName as UnsupportedName  # raised by a format, for the batch to classify
from ...common.settings import Settings, TableFormat
from .base import Format as Format
from .capabilities import Capability as Capability
from .capabilities import capability_table
from .delta import Delta
from .hudi import Hudi
from .iceberg import Iceberg

FORMATS: dict[TableFormat, Format] = {
    TableFormat.ICEBERG: Iceberg(),
    TableFormat.DELTA: Delta(),
    TableFormat.HUDI: Hudi(),
}

# The format of a job that names none (`--table_format`'s default).
DEFAULT = TableFormat.ICEBERG
DEFAULT_FORMAT = FORMATS[DEFAULT]


def table_format(s: Settings) -> Format:
    """The format of `s.table_format`, as `s` configures it; refused (ArgumentError) on a runtime that
    cannot write it so."""
    return FORMATS[s.table_format].configured(s)


def format_of(name: TableFormat | str) -> Format:
    """The format named `name` (`--table_format`'s value)."""
    return FORMATS[TableFormat(name)]


def names() -> list[str]:
    """The formats' `--table_format` values, in the registry's order."""
    return [f.value for f in FORMATS]


def formats_table(reasons: bool = True) -> str:
    """The capability table of every format (docs/TABLE_FORMATS.md holds it as generated here; the
    README its short form, `reasons=False`)."""
    return capability_table({f.title: f.refuses for f in FORMATS.values()}, reasons)
