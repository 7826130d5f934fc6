"""Tables without a primary key: the lake holds exactly the source's rows, duplicates included.

Without a key a row is identified by its whole image, and the table is a multiset of images. The
lake stores every copy as its own row, numbered `_cdc_copy` 1..n among the copies of one image, so
that a reader sees the rows the source has. A change counts per image: an insert or snapshot read
adds a copy of `after`, a delete removes a copy of `before`, an update does both (decode.py splits
it). Per batch the net count of each image touched is applied in one MERGE: copies past the new
count are deleted, missing ones inserted (this module builds the MERGE's source and text,
executor.merge_multiset runs them).

Replay safety: every copy of an image carries the position (`_cdc_seq`, `_cdc_offset`) of the
newest change applied to that image, and a change counts only when it is newer, so a re-run batch
or a change the connector sends again counts once. An image whose copies are all gone keeps its
position in the table's delete markers (deletes.py, keyed by a hash of the image), so an older
insert of it read late counts for nothing. This needs the changes of the table in order,
which one topic partition gives (the connector's default; a keyless record has no key to
partition by).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..common.lake_contract import CDC_COPY, CDC_OFFSET, CDC_OP, CDC_SEQ, METADATA_COLUMNS
from ..common.sqltext import quote
from .deletes import image_key, newest_markers, newest_truncate

COPY = CDC_COPY


def _same_image(left: str, right: str, match: list[str]) -> Column:
    return reduce(Column.__and__, [F.col(f"{left}.{quote(c)}").eqNullSafe(F.col(f"{right}.{quote(c)}")) for c in match])


def copies_to_write(
    lake: DataFrame, changes: DataFrame, columns: list[str], match: list[str], markers: DataFrame | None = None
) -> DataFrame:
    """The MERGE source: one row per copy to insert, update (position only) or delete (`_action` 'd').

    `changes`: conformed changes (data `columns` + `_cdc_*`), updates already split into a delete
    of `before` and an update carrying `after`. `match`: the columns that identify an image (the
    lake columns every event of the batch carries; a column dropped at the source is not compared).
    `markers`: the table's delete markers; an image's position is the newer of its copies' and its
    marker's."""
    meta = list(METADATA_COLUMNS)
    signed = changes.withColumn("_sign", F.when(F.col(CDC_OP) == "d", F.lit(-1)).otherwise(F.lit(1)))
    images = signed.select(*[F.col(quote(c)) for c in match]).distinct()
    stored = (
        lake.alias("t")
        .join(images.alias("i"), _same_image("t", "i", match), "left_semi")
        .groupBy(*[F.col(quote(c)) for c in match])
        .agg(F.count(F.lit(1)).alias("_n"), F.max(F.struct(CDC_SEQ, CDC_OFFSET)).alias("_pos"))
    )
    joined = signed.alias("c").join(stored.alias("s"), _same_image("c", "s", match), "left")
    pos = F.col("s._pos")
    if markers is not None:
        marked = newest_markers(markers)
        joined = (
            joined.withColumn("_img", image_key(match, "c"))
            .join(marked.alias("m"), F.col("_img") == F.col("m._mkey"), "left")
            .crossJoin(F.broadcast(newest_truncate(markers)))
        )
        pos = F.greatest(pos, F.col("m._mpos"), F.col("_tpos"))  # null when none has one
    pos_seq, pos_off = pos.getField(CDC_SEQ), pos.getField(CDC_OFFSET)
    c_seq, c_off = F.col(f"c.{CDC_SEQ}"), F.col(f"c.{CDC_OFFSET}")
    newer = pos_seq.isNull() | (c_seq > pos_seq) | ((c_seq == pos_seq) & (c_off > pos_off))
    rest = [c for c in columns if c not in match]
    # The newest change of an image first by its position: its op and values are the copies'.
    first = [CDC_SEQ, CDC_OFFSET, CDC_OP]
    order = first + [c for c in meta if c not in first] + rest
    counted = joined.where(newer).select(
        *[F.col(f"c.{quote(c)}").alias(c) for c in match],
        F.col("c._sign").alias("_sign"),
        F.coalesce(F.col("s._n"), F.lit(0)).alias("_n"),
        F.struct(*[F.col(f"c.{quote(c)}").alias(c) for c in order]).alias("_change"),
    )
    per_image = (
        counted.groupBy(*[F.col(quote(c)) for c in match])
        .agg(F.sum("_sign").alias("_delta"), F.max("_n").alias("_n"), F.max("_change").alias("_newest"))
        .where(F.col("_delta") != 0)
        .withColumn("_m", F.greatest(F.col("_n") + F.col("_delta"), F.lit(0)))
        .where(F.greatest(F.col("_n"), F.col("_m")) > 0)
    )
    copy = F.explode(F.sequence(F.lit(1), F.greatest(F.col("_n"), F.col("_m")))).alias(COPY)
    out = per_image.select("*", copy)
    action = F.when(F.col(COPY) > F.col("_m"), F.lit("d")).otherwise(F.lit("w"))
    return out.select(
        *[F.col(quote(c)) if c in match else F.col("_newest").getField(c).alias(c) for c in columns],
        *[F.col("_newest").getField(c).alias(c) for c in meta],
        F.col(COPY).cast("int").alias(COPY),
        action.alias("_action"),
    )


def merge_multiset_sql(table: str, source_view: str, columns: list[str], match: list[str]) -> str:
    """The MERGE of `copies_to_write`'s rows (in `source_view`) into a keyless table, in one commit."""
    on = " AND ".join([f"t.{quote(c)} <=> s.{quote(c)}" for c in match] + [f"t.{COPY} = s.{COPY}"])
    meta = list(METADATA_COLUMNS)
    all_cols = columns + meta + [COPY]
    # The newest change of an image may be a delete of one of its copies: a copy that stays keeps
    # its own op, one added is an insert.
    kept_op = f"CASE WHEN s.{CDC_OP} = 'd' THEN t.{CDC_OP} ELSE s.{CDC_OP} END"
    sets = [f"t.{quote(c)} = {kept_op if c == CDC_OP else f's.{quote(c)}'}" for c in meta]
    values = [
        f"CASE WHEN s.{CDC_OP} = 'd' THEN 'c' ELSE s.{CDC_OP} END" if c == CDC_OP else f"s.{quote(c)}" for c in all_cols
    ]
    return (
        f"MERGE INTO {table} t USING {source_view} s ON {on} "
        f"WHEN MATCHED AND s._action = 'd' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(sets)} "
        f"WHEN NOT MATCHED AND s._action <> 'd' THEN INSERT ({', '.join(quote(c) for c in all_cols)}) "
        f"VALUES ({', '.join(values)})"
    )
