from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_ns = itertools.count()


class Lake:
    """A fresh namespace + dead-letter folder, and a BatchProcessor writing into them."""

    def __init__(self, spark, warehouse: Path, tmp: Path, **overrides: str) -> None:
        from cdclake.common.settings import build_settings
        from cdclake.jobs.batch import BatchProcessor

        self.spark = spark
        # A namespace of its own, or another Lake's (`namespace=`: the same tables, other job settings).
        self.namespace = overrides.get("namespace") or f"t{next(_ns)}"
        self.dead_dir = tmp / "dead"
        args = {
            "source": "files",
            "files_path": str(tmp / "in"),
            "catalog_type": "hadoop",
            "warehouse": str(warehouse),
            "namespace": self.namespace,
            "checkpoint_location": str(tmp / "ckpt"),
            "dead_letter_path": str(self.dead_dir),
        }
        args.update(overrides)
        self.settings = build_settings(args)
        self.processor = BatchProcessor(spark, self.settings)
        self._batch = itertools.count()

    def apply(self, records: list[dict[str, Any]], batch_id: int | None = None):
        from cdclake.common.records import RAW_SCHEMA

        df = self.spark.createDataFrame([tuple(r[c] for c in RAW_SCHEMA.names) for r in records], RAW_SCHEMA)
        return self.processor.process(df, next(self._batch) if batch_id is None else batch_id)

    def table(self, name: str = "inventory_customers") -> str:
        return f"glue_catalog.{self.namespace}.{name}"

    def identifier_fields(self, name: str = "inventory_customers") -> set[str]:
        """The table's Iceberg identifier fields, as Iceberg's own API reads its schema."""
        jvm = self.spark._jvm
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(self.spark._jsparkSession, self.table(name))
        return set(table.schema().identifierFieldNames())

    def rows(self, name: str = "inventory_customers", order: str = "id") -> list[dict[str, Any]]:
        return [r.asDict() for r in self.spark.sql(f"SELECT * FROM {self.table(name)} ORDER BY {order}").collect()]

    def ids(self, name: str = "inventory_customers") -> list[int]:
        return [r["id"] for r in self.rows(name)]

    def by_id(self, name: str = "inventory_customers") -> dict[int, dict[str, Any]]:
        """Rows by id; fails if an id is stored more than once (a dict would hide the second copy)."""
        rows = self.rows(name)
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), (
            f"{name}: ids stored more than once: {sorted({i for i in ids if ids.count(i) > 1})}"
        )
        return {r["id"]: r for r in rows}

    def assert_rows(
        self,
        expected: list[dict[str, Any]] | dict[Any, Any],
        key: str | tuple[str, ...] = "id",
        name: str = "inventory_customers",
        column: str = "first_name",
    ) -> None:
        """The table holds exactly `expected`, each key once: cdc_workload.assert_rows."""
        from cdc_workload import assert_rows

        assert_rows(self.spark, self.table(name), expected, key, column)

    def snapshots(self, name: str = "inventory_customers") -> int:
        return self.spark.sql(f"SELECT count(*) AS n FROM {self.table(name)}.snapshots").first()["n"]

    def commits(self, name: str = "inventory_customers") -> list[dict[str, Any]]:
        """Snapshots in commit order with what each wrote: cdc_workload.commits."""
        from cdc_workload import commits

        return commits(self.spark, self.table(name))

    def dead_letters(self) -> list[dict[str, Any]]:
        out = []
        for f in sorted(self.dead_dir.glob("batch=*/*.json")):
            out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        return out


@pytest.fixture
def lake(spark, warehouse, tmp_path) -> Lake:
    return Lake(spark, warehouse, tmp_path)


@pytest.fixture
def make_lake(spark, warehouse, tmp_path_factory) -> Callable[..., Lake]:
    def make(**overrides: str) -> Lake:
        return Lake(spark, warehouse, tmp_path_factory.mktemp("lake"), **overrides)

    return make


@pytest.fixture(scope="session")
def lake_class() -> type[Lake]:
    """For module-scoped fixtures. Test modules must not `from conftest import ...`: with several
    conftest.py files in the suite that name resolves to whichever was imported first."""
    return Lake


# One behaviour test, every table format (format_lakes.py): `format_lake` is a fresh lake of the
# test's `lake_format`, one per format of the registry. A test marked `needs(Capability.X)` runs on
# the formats that support X; on a format that refuses it, it is skipped with the format's reason
# (its capability row), marked `refused_capability` (the one skip tests/conftest.py allows).
def format_params(needs: list[Any], write_mode: str | None = None) -> list[Any]:
    from cdclake.lake.formats import format_of, names

    params = []
    for name in names():
        fmt = format_of(name)
        refused = [f"{fmt.title} refuses {c.value}: {fmt.refuses[c]}" for c in needs if not fmt.supports(c)]
        marks = [pytest.mark.skip(reason="; ".join(refused)), pytest.mark.refused_capability] if refused else []
        if write_mode is None:
            params.append(pytest.param(name, None, marks=marks, id=name))
        elif refused or default_write_mode(name) != write_mode:  # not a second run of the default
            params.append(pytest.param(name, write_mode, marks=marks, id=f"{name}-{write_mode}"))
    return params


def default_write_mode(table_format: str) -> str:
    """The write mode of a lake given no --write_mode (the format's default)."""
    from cdclake.common.settings import build_settings

    where = {
        "source": "files",
        "files_path": "-",
        "warehouse": "-",
        "checkpoint_location": "-",
        "dead_letter_path": "-",
    }
    return str(build_settings(where | {"table_format": table_format, "catalog_type": "hadoop"}).write_mode)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lake_format" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("format_extra")
    if only is not None:
        # A format's own extras: that format only, one lake per module (`format_extra(name)`).
        metafunc.parametrize("lake_format", [pytest.param(only.args[0], id=only.args[0])], scope="module")
        return
    needs = [c for m in metafunc.definition.iter_markers("needs") for c in m.args]
    params = format_params(needs)
    if metafunc.definition.get_closest_marker("every_write_mode") is not None:
        # Once more with --write_mode merge-on-read on each format whose lakes are otherwise
        # copy-on-write (a format that refuses it: skipped with its capability row's reason).
        from cdclake.common.lake_contract import WriteMode
        from cdclake.lake.formats import Capability

        params += format_params([*needs, Capability.MERGE_ON_READ], str(WriteMode.MERGE_ON_READ))
    metafunc.parametrize(("lake_format", "write_mode"), params)


@pytest.fixture
def write_mode() -> str | None:
    """A lake's --write_mode: None, the format's default, unless the test is parametrized with one."""
    return None


@pytest.fixture(scope="session")
def lake_sessions(request, tmp_path_factory) -> Iterator[Callable[[str], Any]]:
    """Each format's session, started at its first test and kept for the run: the default format's is
    the suite's own (`spark`), every other one a server process (format_lakes.Server)."""
    from cdclake.lake.formats import DEFAULT
    from format_lakes import InProcess, Server

    started: dict[str, Any] = {}

    def session(name: str) -> Any:
        if name not in started:
            work = tmp_path_factory.mktemp(f"lakes-{name}")
            if name == DEFAULT.value:
                warehouse = request.getfixturevalue("warehouse")
                started[name] = InProcess(request.getfixturevalue("spark"), name, work, warehouse)
            else:
                started[name] = Server(name, work)
        return started[name]

    yield session
    for s in started.values():
        s.stop()


@pytest.fixture
def format_lake(lake_format: str, write_mode: str | None, lake_sessions) -> Any:
    from format_lakes import FormatLake

    return FormatLake(lake_sessions(lake_format), lake_format, **({"write_mode": write_mode} if write_mode else {}))


@pytest.fixture
def make_format_lake(lake_format: str, write_mode: str | None, lake_sessions) -> Callable[..., Any]:
    """Lakes of the test's format with job settings of their own (`make_format_lake(write_mode=...)`)."""
    from format_lakes import FormatLake

    mode = {"write_mode": write_mode} if write_mode else {}
    return lambda **overrides: FormatLake(lake_sessions(lake_format), lake_format, **(mode | overrides))
