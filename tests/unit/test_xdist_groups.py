"""The xdist groups' names (tests/conftest.py): pytest-xdist's loadgroup keeps a group on one worker
only when its name, after the test id's last "@", holds no "]"; a name with one splits the group
test by test, and each worker then builds the group's shared fixture (a Spark server) again."""

from __future__ import annotations

import json
from pathlib import Path

from xdist.scheduler.loadgroup import LoadGroupScheduling

ROOT = Path(__file__).resolve().parents[2]


def scope(nodeid: str) -> str:
    return LoadGroupScheduling._split_scope(None, nodeid)  # type: ignore[arg-type]


def test_every_recorded_group_name_is_read_by_xdist_as_one_group() -> None:
    names = json.loads((ROOT / "tests" / "xdist_group_seconds.json").read_text())
    for name in names:
        assert scope(f"tests/job/test_x.py::test_y[hudi]@{name}") == name, name


def test_a_group_name_with_a_bracket_is_split_test_by_test() -> None:
    nodeid = "tests/job/test_x.py::test_y[hudi]@tests/job::lake_server[hudi]"
    assert scope(nodeid) == nodeid
