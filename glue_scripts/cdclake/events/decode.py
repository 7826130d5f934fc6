"""Second pass: decode the row images of one schema group into typed lake columns.

A *schema group* is the set of change events of one table that carry the same Connect schema
(usually one per table per batch; two around an ALTER TABLE). Decoding is a `from_json` with
the Spark type derived from that schema, then one conversion expression per column.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import CDC_COPY, CDC_INGESTED_AT, CDC_OFFSET, CDC_OP, CDC_SEQ, CDC_SOURCE_TS
from ..common.records import RAW_COLUMNS
from ..common.sqltext import quote
from .avro_batch import AVRO_KEY, AVRO_VALUE, AvroSchemas
from .connect_types import (
    ColumnSpec,
    UnsupportedSchema,
    cast_type,
    column_spec,
    inferred_column_spec,
    key_columns,
    row_columns,
)
from .envelope import schema_json
from .leaf import as_leaf as as_leaf  # re-exported: where the batch and the writers take it from
from .leaf import release as release

META_COLUMNS: list[tuple[str, T.DataType]] = [
    (CDC_OP, T.StringType()),
    (CDC_SEQ, T.DecimalType(38, 0)),
    (CDC_OFFSET, T.LongType()),
    (CDC_SOURCE_TS, T.TimestampType()),
    (CDC_INGESTED_AT, T.TimestampType()),
]
# Tables without a primary key: the copy number of a row among identical rows (keyless.py).
COPY_COLUMN: tuple[str, T.DataType] = (CDC_COPY, T.IntegerType())
# The raw record columns a decoded row carries along as `_raw_*` (for its dead letter).
RAW_KEEP = RAW_COLUMNS
_CORRUPT = "_corrupt"


@dataclass
class SchemaGroup:
    """Events of one table sharing one value schema (from the batch's group aggregate)."""

    db: str
    table: str
    schema_id: int
    key_schema_id: int
    value_schema: str | None
    key_schema: str | None
    sample_key: str | None
    events: int
    max_seq: int
    columns: list[ColumnSpec] | None = None
    keys: list[str] | None = None  # [] for a table without a primary key
    error: str | None = None
    min_seq: int | None = None
    # Only the events after `seq_after` and up to `seq_upto` (a group cut at a DDL statement's
    # position, `cut_at`); None: no bound.
    seq_after: int | None = None
    seq_upto: int | None = None
    # From the group aggregate (summary.py): whether the events include deletes and updates, and
    # whether an update may carry a TOAST placeholder. True may also be said of a group cut from one
    # that has them: it costs work, never a change.
    deletes: bool = False
    updates: bool = False
    toasted: bool = False
    # The wire format avro: the schema versions of the group's values and keys (avro_batch.attach).
    avro: AvroSchemas | None = None
    # Its rows decoded (lazy) over the batch's kept records, before planning (`with_rows`).
    rows: DataFrame | None = field(default=None, compare=False, repr=False)

    @property
    def _avro_value(self) -> bool:
        return self.avro is not None and self.avro.value is not None

    def resolve(self, infer: callable | None = None) -> None:  # type: ignore[valid-type]
        """Derive column specs and key names; on failure set `error` (the group is dead-lettered)."""
        try:
            if self.value_schema is not None:
                self.columns = row_columns(json.loads(schema_json(self.value_schema)), binary=self._avro_value)
            elif infer is not None:
                self.columns = [inferred_column_spec(f.name, f.dataType) for f in infer(self)]
            else:
                raise UnsupportedSchema("event has no schema and schema inference is unavailable")
            if self.key_schema is not None:
                self.keys = key_columns(json.loads(schema_json(self.key_schema)))
            elif self.sample_key is not None:
                sample = json.loads(self.sample_key)
                if not isinstance(sample, dict) or not sample:
                    raise UnsupportedSchema("record key is not a JSON object with fields")
                self.keys = list(sample)
            else:
                self.keys = []  # no Kafka key: a table without a primary key
            names = {c.name.lower() for c in self.columns}
            missing = [k for k in self.keys if k.lower() not in names]
            if missing:
                raise UnsupportedSchema(f"key column(s) {missing} are not in the row schema")
            _key_specs(self)  # decode_group maps the key's fields too: fail here, where it dead-letters
        except (UnsupportedSchema, ValueError, KeyError, TypeError) as e:
            self.error = f"unsupported schema: {e}"


def resolve_groups(spark: SparkSession, classified: DataFrame, groups: list[SchemaGroup]) -> None:
    """Resolve the groups not resolved yet, oldest schema first (`groups` is sorted in place, so
    that widening follows the source). A group without a schema has its column types inferred
    from its row images in `classified` (one Spark action)."""
    groups.sort(key=lambda g: g.max_seq)
    for g in groups:
        if g.columns is None and g.error is None:
            g.resolve(infer=lambda grp: _infer(spark, classified, grp))


def _infer(spark: SparkSession, classified: DataFrame, g: SchemaGroup) -> list[T.StructField]:
    """Schemaless fallback: infer column types from this group's row images (JSON values)."""
    images = group_rows(classified, g).select(F.coalesce("_after_json", "_before_json"))
    inferred = spark.read.option("primitivesAsString", "false").json(images.rdd.map(lambda r: r[0]))
    return list(inferred.schema.fields)


def _key_specs(group: SchemaGroup) -> list[ColumnSpec]:
    """The key's fields as the Kafka key names them (`source`)."""
    if group.key_schema is not None:
        binary = group.avro is not None and group.avro.key is not None
        return [column_spec(f, binary) for f in json.loads(schema_json(group.key_schema))["fields"]]
    by_name = {c.name.lower(): c for c in group.columns or []}
    return [by_name[k.lower()] for k in group.keys or []]


def group_rows(classified: DataFrame, group: SchemaGroup) -> DataFrame:
    """The classified change records that belong to `group`."""
    cond = (
        (F.col("_status") == "change")
        & (F.col("_schema_id") == group.schema_id)
        & (F.col("_key_schema_id") == group.key_schema_id)
        & (F.col("_src_db") == group.db)
        & (F.col("_src_table") == group.table)
    )
    if group.seq_after is not None:
        cond &= F.col(CDC_SEQ) > _seq(group.seq_after)
    if group.seq_upto is not None:
        cond &= F.col(CDC_SEQ) <= _seq(group.seq_upto)
    return classified.where(cond)


def _seq(value: int) -> Column:
    return F.lit(str(value)).cast(T.DecimalType(38, 0))


def cut_at(classified: DataFrame, groups: list[SchemaGroup], positions: list[int]) -> list[SchemaGroup]:
    """The groups, each one that holds events on both sides of a position (a DDL statement's)
    cut there into one group per side. A group is one Connect schema, and a statement may leave
    the schema as it was (a column dropped and added again alike, a table renamed): the events
    before and after it still go to different columns or tables. One Spark action per group cut,
    none when no statement falls inside a group."""
    out = []
    for g in groups:
        lo = g.min_seq if g.min_seq is not None else g.max_seq
        cuts = sorted({p for p in positions if lo <= p < g.max_seq})
        if not cuts:
            out.append(g)
            continue
        piece = F.lit(len(cuts))
        for i, c in reversed(list(enumerate(cuts))):
            piece = F.when(F.col(CDC_SEQ) <= _seq(c), F.lit(i)).otherwise(piece)
        rows = (
            group_rows(classified, g)
            .groupBy(piece.alias("piece"))
            .agg(F.count(F.lit(1)).alias("n"), F.min(CDC_SEQ).alias("lo"), F.max(CDC_SEQ).alias("hi"))
            .collect()
        )
        bounds = [None, *cuts, None]
        for r in sorted(rows, key=lambda r: r["piece"]):
            i = r["piece"]
            after = max((x for x in (g.seq_after, bounds[i]) if x is not None), default=None)
            upto = min((x for x in (g.seq_upto, bounds[i + 1]) if x is not None), default=None)
            # Its rows decoded (if they were) are the whole group's: a piece is decoded on its own.
            out.append(replace(g, events=r["n"], min_seq=int(r["lo"]), max_seq=int(r["hi"]), seq_after=after,
                               seq_upto=upto, rows=None))  # fmt: skip
    return out


def with_rows(classified: DataFrame, group: SchemaGroup) -> SchemaGroup:
    """A copy of the resolved group with its rows decoded from `classified` (lazy: no Spark action);
    a group that did not resolve has none (it is dead-lettered whole)."""
    if group.columns is None or group.keys is None or group.error is not None:
        return group
    return replace(group, rows=decode_group(classified, group))


def decoded(group: SchemaGroup) -> DataFrame:
    """The rows `with_rows` decoded."""
    assert group.rows is not None, f"schema group of {group.db}.{group.table} was not decoded"
    return group.rows


def decode_group(classified: DataFrame, group: SchemaGroup) -> DataFrame:
    """Typed rows of one schema group: key + data columns, _cdc_* metadata, `_decode_error`,
    and those raw record columns `classified` has, as `_raw_*` (for the dead-letter location)."""
    assert group.columns is not None and group.keys is not None
    rows = group_rows(classified, group)
    if not group.keys:
        # Without a key a row is its whole image, so an update is one copy of `before` removed and
        # one of `after` added (keyless.py): the same record twice, as a delete and as an update.
        op = F.col(CDC_OP)
        rows = rows.withColumn(CDC_OP, F.explode(F.when(op == "u", F.array(F.lit("d"), op)).otherwise(F.array(op))))
    raw_keep = [c for c in RAW_KEEP if c in rows.columns]
    avro = [c for c in (AVRO_VALUE, AVRO_KEY) if group.avro is not None and c in rows.columns and "value" in raw_keep]
    df = _converted(_parsed(rows, group, [*raw_keep, *avro]), group, [*raw_keep, *avro, CDC_OP, CDC_SEQ, CDC_SOURCE_TS])
    return df.select(
        *[F.col(f"__v{i}").cast(cast_type(spec.spark_type)).alias(spec.name) for i, spec in enumerate(group.columns)],
        CDC_OP,
        CDC_SEQ,
        F.col("offset").alias(CDC_OFFSET),
        CDC_SOURCE_TS,
        _decode_error(group).alias("_decode_error"),
        *[_raw_text(group, c).alias(f"_raw_{c}") for c in raw_keep],
    )


def _raw_text(group: SchemaGroup, column: str) -> Column:
    """A raw record column for the dead letters: an Avro key or value as its JsonConverter text."""
    if group.avro is not None and column in ("key", "value"):
        return group.avro.record_text(column)
    return F.col(column)


def _parsed(rows: DataFrame, group: SchemaGroup, raw_keep: list[str]) -> DataFrame:
    """The group's records with their row image (`_img`), Kafka key (`_key`) and whether the image
    did not match its schema (`__bad`): parsed from JSON, or as Avro decoded them."""
    assert group.columns is not None
    carry = [*raw_keep, CDC_OP, CDC_SEQ, CDC_SOURCE_TS]
    key_type = T.StructType([T.StructField(c.source, c.parse_type) for c in _key_specs(group)])
    avro = group.avro
    key = avro.key_record() if avro is not None and avro.key is not None else F.from_json("_key_json", key_type)
    if avro is not None and avro.value is not None:
        rows = rows.select(*carry, avro.image_record().alias("_rec"), key.alias("_key"))
        image = F.when(F.col(CDC_OP) == "d", F.col("_rec.before")).otherwise(F.col("_rec.after"))
        return rows.select(*carry, image.alias("_img"), "_key", F.lit(False).alias("__bad"))
    image_type = T.StructType(
        [T.StructField(c.source, c.parse_type) for c in group.columns] + [T.StructField(_CORRUPT, T.StringType())]
    )
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
    # A delete's row image is `before`; the key also comes from the Kafka key when `before` is absent.
    image_json = F.when(F.col(CDC_OP) == "d", F.col("_before_json")).otherwise(F.col("_after_json"))
    parsed = rows.select(*carry, F.from_json(image_json, image_type, opts).alias("_img"), key.alias("_key"))
    return parsed.select("*", F.col("_img").getField(_CORRUPT).isNotNull().alias("__bad"))


def _converted(df: DataFrame, group: SchemaGroup, carry: list[str]) -> DataFrame:
    """`carry`, the parsed value of every column as `__r<i>` (kept for error detection) and its
    conversion as `__v<i>`, one projection per conversion stage (see ColumnSpec.stages)."""
    assert group.columns is not None and group.keys is not None
    key_lower = {k.lower() for k in group.keys}
    key_specs = {c.name.lower(): c for c in _key_specs(group)} if key_lower else {}
    raws = []
    for i, spec in enumerate(group.columns):
        raw = _as_parsed(group, spec, F.col("_img").getField(spec.source), key=False)
        if spec.name.lower() in key_lower:
            key_spec = key_specs.get(spec.name.lower(), spec)
            raw = F.coalesce(raw, _as_parsed(group, key_spec, F.col("_key").getField(spec.source), key=True))
        raws.append(raw.alias(f"__r{i}"))
    img_ok = F.col("_img").isNotNull().alias("__img")
    corrupt = F.col("__bad").alias("__corrupt")
    df = df.select(*carry, img_ok, corrupt, *raws)
    df = df.select("*", *[F.col(f"__r{i}").alias(f"__v{i}") for i in range(len(group.columns))])
    depth = max((len(c.stages) for c in group.columns), default=0)
    for level in range(depth):
        cols = []
        for i, spec in enumerate(group.columns):
            v = F.col(f"__v{i}")
            cols.append((spec.stages[level](v) if level < len(spec.stages) else v).alias(f"__v{i}"))
        df = df.select(*[c for c in df.columns if not c.startswith("__v")], *cols)
    return df


def _as_parsed(group: SchemaGroup, spec: ColumnSpec, value: Column, key: bool) -> Column:
    """A column's value as its spec's conversions take it (an Avro value adapted, avro_batch.py)."""
    return group.avro.adapt(spec, value, key) if group.avro is not None else value


def _decode_error(group: SchemaGroup) -> Column:
    """Why a converted row cannot be applied (null when it can), over `_converted`'s columns."""
    assert group.columns is not None and group.keys is not None
    # Named with the connector's type and the lake type, e.g. PostgreSQL's 'infinity' timestamps.
    errors = [
        F.when(
            F.col(f"__r{i}").isNotNull() & F.col(f"__v{i}").cast(cast_type(spec.spark_type)).isNull(),
            F.lit(
                f"{spec.source} ({spec.connect_name or spec.parse_type.simpleString()} value does not fit "
                f"{spec.spark_type.simpleString()})"
            ),
        )
        for i, spec in enumerate(group.columns)
    ]
    index = {spec.name.lower(): i for i, spec in enumerate(group.columns)}
    key_null = [F.when(F.col(f"__r{index[k.lower()]}").isNull(), F.lit(k)) for k in group.keys]
    return (
        F.when(~F.col("__img") & (F.col(CDC_OP) != "d"), F.lit("row image is missing"))
        .when(
            ~F.col("__img") & F.lit(not group.keys),
            F.lit(
                "before row image is missing: a table without a primary key needs the whole row (PostgreSQL: REPLICA IDENTITY FULL)"
            ),
        )
        .when(F.col("__corrupt"), F.lit("row image does not match its declared schema"))
        .when(
            F.concat_ws(",", *key_null) != "",
            F.concat(F.lit("primary key column(s) null: "), F.concat_ws(",", *key_null)),
        )
        .when(
            F.concat_ws(",", *errors) != "",
            F.concat(F.lit("could not decode column(s): "), F.concat_ws(", ", *errors)),
        )
    )


def to_lake_names(decoded: DataFrame, renamed: Mapping[str, str], ignored: Collection[str]) -> DataFrame:
    """Decoded rows of a group with its columns named as in the lake (`renamed`: event column -> lake
    column, renamed at the source after these events) and without the columns dropped since (`ignored`)."""
    df = decoded.drop(*ignored) if ignored else decoded
    if not renamed:
        return df
    # All at once: renames may chain (`tag` set aside, `v` renamed onto `tag`), and renaming one
    # after the other would give two columns one name.
    return df.select(*[F.col(quote(c)).alias(renamed.get(c, c)) for c in df.columns])


def conform(
    decoded: DataFrame, table_columns: list[tuple[str, T.DataType]], defaults: dict[str, str] | None = None
) -> DataFrame:
    """Project decoded rows onto the lake table's data columns, cast to lake types.

    A column the rows' schema lacks is null (dropped at the source), or its source default when
    it was added at the source meanwhile (`defaults`: column -> SQL literal)."""
    present = {c.lower(): c for c in decoded.columns}
    fill = {k.lower(): v for k, v in (defaults or {}).items()}
    cols = []
    for name, typ in table_columns:
        src = present.get(name.lower())
        value = F.col(quote(src)) if src else F.expr(fill[name.lower()]) if name.lower() in fill else F.lit(None)
        cols.append(value.cast(cast_type(typ)).alias(name))
    keep = [CDC_OP, CDC_SEQ, CDC_OFFSET, CDC_SOURCE_TS, "_decode_error"]
    keep += [f"_raw_{c}" for c in RAW_KEEP if f"_raw_{c}" in decoded.columns]
    return decoded.select(*cols, *keep)
