"""One table can never stop the others, on the real pipeline and on every table format: a table whose
writes fail every time (the test-only switch CDC_TEST_FAIL_TABLE, glue_scripts/cdclake/local/faults.py)
is set aside while the streaming job keeps running and the other tables stay equal to the source; it
stays set aside across a kill -9 and a restart (the mark is the same file on every format: checked on
Iceberg), and its documented fix (`local-job resume`,
docs/OPERATIONS.md, "A table set aside") brings it back equal to the source with its mark and property gone (on
Hudi, whose property a reader outside Spark does not see, the next job is shown to follow it again).

The same stack carries the upgrade from Glue 5.0 to Glue 6.0: a lake and checkpoint started by the
job on Glue 5.0's runtime (Spark 3.5.4, Iceberg 1.7.1) continued by the job on Glue 6.0's (Spark
4.1.1, Iceberg 1.11.0), with nothing lost or doubled (docs/DEPLOY.md, "Glue versions").

One stack (MariaDB) for all: each job starts on a lake of its own (the one before removed) and
reads the topics from the beginning, so it sees every change made so far."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import private_stack
from pipeline_job import job_log_shows, job_running
from stack_helpers import Stack, reconciled, run_script

pytestmark = pytest.mark.stack

STUCK = "salesdb_stuck"  # the lake table whose writes fail
OTHERS = ("--table", "shop", "--table", "stock")
TABLES = ("shop", "stock", "stuck")
INIT = """CREATE DATABASE IF NOT EXISTS salesdb;
USE salesdb;
CREATE TABLE shop (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, opened DATETIME NOT NULL);
CREATE TABLE stock (sku VARCHAR(20) NOT NULL, shop_id INT NOT NULL, qty INT NOT NULL, PRIMARY KEY (sku, shop_id));
CREATE TABLE stuck (id INT PRIMARY KEY, note VARCHAR(40), amount DECIMAL(10, 2));
INSERT INTO shop VALUES (1, 'Leeds', '2024-01-02 09:00:00'), (2, 'York', '2024-01-03 10:30:00');
INSERT INTO stock VALUES ('A-1', 1, 5), ('B-2', 1, 0), ('A-1', 2, 7);
INSERT INTO stuck VALUES (1, 'first', 1.50), (2, 'second', 2.25), (3, 'third', NULL);
CREATE TABLE `Unit Prices` (`Order Id` INT NOT NULL, `line,no` INT NOT NULL, `unit price` DECIMAL(10, 2),
  `select` VARCHAR(20), `Größe` VARCHAR(20), CamelCase VARCHAR(20), `1st` INT, PRIMARY KEY (`Order Id`, `line,no`));
INSERT INTO `Unit Prices` VALUES (1, 1, 1.10, 'a', 'S', 'c', 11), (1, 2, 1.20, NULL, 'M', NULL, 12);
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    init = tmp_path_factory.mktemp("aside") / "init.sql"
    init.write_text(INIT)
    with private_stack("cdc-aside-", "mysql", init) as s:
        for table, rows in (("shop", 2), ("stock", 3), ("stuck", 3)):  # the snapshot, before any job starts
            s.events(f"salesdb.salesdb.{table}", until=lambda ev, rows=rows: len(ev) >= rows, timeout=120)
        yield s


def changes(stack: Stack, step: int) -> None:
    """A few changes on each table: inserts, an update, a delete (keys of their own per step)."""
    k = 10 * step
    stack.sql(  # `stuck` first: once the others are in the lake, the job has read its changes too
        f"INSERT INTO stuck VALUES ({k}, 'n{k}', {k}.5), ({k + 1}, NULL, 0); UPDATE stuck SET note = 'u{k}' WHERE id = 2;"
        f"DELETE FROM stuck WHERE id = {k - 9};"
        f"INSERT INTO shop VALUES ({k}, 'Shop {k}', NOW()); UPDATE shop SET name = 'Leeds {k}' WHERE id = 1;"
        f"INSERT INTO stock VALUES ('S-{k}', 1, {k}); UPDATE stock SET qty = qty + 1 WHERE shop_id = 2;"
        # Names only quoting allows (docs/TABLE_FORMATS.md): a column added with one, rows under them.
        f"ALTER TABLE `Unit Prices` ADD COLUMN `added {k} (cm²)` VARCHAR(10);"
        f"INSERT INTO `Unit Prices` (`Order Id`, `line,no`, `unit price`, `Größe`, `added {k} (cm²)`) "
        f"VALUES ({k}, 1, {k}.25, 'L', 'x{k}'); UPDATE `Unit Prices` SET `select` = 's{k}' WHERE `line,no` = 2;"
    )


def start(stack: Stack, table_format: str, fault: str = "", glue_version: str = "") -> None:
    env = {"CDC_TEST_FAIL_TABLE": fault} if fault else None
    runtime = ("--glue-version", glue_version) if glue_version else ()
    res = run_script(stack, "local-job", "start", "--table-format", table_format, *runtime, env=env)
    assert res.returncode == 0, res.stdout + res.stderr


def differs(stack: Stack, table: str) -> str:
    """reconcile's report of a table, asserted to differ from the source (no waiting)."""
    res = run_script(stack, "reconcile", "--table", table)
    assert res.returncode == 1, res.stdout + res.stderr
    return res.stdout


def mark(stack: Stack) -> Path:
    return stack.state / "lake" / "dead-letters" / "_set_aside" / f"cdc.{STUCK}" / "_mark.json"


def set_aside_property(stack: Stack, table_format: str) -> str | None:
    """The table property cdc.set-aside as a reader outside Spark sees it (Iceberg's metadata, Delta's
    log); Hudi keeps properties set through Spark in its catalog, so None there."""
    from cdctools import lake_reader as lake

    if table_format == "hudi":
        return None
    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", STUCK, table_format)
    return lake.properties(location).get("cdc.set-aside")


def fresh_lake(stack: Stack) -> None:
    """A new lake, checkpoint and session catalog for the next format (the job is stopped)."""
    for folder in ("lake", "metastore"):
        shutil.rmtree(stack.state / folder, ignore_errors=True)


@pytest.mark.parametrize("table_format", ["iceberg", "delta", "hudi"])
def test_a_table_whose_writes_always_fail_is_set_aside_survives_a_kill_9_and_resumes_equal_to_the_source(
    source: Stack, table_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    t0, step = time.monotonic(), 2 * ["iceberg", "delta", "hudi"].index(table_format) + 1
    fresh_lake(source)
    # Batch 0 (everything on the topics so far) creates the tables; the fault from batch 1 on: the
    # table's writes fail every time, the others commit and the job runs on.
    start(source, table_format, fault=f"{STUCK}@1")
    reconciled(source, wait=600)  # every table in the lake (a cold start of the job: slow under load)
    changes(source, step)
    line = job_log_shows(source, rf"table \S+\.{STUCK} stopped following the source: set aside;", timeout=300)
    [alarm] = [x for x in line.splitlines() if f".{STUCK} stopped following the source" in x]
    assert " ERROR " in alarm and "AnalysisException: [UNRESOLVED_COLUMN" in alarm, alarm
    assert f"local-job resume {STUCK}" in alarm
    reconciled(source, *OTHERS, wait=300)
    assert job_running(source)
    why = json.loads(mark(source).read_text())
    assert why["table"].endswith(f".{STUCK}") and why["reason"].startswith("AnalysisException"), why
    if table_format != "hudi":
        assert json.loads(set_aside_property(source, table_format) or "{}") == why
    differs(source, "stuck")

    if table_format == "iceberg":
        # kill -9 while it is set aside, changes meanwhile, a restart without the fault: still set aside
        # (its mark, not the fault, keeps it so), the others go on. The mark is the same file whatever
        # the format, so this runs once.
        assert run_script(source, "local-job", "kill").returncode == 0
        changes(source, step + 1)
        start(source, table_format)
        reconciled(source, *OTHERS, wait=300)
        job_log_shows(source, rf"table \S+\.{STUCK} stopped following the source: set aside since batch", timeout=120)
        assert job_running(source)
        differs(source, "stuck")

    # The documented fix: the resume run replays its set-aside changes and removes the mark.
    res = run_script(source, "local-job", "resume", STUCK, "--table-format", table_format)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert f"table {why['table']} resumed" in res.stdout + res.stderr
    assert not mark(source).exists() and set_aside_property(source, table_format) is None
    reconciled(source)  # every table, the resumed one included
    if table_format == "hudi":
        # Hudi's property lives in its catalog, unseen from here: the next job must follow the table.
        start(source, table_format)
        changes(source, step + 2)
        reconciled(source, wait=300)
        log = job_log_shows(source, rf"\b{STUCK}: \d+ ev", timeout=120)
        assert not re.search(rf"\.{STUCK} stopped following", log)
        run_script(source, "local-job", "stop")
    with capsys.disabled():
        print(f"\n[set aside, {table_format}] {time.monotonic() - t0:.0f} s")


def spark_versions(stack: Stack, table: str) -> list[str]:
    """The Spark version behind each snapshot of an Iceberg lake table, oldest first (Spark writes it
    into each snapshot's summary as `engine-version`)."""
    from cdctools import lake_reader as lake

    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", table, "iceberg")
    latest = max((location / "metadata").glob("*.metadata.json"), key=lambda p: p.stat().st_mtime)
    snaps = sorted(json.loads(latest.read_text())["snapshots"], key=lambda x: x["sequence-number"])
    return [x["summary"].get("engine-version", "?") for x in snaps]


def test_a_lake_started_on_glue_5_continues_on_glue_6_from_its_checkpoint_with_nothing_lost_or_doubled(
    source: Stack,
) -> None:
    """Upgrading a deployed stack's GlueVersion from 5.0 to 6.0 keeps its checkpoint and tables: the
    Kafka source's offsets that Spark 3.5 wrote are read by Spark 4.1, and Iceberg 1.11 continues the
    tables Iceberg 1.7.1 wrote."""
    run_script(source, "local-job", "stop")
    fresh_lake(source)
    start(source, "iceberg", glue_version="5.0")
    reconciled(source, wait=300)
    changes(source, 20)
    reconciled(source, wait=300)
    assert run_script(source, "local-job", "stop").returncode == 0
    before = spark_versions(source, "salesdb_shop")
    assert set(before) == {"3.5.4"}, before
    changes(source, 21)  # while no job runs: the upgraded job's first batch
    start(source, "iceberg")
    reconciled(source, wait=300)
    after = spark_versions(source, "salesdb_shop")
    assert after[: len(before)] == before and set(after[len(before) :]) == {"4.1.1"}, after
    run_script(source, "local-job", "stop")
