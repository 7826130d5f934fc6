"""Applies the Delta Lake corpus (delta_worker.batches: real Debezium messages in five batches) with
`--table_format hudi` in a Spark session of its own and writes what the lake holds as JSON (the
suite's session is Iceberg's, and a process has one SparkContext).

    python hudi_worker.py OUT.json WORKDIR

Hudi's inline cleaning keeps the file versions of the newest 2 commits (the job's
`--maintenance_retain_last_snapshots 2`). Last, customers' changes of the first three batches and one
of their own again into merge-on-read tables (`--write_mode merge-on-read`, namespace `mor`), then
the maintenance job compacts their log files (`merge_on_read`). After the batches, one change older than the stored row is written by a MERGE WITHOUT the job's
position guard: what Hudi's precombine field alone does with it (`hudi_alone`).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lake_reads
from cdc_events import Events, customer
from delta_worker import batches, wider_balance_schema, worker_settings

# Hudi services a lake of a few rows does not need, off in this harness only (the job keeps Hudi's
# defaults): the metadata table (a second, merge-on-read table written on every commit), the embedded
# timeline server, timeline-server markers and the bloom index. None changes what a table holds or
# its timeline; together they cut the worker from ~114 s to ~83 s.
TEST_ONLY_CONF = {
    "hoodie.metadata.enable": "false",
    "hoodie.embed.timeline.server": "false",
    "hoodie.write.markers.type": "DIRECT",
    "hoodie.index.type": "SIMPLE",
}

# The timeline's completed actions that change a table's data or schema (Hudi 0.15's layout:
# `.hoodie/<instant>.<action>`, the commit metadata as JSON).
ACTIONS = ("commit", "deltacommit", "replacecommit", "schemacommit")


def history(location: Path) -> list[list[str]]:
    """The table's completed commits in order: [instant, action, Hudi's operation type]."""
    out = []
    for f in sorted((location / ".hoodie").iterdir()):
        instant, _, action = f.name.partition(".")
        if action in ACTIONS and instant.isdigit():
            text = f.read_text()
            op = json.loads(text).get("operationType", "") if text.strip() else ""
            out.append([instant, action, op or ""])
    return out


def read_back(spark: Any, name: str, location: Path) -> dict[str, Any]:
    """What the lake holds of one table: its schema and rows without Hudi's `_hoodie_*` columns, its
    properties, its timeline and its provider."""
    from cdclake.lake.formats.hudi import HUDI_META_COLUMNS

    df = spark.table(name)
    data = df.select(*[f"`{c}`" for c in df.columns if c not in HUDI_META_COLUMNS])
    detail = {r["col_name"]: r["data_type"] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    return {
        "schema": [[f.name, f.dataType.simpleString(), f.nullable] for f in data.schema.fields],
        "meta": [c for c in df.columns if c in HUDI_META_COLUMNS],
        "rows": [json.loads(j) for j in data.toJSON().collect()],
        "properties": properties,
        "history": history(location),
        # Hudi's inline cleaning: the completed cleans, and the data file versions left.
        "cleans": len(list((location / ".hoodie").glob("*.clean"))),
        "parquet_files": len(list(location.glob("*.parquet"))),
        "provider": detail.get("Provider"),
        "detail": sorted(detail),
    }


def older_change_without_the_guard(spark: Any, table: str, key: int) -> dict[str, Any]:
    """MERGE a change of row `key` older than the stored one (position 1), no guard: Hudi decides."""
    from cdclake.lake.formats.hudi import HUDI_META_COLUMNS

    cols = [c for c in spark.table(table).columns if c not in HUDI_META_COLUMNS]
    values = {"first_name": "'Older'", "_cdc_seq": "CAST(1 AS decimal(38,0))"}
    select = ", ".join(f"{values.get(c, f'`{c}`')} AS `{c}`" for c in cols)
    spark.sql(
        f"MERGE INTO {table} t USING (SELECT {select} FROM {table} WHERE id = {key}) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET *"
    )
    return (
        spark.sql(f"SELECT first_name, CAST(_cdc_seq AS string) AS seq FROM {table} WHERE id = {key}").first().asDict()
    )


def files_and_timeline(spark: Any, name: str, location: Path) -> dict[str, Any]:
    """One table's rows (without Hudi's columns), latest base files, base files on disk and timeline."""
    from cdclake.lake.formats.hudi import HUDI_META_COLUMNS

    df = spark.table(name)
    latest = spark.sql(f"CALL show_fsview_latest(table => '{name.split('.', 1)[1]}', partition_path => '')").collect()
    rows = [json.loads(j) for j in df.select(*[c for c in df.columns if c not in HUDI_META_COLUMNS]).toJSON().collect()]
    return {
        "rows": sorted(rows, key=lambda r: json.dumps(r, sort_keys=True)),
        "base_files": len(latest),
        "parquet_files": sorted(f.name for f in location.glob("*.parquet")),
        "history": history(location),
        "cleans": len(list((location / ".hoodie").glob("*.clean"))),
        "archived": len(
            [f for f in (location / ".hoodie" / "archived").glob("*archive*") if not f.name.endswith(".crc")]
        ),
    }


def maintain(spark: Any, ns: str, warehouse: Path) -> dict[str, Any]:
    """The maintenance job (--table_format hudi) in this session over customers' delete markers, their
    state before and after. One table, and not customers itself: the module's other tests read
    customers' timeline and file versions from the lake as the batches left them. First two young
    markers of keys the source never had are appended in a file group of their own (Hudi's small file
    limit 0 for this write only, as a stream whose inserts found no small file to fill leaves them),
    then one older than the job's 30 days of delete memory (into a small file, a new version of it).
    The limits: more than 1 small base file, more than 5 commits, 1 commit retained (the stream
    retains 2)."""
    import logging

    from cdclake.jobs.maintenance_job import build_job_settings, run_maintenance

    name = "inventory_customers__cdc_deletes"
    markers, location = f"{ns}.{name}", warehouse / "cdc.db" / name
    limit = spark.conf.get("hoodie.parquet.small.file.limit")
    spark.conf.set("hoodie.parquet.small.file.limit", "0")

    def marker(key: int, days: int) -> str:
        return (
            f"('{{\"id\":{key}}}', CAST(1 AS decimal(38,0)), CAST(0 AS bigint), "
            f"current_timestamp() - INTERVAL {days} DAYS, CAST(NULL AS string))"
        )

    spark.sql(f"INSERT INTO {markers} VALUES {marker(901, 0)}, {marker(902, 0)}")
    spark.conf.set("hoodie.parquet.small.file.limit", limit)
    spark.sql(f"INSERT INTO {markers} VALUES {marker(903, 40)}")
    before = files_and_timeline(spark, markers, location)
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("cdclake")
    log.addHandler(handler)
    log.setLevel(logging.INFO)  # the job's one line per table
    raw = {
        "table_format": "hudi",
        "catalog_type": "hadoop",
        "warehouse": str(warehouse),
        "tables": name,
        "maintenance_max_small_files": "1",
        "maintenance_max_snapshots": "5",
        "maintenance_retain_last_snapshots": "1",
    }
    t0 = time.monotonic()
    code = run_maintenance(spark, build_job_settings(raw))
    seconds = round(time.monotonic() - t0, 1)
    log.removeHandler(handler)
    after = files_and_timeline(spark, markers, location)
    lines = [x for x in lines if x.startswith("maintenance ")]
    return {"exit": code, "before": before, "after": after, "lines": lines, "seconds": seconds}


def maintenance_lines(run: Any) -> tuple[Any, list[str]]:
    """`run()`'s result and the maintenance's log lines it wrote (one per table)."""
    import logging

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("cdclake")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        return run(), [x for x in lines if x.startswith("maintenance ")]
    finally:
        log.removeHandler(handler)


def merge_on_read_batches() -> list[list[dict[str, Any]]]:
    """customers' changes of batches 1-3 (inserts, an update and a delete; the replay, stale changes and
    a newer update; an added column), then a fourth of their own: 5 updated then deleted in the same
    batch, 4 updated (a key whose row only changes: Hudi appends it to a log file)."""
    topic = Events.topic
    first3 = [[r for r in b if r["topic"] == topic] for b in batches()[:3]]
    cust, wide = Events(next_offset=100), wider_balance_schema()
    cust.record("u", {"id": 5}, customer(5, "Eve2", loyalty_tier="gold"), pos=2000, value_schema=wide)
    cust.record("d", {"id": 5}, before=customer(5, "Eve2", loyalty_tier="gold"), pos=2100, value_schema=wide)
    cust.record("u", {"id": 4}, customer(4, "Dee2", loyalty_tier="bronze"), pos=2200, value_schema=wide)
    return [*first3, cust.take()]


def log_files(location: Path) -> int:
    return len([f for f in location.glob(".*.log.*") if not f.name.endswith(".crc")])


def merge_on_read(spark: Any, work: Path) -> dict[str, Any]:
    """customers' changes (merge_on_read_batches) into a merge-on-read table, its rows through the
    real-time (snapshot) view, then the maintenance job with `--maintenance_max_delete_files 1`, and
    after it the rows through both views."""
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.jobs.maintenance_job import build_job_settings, run_maintenance
    from cdclake.lake.formats.hudi import HUDI_META_COLUMNS

    settings = worker_settings(
        "hudi", work, namespace="mor", write_mode="merge-on-read", dead_letter_path=str(work / "dead_mor")
    )
    processor = BatchProcessor(spark, settings)
    name = settings.table_identifier("inventory", "customers")
    location = work / "warehouse" / "mor.db" / name.rsplit(".", 1)[1]

    def rows(df: Any) -> list[dict[str, Any]]:
        data = df.select(*[f"`{c}`" for c in df.columns if c not in HUDI_META_COLUMNS])
        return sorted((json.loads(j) for j in data.toJSON().collect()), key=lambda r: r["id"])

    seconds = []
    for i, records in enumerate(merge_on_read_batches()):
        t0 = time.monotonic()
        processor.process(
            spark.createDataFrame([tuple(r[c] for c in RAW_SCHEMA.names) for r in records], RAW_SCHEMA), i
        )
        seconds.append(round(time.monotonic() - t0, 1))
    before = {"rows": rows(spark.table(name)), "log_files": log_files(location), "history": history(location)}
    shutil.copytree(location, work / "mor_before_compaction")  # for the reconcile reader (test_hudi.py)
    raw = {
        "table_format": "hudi",
        "catalog_type": "hadoop",
        "warehouse": str(work / "warehouse"),
        "namespace": "mor",
        "tables": name.rsplit(".", 1)[1],
        "maintenance_max_delete_files": "1",
    }
    code, lines = maintenance_lines(lambda: run_maintenance(spark, build_job_settings(raw)))
    read_optimized = spark.read.format("hudi").option("hoodie.datasource.query.type", "read_optimized")
    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    return {
        "seconds": seconds,
        "properties": properties,
        "before": before,
        "exit": code,
        "lines": lines,
        "after": {
            "rt": rows(spark.table(name)),
            "ro": rows(read_optimized.load(str(location))),
            "history": history(location),
            "log_files": sum(
                r["num_delta_files"]
                for r in spark.sql(
                    f"CALL show_fsview_latest(table => 'mor.{location.name}', partition_path => '')"
                ).collect()
            ),
        },
    }


def renamed_key_batch() -> list[dict[str, Any]]:
    """A sixth batch, Hudi's own: order_items' key column line_no renamed at the source to line, then a
    line inserted under the new name (Hudi's record key fields cannot follow: dead letters)."""
    from cdc_events import Events, key_schema, value_schema_of, with_row_fields

    items = Events(topic="mdb.inventory.order_items", table="order_items")
    items.schema_change("ALTER TABLE order_items RENAME COLUMN line_no TO line", pos=900, offset=3)
    fields = [("int32", "order_id", False), ("int32", "line", False), ("string", "sku", True)]
    schema = with_row_fields(
        value_schema_of("mariadb/c_insert.json"), [{"type": t, "optional": o, "field": f} for t, f, o in fields]
    )
    key = {"order_id": 5, "line": 1}
    new_key = key_schema("order_items", ("int32", "order_id"), ("int32", "line"))
    items.record("c", key, key | {"sku": "F"}, pos=1000, value_schema=schema, key_schema=new_key)
    return items.take()


def latest_instant(spark: Any, table: str) -> str:
    """The table's newest completed commit instant: a downstream reader's mark on Hudi's timeline."""
    name = table.removeprefix("spark_catalog.")  # Hudi's procedures take database.table
    return spark.sql(f"CALL show_commits(table => '{name}', limit => 1)").first()["commit_time"]


def incremental_since(spark: Any, table: str, instant: str) -> dict[str, Any]:
    """Hudi's incremental query of `table` after `instant` (the SQL function `hudi_table_changes`,
    latest_state: each row written after the instant, as it is now), or the error reading it."""
    name = table.removeprefix("spark_catalog.")
    sql = f"SELECT id, first_name FROM hudi_table_changes('{name}', 'latest_state', '{instant}')"
    try:
        return {"instant": instant, "rows": [r.asDict() for r in spark.sql(sql).collect()]}
    except Exception as e:  # what a reader meets is the result
        return {"instant": instant, "error": str(e)[:2000]}


def main(out: Path, work: Path) -> None:
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.local.session import local_session

    settings = worker_settings(
        "hudi",
        work,
        # Hudi's cleaning keeps the file versions of this many commits (formats.hudi.hudi_table_services).
        maintenance_retain_last_snapshots="2",
    )
    spark = local_session(settings, app_name="cdc-hudi-tests", master="local[2]")
    for k, v in TEST_ONLY_CONF.items():
        spark.conf.set(k, v)  # Hudi's SQL writes take the session's `hoodie.*` settings
    processor = BatchProcessor(spark, settings)
    reports = []
    customers = settings.table_identifier("inventory", "customers")
    for i, records in enumerate([*batches(), renamed_key_batch()]):
        df = spark.createDataFrame([tuple(r[c] for c in RAW_SCHEMA.names) for r in records], RAW_SCHEMA)
        r = processor.process(df, i)
        if i == 0:
            reader = lake_reads.reader_at(spark, customers)
            reader_instant = latest_instant(spark, customers)
        reports.append(
            {
                t.table.rsplit(".", 1)[-1]: {"dead": t.dead, "schema": t.schema, "reasons": t.dead_reasons}
                for t in r.tables
            }
        )
    feed = lake_reads.feed_after(spark, customers, reader)  # before the probes below write to customers
    ns = f"{settings.catalog_name}.{settings.namespace}"
    alone = older_change_without_the_guard(spark, f"{ns}.inventory_customers", 2)
    names = [r["tableName"] for r in spark.sql(f"SHOW TABLES IN {ns}").collect() if not r["isTemporary"]]
    with ThreadPoolExecutor(max_workers=4) as pool:
        tables = dict(
            zip(
                names,
                pool.map(lambda n: read_back(spark, f"{ns}.{n}", work / "warehouse" / "cdc.db" / n), names),
                strict=True,
            )
        )
    maintenance = maintain(spark, ns, work / "warehouse")
    mor = merge_on_read(spark, work)
    # `tables` is what the lake holds at the end (the reconcile reader's tests read the same lake).
    tables["inventory_customers__cdc_deletes"]["rows"] = maintenance["after"]["rows"]
    dead = [
        json.loads(line) for f in sorted((work / "dead").glob("batch=*/*.json")) for line in f.read_text().splitlines()
    ]
    # Last: after Hudi's incremental query, reading another table of the session failed ("cannot prune
    # col: _cdc_key which does not exist in hudi table"). The change query is read again, before it.
    changes = lake_reads.feed_since(spark, customers, reader["mark"])
    incremental = {**incremental_since(spark, customers, reader_instant), "changes": changes}
    result = {
        "incremental": incremental,
        "reports": reports, "tables": tables, "dead": dead, "hudi_alone": alone, "maintenance": maintenance, "feed": feed, "mor": mor,
    }  # fmt: skip
    out.write_text(json.dumps(result, default=str))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
