"""The wire format avro decodes each record straight into the JSON path's typed rows, never through
JSON text: the same classification (status, dead-letter reason, op, source table, position, the
statements of schema changes and of PostgreSQL's DDL log), the same schema groups (with the TOAST
placeholder found alike) and the same decoded values, column by column.

Two sets of real messages: every Debezium message captured with JsonConverter
(tests/fixtures/debezium/*/, PostgreSQL's DDL log included) encoded as the Glue Schema Registry's
converter writes it (cdcbench.avrowire, which tests/bench/test_bench_avro.py holds to the real
converter's bytes), and the all-types records the real converter wrote (tests/fixtures/debezium/avro/)
next to their JSON twins: every column type of tests/type_matrix.py."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import type_matrix as tm
from avro_records import Registry, load, records
from cdc_events import FIXTURES, captured, connect_json
from cdcbench.avrowire import avro_schema, encode, frame, glue_client, register
from cdclake.common.lake_contract import CDC_OP, CDC_SEQ, CDC_SOURCE_TS
from cdclake.common.records import RAW_SCHEMA
from cdclake.events.avro_batch import AvroDecoder
from cdclake.events.decode import SchemaGroup, decode_group
from cdclake.events.envelope import classify
from cdclake.events.leaf import as_leaf
from cdclake.events.schema_registry import SchemaVersions, as_text
from cdclake.events.summary import group_aggregate, summarize
from moto_process import moto_server_process

PLACEHOLDER = "__debezium_unavailable_value"
CLASSIFIED = ["offset", "_status", "_reason", CDC_OP, "_src_db", "_src_table", CDC_SEQ, CDC_SOURCE_TS, "_ddl"]
GROUP_FACTS = ("events", "deletes", "updates", "toasted", "max_seq", "min_seq", "keys")


@pytest.fixture(scope="module")
def registry():
    with moto_server_process() as endpoint, pytest.MonkeyPatch.context() as env:
        for name, value in (("AWS_ENDPOINT_URL_GLUE", endpoint), ("AWS_DEFAULT_REGION", "us-east-1")):
            env.setenv(name, value)
        env.setenv("AWS_ACCESS_KEY_ID", "t")
        env.setenv("AWS_SECRET_ACCESS_KEY", "t")
        yield Registry(endpoint)


def _json_messages() -> list[dict[str, Any]]:
    """Every captured JsonConverter message, in name order (the DDL log's scenario files too)."""
    out = [m for name, m in captured() if isinstance(m, dict) and "value" in m and not name.startswith("avro")]
    for f in sorted((FIXTURES / "postgres" / "ddl").glob("*.json")):
        out += json.loads(f.read_text())["records"]
    return out


@dataclass
class Encoder:
    """Connect schemas registered as the converter registers them, once each."""

    glue: Any
    ids: dict[str, str]

    def framed(self, part: dict[str, Any] | None) -> str | None:
        """A JsonConverter key or value (schema and payload) as the job's raw batch carries its Avro form."""
        if part is None or part.get("payload") is None:
            return None
        schema = avro_schema(part["schema"])
        text = json.dumps(schema, separators=(",", ":"))
        if text not in self.ids:
            self.ids[text] = register(self.glue, "cdc-lake", part["schema"].get("name", "record"), text)
        return as_text(frame(self.ids[text], encode(schema, part["payload"])))


def _text(part: Any) -> str | None:
    return None if part is None else part if isinstance(part, str) else connect_json(part)


def _raw(spark, rows: list[tuple]) -> Any:
    return spark.createDataFrame(rows, RAW_SCHEMA)


def _captured_pair(spark, registry: Registry) -> tuple[Any, Any]:
    """(the JSON batch, the same messages in Avro): one record per message, offset = its index."""
    enc = Encoder(glue_client(registry.endpoint), {})
    ts = datetime(2026, 11, 28, tzinfo=UTC)
    json_rows, avro_rows = [], []
    for i, m in enumerate(_json_messages()):
        key, value = m.get("key"), m.get("value")
        json_rows.append(("captured", 0, i, ts, _text(key), _text(value)))
        schemas = all(isinstance(p, dict) and "schema" in p for p in (key, value) if p is not None)
        avro = (enc.framed(key), enc.framed(value)) if schemas else (_text(key), _text(value))
        avro_rows.append(("captured", 0, i, ts, *avro))
    return _raw(spark, json_rows), _raw(spark, avro_rows)


def _as_text(df, columns: list[str]) -> list[Any]:
    """Columns as text Python can hold (binary as hex; PostgreSQL's year-1 timestamps included)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    kinds = {f.name: f.dataType for f in df.schema.fields}
    return [(F.hex(c) if isinstance(kinds[c], T.BinaryType) else F.col(c).cast("string")).alias(c) for c in columns]


def _classified(classified) -> dict[int, dict[str, Any]]:
    from pyspark.sql import functions as F

    rows = classified.select(*CLASSIFIED, F.col("_ddl_tables").cast("string").alias("_ddl_tables"), "_pg_ddl")
    out = {int(r["offset"]): r.asDict() for r in rows.select(*_as_text(rows, [*CLASSIFIED, "_ddl_tables"])).collect()}
    for r in rows.select("offset", "_pg_ddl").collect():  # the DDL log's row: the same JSON
        out[r["offset"]]["_pg_ddl"] = None if r["_pg_ddl"] is None else json.loads(r["_pg_ddl"])
    return out


def _groups(classified, decoder: AvroDecoder | None) -> list[SchemaGroup]:
    summary = summarize(group_aggregate(classified, PLACEHOLDER).collect(), lambda _sid, text: text)
    groups = sorted((g for gs in summary.tables.values() for g in gs), key=lambda g: (g.db, g.table, g.max_seq))
    if decoder is not None:
        decoder.attach(groups)
    for g in groups:
        g.resolve()
    return groups


def _decoded(classified, groups: list[SchemaGroup]) -> dict[int, dict[str, Any]]:
    """Every group's decoded rows by offset: the lake columns (as text, with their types), the
    metadata and the decode error; all groups in one Spark job."""
    from functools import reduce

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    parts = []
    for g in groups:
        df = decode_group(classified, g)
        columns = [c for c in df.columns if not c.startswith("_raw_")]
        facts = json.dumps({"table": [g.db, g.table], "types": dict(df.select(*columns).dtypes)})
        row = F.to_json(F.struct(*_as_text(df, columns)), {"ignoreNullFields": "false"})
        parts.append(df.select(F.col("_raw_offset").alias("o"), F.lit(facts).alias("facts"), row.alias("row")))
    rows = reduce(DataFrame.unionByName, parts).collect()
    return {r["o"]: {**json.loads(r["facts"]), "row": json.loads(r["row"])} for r in rows}


def _facts(groups: list[SchemaGroup]) -> list[tuple]:
    return [(g.db, g.table, *(getattr(g, f) for f in GROUP_FACTS), [(c.name, c.spark_type) for c in g.columns or []]) for g in groups]  # fmt: skip


def _same_batches(spark, json_raw, avro_raw) -> set[str]:
    """Assert that both batches classify, group and decode alike; the lake columns decoded."""
    decoder = AvroDecoder(True, SchemaVersions(), placeholder=PLACEHOLDER)
    # Held as one-node plans, as the job holds a batch before decoding it (jobs/batch.py): each
    # group's decode then starts from the classified rows instead of classifying the batch again.
    by_json, by_avro = as_leaf(classify(json_raw)), as_leaf(decoder.classify(avro_raw))
    assert _classified(by_avro) == _classified(by_json)
    json_groups, avro_groups = _groups(by_json, None), _groups(by_avro, decoder)
    assert all(g.avro is not None for g in avro_groups) and all(g.error is None for g in avro_groups)
    assert _facts(avro_groups) == _facts(json_groups)
    decoded = _decoded(by_avro, avro_groups)
    assert decoded == _decoded(by_json, json_groups) != {}
    return {c for row in decoded.values() for c in row["row"]}


def test_every_captured_debezium_message_in_avro_gives_the_json_paths_classification_and_rows(spark, registry):
    json_raw, avro_raw = _captured_pair(spark, registry)
    assert avro_raw.where("value LIKE 'gsr-avro:%'").count() > 40  # most carry schemas: they are Avro
    _same_batches(spark, json_raw, avro_raw)


@pytest.mark.parametrize("dialect", ["mariadb", "postgres"])
def test_every_type_of_the_type_matrix_decodes_from_avro_as_from_json(spark, registry, dialect):
    fx = load(f"{dialect}/all_types.json")
    registry.register(fx)
    avro = records(fx, registry)
    twin = tm.kafka_records(fx["json_twin"]["topic"], fx["json_twin"]["messages"])
    rows = lambda recs: [tuple(r[c] for c in RAW_SCHEMA.names) for r in recs]  # noqa: E731
    json_raw = _raw(spark, rows([{**t, "offset": a["offset"], "partition": a["partition"]} for t, a in zip(twin, avro, strict=True)]))  # fmt: skip
    columns = _same_batches(spark, json_raw, _raw(spark, rows(avro)))
    matrix = tm.MARIADB_COLUMNS if dialect == "mariadb" else tm.PG_COLUMNS
    assert {c.name for c in matrix} <= columns


@pytest.mark.parametrize("dialect", ["mariadb", "postgres"])
def test_transaction_records_in_avro_give_the_json_paths_transaction_columns(spark, registry, dialect):
    """With --transactions keep the payload type has the transaction fields: a change's transaction id,
    BEGIN/END records and END's changes per table, read from Avro as the JSON path parses them."""
    enc = Encoder(glue_client(registry.endpoint), {})
    messages = json.loads((FIXTURES / dialect / "transactions" / "transfers.json").read_text())["records"]
    ts = datetime(2026, 11, 28, tzinfo=UTC)
    json_rows = [(m["topic"], 0, i, ts, _text(m["key"]), _text(m["value"])) for i, m in enumerate(messages)]
    avro_rows = [(m["topic"], 0, i, ts, enc.framed(m["key"]), enc.framed(m["value"])) for i, m in enumerate(messages)]
    decoder = AvroDecoder(True, SchemaVersions(), placeholder=PLACEHOLDER)
    by_json = classify(_raw(spark, json_rows), True)
    by_avro = decoder.classify(_raw(spark, avro_rows), True)
    columns = ["offset", "_status", "_txid", "_txn_collection"]
    rows = lambda df: sorted(tuple(r) for r in df.select(*columns, df["_txn_end"].cast("string")).collect())  # noqa: E731
    got, want = rows(by_avro), rows(by_json)
    assert got == want
    assert {r[1] for r in want} >= {"transaction", "change"} and any(r[4] for r in want)
    decoder.release()


def _with_special_defaults(message: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    """A captured PostgreSQL change after `ADD COLUMN score double precision DEFAULT 'NaN', ADD COLUMN
    peak double precision DEFAULT 'Infinity'` (as tests/stack/test_postgres_pipeline.py alters its
    tables): Debezium's Connect schema then holds those defaults, which both JsonConverter and the
    Glue Schema Registry converter write as the text "NaN" / "Infinity" (checked against the real
    converters' jars); the row images hold `values`."""
    value = json.loads(json.dumps(message["value"]))
    added = [{"type": "double", "optional": True, "default": d, "field": n} for n, d in (("score", "NaN"), ("peak", "Infinity"))]  # fmt: skip
    for part in value["schema"]["fields"]:
        if part["field"] in ("before", "after"):
            part["fields"] += added
    for image in ("before", "after"):
        if value["payload"].get(image) is not None:
            value["payload"][image] |= values
    return {**message, "value": value}


def test_a_row_image_with_a_nan_or_infinity_column_default_decodes_from_avro_as_from_json(spark, registry):
    """Avro rejects a double's default written as text, and checks a writer's defaults when the reader
    has aliases, as the first pass's probe columns have: unless the job reads with the writer's
    defaults left out, every record of such a schema version is a dead letter saying its body does
    not decode (the PostgreSQL stack's changes after such an ADD COLUMN)."""
    names = ("c_insert_after_add_column.json", "u_update_after_add_column.json")
    messages = [json.loads((FIXTURES / "postgres" / n).read_text()) for n in names]
    messages = [_with_special_defaults(m, {"score": 2.5, "peak": -1.0}) for m in messages]
    enc = Encoder(glue_client(registry.endpoint), {})
    ts = datetime(2026, 11, 28, tzinfo=UTC)
    json_raw = _raw(spark, [("pg.public.customers", 0, i, ts, _text(m["key"]), _text(m["value"])) for i, m in enumerate(messages)])  # fmt: skip
    avro_raw = _raw(spark, [("pg.public.customers", 0, i, ts, enc.framed(m["key"]), enc.framed(m["value"])) for i, m in enumerate(messages)])  # fmt: skip
    assert any('"default":"NaN"' in schema for schema in enc.ids)  # the version's definition holds it
    columns = _same_batches(spark, json_raw, avro_raw)
    assert {"score", "peak"} <= columns


def test_an_added_decimal_columns_default_backfills_the_same_value_from_avro_as_from_json(spark):
    """`ADD COLUMN credit numeric(20,2) DEFAULT 123456789012345678.91` (test_postgres_pipeline): the
    Connect schema's default is the unscaled value's bytes as base64 text, whichever the wire format;
    the Avro spec's conversion takes bytes, so the default is decoded first (else old rows got null)."""
    from cdclake.events.connect_types import column_spec
    from cdclake.lake.evolution import default_sql

    unscaled = 12345678901234567891
    b64 = base64.b64encode(unscaled.to_bytes(9, "big", signed=True)).decode()
    field = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "2", "connect.decimal.precision": "20"}, "default": b64, "field": "credit"}  # fmt: skip
    expected = "CAST('123456789012345678.91' AS decimal(20,2))"
    assert default_sql(spark, column_spec(field, binary=True)) == default_sql(spark, column_spec(field)) == expected
