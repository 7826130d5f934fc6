"""The maintenance process of test_maintenance_killed.py, run as
`python maintenance_kill_worker.py <role> <work dir> <jdbc url> <jdbc jar>` on the JDBC catalog of
maintenance_worker.py (its commit is a compare-and-set in PostgreSQL, which the test can hold).

  compact  applies micro-batches (inserts, updates, deletes), writes the expected rows, waits for
           `go`, then runs maintenance (compaction first): the test kills it while the compaction's
           commit waits
  expire   waits for `go`, then expires snapshots: the test kills it while the expiry's commit waits
  recover  runs maintenance again, then the orphan clean-up (every file aged past its cut-off), and
           writes what the table holds and which of its files nothing references
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from cdc_workload import Workload, assert_rows  # noqa: E402
from maintenance_worker import session  # noqa: E402

NAMESPACE = "killed"
TABLE = f"glue_catalog.{NAMESPACE}.inventory_customers"


def policy(**kw):
    from cdclake.lake.maintenance import MaintenancePolicy

    return MaintenancePolicy(
        max_small_files=1, max_delete_files=1, min_input_files=2, delete_file_threshold=1, max_snapshots=3,
        retain_last_snapshots=1, snapshot_retention_minutes=0, conflict_retries=0, **kw,
    )  # fmt: skip


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.05)


def compact(work: Path, spark) -> None:
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.common.settings import build_settings
    from cdclake.jobs.batch import BatchProcessor
    from cdclake.lake.formats.iceberg import Iceberg, ensure_commit_retries
    from cdclake.lake.maintenance import maintain_table

    settings = build_settings(
        {
            "source": "files",
            "files_path": str(work / "unused"),
            "catalog_type": "hadoop",  # only names the session's catalog; the session is JDBC
            "warehouse": str(work / "warehouse"),
            "namespace": NAMESPACE,
            "checkpoint_location": str(work / "unused"),
            "dead_letter_path": str(work / "dead"),
        }
    )
    processor = BatchProcessor(spark, settings)
    w = Workload(seed=17, keys=30)
    for batch_id in range(3):  # three small files to compact, four snapshots to expire (with the properties commit)
        rows = [tuple(r[c] for c in RAW_SCHEMA.names) for r in w.batch(8)]
        processor.process(spark.createDataFrame(rows, RAW_SCHEMA), batch_id)
    ensure_commit_retries(spark, TABLE)  # a commit of its own: done before the test holds commits
    (work / "expected.json").write_text(json.dumps(sorted(w.expected.items())))
    (work / "filled").touch()
    wait_for(work / "go")
    maintain_table(spark, TABLE, policy(), Iceberg(), force=True)


def expire(work: Path, spark) -> None:
    from cdclake.lake.formats.iceberg import run_action
    from cdclake.lake.maintenance import Action

    wait_for(work / "go")
    run_action(spark, TABLE, Action.EXPIRE, policy(), time.time())


def table_files(spark, location: Path) -> tuple[set[str], set[str]]:
    """(files under the table's folder, files the table's metadata references), as local paths;
    Hadoop's `.crc` checksum files beside them are not Iceberg files and left out."""

    def local(p: str) -> str:
        return p.removeprefix("file:")

    on_disk = {str(p) for p in location.rglob("*") if p.is_file() and not p.name.endswith(".crc")}
    queries = [
        f"SELECT file_path AS p FROM {TABLE}.all_files",
        f"SELECT path AS p FROM {TABLE}.all_manifests",
        f"SELECT manifest_list AS p FROM {TABLE}.snapshots",
        f"SELECT file AS p FROM {TABLE}.metadata_log_entries",
    ]
    referenced = {local(r["p"]) for q in queries for r in spark.sql(q).collect()}
    return on_disk, referenced


def recover(work: Path, spark) -> None:
    from cdclake.lake.formats.iceberg import Iceberg
    from cdclake.lake.maintenance import maintain_table

    report = maintain_table(spark, TABLE, policy(), Iceberg(), force=True)
    # The clean-up a day later (Iceberg refuses a cut-off under 24 h ago): every file aged 2 days.
    location = work / "warehouse" / NAMESPACE / "inventory_customers"
    two_days_ago = time.time() - 48 * 3600
    for f in location.rglob("*"):
        os.utime(f, (two_days_ago, two_days_ago))
    orphans = maintain_table(spark, TABLE, policy(remove_orphans=True, orphan_min_age_hours=24), Iceberg())
    expected = {k: v for k, v in json.loads((work / "expected.json").read_text())}
    try:
        assert_rows(spark, TABLE, expected)
        state_error = None
    except AssertionError as e:
        state_error = str(e)
    on_disk, referenced = table_files(spark, location)
    result = {
        "maintenance": report.line(),
        "orphans": orphans.line(),
        "failed": report.failed or orphans.failed,
        "state_error": state_error,
        "unreferenced": sorted(on_disk - referenced),
        "files": len(on_disk),
    }
    (work / "recover.json").write_text(json.dumps(result))


def main() -> None:
    role, work, jdbc_url, jdbc_jar = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {role} %(levelname)s %(message)s", stream=sys.stdout)
    spark = session(work, jdbc_url, jdbc_jar, f"maintenance-killed-{role}")
    try:
        {"compact": compact, "expire": expire, "recover": recover}[role](work, spark)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
