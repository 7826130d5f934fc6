"""Rows of a batch kept for its later reads under a plan of one node (a local checkpoint)."""

from __future__ import annotations

from pyspark.sql import DataFrame


def as_leaf(decoded: DataFrame) -> DataFrame:
    """The rows of `decoded`, computed by the first action that reads them and kept for the
    batch's later reads, under a plan of one node (a local checkpoint, not a cache). The decode
    plan is hundreds of expressions per table; every query over a cached copy of it (the MERGE,
    the marker append, the count) would analyse it again, match it against the cache and write
    its plan text for the listener bus, and that per-query driver work is most of a small
    batch's cost. `release` frees the rows."""
    return decoded.localCheckpoint(eager=False)


def release(leaf: DataFrame) -> None:
    """Free the rows kept by `as_leaf` (a checkpoint is not in the cache manager: unpersisting the
    DataFrame would not free them; the garbage collector would, later)."""
    leaf._jdf.queryExecution().analyzed().rdd().unpersist(False)
