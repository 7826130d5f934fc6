"""What the executor's parts (executor.py and the exec_*.py modules) share: one table's plan being
run (`Execution`) and what it returns (`TableRun`: its `Written` rows left to count and its
`Rejected` events), and `Statements`, the catalog access and table properties every part issues
through."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from ..common.sqltext import properties_sql, sql_string
from ..events.decode import SchemaGroup
from .deletes import KnownMarkers
from .evolution import Columns
from .formats import Format
from .plan_steps import GroupView


@dataclass(frozen=True)
class Written:
    """One write of a table in the batch: its decoded rows (decode.as_leaf) and what counting them
    needs: each schema group with the lake's view of it (its columns renamed and dropped since)."""

    ident: str
    decoded: DataFrame
    groups: tuple[tuple[SchemaGroup, GroupView], ...]
    columns: Columns
    fills: dict[str, str]
    keys: list[str]


@dataclass(frozen=True)
class Rejected:
    """Events of one schema group the plan sent to the dead letters: why, how many, their records."""

    reason: str
    events: int
    rows: DataFrame


@dataclass(frozen=True)
class TableRun:
    """What running one table's plan did, as values: its writes (counted by the batch after every
    table's write, table_writer.count_written) and its rejected events."""

    written: tuple[Written, ...] = ()
    rejected: tuple[Rejected, ...] = ()


@dataclass
class Execution:
    """One table's plan being run: where it writes, and what its steps have written and rejected
    so far (this table's own lists: `Executor.run` returns them as a `TableRun`)."""

    ident: str
    groups: list[SchemaGroup]
    batch_id: int
    full: DataFrame  # the batch's classified records (dead letters are built from them)
    cached: DataFrame  # the same, persisted, without key and value text (decoded from them)
    written: list[Written] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    fills: dict[str, str] = field(default_factory=dict)  # source defaults of the run being written

    def result(self) -> TableRun:
        return TableRun(tuple(self.written), tuple(self.rejected))


class Statements:
    """The catalog as the executor's parts reach it: the session, the table format (whose DDL
    differs, formats/) and what the job knows of each table's delete markers (one `KnownMarkers`
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
