"""What the executor's parts (executor.py and the exec_*.py modules) share: one table's plan being
run (`Execution`), one write's decoded rows left to count (`Written`), and `Statements`, the
catalog access and table properties every part issues through."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from ..common.report import TableReport
from ..common.sqltext import properties_sql, sql_string
from ..events.decode import SchemaGroup
from .deletes import KnownMarkers
from .evolution import Columns
from .formats import Format


@dataclass
class Written:
    """One write of a table in the batch: its decoded rows (decode.as_leaf) and what counting them needs."""

    ident: str
    report: TableReport
    decoded: DataFrame
    good: list[SchemaGroup]
    columns: Columns
    fills: dict[str, str]
    keys: list[str]


@dataclass
class Execution:
    """One table's plan being run: where it writes, what it has written and rejected."""

    ident: str
    groups: list[SchemaGroup]
    report: TableReport
    batch_id: int
    full: DataFrame  # the batch's classified records (dead letters are built from them)
    cached: DataFrame  # the same, persisted, without key and value text (decoded from them)
    written: list[Written]  # the batch's list: counted after every table's write
    dead: list[DataFrame] = field(default_factory=list)
    fills: dict[str, str] = field(default_factory=dict)  # source defaults of the run being written


class Statements:
    """The catalog as the executor's parts reach it: the session, the table format (whose DDL
    differs, formats.py) and what the job knows of each table's delete markers (one `KnownMarkers`
    shared by the parts: a write, a re-key and a table move all change it)."""

    def __init__(self, spark: SparkSession, fmt: Format, markers: KnownMarkers) -> None:
        self.spark = spark
        self.fmt = fmt
        self.markers = markers

    def sql(self, statement: str) -> DataFrame:
        return self.spark.sql(statement)

    def name_properties(self, ident: str, lake_names: list[str]) -> None:
        props = self.fmt.name_properties(lake_names)
        if props:
            self.set_properties(ident, props)

    def set_properties(self, ident: str, props: dict[str, str]) -> None:
        self.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ({properties_sql(props)})")

    def unset_properties(self, ident: str, names: list[str]) -> None:
        self.sql(f"ALTER TABLE {ident} UNSET TBLPROPERTIES IF EXISTS ({', '.join(map(sql_string, names))})")
