"""The consistent read point: after every table of a batch has committed, one commit that says, for
every lake table, which version of it holds the lake as of that batch.

A batch commits its tables one after another, so a reader between two commits sees one table ahead
of the other. With `--transactions keep` no batch holds part of a source transaction, so the tables'
versions after a batch's last commit are a cut through the source's transactions: reading each table
at the version the read point names never shows half of one (an order without its lines, money
debited and not yet credited). The read point is the namespace's table `cdc__read_point`
(lake_contract.READ_POINT_COLUMNS), one row per lake table, replaced as a whole by one overwrite per
batch (Executor.replace_rows): one commit, atomic for every reader of the format. A table the batch
did not write keeps the version recorded for it before. Readers: docs/OPERATIONS.md, "A consistent
read point".

Why a pointer table and not one commit of all tables: the job's Iceberg catalog is Iceberg's
GlueCatalog (the Glue API), which commits one table at a time; only Iceberg's REST client has a
multi-table commit (the REST specification's `POST /v1/{prefix}/transactions/commit`), and whether the
Glue Data Catalog's Iceberg REST endpoint accepts it is not verified here. Delta and Hudi have none.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from ..common.lake_contract import READ_POINT_COLUMNS, READ_POINT_TABLE
from ..common.sqltext import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .executor import Executor

log = logging.getLogger(__name__)

SCHEMA = T.StructType(
    [
        T.StructField(READ_POINT_COLUMNS[0], T.StringType(), False),  # the lake table's name in its namespace
        T.StructField(READ_POINT_COLUMNS[1], T.StringType(), False),  # Iceberg snapshot id / Delta version
        T.StructField(READ_POINT_COLUMNS[2], T.LongType(), False),  # the batch that wrote that version
        T.StructField(READ_POINT_COLUMNS[3], T.DecimalType(38, 0)),  # the batch's newest _cdc_seq applied
        T.StructField(READ_POINT_COLUMNS[4], T.TimestampType()),  # its source commit time
        T.StructField(READ_POINT_COLUMNS[5], T.TimestampType(), False),  # when the point was published
    ]
)


def create_sql(table: str, using: str) -> str:
    """The read point's table, when missing."""
    columns = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in SCHEMA.fields)
    return f"CREATE TABLE IF NOT EXISTS {table} ({columns}) USING {using}"


def published(
    before: dict[str, tuple], versions: dict[str, str], batch_id: int, position: int | None, source_ts: float | None
) -> dict[str, tuple]:
    """The read point after a batch: `before` with the rows of the tables it wrote (`versions`: lake table
    name -> its version now) replaced."""
    now = datetime.now(UTC).replace(tzinfo=None)
    ts = None if source_ts is None else datetime.fromtimestamp(source_ts, UTC).replace(tzinfo=None)
    at = None if position is None else Decimal(position)
    return {**before, **{name: (name, v, batch_id, at, ts, now) for name, v in versions.items()}}


class ReadPoint:
    """Publishes the read point of a namespace's tables after each batch, through the executor."""

    def __init__(self, spark: SparkSession, executor: Executor, namespace: str) -> None:
        """`namespace`: `catalog.namespace` of the lake tables."""
        self.spark, self.executor, self.fmt = spark, executor, executor.fmt
        self.namespace = namespace
        self.table = f"{namespace}.{READ_POINT_TABLE}"
        self._rows: dict[str, tuple] | None = None  # table name -> its row, as last published

    def publish(self, batch_id: int, written: list[str], position: int | None, source_ts: float | None) -> None:
        """After every table of the batch committed: the versions of the `written` tables (their
        identifiers), the others as before, in one commit."""
        if not written:
            return
        if self._rows is None:
            self._rows = self._published()
        # Tables a batch dropped or renamed (DROP TABLE with --dropped_table_policy drop, RENAME TABLE)
        # leave the point: one listing of the namespace.
        lake = set(self.executor.catalog.table_names(self.namespace))
        versions = {
            name: self.fmt.current_version(self.spark, ident)
            for ident in written
            if (name := ident.rsplit(".", 1)[-1].strip("`")) in lake
        }
        before = {n: r for n, r in self._rows.items() if n in lake}
        rows = published(before, versions, batch_id, position, source_ts)
        df = self.spark.createDataFrame(sorted(rows.values()), SCHEMA)
        self.executor.replace_rows(create_sql(self.table, self.fmt.using), self.table, df)
        self._rows = rows
        log.info("batch %d: read point published for %d table(s), %d written", batch_id, len(rows), len(written))

    def _published(self) -> dict[str, tuple]:
        """The rows published before this process (none before the first batch)."""
        if not self.spark.catalog.tableExists(self.table):
            return {}
        return {r[0]: tuple(r) for r in self.spark.table(self.table).collect()}

    def forget(self) -> None:
        """After a failed batch: read the published rows again (the catalog is the truth)."""
        self._rows = None
