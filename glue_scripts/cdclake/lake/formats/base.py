"""The table format seam: what differs between the table formats the job writes, declared once per
format (formats/iceberg.py, delta.py, hudi.py), each a subclass of `Format`.

Everything else the job issues (MERGE, UPDATE, DELETE, ALTER TABLE ADD/RENAME/DROP COLUMN, table
properties) is the same Spark SQL for every format. A format says, as pure text (no Spark session):

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
    merge_reads_target  its MERGE's clauses can read the table's row (the position guard); else the
                      guard is resolved in the MERGE's source (merge.guarded_source_sql)

and, for maintenance (lake/maintenance.py runs one frame over these), its health, plan, actions in
order, the statement of each and its outcome, and its report line. `capabilities` declares what the
format supports and what it refuses with the reason (capabilities.py); the registry is formats/__init__.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from ...common.lake_contract import KEY_PROPERTY, MARKERS_OF_PROPERTY, SOURCE_NAME_PREFIX, WriteMode, keys_text
from ...common.maintenance_policy import MaintenancePolicy
from ...common.names import source_name
from ...common.settings import Settings
from ...common.sqltext import properties_sql, quote
from ...events.decode import COPY_COLUMN, META_COLUMNS
from .capabilities import Capability

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T

    from ..maintenance import Action, ActionResult, MaintenancePlan, MaintenanceReport, TableHealth

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
    """What every format shares; a subclass names its `using`, its properties, what it refuses
    (`refuses`: capability -> why) and its maintenance."""

    using: ClassVar[str]
    title: ClassVar[str]  # the format's name for people, with the version the job writes
    label: ClassVar[str]  # its short name, in a sentence
    # What the format refuses, each with the reason; anything else in capabilities.Capability it does.
    refuses: ClassVar[dict[Capability, str]] = {}
    # The Glue versions whose runtime runs the format (the first: the one a local run uses).
    glue_versions: ClassVar[tuple[str, ...]] = ("6.0",)
    # Its jars beyond Iceberg's (.local/jars/<folder>, a jar name the folder must hold), if any.
    jars: ClassVar[tuple[str, str] | None] = None
    # Its catalog is Spark's session catalog (`spark_catalog`), not `--catalog_name`'s own.
    session_catalog: ClassVar[bool] = True
    # The maintenance job's limits that mean nothing for the format's tables, each with the reason.
    meaningless_limits: ClassVar[dict[str, str]] = {}
    # The maintenance actions the format runs, in the order they run.
    maintenance_order: ClassVar[tuple[Action, ...]] = ()
    # Properties the catalog reports but a CREATE ... TBLPROPERTIES must not set (a moved or
    # rewritten table carries the others).
    reserved_properties: ClassVar[frozenset[str]] = frozenset()
    system_columns: ClassVar[frozenset[str]] = frozenset()
    v2_writes: ClassVar[bool] = True
    merge_reads_target: ClassVar[bool] = True
    sort_orders: ClassVar[bool] = False  # a table can carry a write order (Iceberg's WRITE ORDERED BY)
    key_fields: ClassVar[bool] = False  # a table can declare its key in its metadata (key_fields_sql)

    # Derived from `refuses` (__init_subclass__): the format cannot change a table's key after its
    # creation; ALTER COLUMN TYPE widens a column in place; the streaming job maintains its tables.
    fixed_key: ClassVar[bool] = False
    widens_in_place: ClassVar[bool] = True
    maintains_in_stream: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.fixed_key = not cls.supports(Capability.KEY_CHANGE)
        cls.widens_in_place = cls.supports(Capability.WIDEN_IN_PLACE)
        cls.maintains_in_stream = cls.supports(Capability.STREAM_MAINTENANCE)

    @classmethod
    def supports(cls, capability: Capability) -> bool:
        return capability not in cls.refuses

    def configured(self, s: Settings) -> Format:
        """The format as the job's settings configure it (Iceberg: at its format version)."""
        return self

    def session_conf(self, s: Settings) -> dict[str, str]:
        raise NotImplementedError

    def table_properties(self, write_mode: WriteMode) -> dict[str, str]:
        raise NotImplementedError

    def marker_properties(self) -> dict[str, str]:
        raise NotImplementedError

    def key_properties(self, keys: list[str], write_mode: WriteMode = WriteMode.COPY_ON_WRITE) -> dict[str, str]:
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
            **self.key_properties(keys, write_mode),
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

    # ------------------------------------------------------------------ the read point (read_point.py)
    def current_version(self, spark: SparkSession, table: str) -> str:
        """The table's current version, as the format's time travel names it (`VERSION AS OF`)."""
        raise NotImplementedError(self.refuses.get(Capability.READ_POINT, "no version to read"))

    # ------------------------------------------------------------------ maintenance (maintenance.py)
    def maintenance_health(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> TableHealth:
        """What the table weighs now, from the format's own metadata."""
        raise NotImplementedError

    def maintenance_plan(
        self, health: TableHealth, policy: MaintenancePolicy, now_s: float, force: bool
    ) -> MaintenancePlan:
        """The actions the table's health calls for, in `maintenance_order`; `force`: all of them."""
        raise NotImplementedError

    def maintenance_report(self, table: str, before: TableHealth, plan: MaintenancePlan) -> MaintenanceReport:
        """The format's report of one table's maintenance (its line says the format's own measures)."""
        raise NotImplementedError

    def prepare_maintenance(self, spark: SparkSession, table: str, policy: MaintenancePolicy) -> None:
        """What runs once before a due table's actions."""

    def prepare_shared_writes(self, spark: SparkSession, table: str) -> None:
        """What the scheduled maintenance job sets on a table it maintains beside the stream."""

    def due_after(
        self, spark: SparkSession, report: MaintenanceReport, action: Action, policy: MaintenancePolicy
    ) -> bool:
        """Whether `action`, not planned, became due by the actions run so far."""
        return False

    def run_maintenance(
        self,
        spark: SparkSession,
        table: str,
        action: Action,
        policy: MaintenancePolicy,
        now_s: float,
        sleep: Callable[[float], None],
    ) -> ActionResult:
        """Run one action on `table` (maintenance.run_statement: re-run on commit conflicts, never raises)."""
        raise NotImplementedError
