"""Commit conflicts between writers of one table (Iceberg's, Delta's): recognise them, run the operation again.

Iceberg itself retries a commit that lost the race for the catalog pointer (CommitFailedException,
tuned by the `commit.retry.*` table properties) by re-applying the same change on the new metadata.
It does not retry a change that a concurrent commit made invalid (ValidationException), e.g. a MERGE
whose position deletes point at data files a compaction has just replaced ("Cannot commit, missing
data files"), or a compaction that replaced files a MERGE has just added deletes to. Such an
operation must be planned again from the new snapshot. The MERGE (guarded by the source position)
and every maintenance procedure are safe to run again from scratch, which is what
`retry_on_conflict` does, with exponential backoff so the two writers stop colliding.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger("cdclake")

T = TypeVar("T")

CONFLICT_EXCEPTIONS = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.ValidationException",
    # Delta Lake's optimistic concurrency: a commit that a concurrent commit made invalid (e.g. a
    # MERGE that read files an OPTIMIZE has replaced), to be planned again from the new version.
    "io.delta.exceptions.ConcurrentAppendException",
    "io.delta.exceptions.ConcurrentDeleteReadException",
    "io.delta.exceptions.ConcurrentDeleteDeleteException",
    "io.delta.exceptions.MetadataChangedException",
    "io.delta.exceptions.ProtocolChangedException",
)


def _java_chain(exc: BaseException) -> list[Any]:
    """The Java throwable behind a PySpark error and its causes (Py4JJavaError or a captured
    SQL exception); empty for a pure Python error."""
    j = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    chain = []
    while j is not None and len(chain) < 20:
        chain.append(j)
        try:
            j = j.getCause()
        except Exception:  # not a Java object after all
            break
    return chain


# Spark 4.1.1 (Glue 6.0): a MERGE's task may fail with a NullPointerException from MergeRowsExec's
# metrics, which Spark 4.1 creates lazily and which a copy of the plan node made during adaptive
# execution can first touch on an executor, where the node has no session. Seen under load, one MERGE
# in a few hundred here; nothing is committed, and the same MERGE run again succeeds.
SPARK_MERGE_METRICS_NPE = ("NullPointerException", "MergeRowsExec.metrics")


def conflict_reason(exc: BaseException) -> str | None:
    """`"ValidationException: Cannot commit, missing data files..."` when `exc` is a commit conflict
    (retrying the whole operation can succeed), else None. Any other failure is not a conflict,
    except Spark 4.1's MergeRowsExec metrics failure (SPARK_MERGE_METRICS_NPE), which running the
    operation again cures the same way."""
    for j in _java_chain(exc):
        try:
            name = j.getClass().getName()
        except Exception:
            continue
        if name in CONFLICT_EXCEPTIONS:
            return f"{name.rsplit('.', 1)[-1]}: {str(j.getMessage())[:200]}"
    text = str(exc)
    if all(part in text for part in SPARK_MERGE_METRICS_NPE):
        return "NullPointerException in Spark 4.1's MergeRowsExec.metrics (a task failed; nothing was committed)"
    for name in CONFLICT_EXCEPTIONS:
        if name in text:  # e.g. a wrapped error whose cause is only in the message
            after = (text.split(name, 1)[1].lstrip(": ").splitlines() or [""])[0]
            return f"{name.rsplit('.', 1)[-1]}: {after[:200]}"
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently an operation is re-run after a commit conflict."""

    attempts: int = 6  # in total, the first one included
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def delay(self, retry: int, rnd: Callable[[], float] = random.random) -> float:
        """Backoff before retry number `retry` (1-based): doubling, capped, with jitter so two
        writers that collided do not retry in lock-step."""
        return min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1)) * (0.5 + 0.5 * rnd())


DEFAULT_RETRY = RetryPolicy()


class ConflictRetriesExhausted(RuntimeError):
    """Every attempt lost to a concurrent commit. `__cause__` is the last conflict."""

    def __init__(self, what: str, attempts: int, reason: str) -> None:
        super().__init__(f"{what}: still conflicting after {attempts} attempt(s): {reason}")
        self.what, self.attempts, self.reason = what, attempts, reason


def retry_on_conflict(
    fn: Callable[[], T],
    what: str,
    policy: RetryPolicy = DEFAULT_RETRY,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_conflict: Callable[[str], None] | None = None,
) -> T:
    """Run `fn`; when it fails with a commit conflict, wait and run it again (up to
    `policy.attempts` in total). Any other exception propagates at once."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as e:
            reason = conflict_reason(e)
            if reason is None:
                raise
            if on_conflict is not None:
                on_conflict(reason)
            if attempt == policy.attempts:
                raise ConflictRetriesExhausted(what, attempt, reason) from e
            wait = policy.delay(attempt)
            log.warning(
                "%s: commit conflict with a concurrent writer (%s); attempt %d/%d in %.1fs",
                what,
                reason,
                attempt + 1,
                policy.attempts,
                wait,
            )
            sleep(wait)
    raise AssertionError("unreachable")  # the loop returns or raises
