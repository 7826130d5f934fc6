"""Runs a table's plan (table_plan.py) against the catalog: the one layer the batch's DDL, MERGEs
and marker writes run from.

`Executor.step` dispatches each step of the plan, by its type, to the part that runs it: the DDL
(exec_ddl.py), the writes and delete markers (exec_writes.py); the catalog work outside a plan (the
namespace, reads before planning, table moves) is exec_moves.py, and what the parts share
execution.py. The default `Writes` (the MERGEs) live here. What the plan leaves (the table's state,
what the process remembers of it) goes back to `LakeTables` once the steps ran; a step that changed
the table in a way the plan does not model exactly (renames, drops, a new key, the drop mark) makes
the next batch read the table's state from the catalog again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.conflicts import retry_on_conflict
from ..common.lake_contract import WriteMode
from ..events.decode import release as release_rows
from . import table_plan
from .deletes import KnownMarkers, markers_if_any
from .exec_ddl import SchemaDDL
from .exec_moves import TableMoves
from .exec_writes import TableWrites, decoded_rows
from .execution import Execution, Rejected, TableRun, Written
from .formats import DEFAULT_FORMAT, Format
from .keyless import copies_to_write, merge_multiset_sql
from .merge import MERGE_RETRY, merge_sql

__all__ = [
    "LOOK_UP",
    "Execution",
    "Executor",
    "Rejected",
    "TableRun",
    "Writes",
    "Written",
    "decoded_rows",
    "format_writes",
    "merge_changes",
    "merge_multiset",
]

log = logging.getLogger("cdclake")

_LEVELS = {
    table_plan.Level.INFO: logging.INFO,
    table_plan.Level.WARNING: logging.WARNING,
    table_plan.Level.ERROR: logging.ERROR,
}


# Steps after which the key the table's metadata declares (formats.Format.key_fields_sql) is set again:
# they create or re-key the table, change or drop its columns, or rewrite it (REPLACE TABLE drops it).
_KEY_STEPS = (
    table_plan.CreateTable,
    table_plan.SetKey,
    table_plan.Rekey,
    table_plan.RenameColumn,
    table_plan.CopyThenDrop,
    table_plan.DropColumn,
    table_plan.AlterSchema,
    table_plan.RewriteType,
)
_UNDECLARE_FIRST = (table_plan.Rekey, table_plan.CopyThenDrop, table_plan.DropColumn)


class Executor:
    """Runs plans. `write_mode`: what a created table's row-level writes do; `writes`: the keyed and
    keyless writes; `placeholder`: the connector's unavailable-value text;
    `fmt`: the table format, whose DDL differs (formats/). Its parts share one `KnownMarkers`."""

    def __init__(
        self, spark: SparkSession, write_mode: WriteMode, writes: Writes, placeholder: str, fmt: Format | None = None
    ) -> None:
        self.spark = spark
        self.fmt = fmt or DEFAULT_FORMAT
        self.markers = KnownMarkers(spark)  # what the job knows of each table's delete markers
        self.ddl = SchemaDDL(spark, self.fmt, self.markers, write_mode)
        self.rows = TableWrites(spark, self.fmt, self.markers, writes, placeholder)
        self.catalog = TableMoves(spark, self.fmt, self.markers)

    def run(self, plan: table_plan.TablePlan, ex: Execution) -> TableRun:
        """Every step of `plan`, in order; what they wrote and rejected. A step that fails frees
        the rows the table decoded so far (nothing counts them) and raises."""
        key_steps = [s for s in plan.steps if isinstance(s, _KEY_STEPS)]
        undeclare = next((s for s in key_steps if isinstance(s, _UNDECLARE_FIRST)), None)
        run = TableRun()
        try:
            for step in plan.steps:
                if step is undeclare:
                    # Iceberg refuses to drop an identifier column or make it optional: the key's
                    # declaration goes first and comes back below (or at the next job start).
                    self.catalog.declare_key(ex.ident, [])
                run = self.step(step, ex, run)
            if key_steps and plan.state is not None:
                self.catalog.declare_key(ex.ident, plan.state.keys)
        except BaseException:
            for w in run.written:
                release_rows(w.decoded)
            raise
        return TableRun(run.written, run.rejected)

    def replace_rows(self, create: str, table: str, rows: DataFrame) -> None:
        """`table` (created by `create` when missing) holding exactly `rows`, in one commit: the read
        point (read_point.py)."""
        self.spark.sql(create)
        rows.writeTo(table).overwrite(F.lit(True))

    def step(self, step: table_plan.Step, ex: Execution, run: TableRun) -> TableRun:
        """One step, by its type (a step type without a case here fails tests/unit/test_plan_table.py):
        `run` with what it wrote, rejected or found for the next write."""
        ddl, rows = self.ddl, self.rows
        match step:
            case table_plan.Note():
                log.log(_LEVELS[step.level], step.message)
            case table_plan.ColumnsChanged():
                log.log(_LEVELS[step.level], "table %s: %s", ex.ident, step.what)
            case table_plan.RememberEarly():
                pass  # nothing to do in the catalog: LakeTables keeps them (TablePlan.memory)
            case table_plan.ReplaceOnCreate():
                log.info("table %s: created again at the source with another key; replaced at its creation", ex.ident)
            case table_plan.DeadLetter():
                return run.rejecting(rows.dead_letter(step, ex))
            case table_plan.RenameColumn():
                ddl.rename_column(step, ex)
            case table_plan.CopyThenDrop():
                ddl.copy_then_drop(step, ex)
            case table_plan.DropColumn():
                ddl.drop_column(step, ex)
            case table_plan.SetKey():
                ddl.set_key(step, ex)
            case table_plan.RecordColumnChanges():
                ddl.record_column_changes(step, ex)
            case table_plan.Rekey():
                ddl.rekey(step, ex)
            case table_plan.ColumnDefaults():
                return run.filling(ddl.column_defaults(step, ex))
            case table_plan.CreateTable():
                ddl.create_table(step, ex)
            case table_plan.AlterSchema():
                ddl.alter_schema(step, ex, dict(run.fills))
            case table_plan.RewriteType():
                ddl.rewrite_type(step, ex)
            case table_plan.BackfillDefaults():
                ddl.backfill_defaults(step, ex, dict(run.fills))
            case table_plan.Truncate():
                rows.truncate(ex.ident, step.seq)
            case table_plan.Write():
                return run.writing(rows.write(step, ex, dict(run.fills)))
            case table_plan.UnmarkDropped():
                ddl.unmark_dropped(step, ex)
            case table_plan.MarkDropped():
                ddl.mark_dropped(step, ex)
            case table_plan.DropTable():
                ddl.drop_table(step, ex)
            case table_plan.DeletePartitionRows():
                rows.delete_partition_rows(step, ex)
            case table_plan.RecordPartitioning():
                ddl.record_partitioning(step, ex)
            case table_plan.MarkDiverged():
                ddl.mark_diverged(step, ex)
            case table_plan.ReorderSet():
                rows.reorder_set(step, ex)
            case _:
                raise TypeError(f"no handler for plan step {type(step).__name__}")
        return run


class LookUp:
    """merge_changes(markers=LOOK_UP): the catalog says whether the table has markers to consult."""


LOOK_UP = LookUp()


def merge_changes(
    table: str,
    changes: DataFrame,
    keys: list[str],
    columns: list[str],
    keep: dict[str, str] | None = None,
    *,
    markers: str | None | LookUp = LOOK_UP,
    guard_in_source: bool = False,
) -> None:
    """Apply newest-per-key changes (data columns + _cdc_* metadata) to `table` in one commit
    (merge.merge_sql). `markers`: the delete markers to anti-join the changes with
    (deletes.KnownMarkers.to_consult), None for none; `guard_in_source`: the format's MERGE cannot
    read the table's row in its clauses (formats.base.Format.merge_reads_target)."""
    # Inside foreachBatch the batch DataFrame belongs to a cloned session: the temp view and the
    # MERGE must use that session, not the one the job started with.
    session = changes.sparkSession
    view = "cdc_changes_" + table.replace(".", "_").replace("`", "")
    changes.createOrReplaceTempView(view)
    try:
        # Safe to run again: the position guard makes a re-applied change a no-op.
        if isinstance(markers, LookUp):
            markers = markers_if_any(session, table)
        statement = merge_sql(table, view, keys, columns, keep, markers, guard_in_source=guard_in_source)
        retry_on_conflict(lambda: session.sql(statement), f"MERGE into {table}", MERGE_RETRY)
    finally:
        session.catalog.dropTempView(view)


def merge_multiset(
    table: str,
    changes: DataFrame,
    columns: list[str],
    match: list[str],
    *,
    markers: str | None | LookUp = LOOK_UP,
) -> None:
    """Apply a batch's changes of a keyless table in one commit (keyless.py). `markers`: the delete
    markers whose positions count (deletes.KnownMarkers.to_consult), None for none."""
    session = changes.sparkSession
    view = "cdc_copies_" + table.replace(".", "_").replace("`", "")
    if isinstance(markers, LookUp):
        markers = markers_if_any(session, table)

    def attempt() -> None:
        # Counted against the table as it is now: a MERGE re-planned after a conflict reads it again.
        marked = session.table(markers) if markers else None
        copies_to_write(session.table(table), changes, columns, match, marked).createOrReplaceTempView(view)
        session.sql(merge_multiset_sql(table, view, columns, match))

    try:
        retry_on_conflict(attempt, f"MERGE into {table}", MERGE_RETRY)
    finally:
        session.catalog.dropTempView(view)


# (table, newest change per key, key columns, data columns, TOAST placeholders to keep: column -> SQL
# literal; keyword `markers`: the delete markers to consult)
KeyedWrite = Callable[[str, DataFrame, list[str], list[str], dict[str, str] | None], None]
# (table, changes, data columns, the columns that identify a row image; keyword `markers`)
KeylessWrite = Callable[[str, DataFrame, list[str], list[str]], None]


@dataclass(frozen=True)
class Writes:
    """How a table's changes reach it, in one commit per table per batch: the MERGEs above by
    default. The benchmark passes an append here to measure everything but the row-level write,
    tests a MERGE that fails or waits."""

    keyed: KeyedWrite = merge_changes
    keyless: KeylessWrite = merge_multiset


def format_writes(fmt: Format) -> Writes:
    """The MERGEs, their guard in their source where the format's MERGE cannot read the table's row."""
    return Writes() if fmt.merge_reads_target else Writes(keyed=partial(merge_changes, guard_in_source=True))
