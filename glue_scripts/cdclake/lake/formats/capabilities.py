"""What a table format can do: the rows of each format's capability table (base.Format.refuses).

A format supports every capability it does not refuse; a refusal carries the reason, which the
docs' format table (`capability_table`, docs/TABLE_FORMATS.md) and the tests that leave the format
out of a case quote. Some rows decide code directly (base.Format derives `fixed_key`,
`widens_in_place` and `maintains_in_stream` from them); the others are what the format's argument
checks, planner steps and dead letters do, checked against them by tests/unit/test_table_formats.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class Capability(StrEnum):
    """One row of the capability table: what a user may ask of the lake, in the docs' words."""

    KEYLESS_TABLES = "tables without a primary key (`--keyless_table_policy multiset`)"
    KEY_CHANGE = "a primary key change at the source"
    RENAMED_KEY_COLUMN = "a primary key column renamed at the source"
    RECREATED_WITH_ANOTHER_KEY = "a table dropped and created again with another key"
    MERGE_ON_READ = "`--write_mode merge-on-read`"
    WIDEN_IN_PLACE = "safe widening in place (`ALTER COLUMN TYPE`, no rewrite)"
    STREAM_MAINTENANCE = "maintenance inside the streaming job, between micro-batches"
    MAINTENANCE_BESIDE_STREAM = "the maintenance job while the streaming job runs"
    READ_POINT = "a consistent read point across tables (`--transactions keep`, table `cdc__read_point`)"


def cell(refuses: Mapping[Capability, str], capability: Capability, reasons: bool = True) -> str:
    """A capability table cell: `yes`, or `no` (with `: ` and the reason when `reasons`)."""
    why = refuses.get(capability)
    return "yes" if why is None else f"no: {why}" if reasons else "no"


def capability_table(formats: Mapping[str, Mapping[Capability, str]], reasons: bool = True) -> str:
    """The Markdown table of every capability (rows) of `formats` (title -> refusals; columns); without
    `reasons` its cells are `yes` and `no` only (the README's short form)."""
    titles = list(formats)
    lines = [
        "| capability | " + " | ".join(titles) + " |",
        "|---|" + "---|" * len(titles),
    ]
    for capability in Capability:
        lines.append(
            f"| {capability.value} | " + " | ".join(cell(formats[t], capability, reasons) for t in titles) + " |"
        )
    return "\n".join(lines)
