"""The executor's writes and markers (executor.py dispatches to it): a step's dead letters, a
truncate, and the write step, which names the groups' decoded rows as the lake does, hands them to
the `Writes` (executor.py: the MERGEs by default) and appends the batch's delete markers (deletes.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.conflicts import retry_on_conflict
from ..common.lake_contract import CDC_INGESTED_AT, CDC_SEQ, SET_ORDERS_PROPERTY
from ..events.decode import (
    RAW_KEEP,
    SchemaGroup,
    as_leaf,
    conform,
    decode_group,
    decoded,
    group_rows,
    release,
    to_lake_names,
)
from ..events.ordering import latest_per_key
from . import table_plan
from .deadletter import as_dead_letters
from .deletes import KnownMarkers, create_markers_sql, image_deletes, keyed_deletes, marker_table, truncate_marker
from .evolution import Columns
from .execution import Execution, Rejected, Statements, Written
from .formats import Format
from .merge import MERGE_RETRY, partition_delete_sql, set_order_sql, truncate_sql
from .plan_steps import GroupView
from .unavailable import carry_within_batch, keep_existing, placeholder_columns

if TYPE_CHECKING:
    from .executor import Writes

log = logging.getLogger("cdclake")


class TableWrites(Statements):
    """A table's rows: `writes`, the keyed and keyless writes; `placeholder`: the connector's
    unavailable-value text."""

    def __init__(
        self, spark: SparkSession, fmt: Format, markers: KnownMarkers, writes: Writes, placeholder: str
    ) -> None:
        super().__init__(spark, fmt, markers)
        self.writes = writes
        self.placeholder = placeholder

    def dead_letter(self, s: table_plan.DeadLetter, ex: Execution) -> Rejected:
        """The group's records as dead letters (counted in the table's report by table_writer)."""
        g = ex.groups[s.group]
        if s.loud:
            log.error("table %s: %d event(s) rejected to dead letters: %s", ex.ident, g.events, s.reason)
        return Rejected(s.reason, g.events, as_dead_letters(group_rows(ex.full, g), s.reason, ex.batch_id))

    def truncate(self, ident: str, seq: int) -> None:
        """Rows older than `seq` go, and the truncate is remembered (deletes.py): such a change
        read later does not come back."""
        self.sql(truncate_sql(ident, seq))
        self._remember(ident, truncate_marker(self.spark, seq), seq)

    def delete_partition_rows(self, s: table_plan.DeletePartitionRows, ex: Execution) -> None:
        """One DELETE commit: what a DROP/TRUNCATE PARTITION removed at the source (idempotent)."""
        self.sql(partition_delete_sql(ex.ident, s.seq, s.condition))
        log.info("table %s: rows of the source's %s at position %d deleted (%s)", ex.ident, s.what, s.seq, s.condition)

    def reorder_set(self, s: table_plan.ReorderSet, ex: Execution) -> None:
        """One UPDATE commit, then the definitions recorded (a batch run again does the same again)."""
        self.sql(set_order_sql(ex.ident, s.column, s.members, s.seq, s.kind))
        orders = {c: [seq, list(m), kind] for c, seq, m, kind in s.record}
        self.set_properties(ex.ident, {SET_ORDERS_PROPERTY: json.dumps(orders)})
        log.info("table %s: %s column %s redefined at the source at position %d: values read as under it",
                 ex.ident, s.kind, s.column, s.seq)  # fmt: skip

    def write(self, s: table_plan.Write, ex: Execution, fills: dict[str, str]) -> Written:
        """Write what decoded of the groups (`fills`: the source defaults of columns the rows lack).
        The rows, named and conformed to the lake's columns, are kept until the batch counts them
        (table_writer.count_written): the events per op and those that did not decode."""
        groups = tuple((ex.groups[v.index], v) for v in s.groups)
        columns, keys = list(s.columns), list(s.keys)
        rows = as_leaf(decoded_rows(groups, columns, fills))
        changes = rows.where(F.col("_decode_error").isNull()).drop("_decode_error", *[f"_raw_{c}" for c in RAW_KEEP])
        try:
            if s.truncate is not None:
                self.truncate(ex.ident, s.truncate)
                changes = changes.where(F.col(CDC_SEQ) > F.lit(str(s.truncate)).cast(T.DecimalType(38, 0)))
            changes = changes.withColumn(CDC_INGESTED_AT, F.current_timestamp())
            self._merge(ex.ident, changes, s, columns, [g for g, _ in groups])
        except BaseException:
            release(rows)  # nothing counts them: the table's run fails
            raise
        return Written(ex.ident, rows, groups, columns, fills, keys)

    def _merge(
        self, ident: str, changes: DataFrame, s: table_plan.Write, columns: Columns, good: list[SchemaGroup]
    ) -> None:
        """Write the decoded changes: newest per key, or per row image for a table without a key.
        Then the batch's deletes are remembered (deletes.py) for later batches' writes; a crash
        between the two commits re-runs the batch, which writes them then."""
        names = [n for n, _ in columns]
        keys = list(s.keys)
        # Read the markers only when one may be newer than a change: not in a stream read in order.
        oldest = None if any(g.min_seq is None for g in good) else min(g.min_seq or 0 for g in good)
        markers = self.markers.to_consult(ident, oldest)
        newest_seq = max(g.max_seq for g in good)
        if not keys:
            self.writes.keyless(ident, changes, names, list(s.match), markers=markers)
            if s.deletes:
                self._remember(ident, image_deletes(changes, names, list(s.match)), newest_seq)
            return
        newest = latest_per_key(changes, keys)
        keep = None
        unavailable = placeholder_columns(columns, self.placeholder) if s.toasted else {}
        if unavailable:
            # Only batches with an update lacking a TOASTed value pay for this (unavailable.py).
            newest = carry_within_batch(newest, changes, keys, unavailable, self.placeholder)
            keep = keep_existing(unavailable, self.placeholder)
        self.writes.keyed(ident, newest, keys, names, keep, markers=markers)
        if s.deletes:
            self._remember(ident, keyed_deletes(changes, keys, names), newest_seq)

    def _remember(self, ident: str, deleted: DataFrame, position: int) -> None:
        """Append `deleted` (the marker columns, at positions up to `position`) to the table's
        markers, in one commit; the marker table is created first unless it is known to exist. An
        append reads nothing and never conflicts with a concurrent rewrite; a key deleted again, or
        a batch run again, adds a row, which the anti-join and the pruning handle alike."""
        if self.markers.newest(ident) is None:
            self.sql(create_markers_sql(ident, self.fmt))
            self.markers.created(ident)
        markers = marker_table(ident)

        def append() -> None:
            if self.fmt.v2_writes:
                deleted.writeTo(markers).append()
            else:  # by position: `deleted` has the marker table's columns in their order
                deleted.write.insertInto(markers)

        retry_on_conflict(append, f"append to {markers}", MERGE_RETRY)
        self.markers.wrote(ident, position)


def decoded_rows(
    groups: Sequence[tuple[SchemaGroup, GroupView]],
    columns: Columns,
    fills: dict[str, str],
    records: DataFrame | None = None,
) -> DataFrame:
    """The groups' decoded rows (decode.with_rows, or decoded again from `records`: the dead letters'
    records, which hold the key and value text), named as the lake's view of each group says, and
    conformed to the lake columns, as one DataFrame."""
    parts = [decoded(g) if records is None else decode_group(records, g) for g, _ in groups]
    return reduce(
        DataFrame.unionByName,
        [
            conform(to_lake_names(rows, v.renamed, v.ignored), columns, fills)
            for rows, (_, v) in zip(parts, groups, strict=True)
        ],
    )
