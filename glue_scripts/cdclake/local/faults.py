"""TEST-ONLY fault injection: the job kills itself with SIGKILL at a named point of a batch, or a
named table fails every batch (`TableFault`, below).

Recovery has to be proven at the two moments a crash can separate, not found by timing luck:

    before-iceberg-commit   the batch's offsets are planned (Spark's offset log, <checkpoint>/
                            offsets/<id>), no table of the batch is committed
    after-iceberg-commit    every table's MERGE of the batch is committed, the batch is not
                            (no <checkpoint>/commits/<id> in Spark's commit log)
    between-table-commits   the first table of a batch of two or more tables is committed, the
                            others are not (exactly so with --table_concurrency 1: with more, a
                            table running beside it may have committed too); no read point of
                            the batch is published

It is switched on only by the environment variable CDC_TEST_CRASH_AT=<point>[@<batch id>] (without
a batch id: the first batch reaching the point; with one: that batch, so one run can commit the
batches before it and be killed in it), read once where
the process starts (`job.main`), never by a job argument: nothing a deployment configures can
reach it. The kill is a real `kill -9` of the job's own process: no `finally`, no flush, no
shutdown hook runs, exactly like a lost container or an OOM kill.
"""

from __future__ import annotations

import logging
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cdclake")

ENV = "CDC_TEST_CRASH_AT"
BEFORE_COMMIT = "before-iceberg-commit"
AFTER_COMMIT = "after-iceberg-commit"
BETWEEN_TABLES = "between-table-commits"
POINTS = (BEFORE_COMMIT, AFTER_COMMIT, BETWEEN_TABLES)


@dataclass(frozen=True)
class CrashPoint:
    point: str
    batch_id: int | None = None  # None: the first batch reaching the point

    def reached(self, point: str, batch_id: int) -> None:
        """SIGKILL this process if `point` is the configured one (and `batch_id` the configured batch)."""
        if point != self.point or self.batch_id not in (None, batch_id):
            return
        log.critical("TEST fault injection (%s=%s): SIGKILL at %s of batch %s", ENV, self.point, point, batch_id)
        for handler in logging.getLogger().handlers:
            handler.flush()  # the line above is what the test looks for in the log
        os.kill(os.getpid(), signal.SIGKILL)


def from_env(environ: Mapping[str, str]) -> CrashPoint | None:
    """The crash point the environment asks for, if any; an unknown name is an error, not ignored."""
    value = environ.get(ENV, "").strip()
    if not value:
        return None
    point, at, batch = value.partition("@")
    if point not in POINTS or (at and not batch.isdigit()):
        raise ValueError(
            f"{ENV}={value!r} is not a crash point; use one of {', '.join(POINTS)}, optionally @<batch id> (tests only)"
        )
    return CrashPoint(point, int(batch) if at else None)


# ------------------------------------------------------------------ a table that fails every time
FAIL_TABLE_ENV = "CDC_TEST_FAIL_TABLE"
# A column no lake table has: analysing a query of it is Spark's own AnalysisException.
FAULT_COLUMN = "test_fault_no_such_column"


@dataclass(frozen=True)
class TableFault:
    """TEST-ONLY: the named lake tables (`<table>` names, comma-separated in CDC_TEST_FAIL_TABLE)
    fail every batch they have changes in (from batch `from_batch` on: `...@<batch id>`, so that a
    job's first batch can create them), before anything of theirs is written, with the error Spark
    raises for a statement on the table it cannot analyse (a permanent failure: jobs/batch.py sets
    such a table aside). Cleared by starting the job without the variable."""

    tables: frozenset[str]
    from_batch: int = 0

    def hits(self, ident: str, batch_id: int) -> bool:
        return batch_id >= self.from_batch and ident.rsplit(".", 1)[-1] in self.tables

    def fail(self, spark: SparkSession, ident: str) -> None:
        log.warning("TEST fault injection (%s): table %s fails", FAIL_TABLE_ENV, ident)
        spark.table(ident).select(FAULT_COLUMN)  # raises AnalysisException (a missing table: not found)


# A lake table's name as the job makes it (common/names.lake_table_name): no namespace, no catalog.
_LAKE_NAME = re.compile(r"[0-9a-z_]+")


def table_fault_from_env(environ: Mapping[str, str]) -> TableFault | None:
    """The tables CDC_TEST_FAIL_TABLE names (`<table>[,<table>...][@<first batch id>]`), if any; a
    value of another form is an error, not ignored (a typo would otherwise run the job without the fault)."""
    value = environ.get(FAIL_TABLE_ENV, "").strip()
    if not value:
        return None
    tables, at, batch = value.partition("@")
    names = [n.strip() for n in tables.split(",")]
    if not all(_LAKE_NAME.fullmatch(n) for n in names) or (at and not batch.isdigit()):
        raise ValueError(
            f"{FAIL_TABLE_ENV}={value!r} is not a list of lake table names; use <table>[,<table>...] as the lake "
            "names them (lower-case letters, digits and _, no namespace: e.g. salesdb_customer), optionally "
            "@<first batch id> (tests only)"
        )
    return TableFault(frozenset(names), int(batch) if at else 0)
