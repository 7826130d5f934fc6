"""Correctness of an applied table against the stream's expected state.

Every row carries its version in `email` (generator.email), so comparing (key -> version) for
every key the stream touched, plus the total row count, proves the table equals the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from .generator import ExpectedState

_VERSION = re.compile(r"^user(\d+)\.v(\d+)@")


@dataclass
class Verdict:
    expected_rows: int
    actual_rows: int
    missing: int = 0  # should exist, absent (or lost)
    extra: int = 0  # should be deleted, still there
    stale: int = 0  # present with an older or wrong version
    duplicates: int = 0  # more than one row for a key

    @property
    def correct(self) -> bool:
        wrong = self.missing or self.extra or self.stale or self.duplicates
        return not wrong and self.expected_rows == self.actual_rows

    def summary(self) -> str:
        if self.correct:
            return "correct"
        counts = (
            (self.extra, "not deleted"),
            (self.stale, "stale"),
            (self.missing, "missing"),
            (self.duplicates, "duplicate"),
        )
        parts = [f"{n} {what}" for n, what in counts if n]
        if self.expected_rows != self.actual_rows:
            parts.append(f"{self.actual_rows - self.expected_rows:+d} rows")
        return "WRONG: " + ", ".join(parts)


def version_of(email: str | None) -> int | None:
    m = _VERSION.match(email or "")
    return int(m.group(2)) if m else None


def compare(expected: ExpectedState, actual: dict[int, int | None], actual_rows: int) -> Verdict:
    """`actual`: key -> version found in the table, for the keys the stream touched (absent keys
    are simply not in the dict)."""
    v = Verdict(expected.row_count(), actual_rows)
    for key, want in expected.versions.items():
        got_present = key in actual
        if want is None:
            v.extra += got_present
        elif not got_present:
            v.missing += 1
        elif actual[key] != want:
            v.stale += 1
    return v


def check_table(spark: SparkSession, table: str, expected: ExpectedState, key: str = "id") -> Verdict:
    """Read the touched keys' versions and the row count from `table` and compare."""
    touched = spark.createDataFrame([(k,) for k in expected.versions], T.StructType([T.StructField("k", T.LongType())]))
    lake = spark.table(table)
    rows = lake.join(touched.hint("broadcast"), lake[key].cast("long") == touched["k"]).select(key, "email").collect()
    actual = {int(r[key]): version_of(r["email"]) for r in rows}
    verdict = compare(expected, actual, lake.count())
    verdict.duplicates = len(rows) - len(actual)
    return verdict
