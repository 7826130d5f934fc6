"""Ordering of changes by their position in the source log.

Every change gets `_cdc_seq`, a decimal(38,0) that increases with the position of the change in
the source database's log, and keeps its Kafka offset as a tie-breaker (`_cdc_offset`):

* MySQL / MariaDB: binlog file index (numerically: mysql-bin.000010 comes after .000009),
  then position, then row within the binlog event:
  `((file_index * 10^19 + pos) * 10^10 + row) * 10 + not_snapshot`  (at most 37 digits).
* PostgreSQL: `lsn * 10 + not_snapshot`.
* Anything else: the Kafka offset (one key always lives in one partition, so this is the
  order the connector produced).

`not_snapshot` puts snapshot reads (op `r`) before a streamed change recorded at the same log
position: a snapshot is taken *at* that position, every streamed change there happened after it.
The envelope `ts_ms` (connector processing time, ms) is never used for ordering: several changes
to one key inside a millisecond are common, and it says when Debezium saw a change, not when the
database committed it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import POSITION_COLUMNS
from ..common.sqltext import quote
from .connect_types import cast_type

SEQ_TYPE = T.DecimalType(38, 0)


def _dec(c: Column) -> Column:
    return c.cast(cast_type(SEQ_TYPE))


def sequence_expr(source: Column, partition: Column, offset: Column) -> Column:
    """The `_cdc_seq` of one record from its Debezium `source` struct (see module doc)."""
    not_snapshot = F.when(
        F.coalesce(source["snapshot"], F.lit("false")).isin("false", "incremental"), F.lit(1)
    ).otherwise(F.lit(0))
    file_index = F.regexp_extract(source["file"], r"\.(\d+)$", 1)
    mysql = (
        (_dec(file_index) * _dec(F.lit(str(10**19))) + _dec(source["pos"])) * _dec(F.lit(10**10))
        + _dec(F.coalesce(source["row"], F.lit(0)))
    ) * 10 + not_snapshot
    postgres = _dec(source["lsn"]) * 10 + not_snapshot
    return _dec(
        F.when(source["file"].isNotNull() & (file_index != "") & source["pos"].isNotNull(), mysql)
        .when(source["lsn"].isNotNull(), postgres)
        .otherwise(_dec(offset))
    )


def newer_than(s_seq: str, s_off: str, t_seq: str, t_off: str) -> str:
    """SQL predicate: the change (s_seq, s_off) is newer than the stored row (t_seq, t_off).

    A stored row without a position (written by something else) counts as older.
    """
    return f"({t_seq} IS NULL OR {s_seq} > {t_seq} OR ({s_seq} = {t_seq} AND {s_off} > {t_off}))"


def latest_per_key(changes: DataFrame, key_columns: list[str]) -> DataFrame:
    """Keep only the newest change per primary key, by (`_cdc_seq`, `_cdc_offset`).

    One hash aggregation (max of a struct led by the ordering fields), cheaper than a window sort.
    """
    order_first = list(POSITION_COLUMNS)
    rest = [c for c in changes.columns if c not in order_first and c not in key_columns]
    newest = F.max(F.struct(*[F.col(quote(c)) for c in order_first + rest])).alias("_newest")
    grouped = changes.groupBy(*[F.col(quote(k)) for k in key_columns]).agg(newest)
    return grouped.select(
        *[F.col(quote(k)) for k in key_columns],
        *[F.col("_newest").getField(c).alias(c) for c in order_first + rest],
    ).select(*[F.col(quote(c)) for c in changes.columns])
