"""Delta Lake (`--table_format delta`): its DDL and its maintenance, Delta's own commands, never Iceberg's
procedures (a Delta table has no `.files` metadata table and Delta's catalog no `system` procedures).

    OPTIMIZE  bin-packs small files into files of about `--maintenance_target_file_size_mb`; it
              commits no data change, and nothing at all when no two small files can be packed
    VACUUM    deletes the files that no table version younger than the retention references: the
              ones earlier MERGEs, rewrites and OPTIMIZE replaced (Iceberg's expire_snapshots) and
              the ones no commit wrote (Iceberg's remove_orphan_files)

The retention is the table property `delta.deletedFileRetentionDuration`, set from
`--maintenance_snapshot_retention_minutes` before VACUUM: Delta's VACUUM refuses a retention
shorter than the table's own (its safety check, default 7 days), and the property tells every
other writer of the table the same number. Delta keeps versions in its log by time
(`delta.logRetentionDuration`, 30 days), not by count, and its MERGE rewrites whole files (no
deletion vectors), so the Iceberg limits on snapshots, manifests and delete files mean nothing
here: `NO_DELTA_MEANING` lists them, and the maintenance job refuses them with `--table_format delta`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ...common.conflicts import retry_on_conflict
from ...common.lake_contract import WriteMode
from ...common.maintenance_policy import MaintenancePolicy
from ...common.settings import Settings
from ...common.sqltext import properties_sql, table_properties
from ..maintenance import (
    Action,
    ActionResult,
    MaintenancePlan,
    MaintenanceReport,
    TableHealth,
    human_bytes,
    run_statement,
)
from .base import Columns, Format
from .capabilities import Capability

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
# OPTIMIZE's sizes are session settings in Delta 3.3: the file size it writes, and the size under
# which a file is packed with others.
OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
# VACUUM lists the table's folders in this many Spark tasks, 10,000 by default: 80 s for a table of
# one folder on 2 busy local cores, 9 s with one task per core.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
DELTA_ORDER = (Action.COMPACT, Action.VACUUM)

_NO_DELETE_FILES = (
    "Delta's MERGE rewrites the files it touches (no deletion vectors): a Delta table has no delete files"
)
_VERSIONS_BY_TIME = "Delta keeps table versions in its log by time (delta.logRetentionDuration), not by count"
# The maintenance arguments that mean nothing for a Delta table, each with the reason.
NO_DELTA_MEANING: dict[str, str] = {
    "maintenance_min_input_files": "OPTIMIZE packs any two or more small files",
    "maintenance_max_delete_files": _NO_DELETE_FILES,
    "maintenance_delete_file_threshold": _NO_DELETE_FILES,
    "maintenance_max_snapshots": _VERSIONS_BY_TIME,
    "maintenance_retain_last_snapshots": _VERSIONS_BY_TIME,
    "maintenance_max_manifests": "a Delta table has no manifests (Delta checkpoints its own log)",
    "maintenance_orphan_min_age_hours": (
        "VACUUM deletes unreferenced files after one retention, --maintenance_snapshot_retention_minutes"
    ),
}


# Column mapping by name: Delta renames and drops a column in the metadata only (data files keep
# their physical column names); without it Delta refuses RENAME COLUMN and DROP COLUMN. Reader 2 /
# writer 5 is the protocol that feature needs.
DELTA_COLUMN_MAPPING = {
    "delta.columnMapping.mode": "name",
    "delta.minReaderVersion": "2",
    "delta.minWriterVersion": "5",
}


# The lake types (simpleString) a Delta table holds only with a table feature enabled, and the feature.
DELTA_TYPE_FEATURES = {"timestamp_ntz": "timestampNtz"}


class Delta(Format):
    """Delta Lake 4.2.0 (Glue 6.0's `--datalake-formats delta`): Delta's catalog as Spark's session
    catalog `spark_catalog`, over the Glue Data Catalog on AWS (Glue's Hive-compatible metastore)
    and over Spark's in-memory catalog locally, managed tables under the warehouse folder.

    Of the lake types the job writes (connect_types.py), only timestamp_ntz is behind a Delta table
    feature (`timestampNtz`, DELTA_TYPE_FEATURES): Delta enables it by itself on a CREATE TABLE with such
    a column, never on an ADD COLUMN, so the job names it in both. It moves the table to Delta's
    table-features protocol (reader 3, writer 7).

    Writes are copy-on-write (Delta's MERGE, UPDATE and DELETE rewrite the files they touch;
    `--write_mode` does not apply). Delta 4.2 can widen int -> bigint, float -> double and decimal
    precision in place, but only with its typeWidening table feature, which every reader of the table
    must know (Athena's Delta reader is not documented to): those changes are table rewrites here
    (`widens_in_place` False), each one commit like any other rewrite."""

    using = "delta"
    label = "Delta Lake"
    title = "Delta Lake 4.2.0"
    refuses: ClassVar[dict[Capability, str]] = {
        Capability.MERGE_ON_READ: (
            "Delta's MERGE, UPDATE and DELETE rewrite the files they touch (copy-on-write; `--write_mode` does not apply)"
        ),
        Capability.WIDEN_IN_PLACE: (
            "Delta 4.2's type widening (`delta.enableTypeWidening`) is a reader-and-writer table feature that "
            "Athena's Delta reader is not documented to read: the job rewrites the table with the values "
            "converted, in one commit"
        ),
        Capability.STREAM_MAINTENANCE: (
            "the maintenance job's OPTIMIZE and VACUUM commit beside the stream under Delta's own concurrency control"
        ),
    }
    jars = ("delta", "delta-spark")
    meaningless_limits = NO_DELTA_MEANING
    maintenance_order = DELTA_ORDER
    # Delta keeps these itself: the next column id, and what `SHOW TBLPROPERTIES` adds.
    reserved_properties = frozenset({"delta.columnMapping.maxColumnId", "location", "provider", "owner"})

    def session_conf(self, s: Settings) -> dict[str, str]:
        conf = {
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            # Managed tables (and the namespace's database) under the warehouse root.
            "spark.sql.warehouse.dir": s.warehouse,
            # Delta reads its log into this many partitions (default 50): a small table's state in 50
            # tasks costs more than the batch's MERGE.
            "spark.databricks.delta.snapshotPartitions": str(max(1, s.shuffle_partitions)),
            # Delta writes through Spark's Parquet writer, which by default refuses dates and times
            # before 1582 (a DATE '0001-01-01' of the source): write them as they are, proleptic
            # Gregorian, as Iceberg does and Athena reads them.
            "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
            "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
        }
        # On Glue the session catalog's metastore is the Glue Data Catalog by the job parameter
        # `--enable-glue-datacatalog` (with `--datalake-formats delta`), not by a setting here.
        return conf

    def table_properties(self, write_mode: WriteMode) -> dict[str, str]:
        return dict(DELTA_COLUMN_MAPPING)

    def marker_properties(self) -> dict[str, str]:
        return {}

    def current_version(self, spark: SparkSession, table: str) -> str:
        """The table's newest commit (Spark: `VERSION AS OF <n>`)."""
        (row,) = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").select("version").collect()
        return str(row[0])

    def type_features(self, types: list[T.DataType]) -> dict[str, str]:
        names = sorted({f for t in types if (f := DELTA_TYPE_FEATURES.get(t.simpleString()))})
        return {f"delta.feature.{name}": "supported" for name in names}

    def rewrite_sql(
        self, table: str, current: list[str], final: Columns, props: dict[str, str], partitioning: Sequence[str] = ()
    ) -> str:
        """Delta's CREATE OR REPLACE TABLE ... AS SELECT over the table itself: one commit, the
        earlier versions readable by time travel until VACUUM. Delta 3.3 writes the new schema
        nullable whatever the query's (and refuses ALTER COLUMN ... SET NOT NULL), so key columns
        lose NOT NULL here; its readers pin the version they analysed, so none breaks on it."""
        sql = super().rewrite_sql(table, current, final, props, partitioning)
        return sql.replace("REPLACE TABLE", "CREATE OR REPLACE TABLE", 1)

    # ------------------------------------------------------------------ maintenance (maintenance.py)
    def maintenance_health(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> TableHealth:
        return delta_health(spark, table)

    def maintenance_plan(
        self, health: TableHealth, policy: MaintenancePolicy, now_s: float, force: bool
    ) -> MaintenancePlan:
        return plan_delta_maintenance(health, policy, force=force)

    def maintenance_report(self, table: str, before: TableHealth, plan: MaintenancePlan) -> MaintenanceReport:
        return DeltaReport(table, before, plan)

    def prepare_maintenance(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> None:
        """OPTIMIZE's file sizes, and VACUUM's listing in one task per core."""
        spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(policy.target_file_size_bytes))
        spark.conf.set(OPTIMIZE_MIN_FILE_SIZE, str(policy.small_file_bytes))
        spark.conf.set(LISTING_PARALLELISM, str(spark.sparkContext.defaultParallelism))

    def run_maintenance(
        self,
        spark: SparkSession,
        table: str,
        action: Action,
        policy: MaintenancePolicy,
        now_s: float,
        sleep: Callable[[float], None],
    ) -> ActionResult:
        """OPTIMIZE, or VACUUM at the policy's retention (set on the table first), whose outcome is
        read from the table's history."""
        if action is not Action.VACUUM:
            return run_statement(spark, table, action, delta_statement(action, table), optimize_outcome, policy, sleep)
        ensure_retention(spark, table, policy)
        res = run_statement(spark, table, action, delta_statement(action, table), lambda _: "", policy, sleep)
        if not res.error:
            res.summary = vacuum_outcome(spark, table)
        return res


# ---------------------------------------------------------------------------------- maintenance
def retention_value(minutes: int) -> str:
    return f"interval {int(minutes)} minutes"


def delta_health(spark: SparkSession, table: str) -> TableHealth:
    """The table's file count and size from its current version (DESCRIBE DETAIL: no per-file
    sizes, so every file is counted; OPTIMIZE itself leaves the large ones alone)."""
    d = spark.sql(f"DESCRIBE DETAIL {table}").first()
    assert d is not None  # DESCRIBE DETAIL has one row
    return TableHealth(table=table, data_files=int(d["numFiles"] or 0), data_bytes=int(d["sizeInBytes"] or 0))


def plan_delta_maintenance(h: TableHealth, p: MaintenancePolicy, force: bool = False) -> MaintenancePlan:
    """OPTIMIZE when the table has more files than `max_small_files`; VACUUM when orphan removal
    is on (the scheduled job's default); `force` plans both."""
    why: dict[Action, str] = {}
    if h.data_files > p.max_small_files:
        why[Action.COMPACT] = f"{h.data_files} files > {p.max_small_files}"
    if p.remove_orphans:
        why[Action.VACUUM] = f"files unreferenced for {p.snapshot_retention_minutes} min"
    if force:
        for a in DELTA_ORDER:
            why.setdefault(a, "forced")
    return MaintenancePlan(tuple((a, why[a]) for a in DELTA_ORDER if a in why))


def delta_statement(action: Action, table: str) -> str:
    if action is Action.COMPACT:
        return f"OPTIMIZE {table}"
    if action is Action.VACUUM:
        return f"VACUUM {table}"  # the retention is the table's RETENTION_PROPERTY
    raise ValueError(f"{action} is not a Delta maintenance action")


def optimize_outcome(rows: list[dict[str, Any]]) -> str:
    m = (rows[0].get("metrics") if rows else None) or {}
    return f"{m.get('numFilesRemoved', 0)}->{m.get('numFilesAdded', 0)} files"


def vacuum_outcome(spark: SparkSession, table: str) -> str:
    """VACUUM returns only the table's path; Delta records what it deleted as a `VACUUM END` version."""
    last = spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()
    if last is not None and last["operation"] == "VACUUM END":
        return f"{last['operationMetrics'].get('numDeletedFiles', 0)} files deleted"
    return "done"


def ensure_retention(spark: SparkSession, table: str, p: MaintenancePolicy) -> None:
    """Set RETENTION_PROPERTY to the policy's retention where it differs (one metadata commit)."""
    value = retention_value(p.snapshot_retention_minutes)
    if table_properties(spark, table).get(RETENTION_PROPERTY) != value:
        kv = properties_sql({RETENTION_PROPERTY: value})
        sql = f"ALTER TABLE {table} SET TBLPROPERTIES ({kv})"
        retry_on_conflict(lambda: spark.sql(sql), f"properties {table}", p.retry)


class DeltaReport(MaintenanceReport):
    def state(self) -> str:
        b, a = self.before, self.after or self.before
        return (
            f"files {b.data_files}->{a.data_files}, "
            f"avg {human_bytes(b.avg_data_file_bytes)}->{human_bytes(a.avg_data_file_bytes)}"
        )
