"""Dead letters: records that cannot be applied, kept with the reason, never dropped silently.

Layout: `<dead_letter_path>/batch=<batch id>-<fingerprint>/part-*.json`, JSON lines with
`reason, topic, partition, offset, timestamp, key, value, batch_id`. `key` and `value` are the
record's original text, so a dead letter can be replayed as-is through the `files` source
after the cause is fixed. The folder name is deterministic for a batch's content, so a batch
that is re-run after a crash overwrites its own dead letters instead of duplicating them.
"""

from __future__ import annotations

import hashlib

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..common.records import RAW_COLUMNS

RECORD_COLUMNS = RAW_COLUMNS  # the `files` format is the raw record
DEAD_LETTER_COLUMNS = ["reason", *RECORD_COLUMNS, "batch_id"]


def as_dead_letters(df: DataFrame, reason: str | F.Column, batch_id: int, prefix: str = "") -> DataFrame:
    """Project rows that carry the raw record columns (optionally prefixed) to the dead-letter shape."""
    r = F.lit(reason) if isinstance(reason, str) else reason
    return df.select(
        r.alias("reason"),
        *[F.col(f"{prefix}{c}").alias(c) for c in RECORD_COLUMNS],
        F.lit(batch_id).cast("long").alias("batch_id"),
    )


def batch_folder(base: str, batch_id: int, fingerprint: str) -> str:
    digest = hashlib.sha1(fingerprint.encode()).hexdigest()[:12]
    return f"{base.rstrip('/')}/batch={batch_id}-{digest}"


def write_dead_letters(dead: DataFrame, base: str, batch_id: int, fingerprint: str) -> str:
    """Write dead letters of one batch; returns the folder written."""
    return write_folder(dead, batch_folder(base, batch_id, fingerprint))


def write_folder(dead: DataFrame, path: str) -> str:
    """Dead letters into one folder, replacing what a run of the same batch left there."""
    dead.coalesce(1).write.mode("overwrite").json(path)
    return path


def archive_raw(raw: DataFrame, base: str, day: str, batch_id: int, fingerprint: str) -> str:
    """Archive a batch's raw records in the `files` format (the raw zone); idempotent per batch.

    `<base>/<day>/batch-<id>-<fingerprint>/part-*.json`: plain folder names, so the files source
    reads them recursively without partition discovery getting in the way."""
    digest = hashlib.sha1(fingerprint.encode()).hexdigest()[:12]
    path = f"{base.rstrip('/')}/{day}/batch-{batch_id}-{digest}"
    raw.select(*RECORD_COLUMNS).write.mode("overwrite").json(path)
    return path
