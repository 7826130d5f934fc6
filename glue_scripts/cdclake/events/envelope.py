"""First pass over a micro-batch: classify every record and read the Debezium envelope.

Input: the *raw batch* both sources produce (records.py): one row per Kafka record with
key and value as JSON text exactly as Kafka Connect's JsonConverter wrote them.

Output: the same rows plus `_status` (what to do with the record), the operation, the source
position (`_cdc_seq`, see ordering.py), source db/table and the schema fingerprint used to
decode the row images in a second, per-schema pass (decode.py).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..common.lake_contract import CDC_OP, CDC_SEQ, CDC_SOURCE_TS
from ..common.records import RAW_COLUMNS
from ..common.records import RAW_SCHEMA as RAW_SCHEMA  # re-exported: callers that build raw batches
from .ordering import sequence_expr
from .source_ddl import POSTGRES_DDL_TABLE, POSTGRES_HEARTBEAT_TABLE

# Record classification. Only CHANGE rows are applied; DEAD rows go to the dead-letter location;
# HEARTBEAT rows (the connector's heartbeat topic, PostgreSQL's heartbeat table) are only counted.
CHANGE, TOMBSTONE, SCHEMA_CHANGE, TRUNCATE, DEAD = "change", "tombstone", "schema_change", "truncate", "dead"
HEARTBEAT = "heartbeat"
# TRANSACTION rows (BEGIN/END records of the connector's transaction topic, `provide.transaction.metadata`)
# are only counted, and read by the transaction gate (transactions.py) under --transactions keep.
TRANSACTION = "transaction"
_TRANSACTION_SCHEMA = '"name":"io.debezium.connector.common.TransactionMetadataValue"'
# The value schema of a record on Debezium's heartbeat topic <topic.heartbeat.prefix>.<topic.prefix>,
# which a topic pattern may match (a user's pattern such as `salesdb.*`).
_HEARTBEAT_SCHEMA = '"name":"io.debezium.connector.common.Heartbeat"'

_CORRUPT = "_corrupt"
# Debezium source block: MySQL (file/pos/row), PostgreSQL (lsn), both (db, table, snapshot, ts_ms).
_SOURCE = T.StructType(
    [
        T.StructField("db", T.StringType()),
        T.StructField("schema", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("snapshot", T.StringType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("file", T.StringType()),
        T.StructField("pos", T.LongType()),
        T.StructField("row", T.LongType()),
        T.StructField("lsn", T.LongType()),
    ]
)
_PAYLOAD_FIELDS = [
    T.StructField("op", T.StringType()),
    T.StructField("source", _SOURCE),
    T.StructField("before", T.StringType()),
    T.StructField("after", T.StringType()),
    T.StructField("ddl", T.StringType()),
    T.StructField("databaseName", T.StringType()),
    # Schema-change events: which tables the statement changed (`"db"."table"`), and how.
    T.StructField(
        "tableChanges",
        T.ArrayType(
            T.StructType(
                [
                    T.StructField("type", T.StringType()),
                    T.StructField("id", T.StringType()),
                    T.StructField("table", T.StringType()),  # the table after it, as JSON text
                ]
            )
        ),
    ),
    T.StructField(_CORRUPT, T.StringType()),
]
_PAYLOAD = T.StructType(list(_PAYLOAD_FIELDS))
# With --transactions keep: a change's transaction id, a BEGIN/END record's status, id and (END) the
# transaction's changes per table. Parsed only then (--transactions ignore parses what it did before).
_TRANSACTION_FIELDS = [
    T.StructField("transaction", T.StructType([T.StructField("id", T.StringType())])),
    T.StructField("status", T.StringType()),
    T.StructField("id", T.StringType()),
    T.StructField(
        "data_collections",
        T.ArrayType(
            T.StructType([T.StructField("data_collection", T.StringType()), T.StructField("event_count", T.LongType())])
        ),
    ),
]
_PAYLOAD_TXN = T.StructType([*_PAYLOAD_FIELDS, *_TRANSACTION_FIELDS])
# JsonConverter with schemas.enable=true writes {"schema": ..., "payload": ...}; a string-typed
# field keeps a nested object as its JSON text.
_WRAPPED = T.StructType(
    [
        T.StructField("schema", T.StringType()),
        T.StructField("payload", T.StringType()),
        T.StructField(_CORRUPT, T.StringType()),
    ]
)
_PERMISSIVE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}


def _parse(text: Column) -> list[Column]:
    """The two parses of a JsonConverter message, as columns: projected once, before `_unwrap`
    uses them several times (inlined into conditional branches, Spark would evaluate them up to
    three times per record)."""
    return [F.from_json(text, _WRAPPED, _PERMISSIVE), F.json_object_keys(text)]


def _unwrap(text: Column, w: Column, keys: Column) -> tuple[Column, Column, Column]:
    """(schema_json, payload_json, is_valid_json) of a JsonConverter message, schemas on or off,
    from its parses `_parse(text)`."""
    valid = text.isNotNull() & w[_CORRUPT].isNull() & F.trim(text).startswith("{")
    # Schemas on: exactly the keys `schema` and `payload`. Schemas off: the message *is* the payload.
    wrapped = F.coalesce(
        (F.size(keys) == 2) & F.array_contains(keys, "schema") & F.array_contains(keys, "payload"),
        F.lit(False),
    )
    return F.when(wrapped, w["schema"]), F.when(wrapped, w["payload"]).otherwise(text), valid


# Kafka Connect's JsonConverter writes its envelope compactly, `schema` first:
#     {"schema":<schema>,"payload":<payload>}
# Inside JSON text a `"` outside a string only delimits keys and string values, so the first
# `,"payload":` is the envelope's own key unless the schema has an object key named `payload`
# (Connect schemas have none). Splitting the text there (a Boyer-Moore search) costs far less than
# a JSON parse of the wrapper, which copies the whole schema (most of a record's bytes) out as
# text. Character-position functions (instr, substring) are avoided: they walk the 4 KB text
# character by character, several times per record.
_COMPACT_PREFIX = '{"schema":'
_COMPACT_SEP = ',"payload":'  # no regex metacharacters: `split` takes it literally


def schema_json(value_schema: str | None) -> str | None:
    """The Connect schema JSON of a `_value_schema` / `_key_schema` value. Those columns keep
    the schema with the envelope's `{"schema":` in front (the cut is not trimmed per record,
    only here, once per schema group)."""
    if value_schema is None:
        return None
    if not value_schema.startswith(_COMPACT_PREFIX):
        raise ValueError(f"not an envelope schema: {value_schema[:40]!r}")
    return value_schema[len(_COMPACT_PREFIX) :]


def _split_compact(text: Column, parts: Column) -> tuple[Column, Column, Column]:
    """(is_compact, `{"schema":<schema>`, payload_json) of a compact JsonConverter message, from
    `parts`, its `split(text, ',"payload":', 2)` projected once. A cut that is not really the
    envelope's shows up as a payload that does not parse; the caller then takes the full parse."""
    compact = F.coalesce(
        text.startswith(_COMPACT_PREFIX) & (F.size(parts) == 2) & text.endswith("}"),
        F.lit(False),
    )
    head = parts[0]
    tail = parts[1]  # the payload and the envelope's closing brace (~1 KB: its walk is cheap)
    payload = tail.substr(F.lit(1), F.length(tail) - 1)
    return compact, F.when(head != _COMPACT_PREFIX + "null", head), payload


def _envelope_projections(payload: T.StructType) -> list[list[Column]]:
    """The projections that give the raw columns plus the value's schema and payload text, the
    key's, their validity and `_p`, the parsed payload, applied in order by `_read_envelopes`."""
    # Values: the cut of a compact envelope and one parse of its payload; only records that are
    # not compact JsonConverter output (or whose cut payload does not parse) take the full parse.
    raw = [F.col(c) for c in RAW_COLUMNS]
    compact, c_schema, c_payload = _split_compact(F.col("value"), F.col("_vparts"))
    fast = F.col("_vc") & F.col("_vcp_p").isNotNull() & F.col("_vcp_p")[_CORRUPT].isNull()
    slow = [F.when(~F.col("_fast"), c) for c in _parse(F.col("value"))]
    v_schema, v_payload, v_valid = _unwrap(F.col("value"), F.col("_vw"), F.col("_vk"))
    k_schema, k_payload, k_valid = _unwrap(F.col("key"), F.col("_kw"), F.col("_kk"))
    v_schema, k_schema = (F.concat(F.lit(_COMPACT_PREFIX), c) for c in (v_schema, k_schema))  # see schema_json
    is_fast = F.col("_fast")
    slow_p = F.when(~is_fast, F.from_json(F.col("_payload_json"), payload, _PERMISSIVE))
    return [
        [*raw, F.split(F.col("value"), _COMPACT_SEP, 2).alias("_vparts")],
        [*raw, compact.alias("_vc"), c_schema.alias("_vcs"), c_payload.alias("_vcp")],
        [F.col("*"), F.when(F.col("_vc"), F.from_json(F.col("_vcp"), payload, _PERMISSIVE)).alias("_vcp_p")],
        [F.col("*"), fast.alias("_fast")],
        [
            F.col("*"),
            *[c.alias(n) for c, n in zip(slow, ("_vw", "_vk"), strict=True)],
            *[c.alias(n) for c, n in zip(_parse(F.col("key")), ("_kw", "_kk"), strict=True)],
        ],
        [
            *raw,
            is_fast,
            F.col("_vcp_p"),
            F.when(is_fast, F.col("_vcs")).otherwise(v_schema).alias("_value_schema"),
            F.when(is_fast, F.col("_vcp")).otherwise(v_payload).alias("_payload_json"),
            (is_fast | v_valid).alias("_value_valid"),
            k_schema.alias("_key_schema"),
            k_payload.alias("_key_json"),
            k_valid.alias("_key_valid"),
        ],
        [F.col("*"), F.when(is_fast, F.col("_vcp_p")).otherwise(slow_p).alias("_p")],
    ]


def _read_envelopes(raw: DataFrame, keep: bool) -> DataFrame:
    """The raw columns plus the value's schema and payload text, the key's, their validity and
    `_p`, the parsed payload."""
    df = raw
    for columns in _projections(raw, keep)[:-1]:
        df = df.select(*columns)
    return df


def _status_reason(op: Column, src: Column) -> Column:
    """(status, reason) of a record read by `_read_envelopes`, as a struct (col1, col2); the first
    condition that holds decides."""
    payload_null = F.col("_payload_json").isNull() | (F.trim(F.col("_payload_json")) == "null")
    return (
        F.when(
            F.col("topic").isNull(),
            F.struct(F.lit(DEAD), F.lit("not a {topic, partition, offset, key, value} JSON record")),
        )
        .when(F.col("value").isNull(), F.struct(F.lit(TOMBSTONE), F.lit(None).cast("string")))
        .when(~F.col("_value_valid"), F.struct(F.lit(DEAD), F.lit("value is not a JSON object")))
        .when(payload_null, F.struct(F.lit(TOMBSTONE), F.lit(None).cast("string")))
        .when(
            F.col("_p.ddl").isNotNull() | F.col("_p.databaseName").isNotNull(),
            F.struct(F.lit(SCHEMA_CHANGE), F.lit(None).cast("string")),
        )
        # PostgreSQL's DDL log (source_ddl.py): its events are statements, never a lake table.
        .when(_postgres_ddl_log(src), F.struct(F.lit(SCHEMA_CHANGE), F.lit(None).cast("string")))
        .when(_heartbeat(op, src), F.struct(F.lit(HEARTBEAT), F.lit(None).cast("string")))
        .when(_transaction_record(op), F.struct(F.lit(TRANSACTION), F.lit(None).cast("string")))
        .when(op.isNull(), F.struct(F.lit(DEAD), F.lit("payload has no Debezium `op` field")))
        .when(
            ~op.isin("c", "r", "u", "d", "t"),
            F.struct(F.lit(DEAD), F.concat(F.lit("unknown Debezium op "), op)),
        )
        .when(
            src["table"].isNull() | (src["db"].isNull() & src["schema"].isNull()),
            F.struct(F.lit(DEAD), F.lit("payload.source has no db/table")),
        )
        .when(op == "t", F.struct(F.lit(TRUNCATE), F.lit(None).cast("string")))
        .when(
            op.isin("c", "r", "u") & F.col("_p.after").isNull(),
            F.struct(F.lit(DEAD), F.concat(F.lit("op "), op, F.lit(" without an `after` row image"))),
        )
        # A null key is a table without a primary key (batch.py, --keyless_table_policy).
        .when(
            F.col("key").isNotNull() & ~F.col("_key_valid"),
            F.struct(F.lit(DEAD), F.lit("record key is not JSON")),
        )
        .otherwise(F.struct(F.lit(CHANGE), F.lit(None).cast("string")))
    )


def _postgres_ddl_log(src: Column) -> Column:
    return F.coalesce((src["table"] == POSTGRES_DDL_TABLE) & src["lsn"].isNotNull(), F.lit(False))


def _heartbeat(op: Column, src: Column) -> Column:
    """A heartbeat: a record of the heartbeat topic (no `op`; its schema is looked at only then), or a
    change of PostgreSQL's heartbeat table (sql/postgres/heartbeat.sql), which heartbeat.action.query
    updates so that the replication slot advances while the captured tables are quiet."""
    topic_record = op.isNull() & F.coalesce(F.col("_value_schema").contains(_HEARTBEAT_SCHEMA), F.lit(False))
    table_row = F.coalesce((src["table"] == POSTGRES_HEARTBEAT_TABLE) & src["lsn"].isNotNull(), F.lit(False))
    return topic_record | table_row


def _transaction_record(op: Column) -> Column:
    """A BEGIN/END record of the connector's transaction topic `<topic.prefix>.transaction` (no `op`)."""
    named = F.col("_value_schema").contains(_TRANSACTION_SCHEMA) | F.col("topic").endswith(".transaction")
    return op.isNull() & F.coalesce(named, F.lit(False))


def _transaction_id(status: Column) -> Column:
    """`_txid`: a change's transaction id, or a BEGIN/END record's. PostgreSQL's ids are `<xid>:<lsn>`
    with BEGIN's and END's LSNs differing: its transaction is its xid (a MySQL GTID `<uuid>:<n>`
    stays whole: its uuid has letters and dashes)."""
    tx = F.coalesce(F.col("_p.transaction.id"), F.when(status == TRANSACTION, F.col("_p.id")))
    return F.when(tx.rlike("^[0-9]+:[0-9]+$"), F.substring_index(tx, ":", 1)).otherwise(tx)


def _streamed(src: Column) -> Column:
    return F.coalesce(src["snapshot"], F.lit("false")) == "false"


def _classify_projection(keep: bool) -> list[Column]:
    """The last projection of `classify`, over `_read_envelopes`' columns; with `keep`
    (--transactions keep) also `_txid` and `_txn_end` (an END's changes per table)."""
    op = F.col("_p.op")
    src = F.col("_p.source")
    status_reason = _status_reason(op, src)
    # The `{db}` of the target name is what names the table's namespace in the source, as in the
    # Debezium topic <prefix>.<db-or-schema>.<table>: MySQL's database, PostgreSQL's schema. A
    # PostgreSQL `source.db` is the connector's one database, the same for every table: with it,
    # public.orders and archive.orders would be merged into one lake table.
    db = F.coalesce(src["schema"], src["db"])
    # The statement of a schema change made while streaming; the snapshot's own CREATE/DROP
    # statements describe the tables as they already are. Only with its binlog position: the
    # connector's schema-history topic (`<prefix>.schema-history`, which a topic pattern starting
    # with the prefix also matches) holds the same statements without one, and a statement
    # placed by its Kafka offset would be applied again at a wrong position.
    streamed_ddl = (
        (status_reason["col1"] == SCHEMA_CHANGE) & _streamed(src) & src["file"].isNotNull() & src["pos"].isNotNull()
    )
    # The snapshot's CREATE TABLE (SHOW CREATE TABLE's text): read for the table's partitioning only
    # (lake_tables.read_statements), which a later DROP/TRUNCATE PARTITION needs.
    snapshot_ddl = (
        (status_reason["col1"] == SCHEMA_CHANGE) & ~_streamed(src) & src["file"].isNotNull() & src["pos"].isNotNull()
    )
    # A row the DDL log's trigger inserted while streaming: one command's effect on one table. Its
    # snapshot rows, updates and deletes (pruning the log) are no statements.
    postgres_ddl = _postgres_ddl_log(src) & (op == "c") & _streamed(src)
    # Its snapshot rows: read for which table is a partition of which only (lake_tables.read_statements).
    postgres_snapshot_ddl = _postgres_ddl_log(src) & (op == "r")
    return [
        *[F.col(c) for c in RAW_COLUMNS],
        F.col("_value_schema"),
        F.col("_payload_json"),
        F.col("_key_schema"),
        F.col("_key_json"),
        # The row images as text, from the one parse of the payload (decode.py parses them).
        F.col("_p.before").alias("_before_json"),
        F.col("_p.after").alias("_after_json"),
        status_reason["col1"].alias("_status"),
        status_reason["col2"].alias("_reason"),
        op.alias(CDC_OP),
        db.alias("_src_db"),
        src["table"].alias("_src_table"),
        sequence_expr(src, F.col("partition"), F.col("offset")).alias(CDC_SEQ),
        F.timestamp_millis(src["ts_ms"]).alias(CDC_SOURCE_TS),
        F.xxhash64(F.coalesce(F.col("_value_schema"), F.lit(""))).alias("_schema_id"),
        F.xxhash64(F.coalesce(F.col("_key_schema"), F.lit(""))).alias("_key_schema_id"),
        F.when(streamed_ddl, F.col("_p.ddl")).alias("_ddl"),
        F.when(streamed_ddl, F.col("_p.tableChanges")).alias("_ddl_tables"),
        F.when(postgres_ddl, F.col("_p.after")).alias("_pg_ddl"),
        F.when(snapshot_ddl, F.col("_p.ddl")).when(postgres_snapshot_ddl, F.col("_p.after")).alias("_snapshot_ddl"),
        *(_transaction_columns(status_reason["col1"], db, src) if keep else []),
    ]


def _transaction_columns(status: Column, db: Column, src: Column) -> list[Column]:
    """`_txid`, `_txn_collection` (a change's `<db or schema>.<table>`, as the END names it) and
    `_txn_end` (an END's changes per table)."""
    is_end = (status == TRANSACTION) & (F.col("_p.status") == "END")
    txid = _transaction_id(status)
    change = txid.isNotNull() & (status != TRANSACTION)
    return [
        txid.alias("_txid"),
        F.when(change, F.concat_ws(".", db, src["table"])).alias("_txn_collection"),
        F.when(is_end, F.col("_p.data_collections")).alias("_txn_end"),
    ]


# Every batch applies the same projections; built with a few hundred Py4J calls (and as many
# JVM-side lookups of the functions), they are built once per JVM and reused: a Column is an
# unresolved expression, bound to no DataFrame or session.
_BUILT: dict[tuple[int, bool], list[list[Column]]] = {}


def _projections(df: DataFrame, keep: bool) -> list[list[Column]]:
    jvm = id(df.sparkSession.sparkContext._jvm)
    if (jvm, keep) not in _BUILT:
        for k in [k for k in _BUILT if k[0] != jvm]:
            del _BUILT[k]
        payload = _PAYLOAD_TXN if keep else _PAYLOAD
        _BUILT[(jvm, keep)] = [*_envelope_projections(payload), _classify_projection(keep)]
    return _BUILT[(jvm, keep)]


def classify(raw: DataFrame, transactions: bool = False) -> DataFrame:
    """Add envelope fields and `_status` / `_reason` to a raw batch (with `transactions`, the
    transaction columns of `_transaction_columns` too). No action is triggered."""
    return classify_envelopes(read_envelopes(raw, transactions), transactions)


def read_envelopes(raw: DataFrame, transactions: bool = False) -> DataFrame:
    """The first part of `classify`: the raw columns and what was read from each record's envelope
    (`_value_schema`, `_payload_json`, `_value_valid`, `_key_schema`, `_key_json`, `_key_valid`,
    `_p`: the parsed payload, of type `payload_type(transactions)`), which the wire format avro
    replaces for its records (avro_batch.py)."""
    return _read_envelopes(raw, transactions)


def classify_envelopes(envelopes: DataFrame, transactions: bool = False, extra: tuple[str, ...] = ()) -> DataFrame:
    """The second part of `classify`, over `read_envelopes`' columns; `extra` columns go along."""
    return envelopes.select(*_projections(envelopes, transactions)[-1], *extra)


def payload_type(transactions: bool) -> T.StructType:
    """The type of `_p`, the parsed payload: one definition for the JSON path's parse and the
    Avro path's values (avro_batch.py builds its `_p` field by field from it)."""
    return _PAYLOAD_TXN if transactions else _PAYLOAD
