"""The benchmark's stand-in for the job's MERGE must accept every argument the job passes to
`merge_changes`: when the job's call grows a parameter, `make bench` must not break mid-run."""

from __future__ import annotations

import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from cdcbench.apply import _append_instead  # noqa: E402
from cdclake.lake.executor import merge_changes  # noqa: E402


def test_the_append_stand_in_accepts_every_argument_of_merge_changes():
    params = list(inspect.signature(merge_changes).parameters.values())
    positional = [object() for _ in params]
    inspect.signature(_append_instead).bind(*positional)
    inspect.signature(_append_instead).bind(positional[0], positional[1], **{p.name: None for p in params[2:]})
