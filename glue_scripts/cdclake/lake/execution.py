"""What the executor's parts (executor.py and the exec_*.py modules) share: one table's plan being
run (`Execution`) and what it returns (`TableRun`: its `Written` rows left to count and its
`Rejected` events, each step's result a value), and `Statements`, the catalog access and table properties every part issues
through."""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    table's write, table_writer.count_written) and its rejected events. While the steps run, also
    the source defaults found for the next write (`fills`, from a ColumnDefaults step)."""

    written: tuple[Written, ...] = ()
    rejected: tuple[Rejected, ...] = ()
    fills: tuple[tuple[str, str], ...] = ()

    def writing(self, w: Written) -> TableRun:
        """With write `w`, whose source defaults are used up."""
        return replace(self, written=(*self.written, w), fills=())

    def rejecting(self, r: Rejected) -> TableRun:
        return replace(self, rejected=(*self.rejected, r))

    def filling(self, fills: dict[str, str]) -> TableRun:
        return replace(self, fills=tuple({**dict(self.fills), **fills}.items()))


@dataclass(frozen=True)
class Execution:
    """One table's plan being run: where it writes and from which records (the steps' results are
    their return values, `TableRun`)."""

    ident: str
    groups: tuple[SchemaGroup, ...]  # decoded before planning (decode.with_rows)
    batch_id: int
    full: DataFrame  # the batch's classified records (dead letters are built from them)


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
