"""Applies the Delta Lake corpus (test_delta_lake.py) in a Spark session of its own and writes what
the lake holds as JSON: the suite's session is Iceberg's, and a process has one SparkContext.

    python delta_worker.py OUT.json WORKDIR

Real Debezium messages (tests/fixtures/debezium/mariadb and postgres, via cdc_events.Events), in
five batches on one lake (table format delta, local catalog); `batches` says what each holds, with
the table of name_corpus (names the source allows quoted) in batches 2 to 4.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

import lake_reads  # noqa: E402
import name_corpus  # noqa: E402
import transfers  # noqa: E402
from cdc_events import (  # noqa: E402
    ORDER_LINES_KEY_SCHEMA,
    Events,
    customer,
    load,
    order_lines_schema,
    row_fields,
    value_schema_of,
    with_set_and_enum,
)

PG_ROW = {"last_name": "Thomas", "email": "pg@example.com", "balance": "1.00", "created_at": "2026-11-21T23:53:06Z"}


def wider_balance_schema() -> dict[str, Any]:
    """customers with `balance` DECIMAL(10,2) -> DECIMAL(14,2) at the source (a safe widening)."""
    schema = value_schema_of("mariadb/c_insert_after_add_column.json")
    for f in row_fields(schema):
        if f["field"] == "balance":
            f["parameters"]["connect.decimal.precision"] = "14"
    return schema


def renamed_schema() -> dict[str, Any]:
    schema = wider_balance_schema()
    for f in row_fields(schema):
        if f["field"] == "last_name":
            f["field"] = "surname"
    return schema


def postgres_batches() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """PostgreSQL sources' events for batches 3 and 4 (tables named <schema>_<table>; those batches
    write one table each, so these take the idle slot of --table_concurrency): customers'
    inserts, then the captured REPLICA IDENTITY DEFAULT update (before=null) and delete (before holds
    only the key); a TOAST row inserted, then the captured update whose unchanged TOASTed values are
    Debezium's placeholder (the lake's values must stay); every column type of the all-types table."""
    import type_matrix as tm

    pg = Events(topic="pg.public.customers", db="inventory", schema="public", template_dir="postgres")
    for i in (1, 2, 3):
        pg.record("c", {"id": i}, {"id": i, "first_name": f"Pg{i}", **PG_ROW}, lsn=26000000 + i, offset=i - 1)
    messages, _ = tm.load_fixtures("postgres")
    first = pg.take() + tm.kafka_records("salesdb.public.all_types", messages)
    first += tm.kafka_records("salesdb.public.toasty", [load("postgres/toast_c_insert.json")])
    updated = [
        load("postgres/u_update_replica_identity_default.json"),
        load("postgres/d_delete_replica_identity_default.json"),
    ]
    for offset, m in enumerate(updated, start=3):
        m["offset"] = offset
    second = tm.kafka_records("pg.public.customers", updated)
    second += tm.kafka_records("salesdb.public.toasty", [load("postgres/toast_u_update_unavailable_value.json")])
    return first, second


def all_types_before_its_columns() -> list[dict[str, Any]]:
    """The MariaDB all-types table as it was before every column but its key was added: a snapshot
    read of row 5 (older than every captured change; partition 1, the captured ones are in 0). Batch 5's
    captured messages then add a column of every lake type to this existing table (ALTER TABLE ADD
    COLUMN, Delta's timestamp_ntz behind a table feature), update row 5 and delete it."""
    import type_matrix as tm

    messages, _ = tm.load_fixtures("mariadb")
    m = json.loads(json.dumps(messages[0]))
    value = m["value"]
    for f in value["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            f["fields"] = [c for c in f["fields"] if c["field"] == "id"]
    m["key"]["payload"] = {"id": 5}
    value["payload"].update(op="r", before=None, after={"id": 5})
    value["payload"]["source"].update(snapshot="true", pos=4, row=0)
    m["partition"], m["offset"] = 1, 0
    return tm.kafka_records("salesdb.salesdb.all_types", [m])


def batches() -> list[list[dict[str, Any]]]:
    cust = Events()
    lines = Events(topic="mdb.inventory.order_lines", table="order_lines")
    ol = order_lines_schema()

    def line(op: str, o: int, n: int, sku: str, **kw: Any) -> None:
        key = {"order_id": o, "line_no": n}
        lines.record(op, key, key | {"sku": sku}, value_schema=ol, key_schema=ORDER_LINES_KEY_SCHEMA, **kw)

    # 1: inserts, an update and a delete of one table in one batch; a composite key; the all-types
    # table with its key column only.
    for i in (1, 2, 3, 4):
        cust.record("c", {"id": i}, customer(i), pos=100 * i)
    cust.record("u", {"id": 2}, customer(2, "Bea"), pos=500)
    cust.record("d", {"id": 3}, before=customer(3), pos=600)
    line("c", 1, 1, "A", pos=100)
    line("c", 1, 2, "B", pos=200)
    line("c", 2, 1, "C", pos=300)
    line("u", 1, 2, "B2", pos=400)
    first = cust.take() + lines.take() + all_types_before_its_columns()
    # SET and ENUM columns redefined in batch 2 (MariaDB converts stored values by text, no row events).
    tagged = Events(topic="mdb.inventory.tagged", table="tagged")
    old_members, _ = with_set_and_enum("a,b,c")
    for i, tags, grade in ((1, "a,b", "a"), (2, "b,c", "b"), (3, None, None), (5, "", "c")):
        tagged.record("c", {"id": i}, customer(i) | {"tags": tags, "grade": grade}, value_schema=old_members)
    first += tagged.take()
    # 2: batch 1 read again (same offsets), changes older than what the lake holds (an update of 1
    # older than its insert's row, an insert of the deleted 3 older than its delete), a newer
    # update; a truncate of order_lines, then a line after it.
    again = [dict(r) for r in first]
    cust.record("u", {"id": 1}, customer(1, "Stale"), pos=50)
    cust.record("c", {"id": 3}, customer(3, "Undead"), pos=550)
    cust.record("u", {"id": 4}, customer(4, "Dee"), pos=700)
    t = lines.record("c", {"order_id": 0, "line_no": 0}, {"order_id": 0, "line_no": 0, "sku": "x"}, pos=500)
    value = json.loads(t["value"])
    value["payload"].update(op="t", before=None, after=None)
    t["key"], t["value"] = None, json.dumps(value)
    line("c", 3, 1, "D", pos=600)
    new_members, redefined = with_set_and_enum("c,b,a", "A,b")
    tagged.schema_change("ALTER TABLE tagged MODIFY COLUMN tags SET('c','b','a'), MODIFY grade ENUM('A','b')",
                         table=redefined)  # fmt: skip
    tagged.record("c", {"id": 4}, customer(4) | {"tags": "c,a", "grade": "A"}, value_schema=new_members)
    second = again + cust.take() + lines.take() + tagged.take()
    # 3: ADD COLUMN (loyalty_tier) and balance widened in one batch.
    wide = wider_balance_schema()
    cust.record("c", {"id": 5}, customer(5, "Eve", loyalty_tier="gold"), pos=800, value_schema=wide)
    cust.record("u", {"id": 1}, customer(1, "Al", loyalty_tier="silver", balance="123456789.99"), pos=900,
                value_schema=wide)  # fmt: skip
    # A change older than the row batch 1 left (2's update at 500), in a later batch than it: only
    # the MERGE's position guard keeps it out (nothing newer of 2 is in this batch to win over it).
    cust.record("u", {"id": 2}, customer(2, "Stale", loyalty_tier="tin"), pos=450, value_schema=wide)
    third = cust.take()
    # 4: a column renamed at the source, with events after it; then a column dropped (policy drop).
    cust.schema_change("ALTER TABLE customers RENAME COLUMN last_name TO surname", pos=1000, offset=0)
    row = customer(4, "Dee", loyalty_tier="bronze")
    row["surname"] = row.pop("last_name") + "-Renamed"
    cust.record("u", {"id": 4}, row, pos=1100, value_schema=renamed_schema())
    cust.schema_change("ALTER TABLE customers DROP COLUMN email", pos=1200, offset=1)
    dropped = renamed_schema()
    for f in ("before", "after"):
        field = next(x for x in dropped["fields"] if x["field"] == f)
        field["fields"] = [c for c in field["fields"] if c["field"] != "email"]
    row = customer(5, "Eva", loyalty_tier="gold")
    row["surname"] = row.pop("last_name")
    del row["email"]
    cust.record("u", {"id": 5}, row, pos=1300, value_schema=dropped)
    fourth = cust.take()
    # 5: every column type of the MariaDB all-types table, as captured from the connector: each one a
    # column added to the table batch 1 created.
    import type_matrix as tm

    messages, _ = tm.load_fixtures("mariadb")
    fifth = tm.kafka_records("salesdb.salesdb.all_types", messages)
    # ... and order_lines renamed at the source: the lake table moves with its rows and markers.
    lines.schema_change("RENAME TABLE order_lines TO order_items", pos=700, offset=2)
    items = Events(topic="mdb.inventory.order_items", table="order_items")
    key = {"order_id": 4, "line_no": 1}
    items.record("c", key, key | {"sku": "E"}, pos=800, value_schema=ol, key_schema=ORDER_LINES_KEY_SCHEMA)
    fifth += lines.take() + items.take()
    pg_first, pg_second = postgres_batches()
    # The table whose names are every kind the source allows (name_corpus), in batches 2 to 4.
    names = name_corpus.batches()
    return [first, second + names[0], third + pg_first + names[1], fourth + pg_second + names[2], fifth]


def read_back(spark: Any, name: str) -> dict[str, Any]:
    """What the lake holds of one table: its schema, rows, properties, history and format."""
    df = spark.table(name)
    return {
        "schema": [[f.name, f.dataType.simpleString(), f.nullable] for f in df.schema.fields],
        "rows": [json.loads(j) for j in df.toJSON().collect()],
        "properties": {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()},
        # Sorted here, not by Spark: a sort is one more Spark job per table.
        "history": sorted([r["version"], r["operation"]] for r in spark.sql(f"DESCRIBE HISTORY {name}").collect()),
        # The catalog's answer (DESCRIBE DETAIL would load the table's state again in a Spark job).
        "provider": provider(spark, name),
    }


def provider(spark: Any, name: str) -> str | None:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    return next((r["data_type"] for r in rows if r["col_name"] == "Provider"), None)


def maintain(spark: Any, warehouse: Path) -> dict[str, Any]:
    """The maintenance job (--table_format delta, every action forced) over customers' delete markers
    (two files to pack), in this session; first an unreferenced file three days old and a young one
    in its folder. One table: each costs a VACUUM (a listing job) and two file counts."""
    from cdclake.jobs.maintenance_job import build_job_settings, run_maintenance

    folder = warehouse / "cdc.db" / "inventory_customers__cdc_deletes"
    old, young = folder / "part-00000-orphan-old.parquet", folder / "part-00000-orphan-young.parquet"
    for f in (old, young):
        f.write_bytes(b"written by no commit")
    three_days_ago = time.time() - 3 * 86400
    os.utime(old, (three_days_ago, three_days_ago))
    raw = {
        "table_format": "delta",
        "catalog_type": "hadoop",
        "warehouse": str(warehouse),
        "tables": "inventory_customers__cdc_deletes",
        "force": "true",
    }
    code = run_maintenance(spark, build_job_settings(raw))
    return {"exit": code, "orphans_left": sorted(f.name for f in (old, young) if f.exists())}


class Phases:
    """Wall seconds of each phase of the run (in the output and on stderr): where the time goes."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.t = time.monotonic()

    def done(self, phase: str) -> None:
        now = time.monotonic()
        self.seconds[phase] = round(now - self.t, 1)
        self.t = now
        print(f"phase {phase}: {self.seconds[phase]} s", file=sys.stderr, flush=True)


def worker_settings(table_format: str, work: Path, **extra: str) -> Any:
    """The job's settings for a worker that applies the corpus from files under `work`."""
    from cdclake.common.settings import build_settings

    return build_settings(
        {
            "table_format": table_format,
            "source": "files",
            "files_path": str(work / "in"),
            "catalog_type": "hadoop",
            "warehouse": str(work / "warehouse"),
            "namespace": "cdc",
            "checkpoint_location": str(work / "ckpt"),
            "dead_letter_path": str(work / "dead"),
            "shuffle_partitions": "2",
            "dropped_column_policy": "drop",
            **extra,
        }
    )


def read_point(spark: Any, work: Path) -> list[dict[str, Any]]:
    """--transactions keep on Delta: the captured transfers in two batches (namespace `txn`); after each,
    the read point and the two tables read at the versions it names."""
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.jobs.batch import BatchProcessor

    settings = worker_settings(
        "delta", work, namespace="txn", transactions="keep", checkpoint_location=str(work / "ckpt-txn")
    )
    processor = BatchProcessor(spark, settings)
    ns = f"{settings.catalog_name}.{settings.namespace}"
    first, second, _ = transfers.batches()
    points = []
    for i, records in enumerate((first, second)):
        processor.process(
            spark.createDataFrame([tuple(r[c] for c in RAW_SCHEMA.names) for r in records], RAW_SCHEMA), i
        )
        versions = {r["table_name"]: r["version"] for r in spark.table(f"{ns}.cdc__read_point").collect()}
        tables = {
            t: [r.asDict() for r in spark.sql(f"SELECT * FROM {ns}.{t} VERSION AS OF {versions[t]}").collect()]
            for t in (transfers.ACCOUNT, transfers.TRANSFER)
        }
        points.append({"versions": versions, "tables": tables})
    return points


def main(out: Path, work: Path) -> None:
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.local.session import local_session

    settings = worker_settings("delta", work)
    clock = Phases()
    spark = local_session(settings, app_name="cdc-delta-tests", master="local[2]")
    processor = BatchProcessor(spark, settings)
    clock.done("session")
    reports = []
    customers = settings.table_identifier("inventory", "customers")
    for i, records in enumerate(batches()):
        df = spark.createDataFrame([tuple(r[c] for c in RAW_SCHEMA.names) for r in records], RAW_SCHEMA)
        r = processor.process(df, i)
        reports.append({t.table.rsplit(".", 1)[-1]: {"dead": t.dead, "schema": t.schema} for t in r.tables})
        clock.done(f"batch {i}")
        if i == 0:
            reader = lake_reads.reader_at(spark, customers)
    feed = lake_reads.feed_after(spark, customers, reader)
    maintenance = maintain(spark, work / "warehouse")
    clock.done("maintenance")
    points = read_point(spark, work)
    clock.done("read point")
    ns = f"{settings.catalog_name}.{settings.namespace}"
    names = [r["tableName"] for r in spark.sql(f"SHOW TABLES IN {ns}").collect() if not r["isTemporary"]]
    # The tables read back side by side: one at a time, each one's few small Spark jobs wait on the
    # driver and the read-back took as long as the five batches (about 17 s a table under load).
    with ThreadPoolExecutor(max_workers=4) as pool:
        tables = dict(zip(names, pool.map(lambda n: read_back(spark, f"{ns}.{n}"), names), strict=True))
    clock.done("read back")
    dead = [
        json.loads(line) for f in sorted((work / "dead").glob("batch=*/*.json")) for line in f.read_text().splitlines()
    ]
    out.write_text(
        json.dumps(
            {
                "reports": reports,
                "tables": tables,
                "dead": dead,
                "maintenance": maintenance,
                "feed": feed,
                "read_point": points,
                "seconds": clock.seconds,
            },
            default=str,
        )
    )
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
