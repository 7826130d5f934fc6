"""Apache Hudi (`--table_format hudi`): its DDL and its maintenance, Hudi 0.15's own table services, run
through its Spark SQL procedures (never an Iceberg procedure or metadata table):

    run_compaction   merges a merge-on-read table's log files into new base files (scheduleAndExecute:
                     every file group with log files) when its latest file slices hold more than
                     `--maintenance_max_delete_files` log files: Iceberg's rewrite of its delete files
    run_clustering   packs the table's small base files into files of about
                     `--maintenance_target_file_size_mb` (one `replacecommit`; a lone small file is left)
    run_clean        deletes the file versions the newest `--maintenance_retain_last_snapshots` commits
                     no longer read (KEEP_LATEST_COMMITS, as the writer's inline cleaning): Iceberg's
                     snapshot expiry
    archive_commits  moves the oldest commits off the active timeline (`.hoodie/`) into its archive
                     (`.hoodie/archived/`) when it holds more than `--maintenance_max_snapshots` (also
                     when clustering's own commit pushed it over), down to the newest retained + 1
                     (`hudi_timeline_bounds`): Iceberg's snapshot limit

The health comes from Hudi's procedures too: the latest base file and log files of each file group
(`show_fsview_latest`), every base file version kept (`show_fsview_all`) and the completed commits
of the active timeline (`show_commits`). The job's tables are not partitioned, so one partition
path, the table's root, holds every file.

Hudi 0.15 plans its table services in single-writer mode: run them where nothing else writes the
table at the same time, i.e. the streaming job between micro-batches (StreamMaintainer), or the
maintenance job while the streaming job is stopped (docs/MAINTENANCE.md, "Hudi tables").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ...common.lake_contract import CDC_SEQ, WriteMode
from ...common.maintenance_policy import MaintenancePolicy
from ...common.names import avro_column_name
from ...common.settings import Settings
from ...common.sqltext import quote, sql_string
from ..maintenance import (
    Action,
    ActionResult,
    MaintenancePlan,
    MaintenanceReport,
    TableHealth,
    human_bytes,
    run_statement,
    split_table,
)
from .base import Columns, Format
from .capabilities import Capability

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

# The columns Hudi adds to every table (its commit, record key and file of each row).
HUDI_META_COLUMNS = frozenset(
    {"_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"}
)


def hudi_timeline_bounds(policy: MaintenancePolicy) -> tuple[int, int]:
    """(min, max) commits of a Hudi table's active timeline for the maintenance's archival
    (below): once it holds more than `--maintenance_max_snapshots` commits, the oldest
    move to the timeline's archive until the newest `--maintenance_retain_last_snapshots` + 1 are left
    (Hudi requires its archival to keep more commits than cleaning retains, and the maximum to exceed
    the minimum)."""
    keep = policy.retain_last_snapshots + 1
    return keep, max(policy.max_snapshots, keep + 1)


def hudi_table_services(policy: MaintenancePolicy) -> dict[str, str]:
    """Hudi's writer maintains a copy-on-write table inline, after each commit: it packs inserts into
    the table's small files, cleans the file versions no longer needed and archives its timeline.
    File sizing and cleaning follow the job's maintenance limits where they mean the same thing, as
    the maintenance's Hudi actions do (below): files grow to
    `--maintenance_target_file_size_mb` (a file under 75% of it takes new rows), and cleaning keeps
    the file versions of the newest `--maintenance_retain_last_snapshots` commits (readable by time
    travel and incremental queries). The writer's archival keeps Hudi's own short timeline (20 to 30
    commits, more when cleaning retains more: Hudi requires archival to keep more commits than
    cleaning retains); the maintenance's archival applies `--maintenance_max_snapshots` on top. On a
    merge-on-read table Hudi's batch writes compact inline (its default outside streaming sinks) once
    a file group has `--maintenance_max_delete_files` delta commits (Hudi's own default: 5), the bound
    the maintenance's compaction applies to its log files."""
    retained = policy.retain_last_snapshots
    return {
        "hoodie.parquet.max.file.size": str(policy.target_file_size_bytes),
        "hoodie.parquet.small.file.limit": str(policy.small_file_bytes),
        "hoodie.clean.automatic": "true",
        "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
        "hoodie.cleaner.commits.retained": str(retained),
        "hoodie.keep.min.commits": str(max(20, retained + 1)),
        "hoodie.keep.max.commits": str(max(30, retained + 11)),
        "hoodie.compact.inline.max.delta.commits": str(policy.max_delete_files),
    }


# Cleaning first: the versions clustering replaces can only be cleaned once its commit is older than
# the retained ones (a later run), so cleaning before it frees the older versions now and loses nothing.
# Compaction of the log files before clustering: clustering then packs base files that hold every row.
HUDI_ORDER = (Action.CLEAN, Action.LOGS, Action.COMPACT, Action.ARCHIVE)
# Rows a listing procedure returns at most (each defaults to 10 or 20).
LISTING_LIMIT = 1_000_000
# A table property of hoodie.properties: the partitions of the table's metadata table, if it has one.
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"

_NO_DELETE_FILES = (
    "Hudi compacts every log file of a merge-on-read table once they are more than --maintenance_max_delete_files: "
    "no per-file threshold"
)
_NO_ORPHANS = (
    "Hudi 0.15 has no orphan file removal: its writer rolls back a failed write's files, and run_clean deletes "
    "the file versions that no retained commit reads"
)
# The maintenance arguments that mean nothing for a Hudi table, each with the reason.
NO_HUDI_MEANING: dict[str, str] = {
    "maintenance_min_input_files": "Hudi's clustering packs any two or more small files",
    "maintenance_delete_file_threshold": _NO_DELETE_FILES,
    "maintenance_max_manifests": "a Hudi table has no manifests (its timeline is archived instead)",
    "maintenance_snapshot_retention_minutes": (
        "Hudi's cleaning keeps the file versions of the newest --maintenance_retain_last_snapshots commits, "
        "by count, not by time"
    ),
    "maintenance_remove_orphans": _NO_ORPHANS,
    "maintenance_orphan_min_age_hours": _NO_ORPHANS,
}


# The table property that makes Athena read a Hudi table with its Hudi 0.15.0 connector, the version
# Glue 5.0 writes (https://docs.aws.amazon.com/athena/latest/ug/querying-hudi-in-athena-considerations-and-limitations.html).
ATHENA_NATIVE_HUDI = "athena_enable_native_hudi_connector_implementation"


def table_type(write_mode: WriteMode) -> str:
    """Hudi's table type (its `type` property) of `--write_mode`."""
    return "mor" if WriteMode(write_mode) is WriteMode.MERGE_ON_READ else "cow"


class Hudi(Format):
    """Apache Hudi 0.15.0 (Glue 5.0's `--datalake-formats hudi`): Hudi's catalog as Spark's session
    catalog `spark_catalog`, over the Glue Data Catalog on AWS and Spark's in-memory catalog locally,
    managed tables under the warehouse folder.

    Hudi's own idioms carry the lake contract: the primary key is the table's record key, and the
    source-log position `_cdc_seq` a copy-on-write table's precombine (ordering) field, so Hudi itself
    keeps the stored row when a change older than it is written (the MERGE's guard decides the rest: ties by Kafka
    offset, deletes). Tables are copy-on-write, or merge-on-read with `--write_mode merge-on-read`
    (type `mor`: updates and deletes appended to log files, merged on read and compacted by the
    maintenance). Hudi's MERGE into a merge-on-read table cannot read the stored row in its clauses,
    so the position guard runs in the MERGE's source (`merge_reads_target`, merge.guarded_source_sql),
    for both table types. Hudi's schema evolution on read (`hoodie.schema.on.read.enable`) is on: ADD COLUMN,
    ALTER COLUMN TYPE, RENAME COLUMN and DROP COLUMN are metadata only, recorded in Hudi's own schema
    history; without it Hudi 0.15 can only add columns, and it has no REPLACE TABLE. A table's
    record key is fixed at its creation (`fixed_key`). File sizing and cleaning run inline in Hudi's
    writer, by the job's maintenance limits (`hudi_table_services`)."""

    using = "hudi"
    label = "Apache Hudi"
    title = "Apache Hudi 0.15.0"
    refuses: ClassVar[dict[Capability, str]] = {
        Capability.KEYLESS_TABLES: (
            "Hudi 0.15's MERGE into a table without a record key applies a matched DELETE as an update: such "
            "tables' changes go to the dead letters"
        ),
        Capability.KEY_CHANGE: (
            "a Hudi table's record key is fixed at its creation: the events under the new key go to the dead letters"
        ),
        Capability.RENAMED_KEY_COLUMN: (
            "the record key fields are fixed: the lake column keeps its name, the events under the new name go to "
            "the dead letters"
        ),
        Capability.RECREATED_WITH_ANOTHER_KEY: (
            "Hudi 0.15 has no REPLACE TABLE: the batch fails naming the fix (drop the lake table)"
        ),
        Capability.READ_POINT: (
            "the job holds whole source transactions but records no Hudi commit instant to read at: readers see each "
            "table's latest commit"
        ),
        Capability.MAINTENANCE_BESIDE_STREAM: (
            "Hudi 0.15 plans its table services in single-writer mode: run the maintenance job while the stream is "
            "stopped (the stream maintains its tables itself)"
        ),
    }
    # Glue 5.0 only: Athena reads Hudi 0.14/0.15 tables, and Hudi's Spark 4 bundle is not on Maven Central
    # (the template's rule HudiNeedsGlue50; docs/DEPLOY.md, "Glue versions").
    glue_versions = ("5.0",)
    jars = ("hudi", "hudi-spark3.5-bundle")
    meaningless_limits = NO_HUDI_MEANING
    maintenance_order = HUDI_ORDER
    system_columns = HUDI_META_COLUMNS
    # Hudi's tables are v1 tables to Spark: `writeTo` refuses them, `insertInto` (INSERT INTO) works.
    v2_writes = False
    # Its MERGE appends a merge-on-read table's updates to log files without the stored row (apache/hudi#12180).
    merge_reads_target = False
    # The table's own path: a table made from it by AS SELECT gets its own.
    reserved_properties = frozenset({"option.path", "path", "location", "provider", "owner"})

    def session_conf(self, s: Settings) -> dict[str, str]:
        return {
            "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
            # Hudi's writers serialize records with Kryo and its registrations (Hudi's quick start).
            "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
            "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
            "spark.sql.warehouse.dir": s.warehouse,
            # Schema evolution on read: RENAME/DROP COLUMN and type changes are metadata only.
            "hoodie.schema.on.read.enable": "true",
            # As for Delta: dates and times before 1582 are written as they are (proleptic Gregorian);
            # Hudi's files do not say so in Spark's footer key, so their reads are told too.
            "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
            "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
            "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
            "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
            **hudi_table_services(s.maintenance),
        }

    def table_properties(self, write_mode: WriteMode) -> dict[str, str]:
        # Athena reads a table with its Hudi 0.15.0 connector only with this property; without it Athena
        # takes its default, 0.14.0 ("Query Apache Hudi datasets: Considerations and limitations").
        return {"type": table_type(write_mode), ATHENA_NATIVE_HUDI: "true"}

    def lake_type(self, decoded: T.DataType) -> T.DataType:
        """Hudi 0.15 cannot write timestamp_ntz (its Avro conversion refuses the type): a DATETIME
        is stored as a timestamp at the same wall-clock time in UTC (the job's session time zone)."""
        from pyspark.sql import types as T

        return T.TimestampType() if isinstance(decoded, T.TimestampNTZType) else decoded

    def column_name(self, source: str) -> str:
        """Avro's name rule (Hudi writes through Avro): a name it refuses, one of Hudi's own columns'
        names or one that looks escaped is escaped (common/names.py); UnsupportedName when too long."""
        return avro_column_name(source, HUDI_META_COLUMNS)

    def key_properties(self, keys: list[str], write_mode: WriteMode = WriteMode.COPY_ON_WRITE) -> dict[str, str]:
        """The record key, and on a copy-on-write table the precombine field. A merge-on-read table has
        none: Hudi 0.15 writes a delete's ordering value into its log file as a decimal(30,15), which
        refuses the source positions (31 digits and more) the job's `_cdc_seq` holds; its position
        guard alone keeps an older change out (it runs before every write)."""
        if not keys:
            return {}
        if table_type(write_mode) == "mor":
            return {"primaryKey": ",".join(keys)}
        return {"primaryKey": ",".join(keys), "preCombineField": CDC_SEQ}

    def marker_properties(self) -> dict[str, str]:
        # No record key: Hudi generates one per row, and every marker appended is kept.
        return {"type": "cow"}

    def create_table_sql(
        self, table: str, columns: Columns, keys: list[str], write_mode: WriteMode, replace: bool = False
    ) -> str:
        if replace:
            raise ValueError(
                f"table {table} was created again at the source with another primary key; a Hudi table's record "
                "key is fixed and Hudi 0.15 has no REPLACE TABLE: drop the lake table, then replay the batch"
            )
        return super().create_table_sql(table, columns, keys, write_mode)

    def rewrite_sql(
        self, table: str, current: list[str], final: Columns, props: dict[str, str], partitioning: Sequence[str] = ()
    ) -> str:
        raise ValueError(f"table {table}: Hudi 0.15 has no REPLACE TABLE; its type changes are ALTER COLUMN TYPE")

    def retype_sql(self, table: str, changes: list[tuple[str, T.DataType, T.DataType]]) -> list[str] | None:
        """Hudi's schema evolution on read changes a column's type in its metadata: the data files keep
        the old type, read as the new one."""
        return [f"ALTER TABLE {table} ALTER COLUMN {quote(n)} TYPE {new.simpleString()}" for n, _old, new in changes]

    # ------------------------------------------------------------------ maintenance (maintenance.py)
    def maintenance_health(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> TableHealth:
        return hudi_health(spark, table, policy)

    def maintenance_plan(
        self, health: TableHealth, policy: MaintenancePolicy, now_s: float, force: bool
    ) -> MaintenancePlan:
        assert isinstance(health, HudiHealth)
        return plan_hudi_maintenance(health, policy, force=force)

    def maintenance_report(self, table: str, before: TableHealth, plan: MaintenancePlan) -> MaintenanceReport:
        return HudiReport(table, before, plan)

    def due_after(
        self, spark: SparkSession, report: MaintenanceReport, action: Action, policy: MaintenancePolicy
    ) -> bool:
        return action is Action.ARCHIVE and over_bound_after_clustering(spark, report, policy)

    def run_maintenance(
        self,
        spark: SparkSession,
        table: str,
        action: Action,
        policy: MaintenancePolicy,
        now_s: float,
        sleep: Callable[[float], None],
    ) -> ActionResult:
        sql = hudi_statement(action, table, policy, action is Action.ARCHIVE and has_metadata_table(spark, table))
        return run_statement(spark, table, action, sql, lambda rows: hudi_outcome(action, rows), policy, sleep)


# ---------------------------------------------------------------------------------- maintenance
@dataclass(frozen=True)
class HudiHealth(TableHealth):
    """TableHealth from Hudi's file system view and timeline: `data_files` are the latest base files
    (one per file group), `delete_files` the log files of their file slices (merge-on-read),
    `file_versions` every base file version still kept, `snapshots` the completed commits of the
    active timeline."""

    file_versions: int = 0


def health_from_views(
    table: str, latest: list[dict[str, Any]], every: list[dict[str, Any]], commits: int, small_file_bytes: int
) -> HudiHealth:
    """A table's health from the rows of `show_fsview_latest`, `show_fsview_all` and the commit count."""
    sizes = [int(r.get("data_file_size") or 0) for r in latest if r.get("data_file")]
    return HudiHealth(
        table=table,
        data_files=len(sizes),
        delete_files=sum(int(r.get("num_delta_files") or 0) for r in latest),
        small_data_files=sum(1 for s in sizes if s < small_file_bytes),
        data_bytes=sum(sizes),
        snapshots=commits,
        file_versions=sum(1 for r in every if r.get("data_file")),
    )


def plan_hudi_maintenance(h: HudiHealth, p: MaintenancePolicy, force: bool = False) -> MaintenancePlan:
    """Compaction when the latest file slices hold more than `max_delete_files` log files (merge-on-read);
    clustering when more than `max_small_files` base files are small; cleaning when the table keeps
    file versions older than the latest (Hudi's cleaner deletes those no retained commit reads, and
    commits nothing when there are none); archival when the active timeline holds more commits
    than its bound; `force` plans all three."""
    why: dict[Action, str] = {}
    if h.delete_files > p.max_delete_files:
        why[Action.LOGS] = f"{h.delete_files} log files > {p.max_delete_files}"
    if h.small_data_files > p.max_small_files:
        why[Action.COMPACT] = f"{h.small_data_files} small base files > {p.max_small_files}"
    if h.file_versions > h.data_files:
        why[Action.CLEAN] = f"{h.file_versions - h.data_files} older file versions"
    _, most = hudi_timeline_bounds(p)
    if h.snapshots > most:
        why[Action.ARCHIVE] = f"{h.snapshots} commits on the active timeline > {most}"
    if force:
        for a in HUDI_ORDER:
            if a is not Action.LOGS or h.delete_files:  # a table without log files has nothing to compact
                why.setdefault(a, "forced")
    return MaintenancePlan(tuple((a, why[a]) for a in HUDI_ORDER if a in why))


def _options(opts: dict[str, Any]) -> str:
    """Hudi's procedure options: one string of `key=value` pairs separated by commas."""
    return sql_string(",".join(f"{k}={v}" for k, v in opts.items()))


def clustering_sql(table: str, p: MaintenancePolicy) -> str:
    _, ref = split_table(table)
    opts = {
        "hoodie.clustering.plan.strategy.target.file.max.bytes": p.target_file_size_bytes,
        "hoodie.clustering.plan.strategy.small.file.limit": p.small_file_bytes,
        # A lone small file rewritten into one file of the same size is work for nothing.
        "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "false",
    }
    return f"CALL run_clustering(table => {sql_string(ref)}, op => 'scheduleAndExecute', options => {_options(opts)})"


def compaction_sql(table: str) -> str:
    """Compaction of every file group with log files: the plan scheduled now (after one delta commit
    or more), then run; the maintenance's limit decided that it is due."""
    _, ref = split_table(table)
    opts = {"hoodie.compact.inline.max.delta.commits": 1}
    return f"CALL run_compaction(op => 'scheduleAndExecute', table => {sql_string(ref)}, options => {_options(opts)})"


def clean_sql(table: str, p: MaintenancePolicy) -> str:
    _, ref = split_table(table)
    return (
        f"CALL run_clean(table => {sql_string(ref)}, clean_policy => 'KEEP_LATEST_COMMITS', "
        f"retain_commits => {int(p.retain_last_snapshots)})"
    )


def archive_sql(table: str, p: MaintenancePolicy, metadata_table: bool) -> str:
    """`metadata_table`: the table has Hudi's metadata table, whose own timeline the archival reads."""
    _, ref = split_table(table)
    keep, most = hudi_timeline_bounds(p)
    return (
        f"CALL archive_commits(table => {sql_string(ref)}, min_commits => {keep}, max_commits => {most}, "
        f"retain_commits => {int(p.retain_last_snapshots)}, enable_metadata => {str(metadata_table).lower()})"
    )


def hudi_statement(action: Action, table: str, p: MaintenancePolicy, metadata_table: bool) -> str:
    if action is Action.LOGS:
        return compaction_sql(table)
    if action is Action.COMPACT:
        return clustering_sql(table, p)
    if action is Action.CLEAN:
        return clean_sql(table, p)
    if action is Action.ARCHIVE:
        return archive_sql(table, p, metadata_table)
    raise ValueError(f"{action} is not a Hudi maintenance action")


def hudi_outcome(action: Action, rows: list[dict[str, Any]]) -> str:
    """A procedure's result rows in a few words (archival returns only its exit status)."""
    if action is Action.LOGS:
        groups = sum(int(r.get("operation_size") or 0) for r in rows if r.get("state") == "COMPLETED")
        return f"{groups} file group(s) compacted" if groups else "nothing to compact"
    if action is Action.COMPACT:
        groups = sum(int(r.get("input_group_size") or 0) for r in rows if r.get("state") == "COMPLETED")
        return f"{groups} file group(s) written" if groups else "nothing to pack"
    if action is Action.CLEAN:
        return f"{int(rows[0].get('total_files_deleted') or 0)} files deleted" if rows else "nothing to clean"
    return "done" if rows and rows[0].get("result") == 0 else f"result {rows[0].get('result') if rows else None}"


def hudi_health(spark: SparkSession, table: str, policy: MaintenancePolicy) -> HudiHealth:
    _, ref = split_table(table)
    name = sql_string(ref)

    def rows(sql: str) -> list[dict[str, Any]]:
        return [r.asDict() for r in spark.sql(sql).collect()]

    latest = rows(f"CALL show_fsview_latest(table => {name}, partition_path => '', limit => {LISTING_LIMIT})")
    every = rows(f"CALL show_fsview_all(table => {name}, path_regex => '', limit => {LISTING_LIMIT})")
    commits = len(rows(f"CALL show_commits(table => {name}, limit => {LISTING_LIMIT})"))
    return health_from_views(table, latest, every, commits, policy.small_file_bytes)


def has_metadata_table(spark: SparkSession, table: str) -> bool:
    _, ref = split_table(table)
    props = {
        r["key"]: r["value"] for r in spark.sql(f"CALL show_table_properties(table => {sql_string(ref)})").collect()
    }
    return bool(props.get(METADATA_PARTITIONS))


def over_bound_after_clustering(spark: SparkSession, report: MaintenanceReport, policy: MaintenancePolicy) -> bool:
    """Clustering's own commit may have pushed the active timeline over its bound (archival not planned)."""
    if not any(r.action is Action.COMPACT and not r.error for r in report.results):
        return False
    _, ref = split_table(report.table)
    commits = spark.sql(f"CALL show_commits(table => {sql_string(ref)}, limit => {LISTING_LIMIT})").count()
    return commits > hudi_timeline_bounds(policy)[1]


class HudiReport(MaintenanceReport):
    def state(self) -> str:
        b = self.before
        a = self.after or b
        versions = getattr(b, "file_versions", 0), getattr(a, "file_versions", 0)
        return (
            f"base files {b.data_files}->{a.data_files}, log files {b.delete_files}->{a.delete_files}, "
            f"file versions {versions[0]}->{versions[1]}, "
            f"commits {b.snapshots}->{a.snapshots}, avg {human_bytes(b.avg_data_file_bytes)}->"
            f"{human_bytes(a.avg_data_file_bytes)}"
        )
