"""Fuzz of the whole decode path: generated and mutated Debezium records through the real batch function.

Every record of a batch ends up exactly once: applied (its row is in a lake table, found by its
`_cdc_offset`), dead-lettered with a reason, or ignored as a tombstone; the batch never fails.

Inputs: the captured Debezium messages (tests/fixtures/debezium) and records of a generated table
holding extreme values (dates before 1970 and after 9999, NaN and infinities, decimals at their
precision limit and beyond, 64 KB strings, unknown logical types), then damaged at random:
truncated value or key, mistyped values, wrong or unknown schema entries, invalid ops, missing
source fields, non-object values, invalid UTF-8 bytes, a null key. Each record is turned into an
insert of its own id so that an applied record stays visible in the lake.

Budget: FUZZ_BATCHES batches (default 2, of 12 to 30 records; `make fuzz` runs more), derandomized.
"""

from __future__ import annotations

import base64
import copy
import itertools
import json
import os
from datetime import datetime
from typing import Any

import pytest
from cdc_events import captured
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BATCHES = int(os.environ.get("FUZZ_BATCHES") or 2)
MARK = "@@utf8@@"  # where the invalid-UTF-8 mutation puts its bytes, inside a string value

_offsets = itertools.count(1)
_ids = itertools.count(1_000_000)
_batches = itertools.count()


def _captured() -> list[dict[str, Any]]:
    """Captured change events (any op) as (key, value) dicts with an `after` image."""
    out = []
    for name, rec in captured():
        value = rec.get("value") if isinstance(rec, dict) else None
        if not isinstance(value, dict) or not isinstance(value.get("payload"), dict):
            continue
        payload = value["payload"]
        image = payload.get("after") or payload.get("before")
        if payload.get("op") not in ("c", "r", "u", "d") or not image or not isinstance(rec.get("key"), dict):
            continue
        out.append({"key": rec["key"], "value": value, "file": name})
    return out


CAPTURED = _captured()


def _field(name: str, ctype: str, logical: str | None = None, **params: str) -> dict[str, Any]:
    f: dict[str, Any] = {"type": ctype, "optional": name != "id", "field": name}
    if logical:
        f["name"] = logical
    if params:
        f["parameters"] = params
    return f


DEC = "org.apache.kafka.connect.data.Decimal"
EXTREME_FIELDS = [
    _field("id", "int64"),
    _field("s", "string"),
    _field("d", "int32", "io.debezium.time.Date"),
    _field("ts", "int64", "io.debezium.time.MicroTimestamp"),
    _field("ts_ms", "int64", "io.debezium.time.Timestamp"),
    _field("zts", "string", "io.debezium.time.ZonedTimestamp"),
    _field("t", "int64", "io.debezium.time.MicroTime"),
    _field("f", "double"),
    _field("r", "float"),
    _field("dec", "bytes", DEC, scale="10", **{"connect.decimal.precision": "38"}),
    _field("wide", "bytes", DEC, scale="30", **{"connect.decimal.precision": "65"}),
    _field("vsd", "struct", "io.debezium.data.VariableScaleDecimal"),
    _field("b", "bytes"),
    _field("bits", "bytes", "io.debezium.data.Bits", length="12"),
    _field("unknown", "int64", "io.debezium.time.NotYetInvented"),
]


def _b64_int(n: int) -> str:
    """A Connect Decimal's unscaled value: two's-complement big-endian bytes, base64."""
    size = max(1, (n.bit_length() + 8) // 8)
    return base64.b64encode(n.to_bytes(size, "big", signed=True)).decode()


I64 = 2**63 - 1
DAYS = [0, -1, 1, -719162, -719163, 2932896, 2932897, 2**31 - 1, -(2**31)]  # 0001-01-01 .. 9999-12-31 and past
MICROS = [0, -1, 1, I64, -I64 - 1, 253402300799999999, 253402300800000000, -62135596800000000, -62135596800000001]
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "s": st.one_of(
        st.text(max_size=20),
        st.sampled_from([65536, 70000]).map(lambda n: "x" * n),  # built, not drawn: 64 KB and over
        st.just(f"before {MARK} after"),
        st.none(),
    ),
    "d": st.sampled_from(DAYS) | st.integers(-(2**31), 2**31 - 1),
    "ts": st.sampled_from(MICROS) | st.integers(-I64 - 1, I64),
    "ts_ms": st.sampled_from([0, -1, 253402300800000, -62135596800001, I64]),
    "zts": st.sampled_from(
        [
            *["2024-02-29T23:59:59.999999Z", "1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "+10000-01-01T00:00:00Z"],
            *["infinity", "-infinity", "not a time", ""],
        ]
    ),
    "t": st.sampled_from([0, -1, 86_400_000_000, 3_020_399_000_000, -3_020_399_000_000, I64, -I64 - 1]),
    "f": st.sampled_from(["NaN", "Infinity", "-Infinity", 1e308, -0.0, 5e-324]) | st.floats(allow_nan=False),
    "r": st.sampled_from(["NaN", 3.4e38, 1e39, -1.5]),
    "dec": st.sampled_from([10**38 - 1, -(10**38) + 1, 10**38, -(10**38), 0, -1]).map(_b64_int)
    | st.sampled_from(["", "!!!", "AA=="]),
    "wide": st.sampled_from([10**65 - 1, -(10**65) + 1, 10**70, 0]).map(_b64_int),
    "vsd": st.sampled_from(
        [{"scale": 0, "value": _b64_int(10**40)}, {"scale": 60, "value": _b64_int(-7)}, {"scale": -3, "value": "AQ=="}]
    ),
    "b": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()) | st.just("not base64!"),
    "bits": st.sampled_from(["AQ==", "/w8=", "", "AAAAAAAA"]),
    "unknown": st.integers(-I64 - 1, I64),
}


def _extreme_record(values: dict[str, Any]) -> dict[str, Any]:
    after = {"id": 0, **values}
    schema = {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": EXTREME_FIELDS, "optional": True, "field": "before"},
            {"type": "struct", "fields": EXTREME_FIELDS, "optional": True, "field": "after"},
            {"type": "struct", "fields": [], "optional": False, "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
        ],
        "optional": False,
        "name": "fuzz.fuzzdb.extremes.Envelope",
    }
    source = {"db": "fuzzdb", "table": "extremes", "snapshot": "false", "ts_ms": 1, "file": "b.000001", "pos": 4}
    value = {"schema": schema, "payload": {"before": None, "after": after, "source": source, "op": "c", "ts_ms": 1}}
    key = {"schema": {"type": "struct", "fields": [_field("id", "int64")]}, "payload": {"id": 0}}
    return copy.deepcopy({"key": key, "value": value})  # mutated in place by `records`


JUNK = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8), st.just({"a": [1]}), st.just([None]))
MUTATIONS = [
    "none",
    "truncate_value",
    "truncate_key",
    "mistype_value",
    "retype_schema",
    "unknown_logical",
    "junk_field_schema",
    "bad_op",
    "no_source_table",
    "no_after",
    "not_an_object",
    "invalid_utf8",
    "tombstone",
    "null_key",
    "other_table",
]


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """One raw record (key and value as bytes, as Kafka delivers them) and what it was made from."""
    if draw(st.booleans()) and CAPTURED:
        base = copy.deepcopy(draw(st.sampled_from(CAPTURED)))
    else:
        base = _extreme_record({k: draw(v) for k, v in VALUES.items() if draw(st.integers(0, 4)) > 0})
    key, value = base["key"], base["value"]
    payload = value["payload"]
    # Its own id, as an insert (or snapshot read, or update without a before image).
    image = payload.get("after") or payload.get("before")
    rid = next(_ids)
    image["id"] = rid
    key["payload"]["id"] = rid
    payload.update(after=image, before=None, op=draw(st.sampled_from(["c", "r", "u"])))
    envelope_fields = value["schema"]["fields"]
    image_schema = next(f for f in envelope_fields if f["field"] == "after")
    columns = [f for f in image_schema["fields"] if f["field"] != "id"]

    mutation = draw(st.sampled_from(MUTATIONS))
    if mutation == "mistype_value" and columns:
        image[draw(st.sampled_from(columns))["field"]] = draw(JUNK)
    elif mutation in ("retype_schema", "unknown_logical", "junk_field_schema") and columns:
        target = draw(st.sampled_from(columns))
        i = image_schema["fields"].index(target)
        if mutation == "retype_schema":
            image_schema["fields"][i] = {**target, "type": draw(st.sampled_from(["int8", "boolean", "bytes", "map"]))}
        elif mutation == "unknown_logical":
            image_schema["fields"][i] = {**target, "name": "io.debezium.data.SomethingNew", "version": 9}
        else:
            image_schema["fields"][i] = draw(JUNK)
    elif mutation == "bad_op":
        payload["op"] = draw(st.sampled_from(["x", "", "C", None, 5]))
    elif mutation == "no_source_table":
        payload["source"].pop("table", None)
    elif mutation == "no_after":
        payload["after"] = None
    elif mutation == "other_table":
        payload["source"]["table"] = "fuzz_other"

    key_text = json.dumps(key).encode()
    value_text: bytes | None = json.dumps(value).encode()
    if mutation == "truncate_value":
        value_text = value_text[: draw(st.integers(0, len(value_text) - 1))]
    elif mutation == "truncate_key":
        key_text = key_text[: draw(st.integers(0, len(key_text) - 1))]
    elif mutation == "not_an_object":
        value_text = draw(st.sampled_from([b"[1]", b"42", b'"text"', b"null", b"", b"{}"]))
    elif mutation == "tombstone":
        value_text = None
    elif mutation == "null_key":
        key_text = None
    if value_text is not None and MARK.encode() in value_text:
        # Invalid UTF-8 inside a JSON string (a lone continuation byte, a cut multi-byte sequence).
        bad = draw(st.sampled_from([b"\xff", b"\x80", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80"]))
        value_text = value_text.replace(MARK.encode(), bad if mutation == "invalid_utf8" else b"ok")
    return {"key": key_text, "value": value_text, "mutation": mutation, "id": rid}


def _raw_batch(spark, recs: list[dict[str, Any]]):
    """The raw batch as the Kafka source builds it: binary key and value cast to string."""
    from cdclake.common.records import RAW_COLUMNS
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
            T.StructField("timestamp", T.TimestampType()),
            T.StructField("key", T.BinaryType()),
            T.StructField("value", T.BinaryType()),
        ]
    )
    now = datetime(2026, 1, 1)
    rows = [("fuzz.topic", 0, r["offset"], now, r["key"], r["value"]) for r in recs]
    df = spark.createDataFrame(rows, schema)
    return df.select(*[F.col(c).cast("string").alias(c) if c in ("key", "value") else F.col(c) for c in RAW_COLUMNS])


def _applied_offsets(lake, offsets: set[int]) -> list[int]:
    found: list[int] = []
    for t in lake.spark.sql(f"SHOW TABLES IN glue_catalog.{lake.namespace}").collect():
        table = f"glue_catalog.{lake.namespace}.{t['tableName']}"
        wanted = ",".join(str(o) for o in offsets)
        found += [
            r[0] for r in lake.spark.sql(f"SELECT _cdc_offset FROM {table} WHERE _cdc_offset IN ({wanted})").collect()
        ]
    return found


def _dead_letters(lake, batch_id: int) -> list[dict[str, Any]]:
    out = []
    for f in sorted(lake.dead_dir.glob(f"batch={batch_id}-*/*.json")):
        # Dead letters keep the record's bytes, invalid UTF-8 included.
        out += [json.loads(line) for line in f.read_bytes().decode("utf-8", "replace").splitlines() if line.strip()]
    return out


FUZZ_COUNTS = {"batches": 0, "records": 0}


@pytest.fixture(scope="module")
def fuzz_lake(spark, warehouse, tmp_path_factory, lake_class):
    yield lake_class(spark, warehouse, tmp_path_factory.mktemp("fuzz"))
    # The numbers docs/OPERATIONS.md's "Reliability of decoding" quotes (shown with -s or in the captured output).
    print(f"[fuzz] {FUZZ_COUNTS['batches']} batches, {FUZZ_COUNTS['records']} records through the batch function")


@settings(
    max_examples=BATCHES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(st.lists(records(), min_size=12, max_size=30))
def test_every_fuzzed_record_is_applied_or_dead_lettered_once_and_the_batch_never_fails(fuzz_lake, recs):
    for r in recs:
        r["offset"] = next(_offsets)
    batch_id = next(_batches)
    report = fuzz_lake.processor.process(_raw_batch(fuzz_lake.spark, recs), batch_id)

    offsets = {r["offset"] for r in recs}
    applied = _applied_offsets(fuzz_lake, offsets)
    dead = _dead_letters(fuzz_lake, batch_id)
    dead_offsets = [d["offset"] for d in dead]
    tombstones = {r["offset"] for r in recs if r["value"] is None}
    assert len(applied) == len(set(applied)), "a record applied twice"
    assert len(dead_offsets) == len(set(dead_offsets)), "a record dead-lettered twice"
    assert not set(applied) & set(dead_offsets), "a record both applied and dead-lettered"
    assert all(d["reason"] for d in dead), "a dead letter without a reason"
    lost = offsets - set(applied) - set(dead_offsets) - tombstones
    assert not lost, f"lost: {[(r['mutation'], r['offset']) for r in recs if r['offset'] in lost]}"
    assert report.records == len(recs) and report.dead == len(dead)
    FUZZ_COUNTS["batches"] += 1
    FUZZ_COUNTS["records"] += len(recs)


def test_text_that_is_not_base64_in_a_bytes_or_decimal_column_is_a_dead_letter_not_a_failed_batch(fuzz_lake):
    """Found by the fuzz: Spark's unbase64 threw on it (IllegalArgumentException: Last unit does not
    have enough valid bits) and failed the batch."""
    good, bad_bytes, bad_decimal = (_extreme_record({"b": "AQ==", "dec": _b64_int(12345)}) for _ in range(3))
    bad_bytes["value"]["payload"]["after"]["b"] = "AQ="
    bad_decimal["value"]["payload"]["after"]["dec"] = "not base64!"
    recs = []
    for base in (good, bad_bytes, bad_decimal):
        rid = next(_ids)
        base["key"]["payload"]["id"] = base["value"]["payload"]["after"]["id"] = rid
        recs.append({"key": json.dumps(base["key"]).encode(), "value": json.dumps(base["value"]).encode()})
        recs[-1]["offset"] = next(_offsets)
    batch_id = next(_batches)
    fuzz_lake.processor.process(_raw_batch(fuzz_lake.spark, recs), batch_id)

    assert _applied_offsets(fuzz_lake, {r["offset"] for r in recs}) == [recs[0]["offset"]]
    reasons = {d["offset"]: d["reason"] for d in _dead_letters(fuzz_lake, batch_id)}
    assert reasons[recs[1]["offset"]].startswith("could not decode column(s): b (")
    assert reasons[recs[2]["offset"]].startswith("could not decode column(s): dec (")
