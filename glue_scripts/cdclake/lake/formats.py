"""The table format seam: the SQL text that differs between the table formats the job writes.

Everything else the job issues (MERGE, UPDATE, DELETE, ALTER TABLE ADD/RENAME/DROP COLUMN, table
properties) is the same Spark SQL for every format; what differs is here, one small class per
format, pure text (no Spark session):

    session_conf      the Spark settings of the format's catalog (Glue and local alike)
    create_table_sql  a lake table, its key columns NOT NULL, the lake contract's `cdc.*` properties
    markers_sql       the delete-marker table beside it (deletes.py)
    copy_sql          CREATE TABLE AS SELECT: a table moved to a new name (lake_tables.rename_tables)
    rewrite_sql       a column type change rewritten in one commit (evolution.exact_change), keeping
                      the table's partitioning (partition_terms) and, on Iceberg, its key NOT NULL;
                      write_order_sql puts an Iceberg sort order back after it
    widens_in_place   whether ALTER COLUMN TYPE promotes int->bigint, float->double, decimal(p)->(p')
    retype_sql        the ALTER COLUMN TYPE statements of an exact type change, if the format has them
                      (else rewrite_sql)
    key_fields_sql    the statement that makes the key declared in the format's metadata the table's
                      key (Iceberg's identifier fields), if the format has such a declaration
    key_properties    the key as the format's own table properties (Hudi's record key), if any
    lake_type         the column type a decoded column's type is stored as (Hudi has no timestamp_ntz)
    type_features     the table properties that enable the features columns of some types need (Delta:
                      timestamp_ntz); features_sql enables them on an existing table before an ADD COLUMN
    system_columns    columns the format adds to every table (Hudi's `_hoodie_*`), not the lake's
    column_name       the lake name of a source column (Hudi: Avro's rule, common/names.py), and
                      name_properties the table properties that record the source names of such columns
    fixed_key         the format cannot change a table's key after its creation
    v2_writes         DataFrameWriterV2 (`writeTo`) can append to its tables; else `insertInto`

`FORMATS` maps `--table_format` to its class; `table_format(settings)` gives the one a job uses (Iceberg
at `--iceberg_format_version`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import pyspark

from ..common.lake_contract import (
    CDC_SEQ,
    KEY_PROPERTY,
    MARKERS_OF_PROPERTY,
    SOURCE_NAME_PREFIX,
    WriteMode,
    keys_text,
)
from ..common.maintenance_policy import MaintenancePolicy
from ..common.names import UnsupportedName as UnsupportedName  # raised here, for the batch to classify
from ..common.names import avro_column_name, source_name
from ..common.settings import ArgumentError, CatalogType, Settings, TableFormat
from ..common.sqltext import properties_sql, quote
from ..events.decode import COPY_COLUMN, META_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import types as T

Columns = list[tuple[str, "T.DataType"]]


def column_defs(columns: Columns, keys: list[str]) -> str:
    """`name type [NOT NULL], ...`: key columns NOT NULL (names match case-insensitively)."""
    key_lower = {k.lower() for k in keys}
    return ", ".join(
        f"{quote(n)} {t.simpleString()}{' NOT NULL' if n.lower() in key_lower else ''}" for n, t in columns
    )


def cast_select(current: list[str], final: Columns) -> str:
    """The SELECT list that converts each of `current`'s columns whose type `final` names."""
    new_types = {n.lower(): t for n, t in final}
    out = []
    for name in current:
        typ = new_types.get(name.lower())
        out.append(f"CAST({quote(name)} AS {typ.simpleString()}) AS {quote(name)}" if typ else quote(name))
    return ", ".join(out)


class Format:
    """What every format shares; a subclass names its `using` and its properties."""

    using: ClassVar[str]
    widens_in_place: ClassVar[bool] = True
    # Properties the catalog reports but a CREATE ... TBLPROPERTIES must not set (a moved or
    # rewritten table carries the others).
    reserved_properties: ClassVar[frozenset[str]] = frozenset()
    system_columns: ClassVar[frozenset[str]] = frozenset()
    fixed_key: ClassVar[bool] = False
    v2_writes: ClassVar[bool] = True
    sort_orders: ClassVar[bool] = False  # a table can carry a write order (Iceberg's WRITE ORDERED BY)
    key_fields: ClassVar[bool] = False  # a table can declare its key in its metadata (key_fields_sql)

    def session_conf(self, s: Settings) -> dict[str, str]:
        raise NotImplementedError

    def table_properties(self, write_mode: WriteMode) -> dict[str, str]:
        raise NotImplementedError

    def marker_properties(self) -> dict[str, str]:
        raise NotImplementedError

    def key_properties(self, keys: list[str]) -> dict[str, str]:
        return {}

    def lake_type(self, decoded: T.DataType) -> T.DataType:
        return decoded

    def column_name(self, source: str) -> str:
        """The lake name of source column `source`: the name itself (Iceberg; Delta maps names)."""
        return source

    def name_properties(self, lake_names: list[str]) -> dict[str, str]:
        """The properties that record the source name of each of `lake_names` that differs from it."""
        return {SOURCE_NAME_PREFIX + n: source_name(n) for n in lake_names if source_name(n) != n}

    def type_features(self, types: list[T.DataType]) -> dict[str, str]:
        """The table properties that enable the format's features columns of `types` need."""
        return {}

    def features_sql(self, table: str, existing: list[T.DataType], added: list[T.DataType]) -> str | None:
        """The statement that enables on `table` (columns of the `existing` types) the features the
        `added` columns need, to run before their ADD COLUMN; None when it has them already."""
        have = self.type_features(existing)
        missing = {k: v for k, v in self.type_features(added).items() if have.get(k) != v}
        return f"ALTER TABLE {table} SET TBLPROPERTIES ({properties_sql(missing)})" if missing else None

    def create_table_sql(
        self, table: str, columns: Columns, keys: list[str], write_mode: WriteMode, replace: bool = False
    ) -> str:
        """The lake table: key columns NOT NULL, the key named in the `cdc.primary-key` property.
        `replace`: replace an existing table in one commit."""
        props = {
            **self.table_properties(write_mode),
            **self.type_features([t for _, t in columns]),
            **self.name_properties([n for n, _ in columns]),
            **self.key_properties(keys),
            KEY_PROPERTY: keys_text(keys),
        }
        create = "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE IF NOT EXISTS"
        # The metadata columns after the data columns; a table without a key numbers its copies (keyless.py).
        defs = column_defs(columns + META_COLUMNS + ([] if keys else [COPY_COLUMN]), keys)
        return f"{create} {table} ({defs}) USING {self.using} TBLPROPERTIES ({properties_sql(props)})"

    def markers_sql(self, markers: str, columns: str, owner: str) -> str:
        props = {**self.marker_properties(), MARKERS_OF_PROPERTY: owner}
        return f"CREATE TABLE IF NOT EXISTS {markers} ({columns}) USING {self.using} TBLPROPERTIES ({properties_sql(props)})"

    def copy_sql(self, new: str, old: str, props: dict[str, str]) -> str:
        return f"CREATE TABLE {new} USING {self.using} TBLPROPERTIES ({properties_sql(props)}) AS SELECT * FROM {old}"

    def moved_markers_sql(self, new_markers: str, old_markers: str, owner: str) -> str:
        props = {**self.marker_properties(), MARKERS_OF_PROPERTY: owner}
        return self.copy_sql(new_markers, old_markers, props)

    def rewrite_sql(
        self, table: str, current: list[str], final: Columns, props: dict[str, str], partitioning: Sequence[str] = ()
    ) -> str:
        """Every row of `table` with the columns `final` changes converted, in ONE commit: REPLACE
        TABLE ... AS SELECT over the table itself, with its properties and its `partitioning` (a
        replace without PARTITIONED BY leaves the table unpartitioned)."""
        parts = f"PARTITIONED BY ({', '.join(partitioning)}) " if partitioning else ""
        return (
            f"REPLACE TABLE {table} USING {self.using} {parts}TBLPROPERTIES ({properties_sql(props)}) "
            f"AS SELECT {cast_select(current, final)} FROM {table}"
        )

    def partition_terms(self, described: list[tuple[str, str]]) -> list[str]:
        """The table's partitioning as PARTITIONED BY terms, from DESCRIBE TABLE EXTENDED's
        (col_name, data_type) rows: Spark's own section `# Partitioning`, `Part N` -> the transform
        as SQL (Iceberg), or Delta's `# Partition Information`, one column per row."""
        out: list[str] = []
        section = ""
        for name, text in described:
            if name == "# col_name":  # the header row of Delta's section
                continue
            if name.startswith("#"):
                section = name
            elif not name.strip():
                section = ""
            elif section == "# Partitioning" and name.startswith("Part "):
                out.append(text)
            elif section == "# Partition Information":
                out.append(quote(name))
        return out

    def write_order_sql(self, table: str, order: list[tuple[str, str, str, str]]) -> str | None:
        """The statement that gives `table` back its write order; None: the format has none."""
        return None

    def declared_key(self, properties: dict[str, str], column_names: Sequence[str]) -> list[str]:
        """The key the table's metadata declares (key_fields_sql), from its properties."""
        return []

    def key_fields_sql(
        self, table: str, declared: Sequence[str], keys: Sequence[str], columns: Sequence[tuple[str, bool]]
    ) -> str | None:
        """None: the format declares no key in its metadata (the `cdc.primary-key` property does)."""
        return None

    def retype_sql(self, table: str, changes: list[tuple[str, T.DataType, T.DataType]]) -> list[str] | None:
        """None: an exact type change is a rewrite (rewrite_sql)."""
        return None


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

    def __init__(self, format_version: str = "2") -> None:
        self.format_version = format_version

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
    """Delta Lake 3.3.0 (Glue 5.0's `--datalake-formats delta`): Delta's catalog as Spark's session
    catalog `spark_catalog`, over the Glue Data Catalog on AWS (Glue's Hive-compatible metastore)
    and over Spark's in-memory catalog locally, managed tables under the warehouse folder.

    Of the lake types the job writes (connect_types.py), only timestamp_ntz is behind a Delta table
    feature (`timestampNtz`, DELTA_TYPE_FEATURES): Delta enables it by itself on a CREATE TABLE with such
    a column, never on an ADD COLUMN, so the job names it in both. It moves the table to Delta's
    table-features protocol (reader 3, writer 7).

    Writes are copy-on-write (Delta's MERGE, UPDATE and DELETE rewrite the files they touch;
    `--write_mode` does not apply). Delta 3.3's type widening is a preview table feature limited to
    byte/short -> int, so int -> bigint, float -> double and decimal precision increases are table
    rewrites here (`widens_in_place` False), each one commit like any other rewrite."""

    using = "delta"
    widens_in_place = False
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


# The columns Hudi adds to every table (its commit, record key and file of each row).
HUDI_META_COLUMNS = frozenset(
    {"_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"}
)


def hudi_timeline_bounds(policy: MaintenancePolicy) -> tuple[int, int]:
    """(min, max) commits of a Hudi table's active timeline for the maintenance's archival
    (hudi_maintenance.py): once it holds more than `--maintenance_max_snapshots` commits, the oldest
    move to the timeline's archive until the newest `--maintenance_retain_last_snapshots` + 1 are left
    (Hudi requires its archival to keep more commits than cleaning retains, and the maximum to exceed
    the minimum)."""
    keep = policy.retain_last_snapshots + 1
    return keep, max(policy.max_snapshots, keep + 1)


def hudi_table_services(policy: MaintenancePolicy) -> dict[str, str]:
    """Hudi's writer maintains a copy-on-write table inline, after each commit: it packs inserts into
    the table's small files, cleans the file versions no longer needed and archives its timeline.
    File sizing and cleaning follow the job's maintenance limits where they mean the same thing, as
    the maintenance's Hudi actions do (hudi_maintenance.py): files grow to
    `--maintenance_target_file_size_mb` (a file under 75% of it takes new rows), and cleaning keeps
    the file versions of the newest `--maintenance_retain_last_snapshots` commits (readable by time
    travel and incremental queries). The writer's archival keeps Hudi's own short timeline (20 to 30
    commits, more when cleaning retains more: Hudi requires archival to keep more commits than
    cleaning retains); the maintenance's archival applies `--maintenance_max_snapshots` on top."""
    retained = policy.retain_last_snapshots
    return {
        "hoodie.parquet.max.file.size": str(policy.target_file_size_bytes),
        "hoodie.parquet.small.file.limit": str(policy.small_file_bytes),
        "hoodie.clean.automatic": "true",
        "hoodie.cleaner.policy": "KEEP_LATEST_COMMITS",
        "hoodie.cleaner.commits.retained": str(retained),
        "hoodie.keep.min.commits": str(max(20, retained + 1)),
        "hoodie.keep.max.commits": str(max(30, retained + 11)),
    }


# The table property that makes Athena read a Hudi table with its Hudi 0.15.0 connector, the version
# Glue 5.0 writes (https://docs.aws.amazon.com/athena/latest/ug/querying-hudi-in-athena-considerations-and-limitations.html).
ATHENA_NATIVE_HUDI = "athena_enable_native_hudi_connector_implementation"


class Hudi(Format):
    """Apache Hudi 0.15.0 (Glue 5.0's `--datalake-formats hudi`): Hudi's catalog as Spark's session
    catalog `spark_catalog`, over the Glue Data Catalog on AWS and Spark's in-memory catalog locally,
    managed tables under the warehouse folder.

    Hudi's own idioms carry the lake contract: the primary key is the table's record key, and the
    source-log position `_cdc_seq` its precombine (ordering) field, so Hudi itself keeps the stored
    row when a change older than it is written (the MERGE's guard decides the rest: ties by Kafka
    offset, deletes). Tables are copy-on-write (settings refuse merge-on-read until maintenance
    compacts). Hudi's schema evolution on read (`hoodie.schema.on.read.enable`) is on: ADD COLUMN,
    ALTER COLUMN TYPE, RENAME COLUMN and DROP COLUMN are metadata only, recorded in Hudi's own schema
    history; without it Hudi 0.15 can only add columns, and it has no REPLACE TABLE. A table's
    record key is fixed at its creation (`fixed_key`). File sizing and cleaning run inline in Hudi's
    writer, by the job's maintenance limits (`hudi_table_services`)."""

    using = "hudi"
    system_columns = HUDI_META_COLUMNS
    fixed_key = True
    # Hudi's tables are v1 tables to Spark: `writeTo` refuses them, `insertInto` (INSERT INTO) works.
    v2_writes = False
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
        return {"type": "cow", ATHENA_NATIVE_HUDI: "true"}

    def lake_type(self, decoded: T.DataType) -> T.DataType:
        """Hudi 0.15 cannot write timestamp_ntz (its Avro conversion refuses the type): a DATETIME
        is stored as a timestamp at the same wall-clock time in UTC (the job's session time zone)."""
        from pyspark.sql import types as T

        return T.TimestampType() if isinstance(decoded, T.TimestampNTZType) else decoded

    def column_name(self, source: str) -> str:
        """Avro's name rule (Hudi writes through Avro): a name it refuses, one of Hudi's own columns'
        names or one that looks escaped is escaped (common/names.py); UnsupportedName when too long."""
        return avro_column_name(source, HUDI_META_COLUMNS)

    def key_properties(self, keys: list[str]) -> dict[str, str]:
        return {"primaryKey": ",".join(keys), "preCombineField": CDC_SEQ} if keys else {}

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


FORMATS: dict[TableFormat, Format] = {
    TableFormat.ICEBERG: Iceberg(),
    TableFormat.DELTA: Delta(),
    TableFormat.HUDI: Hudi(),
}


def table_format(s: Settings) -> Format:
    """The format of `s.table_format`; Iceberg with `s.iceberg_format_version`, refused on a runtime
    that cannot write that version."""
    if s.table_format != TableFormat.ICEBERG:
        return FORMATS[s.table_format]
    check_format_version(s.iceberg_format_version, pyspark.__version__)
    return Iceberg(s.iceberg_format_version)


def check_format_version(version: str, spark_version: str) -> None:
    """Refuse an Iceberg format version the runtime cannot write (ArgumentError, before Spark starts)."""
    if version != "2" and not writes_deletion_vectors(spark_version):
        raise ArgumentError(
            f"--iceberg_format_version {version} needs Glue 6.0 (Iceberg 1.11.0): this runtime (Spark "
            f"{spark_version}, Glue 5.0's Iceberg 1.7.1) writes no deletion vectors; leave it out (2)"
        )
