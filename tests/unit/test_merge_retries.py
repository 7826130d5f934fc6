"""The streaming MERGE against a writer that keeps winning: re-planned MERGE_RETRY.attempts times,
then the batch fails (Glue re-runs it) instead of looping for ever or dropping the changes."""

from __future__ import annotations

import dataclasses

import pytest
from cdclake.common.conflicts import ConflictRetriesExhausted
from cdclake.lake import executor, merge

CONFLICT = "org.apache.iceberg.exceptions.ValidationException: Cannot commit, missing data files: [d-1.parquet]"


class Catalog:
    def __init__(self) -> None:
        self.dropped: list[str] = []

    def dropTempView(self, name: str) -> None:
        self.dropped.append(name)

    def tableExists(self, name: str) -> bool:
        return False  # the table has no delete markers


class Session:
    """What merge_changes uses of a SparkSession; every MERGE loses to a concurrent compaction."""

    def __init__(self, error: str) -> None:
        self.statements: list[str] = []
        self.catalog = Catalog()
        self.error = error

    def sql(self, statement: str) -> None:
        self.statements.append(statement)
        raise RuntimeError(self.error)


class Changes:
    def __init__(self, session: Session) -> None:
        self.sparkSession = session
        self.views: list[str] = []

    def createOrReplaceTempView(self, name: str) -> None:
        self.views.append(name)


def test_a_merge_that_keeps_losing_to_concurrent_commits_gives_up_after_its_attempts_and_fails_the_batch(monkeypatch):
    # The real policy's attempts, with millisecond waits instead of its 1 s..30 s backoff.
    quick = dataclasses.replace(merge.MERGE_RETRY, base_delay_s=0.001, max_delay_s=0.001)
    monkeypatch.setattr(executor, "MERGE_RETRY", quick)
    session = Session(CONFLICT)
    changes = Changes(session)
    with pytest.raises(ConflictRetriesExhausted) as e:
        executor.merge_changes("glue_catalog.cdc.t", changes, ["id"], ["id", "name"])
    assert merge.MERGE_RETRY.attempts == 8  # the documented patience (docs/MAINTENANCE.md, "Concurrent commits")
    assert len(session.statements) == 8 and all(
        s.startswith("MERGE INTO glue_catalog.cdc.t") for s in session.statements
    )
    assert str(e.value).startswith("MERGE into glue_catalog.cdc.t: still conflicting after 8 attempt(s)")
    assert "missing data files" in e.value.reason
    assert session.catalog.dropped == changes.views == ["cdc_changes_glue_catalog_cdc_t"]  # the view is not left behind


def test_a_merge_failing_for_another_reason_is_not_retried():
    session = Session("org.apache.spark.SparkException: Job aborted: No space left on device")
    with pytest.raises(RuntimeError, match="No space left on device"):
        executor.merge_changes("glue_catalog.cdc.t", Changes(session), ["id"], ["id", "name"])
    assert len(session.statements) == 1
    assert session.catalog.dropped == ["cdc_changes_glue_catalog_cdc_t"]
