"""One side of the two-process maintenance test (test_maintenance_concurrency_jdbc.py), run as
`python maintenance_worker.py <stream|maintain> <work dir> <jdbc url>`.

Both processes open the same Iceberg JDBC catalog (PostgreSQL), named `glue_catalog` like the job's:
its commits are an atomic compare-and-set of the table's metadata pointer in the database, so
unlike the Hadoop catalog on a local disk it detects a concurrent commit from another process.

  stream    applies micro-batches with the BatchProcessor, holding one MERGE at a barrier between
            its planning and its commit; signals `stream.done`, waits for `maintain.done`, writes
            what the table holds
  maintain  runs maintain_table in a loop, as the scheduled job would, and compacts while the MERGE
            is held (so the two collide on every run), until `stream.done`
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from cdc_workload import MergeBarrier, Workload, assert_rows  # noqa: E402
from cdclake.local.session import local_jars  # noqa: E402

NAMESPACE = "twoproc"
TABLE = f"glue_catalog.{NAMESPACE}.inventory_customers"
BATCHES, HELD_BATCH = 6, 4


class ConflictCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "commit conflict" in record.getMessage():
            self.count += 1


def session(work: Path, jdbc_url: str, jdbc_jar: str, name: str):
    from pyspark.sql import SparkSession

    p = "spark.sql.catalog.glue_catalog"
    b = (
        SparkSession.builder.appName(name)
        .master("local[2]")
        .config("spark.jars", ",".join([*local_jars(), jdbc_jar]))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(p, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{p}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
        .config(f"{p}.uri", jdbc_url)
        .config(f"{p}.jdbc.user", "postgres")
        # Iceberg 1.11's JDBC catalog answers Spark 4's table-exists check through its view support,
        # which needs its V1 schema (it adds the column on a new database).
        .config(f"{p}.jdbc.schema-version", "V1")
        .config(f"{p}.warehouse", str(work / "warehouse"))
        .config(f"{p}.cache-enabled", "false")
    )
    if os.environ.get("CDC_JVM_OPTIONS"):  # the suite's JIT flags (tests/conftest.py)
        b = b.config("spark.driver.extraJavaOptions", os.environ["CDC_JVM_OPTIONS"])
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stream(work: Path, spark, counter: ConflictCounter) -> None:
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.common.settings import build_settings
    from cdclake.jobs.batch import BatchProcessor, Writes
    from cdclake.lake.executor import merge_changes

    settings = build_settings(
        {
            "source": "files",
            "files_path": str(work / "unused"),
            "catalog_type": "hadoop",  # only names the session's catalog; the session above is JDBC
            "warehouse": str(work / "warehouse"),
            "namespace": NAMESPACE,
            "checkpoint_location": str(work / "unused"),
            "dead_letter_path": str(work / "dead"),
        }
    )
    barrier = MergeBarrier(work / "barrier")
    processor = BatchProcessor(spark, settings, writes=Writes(keyed=barrier.wrap(merge_changes)))
    w = Workload(seed=9, keys=30)

    def apply(batch_id: int, records: list) -> None:
        rows = [tuple(r[c] for c in RAW_SCHEMA.names) for r in records]
        processor.process(spark.createDataFrame(rows, RAW_SCHEMA), batch_id)

    apply(0, w.batch(8))
    (work / "table.ready").touch()
    for batches in range(1, BATCHES):
        if batches == HELD_BATCH - 2:
            barrier.hold_off()  # two batches' files stay uncompacted until the held MERGE
        if batches == HELD_BATCH:
            barrier.arm()  # only updates: its deletes point at files the other process replaces
            apply(batches, w.updates(6))
        else:
            apply(batches, w.batch(5))
    batches = BATCHES
    (work / "stream.done").touch()
    while not (work / "maintain.done").exists():
        time.sleep(0.5)
    try:  # every key once, count(*) == count(distinct id) == expected, and the values
        assert_rows(spark, TABLE, w.expected)
        state_error = None
    except AssertionError as e:
        state_error = str(e)
    actual = [
        [r["id"], r["first_name"]] for r in spark.sql(f"SELECT id, first_name FROM {TABLE} ORDER BY id").collect()
    ]
    ops = [r["operation"] for r in spark.sql(f"SELECT operation FROM {TABLE}.snapshots").collect()]
    result = {
        "batches": batches,
        "merge_conflicts": counter.count,
        "expected": [[k, v] for k, v in sorted(w.expected.items())],
        "actual": actual,  # a list, not a dict by id: a key stored twice shows
        "state_error": state_error,
        "operations": ops,
    }
    (work / "stream.json").write_text(json.dumps(result))


def maintain(work: Path, spark) -> None:
    from cdclake.jobs.maintenance_job import build_job_settings
    from cdclake.lake.formats.iceberg import Iceberg
    from cdclake.lake.maintenance import Action, maintain_table

    policy = build_job_settings(
        {
            "warehouse": str(work / "warehouse"),
            "maintenance_max_small_files": "1",
            "maintenance_max_delete_files": "1",
            "maintenance_min_input_files": "2",
            "maintenance_delete_file_threshold": "1",
            "maintenance_remove_orphans": "false",
            "maintenance_conflict_retries": "8",
        }
    ).policy
    barrier = MergeBarrier(work / "barrier")
    while not (work / "table.ready").exists():
        time.sleep(0.2)
    compactions = conflicts = runs = 0
    while not (work / "stream.done").exists():
        if barrier.should_hold_off():
            time.sleep(0.05)
            continue
        held = barrier.paused()
        report = maintain_table(spark, TABLE, policy, Iceberg(), force=held)
        if held:
            barrier.release()
        runs += 1
        conflicts += report.conflicts
        compactions += sum(
            1 for r in report.results if r.action is Action.COMPACT and not r.error and "0->0" not in r.summary
        )
        assert not report.failed, report.line()
        time.sleep(0.5)  # as a schedule would: leave the two cores to the stream between runs
    (work / "maintain.json").write_text(json.dumps({"runs": runs, "compactions": compactions, "conflicts": conflicts}))
    (work / "maintain.done").touch()


def main() -> None:
    role, work, jdbc_url, jdbc_jar = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {role} %(levelname)s %(message)s", stream=sys.stdout)
    counter = ConflictCounter()
    logging.getLogger("cdclake").addHandler(counter)
    spark = session(work, jdbc_url, jdbc_jar, f"maintenance-test-{role}")
    try:
        stream(work, spark, counter) if role == "stream" else maintain(work, spark)
    except BaseException:
        (work / f"{role}.failed").touch()
        MergeBarrier(work / "barrier").release()
        (work / "maintain.done").touch()  # never leave the other side waiting
        (work / "stream.done").touch()
        raise
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
