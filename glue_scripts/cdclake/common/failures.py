"""Why one table's batch failed, and whether running the batch again can cure it.

    transient  a commit conflict, throttling, a catalog or S3 timeout, a lost connection: the batch
               fails and runs again (from its checkpoint; on Glue the job run restarts), as before
    permanent  a statement the table format refuses, an AnalysisException on the table's statements,
               a type the format cannot hold, the catalog refusing the table: running it again gives
               the same error, so the table is set aside (jobs/batch.py) and the others go on
    unknown    anything else: treated as transient until it repeats on the same table for the same
               batch `REPEATS` times (counted durably, lake/set_aside.py), then as permanent

Decided from the exception's class names (Python's and the Java chain's) and its text only, so the
decision is a pure function (`classify`) tested on the texts Spark, Iceberg, Delta and Hudi raise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from .conflicts import CONFLICT_EXCEPTIONS, _java_chain

# Attempts of one table's batch (the first one included) that fail with the same unknown error
# before the table is set aside. The streaming job's Glue restarts (GlueMaxRetries, default 3)
# must allow REPEATS - 1 re-runs.
REPEATS = 3


class Kind(StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    UNKNOWN = "unknown"


# Class names (simple or qualified; matched as whole names in the chain) and phrases of the text.
TRANSIENT_CLASSES = frozenset(
    {
        *(c.rsplit(".", 1)[-1] for c in CONFLICT_EXCEPTIONS),
        "ConflictRetriesExhausted",
        "ConcurrentModificationException",  # Glue's: another writer updated the table
        "ThrottlingException",
        "TooManyRequestsException",
        "SlowDownException",
        "RequestLimitExceeded",
        "InternalServiceException",
        "ServiceUnavailableException",
        "OperationTimeoutException",
        "ApiCallTimeoutException",
        "ApiCallAttemptTimeoutException",
        "SocketTimeoutException",
        "ConnectTimeoutException",
        "ConnectException",
        "NoHttpResponseException",
        "UnknownHostException",
        "SocketException",
        "Py4JNetworkError",
    }
)
TRANSIENT_PHRASES = (
    "Rate exceeded",
    "Please reduce your request rate",
    "SlowDown",
    "Status Code: 503",
    "Status Code: 429",
    "Unable to execute HTTP request",
    "Connection reset",
    "Connection refused",
    "Read timed out",
    "connect timed out",
    "Broken pipe",
    "ExecutorLostFailure",
)
PERMANENT_CLASSES = frozenset(
    {
        "AnalysisException",  # Spark's, on the table's statements (Delta's and Hudi's extend it)
        "UnsupportedName",  # a source name no table format holds (common/names.py)
        "ExtendedAnalysisException",
        "ParseException",
        "DeltaTableFeatureException",
        "DeltaAnalysisException",
        "DeltaUnsupportedOperationException",
        "DeltaInvariantViolationException",
        "DeltaIllegalArgumentException",
        "SchemaCompatibilityException",  # Hudi's
        "HoodieSchemaException",
        "HoodieNotSupportedException",
        "UnsupportedOperationException",  # e.g. "Not a supported type: void"
        "InvalidInputException",  # the Glue Data Catalog refusing a table or a column
        "AccessDeniedException",  # Lake Formation's per-table permissions
        "SparkArithmeticException",
        "SparkDateTimeException",
        "SparkNumberFormatException",
    }
)
PERMANENT_PHRASES = (
    "Unsupported table change",
    "Cannot change column type",
    "Not a supported type",
)


_NAMED = re.compile(r"^[\w.$]+(Exception|Error): ")


@dataclass(frozen=True)
class Failure:
    kind: Kind
    reason: str  # one line: the exception's class and the start of its message


def classify(names: Sequence[str], text: str) -> Failure:
    """The failure of an exception whose class names (the Python class's MRO and the Java cause
    chain, qualified or not) and text are given. Transient signs win: an AnalysisException that
    wraps a catalog timeout is a timeout."""
    simple = {n.rsplit(".", 1)[-1] for n in names} | set(names)
    reason = _reason(names, text)
    if simple & TRANSIENT_CLASSES or any(p in text for p in TRANSIENT_PHRASES):
        return Failure(Kind.TRANSIENT, reason)
    if simple & PERMANENT_CLASSES or any(p in text for p in PERMANENT_PHRASES):
        return Failure(Kind.PERMANENT, reason)
    return Failure(Kind.UNKNOWN, reason)


def after_attempts(failure: Failure, attempts: int, repeats: int = REPEATS) -> Failure:
    """An unknown failure seen on `attempts` attempts of the same table and batch is permanent
    once they reach `repeats`."""
    if failure.kind == Kind.UNKNOWN and attempts >= repeats:
        return Failure(Kind.PERMANENT, f"{failure.reason} (the same failure on {attempts} attempts of the batch)")
    return failure


def _reason(names: Sequence[str], text: str) -> str:
    """`<innermost named class>: <first line of the message that says something>`, at most 300 characters."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # Py4J's text starts with "An error occurred while calling o55.sql." and then ": <Java class>: message".
    useful = [ln.lstrip(": ") for ln in lines if not ln.startswith(("An error occurred while calling", "at "))]
    first = useful[0] if useful else (lines[0] if lines else "")
    name = names[0].rsplit(".", 1)[-1] if names else "Error"
    head = first if _NAMED.match(first) else f"{name}: {first}"
    return " ".join(head.split())[:300]


def describe(exc: BaseException) -> tuple[list[str], str]:
    """The class names (Python MRO, then the Java cause chain) and the text of a raised exception."""
    names = [f"{c.__module__}.{c.__name__}" for c in type(exc).__mro__ if c not in (object, BaseException)]
    for j in _java_chain(exc):
        try:
            names.append(str(j.getClass().getName()))
        except Exception:  # not a Java object after all
            break
    return names, str(exc)


def classify_exception(exc: BaseException) -> Failure:
    return classify(*describe(exc))
