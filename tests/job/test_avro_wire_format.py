"""The wire format avro: Debezium's records as the AWS Glue Schema Registry's Avro converter wrote
them (tests/fixtures/debezium/avro/, captured from the local stack with MariaDB and PostgreSQL by
tests/stack/capture_avro_fixtures.py) are decoded with the schema
version each names, fetched from a Glue API (moto, as a server) once, and applied exactly as the
same changes in JSON are."""

from __future__ import annotations

import base64
import json
import math
import zlib

import pytest
import type_matrix as tm
from avro_records import MARKER, REGION, Registry, load, records, version_of
from moto_process import moto_server_process
from test_types import LAKE_TABLE, duckdb_rows

TYPES = {"mariadb": "mariadb/all_types.json", "postgres": "postgres/all_types.json"}


@pytest.fixture(scope="module")
def registry():
    with moto_server_process() as endpoint, pytest.MonkeyPatch.context() as env:
        # the job's boto3 client finds the registry as on AWS, from its environment
        env.setenv("AWS_ENDPOINT_URL_GLUE", endpoint)
        env.setenv("AWS_DEFAULT_REGION", REGION)
        env.setenv("AWS_ACCESS_KEY_ID", "t")
        env.setenv("AWS_SECRET_ACCESS_KEY", "t")
        reg = Registry(endpoint)
        for name in TYPES.values():
            reg.register(load(name))
        yield reg


def _source(name: str) -> dict[int, dict]:
    """The database's values after the captured changes."""
    return {int(k): v for k, v in load(name)["source_rows"].items()}


@pytest.fixture(scope="module")
def avro_lake(spark, warehouse, tmp_path_factory, lake_class, registry):
    """Both sources' captured all-types records in one batch (two tables, written side by side)."""
    lake = lake_class(spark, warehouse, tmp_path_factory.mktemp("avro"), wire_format="avro")
    return lake, lake.apply([r for f in TYPES.values() for r in records(load(f), registry)])


@pytest.mark.parametrize("dialect", sorted(TYPES))
def test_every_column_type_of_real_avro_records_decodes_to_the_value_the_database_held(avro_lake, dialect):
    lake, _ = avro_lake
    assert tm.differences(dialect, duckdb_rows(lake, LAKE_TABLE[dialect]), _source(TYPES[dialect])) == []


def test_avro_values_no_lake_type_holds_are_dead_lettered_with_the_column_as_in_json(avro_lake, registry):
    # PostgreSQL's infinite timestamps: the same reason as the JSON record's (test_types), and the
    # record kept as it came (framed), so that a replay decodes it again.
    lake, report = avro_lake
    fx = load(TYPES["postgres"])
    infinite = [i for i, m in enumerate(fx["json_twin"]["messages"]) if tm.is_infinite_row(m)]
    assert report.dead == len(infinite) >= 1
    letters = lake.dead_letters()
    assert {(d["topic"], d["offset"]) for d in letters} == {
        (fx["topic"], fx["messages"][i]["offset"]) for i in infinite
    }
    assert {d["reason"] for d in letters} == {
        "could not decode column(s): c_timestamp (io.debezium.time.MicroTimestamp value does not fit "
        "timestamp_ntz), c_timestamptz (io.debezium.time.ZonedTimestamp value does not fit timestamp)"
    }
    # A record that decoded but holds a value no lake column takes is kept as the JsonConverter text it
    # decoded to (replayable with either --wire_format): the same change as the JSON twin's record.
    twin = fx["json_twin"]["messages"]
    assert [json.loads(d["value"])["payload"]["after"] for d in letters] == [
        twin[i]["value"]["payload"]["after"] for i in infinite
    ]


def _one(fixture: dict, registry: Registry, i: int, **change: bytes | None) -> dict:
    """Message `i` of a fixture as a raw record, its value's bytes replaced by `change['value']`."""
    rec = records(fixture, registry)[i]
    for part, data in change.items():
        rec[part] = None if data is None else MARKER + base64.b64encode(data).decode()
    return rec


def _value(fixture: dict, registry: Registry, i: int) -> bytes:
    return registry.framed(fixture["messages"][i]["value"])


def test_records_that_cannot_be_decoded_are_dead_letters_with_the_reason_and_their_bytes(make_lake, registry):
    fx = load(TYPES["mariadb"])
    good = _value(fx, registry, 0)
    unknown = good[:2] + bytes(16) + good[18:]
    corrupt = good[: len(good) // 2]
    bad_header = good[:1] + bytes([9]) + good[2:]
    lake = make_lake(wire_format="avro")
    batch = [_one(fx, registry, 0)] + [_one(fx, registry, 1, value=v) for v in (unknown, corrupt, bad_header)]
    for offset, rec in enumerate(batch):
        rec["offset"] = offset
    report = lake.apply(batch)

    assert report.dead == 3 and report.changes == 1
    letters = {d["offset"]: d for d in lake.dead_letters()}
    vid = registry.ids[next(iter(sorted(registry.ids)))]  # any: the reasons name the record's own
    assert letters[1]["reason"] == (
        "record value: schema version 00000000-0000-0000-0000-000000000000 is not in the AWS Glue Schema "
        "Registry (GetSchemaVersion: not found)"
    )
    assert letters[2]["reason"].startswith("record value: Avro body does not decode with schema version ")
    assert letters[2]["reason"].split()[-1] in registry.ids.values() and vid
    assert letters[3]["reason"] == "record value: compression byte 9 (expected 0: none or 5: zlib)"
    # the record as it came, so that it can be replayed once its schema is back
    assert base64.b64decode(letters[1]["value"].removeprefix(MARKER)) == unknown
    assert lake.ids("salesdb_all_types") == [1]


def _json_records(fixture: dict) -> list[dict]:
    """The same changes as the fixture's Avro records, written by a JSON twin of the connector."""
    from type_matrix import kafka_records as json_records

    twin = fixture["json_twin"]
    return json_records(twin["topic"], twin["messages"])


def _lake_rows(lake, table: str) -> list[dict]:
    """Every column but the time the job wrote the row, ordered by key."""
    return [{k: v for k, v in r.items() if k != "_cdc_ingested_at"} for r in lake.rows(table)]


def _comparable_rows(lake, table: str) -> dict[int, dict]:
    """The rows as DuckDB reads them (Spark's Python rows cannot hold PostgreSQL's year-1 timestamps),
    by id, without the time the job wrote them; NaN as text, so that it equals itself."""
    nan = lambda v: "NaN" if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
    return {
        i: {k: nan(v) for k, v in r.items() if k != "_cdc_ingested_at"} for i, r in duckdb_rows(lake, table).items()
    }


def test_the_lake_from_avro_records_equals_the_lake_from_the_same_changes_in_json(avro_lake, make_lake):
    lake, _ = avro_lake
    json_lake = make_lake()
    json_lake.apply([r for f in TYPES.values() for r in _json_records(load(f))])  # both sources, one batch
    schema = lambda lk, t: [(f.name, f.dataType) for f in lk.spark.table(lk.table(t)).schema]  # noqa: E731
    for dialect, table in sorted(LAKE_TABLE.items()):
        assert _comparable_rows(lake, table) == _comparable_rows(json_lake, table) != {}, dialect
        assert schema(lake, table) == schema(json_lake, table), dialect


def test_a_topic_that_switches_from_json_to_avro_mid_stream_gives_the_same_lake(make_lake, registry):
    fx = load(TYPES["mariadb"])
    half = len(fx["messages"]) // 2
    mixed = _json_records(fx)[:half] + records(fx, registry)[half:]
    lake = make_lake(wire_format="avro")
    report = lake.apply(mixed)  # one batch holds both formats
    assert report.dead == 0
    assert tm.differences("mariadb", duckdb_rows(lake, LAKE_TABLE["mariadb"]), _source(TYPES["mariadb"])) == []


def test_a_zlib_compressed_record_decodes_like_the_plain_one(make_lake, registry):
    fx = load(TYPES["mariadb"])
    plain = _value(fx, registry, 0)
    compressed = plain[:1] + bytes([5]) + plain[2:18] + zlib.compress(plain[18:])
    lake, plain_lake = make_lake(wire_format="avro"), make_lake(wire_format="avro")
    assert lake.apply([_one(fx, registry, 0, value=compressed)]).dead == 0
    plain_lake.apply([_one(fx, registry, 0)])
    table = LAKE_TABLE["mariadb"]
    assert _lake_rows(lake, table) == _lake_rows(plain_lake, table) != []


def test_each_schema_version_is_fetched_from_the_registry_once_per_run(make_lake, registry):
    fx = load(TYPES["mariadb"])
    lake = make_lake(wire_format="avro")
    batch = records(fx, registry)
    lake.apply(batch[:3])
    lake.apply(batch[3:])
    framed = [registry.framed(m[p]) for m in fx["messages"] for p in ("key", "value") if m[p] is not None]
    assert lake.processor.avro.versions.fetches == len({version_of(f) for f in framed}) == 2


def test_a_job_reading_json_keeps_avro_records_as_dead_letters_that_say_how_to_read_them(make_lake, registry):
    fx = load(TYPES["mariadb"])
    lake = make_lake()  # --wire_format json
    report = lake.apply(records(fx, registry)[:1])
    assert report.dead == 1
    (letter,) = lake.dead_letters()
    assert letter["reason"] == (
        "record value: Avro record of the AWS Glue Schema Registry, and the job runs with --wire_format json: "
        "run it with --wire_format avro, then replay these dead letters (replay)"
    )
    assert letter["value"] == records(fx, registry)[0]["value"]


def test_a_schema_version_with_an_added_column_adds_the_column_with_its_default(make_lake, registry):
    # The customer's snapshot and changes, then ADD COLUMN status ... DEFAULT 'Green' and changes
    # (sql/03_add_status_column.sql, sql/postgres/...): each source's records name two versions of the
    # value schema. PostgreSQL writes no change for the rows the ALTER fills: their default is the
    # schema's. Both sources in one batch (two tables side by side).
    fixtures = {"salesdb_customer": load("mariadb/customer.json"), "public_customer": load("postgres/customer.json")}
    for fx in fixtures.values():
        registry.register(fx)
    lake = make_lake(wire_format="avro")
    report = lake.apply([r for fx in fixtures.values() for r in records(fx, registry)])
    assert report.dead == 0
    for table in fixtures:
        rows = {r["cust_id"]: r for r in lake.rows(table, order="cust_id")}
        assert 20 not in rows and rows[34]["status"] == "Green", table
        assert rows[35]["status"] == rows[12]["status"] == "Amber", table
        # rows no change touched after the ALTER hold the source's default, as the database reads them
        assert {r["status"] for i, r in rows.items() if i not in (12, 35) and r["acct_balance"] >= 0} == {"Green"}
        assert {r["status"] for r in rows.values() if r["acct_balance"] < 0} == {"Red"}
        assert len(lake.commits(table)) == 1  # both schema versions in one commit


def test_the_kafka_source_keeps_a_framed_record_as_one_line_of_its_bytes_and_json_as_text(spark, registry):
    from cdclake.jobs.sources import record_text
    from pyspark.sql import functions as F

    framed = _value(load(TYPES["mariadb"]), registry, 0)
    assert len(framed) > 76  # longer than a MIME base64 line
    rows = spark.createDataFrame([(bytearray(framed),), (bytearray(b'{"a":1}'),), (None,)], "v binary")
    texts = [r["t"] for r in rows.select(record_text(F.col("v")).alias("t")).collect()]
    assert texts == [MARKER + base64.b64encode(framed).decode(), '{"a":1}', None]
