"""Apache Iceberg (`--table_format iceberg`): its DDL, its runtime's differences between Glue 5.0 and
6.0, and its maintenance.

Maintenance: every micro-batch commits one MERGE per table. Left alone, three things grow without bound:

    small data files   each MERGE writes the rows it inserts or updates as new files
    delete files       merge-on-read: each MERGE writes position deletes for the files it touches
    snapshots          one per commit, each pinning the files it references

plus orphan files (written by a commit that failed, referenced by nothing). The health is measured
from the metadata tables (`.files`, `.snapshots`, `.manifests`), the plan decided from configured
limits (`plan_maintenance`), and Iceberg's Spark procedures run in this order:

    rewrite_data_files             compact small files; apply the deletes of files with many of them
    rewrite_position_delete_files  merge small delete files, drop those of files compacted away
    rewrite_manifests              a few large manifests instead of many small ones
    expire_snapshots               old snapshots and the files only they reference
    remove_orphan_files            unreferenced files older than a safe minimum age

A procedure that loses a commit race to a concurrent writer is run again (conflicts.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyspark

from ...common.conflicts import retry_on_conflict
from ...common.lake_contract import WriteMode
from ...common.maintenance_policy import MIN_ORPHAN_AGE_HOURS, MaintenancePolicy
from ...common.settings import ArgumentError, CatalogType, Settings
from ...common.sqltext import properties_sql, quote, sql_string, table_properties
from ..maintenance import (
    Action,
    ActionResult,
    MaintenancePlan,
    MaintenanceReport,
    TableHealth,
    human_bytes,
    run_statement,
    split_table,
    timestamp_sql,
)
from .base import Format

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _iceberg_1_11(spark_version: str) -> bool:
    """Whether the runtime is Glue 6.0's (Spark 4, Iceberg 1.11.0), not Glue 5.0's (Spark 3.5, Iceberg
    1.7.1): what each Iceberg difference below is decided by."""
    return int(spark_version.split(".", 1)[0]) >= 4


def writes_deletion_vectors(spark_version: str) -> bool:
    """Whether the runtime's Iceberg writes format v3's deletion vectors: Iceberg 1.11.0 on Glue 6.0
    (Spark 4) does; Glue 5.0's Iceberg 1.7.1 (Spark 3.5) predates them (Iceberg 1.8)."""
    return _iceberg_1_11(spark_version)


def _split_names(text: str, names: Sequence[str]) -> list[str] | None:
    """`text` as names of `names` joined by commas (None: it is not)."""
    for name in names:
        if text == name:
            return [name]
        if text.startswith(name + ","):
            rest = _split_names(text[len(name) + 1 :], names)
            if rest is not None:
                return [name, *rest]
    return None


def declares_identifier_fields(spark_version: str) -> bool:
    """Whether a table's key is declared as Iceberg identifier fields (what other engines and writers
    read as the row key): from Glue 6.0's runtime (Iceberg 1.11.0). Glue 5.0's Iceberg 1.7.1 fails
    every merge-on-read MERGE into a table that has them ("Cannot add fieldId 1 as an identifier
    field: field does not exist"), so there the job removes them."""
    return _iceberg_1_11(spark_version)


def reads_vectorized(spark_version: str) -> bool:
    """Iceberg's vectorized Parquet reads are left on (Iceberg's default) from Glue 6.0's runtime
    (Spark 4, Iceberg 1.11.0), where they read correctly and cost less CPU (docs/BENCHMARKS.md), and
    turned off on Glue 5.0's (Spark 3.5, Iceberg 1.7.1), whose reader corrupts memory."""
    return _iceberg_1_11(spark_version)


class Iceberg(Format):
    """Apache Iceberg in the catalog `--catalog_name`: the Glue Data Catalog with S3FileIO on AWS, a
    Hadoop catalog over the warehouse folder locally. New tables get `--iceberg_format_version`: 2
    (merge-on-read deletes as position-delete files) or 3 (deletion vectors: one Puffin blob per data
    file, replaced by each commit that deletes more of its rows). A table moved or rewritten keeps its
    own version (its properties are carried)."""

    using = "iceberg"
    label = "Iceberg"
    title = "Apache Iceberg 1.11.0"
    glue_versions = ("6.0", "5.0")
    session_catalog = False
    maintenance_order = (Action.COMPACT, Action.DELETES, Action.MANIFESTS, Action.EXPIRE, Action.ORPHANS)

    def __init__(self, format_version: str = "2") -> None:
        self.format_version = format_version

    def configured(self, s: Settings) -> Format:
        """Iceberg at `--iceberg_format_version`, refused on a runtime that cannot write that version."""
        check_format_version(s.iceberg_format_version, pyspark.__version__)
        return Iceberg(s.iceberg_format_version)

    sort_orders = True
    key_fields = True
    reserved_properties = frozenset(
        {"current-snapshot-id", "format", "provider", "location", "owner", "sort-order", "identifier-fields"}
    )

    def session_conf(self, s: Settings) -> dict[str, str]:
        prefix = f"spark.sql.catalog.{s.catalog_name}"
        conf = {
            "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
            prefix: "org.apache.iceberg.spark.SparkCatalog",
            f"{prefix}.warehouse": s.warehouse,
            # A cached table object can be stale after our own MERGE (seen with a second reader).
            f"{prefix}.cache-enabled": "false",
            # CREATE/REPLACE TABLE ... AS SELECT keeps the query's nullability (Iceberg's default marks
            # every column optional): a type-change rewrite keeps its key columns required, and a Spark
            # reader that analysed the table before it (id NOT NULL) still plans against it after
            # ("Cannot project an optional field as non-null: id" otherwise). A moved table keeps its too.
            f"{prefix}.use-nullable-query-schema": "false",
        }
        if not reads_vectorized(pyspark.__version__):
            # Row-based reads on Glue 5.0: Iceberg 1.7.1's vectorized (Arrow) Parquet reader, on Spark
            # 3.5.4 and JDK 17, writes the second 5,000-row batch of a data file (read.parquet.
            # vectorization.batch-size) into an Arrow buffer of capacity 0 (an IndexOutOfBoundsException
            # with Arrow's bounds checks; Iceberg turns them off, and then the write lands in memory it
            # does not own: SIGSEGV at varying VM sites). Any file over 5,000 rows, so any table.
            conf["spark.sql.iceberg.vectorization.enabled"] = "false"
        if s.catalog_type == CatalogType.GLUE:
            conf[f"{prefix}.catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
            conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
            conf[f"{prefix}.glue.skip-name-validation"] = "false"
        else:
            conf[f"{prefix}.type"] = "hadoop"
        return conf

    def table_properties(self, write_mode: WriteMode) -> dict[str, str]:
        mode = WriteMode(write_mode).value
        return {
            "format-version": self.format_version,
            "write.delete.mode": mode,
            "write.update.mode": mode,
            "write.merge.mode": mode,
            # Position deletes, not equality deletes: every engine (Athena included) reads them; one
            # delete file per data file (v3's deletion vectors are always so).
            "write.delete.granularity": "file",
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "100",
        }

    def marker_properties(self) -> dict[str, str]:
        return self.table_properties(WriteMode.MERGE_ON_READ)

    def current_version(self, spark: SparkSession, table: str) -> str:
        """The table's current snapshot (Athena: `FOR VERSION AS OF <id>`), from Iceberg's Java API: a
        query of the `.refs` table costs a Spark job (0.27 vs 0.007 s for two tables, docs/BENCHMARKS.md)."""
        loaded = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
        return str(loaded.currentSnapshot().snapshotId())

    def write_order_sql(self, table: str, order: list[tuple[str, str, str, str]]) -> str | None:
        """WRITE ORDERED BY from the table's sort fields before a rewrite (REPLACE TABLE resets the sort
        order): (column, Iceberg transform as `SortField.transform()` prints it, ASC|DESC, NULLS_FIRST|
        NULLS_LAST) each. Metadata only; it orders later writes, not the rows already written."""
        if not order:
            return None
        terms = []
        for column, transform, direction, nulls in order:
            name, _, arg = transform.rstrip("]").partition("[")
            expr = {
                "identity": quote(column),
                "bucket": f"bucket({arg}, {quote(column)})",
                "truncate": f"truncate({quote(column)}, {arg})",
            }.get(name) or f"{name}s({quote(column)})"  # year, month, day, hour -> years(c) ...
            terms.append(f"{expr} {direction} {nulls.replace('_', ' ')}")
        return f"ALTER TABLE {table} WRITE ORDERED BY {', '.join(terms)}"

    def declared_key(self, properties: dict[str, str], column_names: Sequence[str]) -> list[str]:
        """The identifier fields from the catalog's `identifier-fields` property, `[a,b]`: the names
        joined by commas, so a name holding a comma is found by matching the table's column names."""
        text = properties.get("identifier-fields", "")
        if not (text.startswith("[") and text.endswith("]")) or text == "[]":
            return []
        return _split_names(text[1:-1], sorted(column_names, key=len, reverse=True)) or []

    def key_fields_sql(
        self,
        table: str,
        declared: Sequence[str],
        keys: Sequence[str],
        columns: Sequence[tuple[str, bool]],
        spark_version: str = pyspark.__version__,
    ) -> str | None:
        """The statement that makes `table`'s identifier fields (now `declared`) its key `keys`, or
        None when they are already. `columns`: (name, nullable) of the table's columns. Identifier
        fields must be required columns: a key with an optional column (a re-key onto columns that
        were not NOT NULL in the lake), a keyless table and Glue 5.0's runtime get none (and lose
        any they have: declares_identifier_fields). Metadata only."""
        by_name = {n.lower(): (n, nullable) for n, nullable in columns}
        wanted = [by_name[k.lower()][0] for k in keys if k.lower() in by_name and not by_name[k.lower()][1]]
        if not declares_identifier_fields(spark_version) or len(wanted) != len(keys):
            wanted = []
        if {d.lower() for d in declared} == {w.lower() for w in wanted}:
            return None
        if wanted:
            return f"ALTER TABLE {table} SET IDENTIFIER FIELDS {', '.join(quote(k) for k in wanted)}"
        return f"ALTER TABLE {table} DROP IDENTIFIER FIELDS {', '.join(quote(k) for k in declared)}"

    # ------------------------------------------------------------------ maintenance (maintenance.py)
    def maintenance_health(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> TableHealth:
        return table_health(spark, table, policy)

    def maintenance_plan(
        self, health: TableHealth, policy: MaintenancePolicy, now_s: float, force: bool
    ) -> MaintenancePlan:
        return plan_maintenance(health, policy, now_s, force=force)

    def maintenance_report(self, table: str, before: TableHealth, plan: MaintenancePlan) -> MaintenanceReport:
        return IcebergReport(table, before, plan)

    def prepare_maintenance(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> None:
        ensure_commit_retries(spark, table)

    def prepare_shared_writes(self, spark: SparkSession, table: str) -> None:
        # Both writers of the table (the stream and the maintenance job) get patient commit retries.
        ensure_commit_retries(spark, table)

    def due_after(
        self, spark: SparkSession, report: MaintenanceReport, action: Action, policy: MaintenancePolicy
    ) -> bool:
        """Expiry, unplanned: the rewrites' own commits may have pushed the table over its snapshot limit."""
        if action is not Action.EXPIRE or not any(a in REWRITES for a in report.plan.actions):
            return False
        snapshots = int(spark.sql(f"SELECT count(*) AS n FROM {report.table}.snapshots").first()["n"])  # type: ignore[index]
        return snapshots > policy.max_snapshots

    def run_maintenance(
        self,
        spark: SparkSession,
        table: str,
        action: Action,
        policy: MaintenancePolicy,
        now_s: float,
        sleep: Callable[[float], None],
    ) -> ActionResult:
        return run_action(spark, table, action, policy, now_s, sleep)


def check_format_version(version: str, spark_version: str) -> None:
    """Refuse an Iceberg format version the runtime cannot write (ArgumentError, before Spark starts)."""
    if version != "2" and not writes_deletion_vectors(spark_version):
        raise ArgumentError(
            f"--iceberg_format_version {version} needs Glue 6.0 (Iceberg 1.11.0): this runtime (Spark "
            f"{spark_version}, Glue 5.0's Iceberg 1.7.1) writes no deletion vectors; leave it out (2)"
        )


# ---------------------------------------------------------------------------------- maintenance
# Both writers of a table (the streaming MERGE and a maintenance job) lose the catalog race more
# often than one writer does; Iceberg's defaults give up after 4 retries.
COMMIT_RETRY_PROPERTIES = {
    "commit.retry.num-retries": "10",
    "commit.retry.min-wait-ms": "250",
    "commit.retry.max-wait-ms": "30000",
    "commit.retry.total-timeout-ms": "600000",
}


def health_sql(table: str, small_file_bytes: int) -> str:
    """One query over three metadata tables. `.files` lists the current snapshot's data files
    (content 0) and delete files (1 position, 2 equality): the union of `.data_files` and
    `.delete_files`. `.snapshots` is the history still kept; `.manifests` the current snapshot's."""
    return (
        "SELECT f.*, s.*, m.* FROM "
        "(SELECT count_if(content = 0) AS data_files, "
        f"count_if(content = 0 AND file_size_in_bytes < {int(small_file_bytes)}) AS small_data_files, "
        "coalesce(sum(CASE WHEN content = 0 THEN file_size_in_bytes END), 0) AS data_bytes, "
        "coalesce(sum(CASE WHEN content = 0 THEN record_count END), 0) AS data_records, "
        "count_if(content <> 0) AS delete_files, "
        "coalesce(sum(CASE WHEN content <> 0 THEN record_count END), 0) AS deleted_rows "
        f"FROM {table}.files) f "
        "CROSS JOIN (SELECT count(*) AS snapshots, unix_micros(min(committed_at)) AS oldest_snapshot_us "
        f"FROM {table}.snapshots) s "
        f"CROSS JOIN (SELECT count(*) AS manifests FROM {table}.manifests) m"
    )


def table_health(spark: SparkSession, table: str, policy: MaintenancePolicy) -> TableHealth:
    r = spark.sql(health_sql(table, policy.small_file_bytes)).first()
    assert r is not None  # aggregates without GROUP BY always return one row
    oldest = r["oldest_snapshot_us"]
    return TableHealth(
        table=table,
        data_files=int(r["data_files"]),
        small_data_files=int(r["small_data_files"]),
        data_bytes=int(r["data_bytes"]),
        data_records=int(r["data_records"]),
        delete_files=int(r["delete_files"]),
        deleted_rows=int(r["deleted_rows"]),
        snapshots=int(r["snapshots"]),
        oldest_snapshot_s=None if oldest is None else oldest / 1e6,
        manifests=int(r["manifests"]),
    )


ORDER = Iceberg.maintenance_order
REWRITES = (Action.COMPACT, Action.DELETES, Action.MANIFESTS)


def plan_maintenance(h: TableHealth, p: MaintenancePolicy, now_s: float, force: bool = False) -> MaintenancePlan:
    """Does this table need maintenance, and which? Each limit is compared with the table's health;
    `force` plans every action (a run by hand)."""
    why: dict[Action, str] = {}
    if h.small_data_files > p.max_small_files:
        why[Action.COMPACT] = f"{h.small_data_files} small data files > {p.max_small_files}"
    if h.delete_files > p.max_delete_files:
        # Deletes disappear only when their data files are rewritten (compaction applies them) or
        # when the delete files themselves are merged; both are needed.
        why.setdefault(Action.COMPACT, f"{h.delete_files} delete files > {p.max_delete_files}")
        why[Action.DELETES] = f"{h.delete_files} delete files > {p.max_delete_files}"
    if Action.COMPACT in why and h.delete_files and Action.DELETES not in why:
        # Compaction applies deletes but leaves their files behind, dangling, until they are rewritten.
        why[Action.DELETES] = "drop the deletes of compacted files"
    if h.manifests > p.max_manifests:
        why[Action.MANIFESTS] = f"{h.manifests} manifests > {p.max_manifests}"
    retention_s = p.snapshot_retention_minutes * 60
    oldest_age = None if h.oldest_snapshot_s is None else now_s - h.oldest_snapshot_s
    if h.snapshots > p.max_snapshots:
        why[Action.EXPIRE] = f"{h.snapshots} snapshots > {p.max_snapshots}"
    elif retention_s and h.snapshots > p.retain_last_snapshots and oldest_age and oldest_age > 2 * retention_s:
        # Twice the retention, not once: expiry then runs about once per retention period, not on
        # every check as soon as the oldest snapshot ages past the cut-off.
        why[Action.EXPIRE] = f"oldest snapshot {oldest_age / 60:.0f} min old > 2 x {p.snapshot_retention_minutes} min"
    if p.remove_orphans:
        why[Action.ORPHANS] = f"enabled, older than {p.orphan_min_age_hours} h"
    if force:
        for a in ORDER:
            if a is not Action.ORPHANS or p.remove_orphans:
                why.setdefault(a, "forced")
    return MaintenancePlan(tuple((a, why[a]) for a in ORDER if a in why))


def _options(opts: dict[str, Any]) -> str:
    return "map(" + ", ".join(f"{sql_string(k)}, {sql_string(str(v))}" for k, v in opts.items()) + ")"


def rewrite_data_files_sql(table: str, p: MaintenancePolicy) -> str:
    catalog, ref = split_table(table)
    opts = {
        "target-file-size-bytes": p.target_file_size_bytes,
        "min-input-files": p.min_input_files,
        "delete-file-threshold": p.delete_file_threshold,
        # Each file group commits on its own: a conflict with a streaming commit loses one group,
        # not the whole run, and keeps each commit short.
        "partial-progress.enabled": "true",
        # The streaming job shares these executors when maintenance runs in it.
        "max-concurrent-file-group-rewrites": 2,
    }
    return f"CALL {catalog}.system.rewrite_data_files(table => {sql_string(ref)}, strategy => 'binpack', options => {_options(opts)})"


def rewrite_position_delete_files_sql(table: str, p: MaintenancePolicy) -> str:
    catalog, ref = split_table(table)
    # All of them: delete files are small, and a lone delete file left dangling by compaction would
    # otherwise stay below min-input-files forever.
    opts = {"rewrite-all": "true", "partial-progress.enabled": "true"}
    return (
        f"CALL {catalog}.system.rewrite_position_delete_files(table => {sql_string(ref)}, options => {_options(opts)})"
    )


def rewrite_manifests_sql(table: str) -> str:
    catalog, ref = split_table(table)
    return f"CALL {catalog}.system.rewrite_manifests(table => {sql_string(ref)})"


def expire_snapshots_sql(table: str, older_than_s: float, retain_last: int) -> str:
    catalog, ref = split_table(table)
    return (
        f"CALL {catalog}.system.expire_snapshots(table => {sql_string(ref)}, older_than => {timestamp_sql(older_than_s)}, "
        f"retain_last => {int(retain_last)})"
    )


def remove_orphan_files_sql(table: str, older_than_s: float) -> str:
    catalog, ref = split_table(table)
    return f"CALL {catalog}.system.remove_orphan_files(table => {sql_string(ref)}, older_than => {timestamp_sql(older_than_s)})"


def procedure_sql(action: Action, table: str, p: MaintenancePolicy, now_s: float) -> str:
    if action is Action.COMPACT:
        return rewrite_data_files_sql(table, p)
    if action is Action.DELETES:
        return rewrite_position_delete_files_sql(table, p)
    if action is Action.MANIFESTS:
        return rewrite_manifests_sql(table)
    if action is Action.EXPIRE:
        return expire_snapshots_sql(table, now_s - p.snapshot_retention_minutes * 60, p.retain_last_snapshots)
    return remove_orphan_files_sql(table, now_s - max(p.orphan_min_age_hours, MIN_ORPHAN_AGE_HOURS) * 3600)


def outcome(action: Action, rows: list[dict[str, Any]]) -> str:
    """A procedure's result rows in a few words."""
    r = rows[0] if rows else {}
    if action is Action.COMPACT:
        return f"{r.get('rewritten_data_files_count', 0)}->{r.get('added_data_files_count', 0)} data files"
    if action is Action.DELETES:
        return f"{r.get('rewritten_delete_files_count', 0)}->{r.get('added_delete_files_count', 0)} delete files"
    if action is Action.MANIFESTS:
        return f"{r.get('rewritten_manifests_count', 0)}->{r.get('added_manifests_count', 0)} manifests"
    if action is Action.EXPIRE:
        freed = sum(v for k, v in r.items() if k.startswith("deleted_") and isinstance(v, int))
        return f"{freed} files deleted"
    return f"{len(rows)} orphan files deleted"


def ensure_commit_retries(spark: SparkSession, table: str) -> None:
    """Set COMMIT_RETRY_PROPERTIES on the table where they differ (one metadata commit, once)."""
    props = table_properties(spark, table)
    missing = {k: v for k, v in COMMIT_RETRY_PROPERTIES.items() if props.get(k) != v}
    if missing:
        kv = properties_sql(missing)
        retry_on_conflict(lambda: spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({kv})"), f"properties {table}")


def run_action(
    spark: SparkSession,
    table: str,
    action: Action,
    policy: MaintenancePolicy,
    now_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> ActionResult:
    """One Iceberg procedure, re-run on commit conflicts (run_statement)."""
    sql = procedure_sql(action, table, policy, now_s)
    return run_statement(spark, table, action, sql, lambda rows: outcome(action, rows), policy, sleep)


class IcebergReport(MaintenanceReport):
    def state(self) -> str:
        """Nothing due: the table's health; else each measure before and after."""
        if not self.plan.due:
            return self.before.brief()
        b, a = self.before, self.after or self.before
        return (
            f"data files {b.data_files}->{a.data_files}, delete files {b.delete_files}->{a.delete_files}, "
            f"snapshots {b.snapshots}->{a.snapshots}, manifests {b.manifests}->{a.manifests}, "
            f"avg data file {human_bytes(b.avg_data_file_bytes)}->{human_bytes(a.avg_data_file_bytes)}"
        )
