"""The Glue streaming job with the configuration the CloudFormation template gives it: Iceberg's
GlueCatalog and S3FileIO (`--catalog_type glue`, the warehouse on the lake bucket), against moto
standing in for the Glue Data Catalog and S3.

The job runs as a process of the entry script, with the Glue job's DefaultArguments taken from the
rendered template. What differs from a Glue run, and nothing else:
- the moto endpoints, added as Iceberg catalog properties (conftest.moto_catalog_properties, through
  cdclake.local.session's CDC_CATALOG_PROPERTIES), and fake credentials in the job's environment;
- `local_arguments()` below: Debezium records come from the `files` source instead of MSK, each run
  is run-once, and the streaming checkpoint and dead letters are on local disk (Spark writes those
  through Hadoop's FileSystem, which has no s3:// implementation locally; Glue's EMRFS is one).

A second, independent reader (pyiceberg, through the same Glue catalog in moto) then reconciles
every table against the source state, row by row.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cdc_events import ORDER_LINES_KEY_SCHEMA, Events, decimal_b64, load, value_schema_of, with_row_fields
from job_runs import MAINTENANCE_JOB, STREAMING_JOB, run_job_script

ROOT = Path(__file__).resolve().parents[2]

# What Glue does with each of its own arguments the template sets, and what the local run does
# instead. A Glue argument missing here (e.g. a `--conf`) fails the tier: the local run would no
# longer be the configuration the job gets on Glue.
GLUE_ARGUMENTS = {
    "--job-language": "runs the script with Python: the local run does too",
    "--extra-py-files": "puts cdclake.zip on sys.path: locally the entry script finds cdclake next to it",
    "--extra-jars": "adds the MSK IAM client jar (pom.xml, glue-extra-jars): locally cdclake.local.session.local_jars()",
    "--datalake-formats": "adds Glue's Iceberg jars: locally cdclake.local.session.local_jars(), the same Iceberg (pom.xml)",
    "--enable-metrics": "CloudWatch job metrics: none locally",
    "--custom-logGroup-prefix": "CloudWatch log groups: the process's stdout locally",
    "--TempDir": "Glue's scratch location: the job writes nothing there",
    "--enable-glue-datacatalog": "(delta) backs Spark's session catalog with the Glue Data Catalog: locally "
    "Spark's Hive metastore client over Derby (CDC_SESSION_METASTORE, test_session_catalog_formats.py)",
}


def local_arguments(work: Path) -> dict[str, str]:
    """The job arguments this tier sets differently from the template (see the module docstring)."""
    return {
        "--source": "files",
        "--files_path": str(work / "in"),
        "--run_once": "true",
        "--checkpoint_location": str(work / "checkpoint"),
        "--dead_letter_path": str(work / "dead"),
    }


def job_argv(job, local: dict[str, str], job_args=None) -> list[str]:
    """The script's argv: the template's DefaultArguments (Glue passes them all, its own included),
    with `local` replacing theirs. Arguments known only in a deployed stack (the MSK bootstrap
    brokers) must be Kafka ones, which the `files` source does not use. `job_args`: the script's
    argument table (the streaming job's by default)."""
    from cdclake.common.settings import ARGS

    job_names = {f"--{a.name}" for a in (job_args or ARGS)}
    unknown = sorted(set(job.arguments) - job_names - set(GLUE_ARGUMENTS))
    assert not unknown, f"{job.logical_id} sets arguments this tier does not know how to run locally: {unknown}"
    unresolved = sorted(n for n, v in job.arguments.items() if v is None)
    assert all(n.startswith("--kafka_") for n in unresolved), f"unresolvable non-Kafka arguments: {unresolved}"
    args = {n: v for n, v in job.arguments.items() if v is not None}
    args.update(local)
    return [tok for name, value in args.items() for tok in (name, value)]


def run_job(argv: list[str], env: dict[str, str], script: Path = STREAMING_JOB) -> subprocess.CompletedProcess:
    run = run_job_script(argv, env, script)
    assert run.returncode == 0, f"job failed ({run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    return run


# ---------------------------------------------------------------- the source database, as a model
@dataclass
class SourceTable:
    """One source table's current rows (what the database holds), and the Debezium events its
    changes produce, built on the captured messages in tests/fixtures/debezium."""

    events: Events
    keys: tuple[str, ...]
    encode: Any  # source row -> Debezium row image
    value_schema: dict[str, Any] | None = None
    key_schema: dict[str, Any] | None = None
    rows: dict[tuple, dict[str, Any]] = field(default_factory=dict)

    def _emit(self, op: str, row: dict[str, Any], before: dict[str, Any] | None = None) -> None:
        key = {k: row[k] for k in self.keys}
        self.events.record(
            op,
            key,
            self.encode(row) if op != "d" else None,
            before=self.encode(before) if before is not None else None,
            value_schema=self.value_schema,
            key_schema=self.key_schema,
        )

    def snapshot(self, row: dict[str, Any]) -> None:
        self.rows[tuple(row[k] for k in self.keys)] = dict(row)
        self._emit("r", row)

    def insert(self, row: dict[str, Any]) -> None:
        k = tuple(row[k] for k in self.keys)
        assert k not in self.rows
        self.rows[k] = dict(row)
        self._emit("c", row)

    def update(self, *key: Any, **changes: Any) -> None:
        row = {**self.rows[key], **changes}
        self.rows[key] = row
        self._emit("u", row)

    def delete(self, *key: Any) -> None:
        row = self.rows.pop(key)
        self._emit("d", row, before=row)
        self.events.tombstone({k: row[k] for k in self.keys})

    def add_column(self, name: str, default: Any, value_schema: dict[str, Any]) -> None:
        """ALTER TABLE ... ADD COLUMN name DEFAULT default: existing rows get the default."""
        for row in self.rows.values():
            row[name] = default
        self.value_schema = value_schema

    def expected(self, columns: list[str]) -> Counter:
        return Counter(tuple(row.get(c) for c in columns) for row in self.rows.values())


def customer_image(row: dict[str, Any]) -> dict[str, Any]:
    """inventory.customers as the MariaDB connector sends it: DECIMAL(10,2) as Connect bytes,
    TIMESTAMP as an ISO string (io.debezium.time.ZonedTimestamp)."""
    image = dict(row, balance=decimal_b64(row["balance"], 2))
    image["created_at"] = row["created_at"].strftime("%Y-%m-%dT%H:%M:%SZ")
    return image


def customer(id_: int, first: str, balance: str, minute: int = 0) -> dict[str, Any]:
    return {
        "id": id_,
        "first_name": first,
        "last_name": "Thomas",
        "email": f"{first.lower()}{id_}@example.com",
        "balance": Decimal(balance),
        "created_at": datetime(2026, 11, 21, 23, minute, 34, tzinfo=UTC),
    }


ORDER_VALUE_SCHEMA = with_row_fields(
    value_schema_of("mariadb/c_insert.json"),
    [
        {"type": "int32", "optional": False, "field": "order_id"},
        {"type": "int32", "optional": False, "field": "line_no"},
        {"type": "string", "optional": True, "field": "sku"},
        {"type": "int32", "optional": True, "field": "qty"},
    ],
)
CUSTOMER_COLUMNS = ["id", "first_name", "last_name", "email", "balance", "created_at"]
ORDER_COLUMNS = ["order_id", "line_no", "sku", "qty"]


def write_records(path: Path, records: list[dict[str, Any]], schema_events: int = 0) -> str:
    """One JSON line per Kafka record, in the `files` source format (docs/CONFIGURATION.md: The `files` source).
    Returns how the job's batch log line counts them (all are changes, tombstones or schema events)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tombstones = sum(r["value"] is None for r in records)
    changes = len(records) - tombstones - schema_events
    with path.open("w") as f:
        for r in records:
            line = {k: r[k] for k in ("topic", "partition", "offset")}
            line["timestamp"] = int(r["timestamp"].timestamp() * 1000)
            line["key"] = json.loads(r["key"]) if r["key"] is not None else None
            line["value"] = json.loads(r["value"]) if r["value"] is not None else None
            f.write(json.dumps(line) + "\n")
    return (
        f"{len(records)} records ({changes} changes, {tombstones} tombstones, {schema_events} schema events, "
        "0 dead letters)"
    )


# ---------------------------------------------------------------- the second reader
def pyiceberg_catalog(endpoint: str, credentials: dict[str, str]):
    """pyiceberg's own Glue catalog client and S3 file IO (pyarrow), on the moto server."""
    from pyiceberg.catalog import load_catalog

    creds = {
        "access-key-id": credentials["AWS_ACCESS_KEY_ID"],
        "secret-access-key": credentials["AWS_SECRET_ACCESS_KEY"],
        "region": credentials["AWS_REGION"],
    }
    props = {"type": "glue", "glue.endpoint": endpoint, "s3.endpoint": endpoint}
    props.update({f"glue.{k}": v for k, v in creds.items()})
    props.update({f"s3.{k}": v for k, v in creds.items()})
    return load_catalog("moto_glue", **props)


def lake_rows(catalog, database: str, table: str, columns: list[str]) -> Counter:
    scan = catalog.load_table((database, table)).scan(selected_fields=tuple(columns))
    return Counter(tuple(r[c] for c in columns) for r in scan.to_arrow().to_pylist())


def reconcile(catalog, database: str, table: str, source: SourceTable, columns: list[str]) -> None:
    lake = lake_rows(catalog, database, table, columns)
    want = source.expected(columns)
    assert sum(lake.values()) == sum(want.values()), f"{table}: {sum(lake.values())} rows, source has {len(want)}"
    assert lake == want, f"{table}: only in the lake {lake - want}; only in the source {want - lake}"


def glue_table(aws, database: str, table: str) -> dict[str, Any]:
    return aws.glue.get_table(DatabaseName=database, Name=table)["Table"]


# ---------------------------------------------------------------- the tests
def test_job_with_the_templates_spark_settings_writes_iceberg_tables_to_the_glue_catalog_on_s3(
    streaming_job, glue_stack_resources, job_env, moto_endpoint, aws_credentials, aws, tmp_path
):
    work = tmp_path
    args = streaming_job.arguments
    bucket, database = glue_stack_resources["bucket"], glue_stack_resources["database"]
    # The template's catalog: Iceberg's GlueCatalog + S3FileIO, the warehouse on the lake bucket.
    assert args["--catalog_type"] == "glue" and args["--datalake-formats"] == "iceberg"
    # Glue 6.0's Iceberg (`--datalake-formats iceberg`) is the manifest's, and the local run loads it.
    from cdclake.local.session import local_jars
    from cdctools import pinned_jars as runtime

    iceberg = runtime.versions()["iceberg"]
    jars = {Path(j).name for j in local_jars()}
    assert {f"iceberg-spark-runtime-4.1_2.13-{iceberg}.jar", f"iceberg-aws-bundle-{iceberg}.jar"} <= jars, jars
    assert args["--warehouse"] == f"s3://{bucket}/warehouse" and args["--namespace"] == database
    # ... and Spark's checkpoint and dead letters on S3 too, which this tier keeps on local disk.
    assert args["--checkpoint_location"].startswith(f"s3://{bucket}/")
    assert args["--dead_letter_path"].startswith(f"s3://{bucket}/")
    argv = job_argv(streaming_job, local_arguments(work))

    customers = SourceTable(Events(), ("id",), customer_image)
    orders = SourceTable(
        Events(topic="mdb.inventory.order_lines", table="order_lines"),
        ("order_id", "line_no"),
        dict,
        value_schema=ORDER_VALUE_SCHEMA,
        key_schema=ORDER_LINES_KEY_SCHEMA,
    )

    # ---- first run: a snapshot, then inserts, updates and deletes, in two tables
    for i, name in enumerate(["Sally", "George", "Edward", "Anne"], start=1):
        customers.snapshot(customer(i, name, f"{i}0.50", minute=i))
    customers.insert(customer(5, "Kenneth", "7.25", minute=5))
    customers.insert(customer(6, "Zoe", "0.00", minute=6))
    customers.update(2, email="george.new@example.com")
    customers.update(5, balance=Decimal("1234.56"))
    customers.delete(3)
    customers.update(2, first_name="Georg")  # a second change of one row in the same batch
    for order_id, line_no, sku in [(1, 1, "A-1"), (1, 2, "B-2"), (2, 1, "C-3")]:
        orders.snapshot({"order_id": order_id, "line_no": line_no, "sku": sku, "qty": 1})
    orders.insert({"order_id": 2, "line_no": 2, "sku": "D-4", "qty": 3})
    orders.insert({"order_id": 3, "line_no": 1, "sku": "E-5", "qty": 1})
    orders.update(1, 2, qty=7)
    orders.delete(2, 1)
    batch0 = write_records(work / "in" / "0001.json", customers.events.take() + orders.events.take())

    first = run_job(argv, job_env)
    assert f"batch 0: {batch0}" in first.stdout, first.stdout[-3000:]

    glue = {t: glue_table(aws, database, t) for t in ("inventory_customers", "inventory_order_lines")}
    for name, table in glue.items():
        params = table["Parameters"]
        assert params["table_type"].upper() == "ICEBERG", params
        location = f"s3://{bucket}/warehouse/{database}.db/{name}"
        assert table["StorageDescriptor"]["Location"] == location
        assert params["metadata_location"].startswith(f"{location}/metadata/"), params
        key = params["metadata_location"].removeprefix(f"s3://{bucket}/")
        assert aws.s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0

    catalog = pyiceberg_catalog(moto_endpoint, aws_credentials)
    reconcile(catalog, database, "inventory_customers", customers, CUSTOMER_COLUMNS)
    reconcile(catalog, database, "inventory_order_lines", orders, ORDER_COLUMNS)

    # ---- second run, from the checkpoint: ADD COLUMN at the source, then more changes
    schema_topic = Events(topic="mdb")
    ddl = load("mariadb/schema_change_alter.json")  # ALTER TABLE customers ADD COLUMN loyalty_tier ... 'bronze'
    schema_topic.raw(json.dumps(ddl["key"]), json.dumps(ddl["value"]))
    customers.events.binlog_file = "mysql-bin.000005"  # later in the source log than the first run
    orders.events.binlog_file = "mysql-bin.000005"
    customers.add_column("loyalty_tier", "bronze", value_schema_of("mariadb/c_insert_after_add_column.json"))
    customers.insert({**customer(7, "Yuki", "99.99", minute=7), "loyalty_tier": "gold"})
    customers.update(1, loyalty_tier="silver", balance=Decimal("-5.00"))
    customers.delete(4)
    customers.insert({**customer(3, "Edward", "30.50", minute=3), "loyalty_tier": None})  # a deleted key again
    orders.update(1, 1, sku="A-1b")
    orders.delete(3, 1)
    orders.insert({"order_id": 3, "line_no": 2, "sku": "F-6", "qty": 2})
    orders.update(2, 2, qty=4)
    orders.update(2, 2, qty=5)
    batch1 = write_records(
        work / "in" / "0002.json", schema_topic.take() + customers.events.take() + orders.events.take(), 1
    )

    second = run_job(argv, job_env)
    assert "batch 0:" not in second.stdout, "the second run must resume from the first run's checkpoint"
    assert f"batch 1: {batch1}" in second.stdout, second.stdout[-3000:]
    assert "+loyalty_tier string" in second.stdout

    reconcile(catalog, database, "inventory_customers", customers, [*CUSTOMER_COLUMNS, "loyalty_tier"])
    reconcile(catalog, database, "inventory_order_lines", orders, ORDER_COLUMNS)
    for name, before in glue.items():
        after = glue_table(aws, database, name)
        # Each commit moved the Glue table to a new metadata file and named the one it replaced.
        assert after["Parameters"]["metadata_location"] != before["Parameters"]["metadata_location"]
        assert after["Parameters"]["previous_metadata_location"].startswith(f"s3://{bucket}/warehouse/")
        assert int(after["VersionId"]) > int(before["VersionId"])
        # The Glue table's columns follow the Iceberg schema (what Glue's console and crawlers show).
        lake_columns = [f.name for f in catalog.load_table((database, name)).schema().fields]
        assert [c["Name"] for c in after["StorageDescriptor"]["Columns"]] == lake_columns
    assert "loyalty_tier" in [
        c["Name"] for c in glue_table(aws, database, "inventory_customers")["StorageDescriptor"]["Columns"]
    ]
    # The tables' files are in the moto bucket, none on local disk.
    keys = [
        o["Key"] for p in aws.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket) for o in p.get("Contents", [])
    ]
    assert any(k.startswith(f"warehouse/{database}.db/inventory_customers/data/") for k in keys)
    assert any(k.startswith(f"warehouse/{database}.db/inventory_order_lines/data/") for k in keys)
    assert not [*work.rglob("*.parquet"), *work.rglob("*.metadata.json"), *ROOT.glob("s3*")]
    assert not list((work / "dead").glob("batch=*")), "no record may be dead-lettered"


def test_maintenance_job_with_the_templates_arguments_compacts_glue_tables_on_s3_and_keeps_every_row(
    streaming_job, maintenance_job, glue_stack_resources, job_env, moto_endpoint, aws_credentials, aws, tmp_path
):
    """The scheduled maintenance job with its template arguments, run by hand with `--force true`
    on a table the streaming job wrote in three micro-batches (one file each). Added for this run:
    `--maintenance_min_input_files 2` (three small files are then worth a compaction) and
    `--maintenance_remove_orphans false`: Iceberg 1.7.1's remove_orphan_files lists a table's
    location through Hadoop's FileSystem, which has no s3:// implementation locally (on Glue,
    EMRFS is one)."""
    from cdclake.common.settings import MAINTENANCE_JOB_ARGS

    database = glue_stack_resources["database"]
    table = SourceTable(Events(topic="mdb.inventory.maintained", table="maintained"), ("id",), customer_image)
    for batch in range(3):
        for i in range(4):
            table.insert(customer(batch * 10 + i, f"N{i}", f"{batch}.{i}0"))
        table.update(batch * 10, first_name=f"Updated{batch}")
        if batch:
            table.delete((batch - 1) * 10 + 1)
        write_records(tmp_path / "in" / f"{batch:04d}.json", table.events.take())
    streamed = run_job(job_argv(streaming_job, local_arguments(tmp_path) | {"--max_files_per_trigger": "1"}), job_env)
    assert "batch 2:" in streamed.stdout, streamed.stdout[-3000:]
    catalog = pyiceberg_catalog(moto_endpoint, aws_credentials)
    data_files = len(catalog.load_table((database, "inventory_maintained")).inspect.data_files())
    assert data_files >= 3
    before = glue_table(aws, database, "inventory_maintained")["Parameters"]["metadata_location"]

    local = {
        "--force": "true",
        "--tables": "inventory_maintained",
        "--maintenance_min_input_files": "2",
        "--maintenance_remove_orphans": "false",
    }
    run = run_job(job_argv(maintenance_job, local, MAINTENANCE_JOB_ARGS), job_env, MAINTENANCE_JOB)
    assert "maintenance run: 1 table(s), 1 maintained, 0 failed" in run.stdout, run.stdout[-3000:]
    assert f"maintenance {database}.inventory_maintained: compact" in run.stdout, run.stdout[-3000:]
    reconcile(catalog, database, "inventory_maintained", table, CUSTOMER_COLUMNS)
    assert len(catalog.load_table((database, "inventory_maintained")).inspect.data_files()) < data_files
    after = glue_table(aws, database, "inventory_maintained")["Parameters"]["metadata_location"]
    assert after != before, "the compaction is committed through the Glue catalog"


def test_local_catalog_properties_can_only_add_to_the_glue_catalog_configuration():
    from cdclake.common.settings import build_settings
    from cdclake.lake.catalog import catalog_conf
    from cdclake.local.session import CATALOG_PROPERTIES_ENV, local_catalog_overrides

    s = build_settings(
        {"source": "files", "files_path": "/in", "warehouse": "s3://b/w", "checkpoint_location": "/c"}
        | {"dead_letter_path": "/d"}
    )
    assert local_catalog_overrides(s, {}) == {}
    added = local_catalog_overrides(s, {CATALOG_PROPERTIES_ENV: '{"s3.endpoint": "http://127.0.0.1:1"}'})
    assert added == {"spark.sql.catalog.glue_catalog.s3.endpoint": "http://127.0.0.1:1"}
    assert not set(added) & set(catalog_conf(s))
    for text, message in [
        ('{"io-impl": "org.apache.iceberg.hadoop.HadoopFileIO"}', "may only add catalog properties"),
        ('{"warehouse": "/elsewhere"}', "may only add catalog properties"),
        ('["s3.endpoint"]', "must be a JSON object of strings"),
        ('{"s3.path-style-access": true}', "must be a JSON object of strings"),
        ("s3.endpoint=http://x", "is not a JSON object"),
    ]:
        with pytest.raises(ValueError, match=message):
            local_catalog_overrides(s, {CATALOG_PROPERTIES_ENV: text})


def test_moto_glue_update_table_ignores_a_stale_version_id(aws, glue_stack_resources):
    """Why this tier cannot check commit races. Iceberg's GlueCatalog (no lock manager configured,
    as in the job) sends UpdateTable with the VersionId it read, and Glue answers a newer table
    version with ConcurrentModificationException, which Iceberg turns into a retried
    CommitFailedException. moto applies the stale update; if this starts failing, moto honours
    VersionId and a concurrent-commit test against it becomes possible."""
    database = glue_stack_resources["database"]
    table_input = {"Name": "version_probe", "Parameters": {"probe": "0"}}
    aws.glue.create_table(DatabaseName=database, TableInput=table_input)
    read = aws.glue.get_table(DatabaseName=database, Name="version_probe")["Table"]["VersionId"]
    for value in ("1", "2"):  # the second update carries a version that is no longer current
        aws.glue.update_table(
            DatabaseName=database, TableInput={**table_input, "Parameters": {"probe": value}}, VersionId=read
        )
    table = aws.glue.get_table(DatabaseName=database, Name="version_probe")["Table"]
    assert table["Parameters"]["probe"] == "2" and int(table["VersionId"]) > int(read) + 1
    aws.glue.delete_table(DatabaseName=database, Name="version_probe")
