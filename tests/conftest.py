"""Shared fixtures: one real local Spark + Iceberg session for the whole run (Hadoop catalog
named `glue_catalog`, exactly the name the Glue job uses)."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from clean_env import behaviour_variables  # tests/ is on the path: pyproject.toml's pythonpath

ROOT = Path(__file__).resolve().parents[1]

# Cleared at import, before any fixture builds a subprocess environment from os.environ.
CLEARED = {k: os.environ.pop(k) for k in behaviour_variables(dict(os.environ))}
# Every JVM the suite starts (Spark in-process and in job subprocesses, the stacks' Kafka and Connect)
# is short-lived and shares two cores with the others: C1-only JIT and the serial collector take
# about a third less CPU per JVM than the defaults (docs/BENCHMARKS.md, section j). An exported
# CDC_JVM_OPTIONS wins (e.g. " " for the JDK's defaults).
os.environ.setdefault("CDC_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_configure(config: pytest.Config) -> None:
    # The tests' child processes (workers, the tools) import this checkout's code as the tests do
    # (pyproject.toml's pythonpath), also when the venv (CDC_LOCAL_DIR) holds another checkout's install.
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    roots = [str(p) for p in config.getini("pythonpath") if str(p) not in inherited]
    os.environ["PYTHONPATH"] = os.pathsep.join([*roots, *inherited])


def pytest_report_header() -> str:
    return "cleared from the environment: " + (", ".join(sorted(CLEARED)) or "nothing to clear")


_counter = itertools.count()


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(warehouse: Path):
    from cdclake.common.settings import build_settings
    from cdclake.local.session import local_session

    s = build_settings(
        {
            "source": "files",
            "files_path": "unused",
            "catalog_type": "hadoop",
            "warehouse": str(warehouse),
            "checkpoint_location": "unused",
            "dead_letter_path": "unused",
            "shuffle_partitions": "2",
        }
    )
    session = local_session(s, app_name="cdc-tests", master="local[2]")
    yield session
    session.stop()


# Tests that share an expensive fixture run in one xdist worker (`make test` runs three), so each is
# built once: the pipeline stacks, the moto server, and any module-scoped fixture (grouped by its
# file). xdist hands out the biggest groups first; the single tests fill in around them.
_SHARED_FIXTURES = {("tests/stack", "stack"), ("tests/stack", "pg_stack"), ("tests/glue_catalog", "moto_endpoint")}


def _group(item: pytest.Item) -> str | None:
    # A behaviour test on a format whose session is a server process (tests/job/format_lakes.py): with
    # the other tests of that server, on any test module. No brackets in a group's name: xdist reads
    # the name after a test id's last "@" only when no "]" follows it, else each test is its own group.
    lake_format = getattr(getattr(item, "callspec", None), "params", {}).get("lake_format")
    if lake_format is not None and lake_format != _default_format():
        return f"tests/job::lake_server:{lake_format}"
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    shared = sorted(
        f"{d[-1].baseid}::{name}" for name, d in defs.items() if d and (d[-1].baseid, name) in _SHARED_FIXTURES
    )
    if shared:
        return shared[0]
    if any(d and d[-1].scope == "module" for d in defs.values()):
        return item.nodeid.split("::")[0]
    return None


def _default_format() -> str:
    from cdclake.lake.formats import DEFAULT

    return DEFAULT.value


def pytest_itemcollected(item: pytest.Item) -> None:
    # Marked as each test is collected: xdist reads the marks in its own collection hook.
    name = _group(item)
    if name is not None:
        item.add_marker(pytest.mark.xdist_group(name))


# Longest group first: xdist hands out groups in collection order (the Makefile's
# --no-loadscope-reorder), so a long group that starts late is not the run's tail while the other
# workers idle (the set-aside stack test, 4 tests and ~18 minutes under load, came 14th of 23 when
# ordered by test count). Each group's seconds are those of the latest xdist run that ran it (the
# pytest cache); a group not timed yet goes by its test count, after the timed ones; single tests last.
_GROUP_SECONDS = "cdc/xdist-group-seconds"
_group_seconds: dict[str, float] = {}


def _recorded_group_seconds() -> dict[str, float]:
    """A clean checkout (CI) has no cache: the groups' seconds of a full run recorded in the tree."""
    path = ROOT / "tests" / "xdist_group_seconds.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle: the order xdist sees is this one
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    timed: dict[str, float] = (cache.get(_GROUP_SECONDS, {}) if cache else {}) or _recorded_group_seconds()
    names = [m.args[0] if (m := item.get_closest_marker("xdist_group")) else None for item in items]
    counts = Counter(n for n in names if n is not None)
    rank = {n: (0 if n in timed else 1, -timed.get(n, 0.0), -counts[n]) for n in counts}
    order = sorted(range(len(items)), key=lambda i: rank[names[i]] if names[i] is not None else (2, 0.0, 0))
    items[:] = [items[i] for i in order]  # a stable sort: each group's tests keep their order


# A skipped test is a check that did not run: in this suite that means an install step is missing
# (make setup installs every tool the tests use), so the run fails instead of passing quietly. The
# one skip allowed: a behaviour test on a format whose capability row refuses what it needs, skipped
# with the row's reason (tests/job/conftest.py, format_params).
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail") and "refused_capability" not in report.keywords:
        _skipped.append(report.nodeid)
    if "xdist_group" in report.keywords and "@" in report.nodeid:  # loadgroup: "<test>@<group>"
        name = report.nodeid.rpartition("@")[2]
        _group_seconds[name] = _group_seconds.get(name, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    cache = getattr(session.config, "cache", None)
    if _group_seconds and cache is not None and not hasattr(session.config, "workerinput"):
        cache.set(_GROUP_SECONDS, cache.get(_GROUP_SECONDS, {}) | {k: round(v) for k, v in _group_seconds.items()})
    if hasattr(session.config, "workerinput") or not _skipped:
        return  # an xdist worker: the controller sees every report and decides
    print(f"\n{len(_skipped)} test(s) skipped, which this suite does not allow (run make setup):")
    for nodeid in _skipped:
        print(f"  {nodeid}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
