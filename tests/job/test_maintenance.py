"""Table maintenance on real Iceberg tables written by the BatchProcessor: health from the metadata
tables, compaction + delete-file rewrite + expiry + orphan removal keep every row, and both jobs run
it from their command lines."""

from __future__ import annotations

import logging
import os
import time

from cdc_workload import Workload, assert_rows
from cdclake.lake.formats.iceberg import COMMIT_RETRY_PROPERTIES, Iceberg, table_health
from cdclake.lake.maintenance import Action, MaintenancePolicy, maintain_table

# Every action due after four micro-batches: four data files, delete files and snapshots above these.
SMALL = MaintenancePolicy(
    max_small_files=3,
    max_delete_files=1,
    max_snapshots=3,
    retain_last_snapshots=2,
    snapshot_retention_minutes=0,
    min_input_files=2,
    delete_file_threshold=1,
)


def fill(lake, batches: int, seed: int = 3) -> Workload:
    w = Workload(seed=seed, keys=30)
    for _ in range(batches):
        lake.apply(w.batch(5))
    return w


def test_iceberg_health_from_the_metadata_tables_then_compaction_deletes_and_expiry_keep_every_row(make_lake):
    lake = make_lake()
    w = fill(lake, 4)
    t = lake.table()
    lake.assert_rows(w.expected)
    # Health, from the metadata tables, as each of them counts it.
    h = table_health(lake.spark, t, SMALL)

    def count(meta: str) -> int:
        return lake.spark.sql(f"SELECT count(*) AS n FROM {t}.{meta}").first()["n"]

    assert h.data_files == count("data_files") == 4  # one per MERGE
    assert h.delete_files == count("delete_files") > 1  # updates and deletes of earlier rows
    assert h.snapshots == count("snapshots") == 4
    assert h.manifests == count("manifests")
    assert h.small_data_files == h.data_files  # a few KB each, far below 75% of 128 MB
    assert h.data_records == lake.spark.sql(f"SELECT sum(record_count) AS n FROM {t}.data_files").first()["n"]
    assert 0 < h.avg_data_file_bytes < 64 * 1024
    assert h.oldest_snapshot_s is not None and abs(time.time() - h.oldest_snapshot_s) < 3600

    report = maintain_table(lake.spark, t, SMALL, Iceberg())
    assert report.before == h
    assert report.plan.actions == (Action.COMPACT, Action.DELETES, Action.EXPIRE)
    assert not report.failed, report.line()
    after = report.after
    assert after is not None
    assert (report.before.data_files, after.data_files) == (4, 1)
    assert report.before.delete_files > 1 and after.delete_files == 0
    assert after.snapshots == SMALL.retain_last_snapshots
    lake.assert_rows(w.expected)
    line = report.line()
    assert line.startswith(f"maintenance {lake.namespace}.inventory_customers: compact 4->1 data files")
    assert "data files 4->1" in line and "snapshots 4->2" in line
    props = {r["key"]: r["value"] for r in lake.spark.sql(f"SHOW TBLPROPERTIES {t}").collect()}
    assert all(props[k] == v for k, v in COMMIT_RETRY_PROPERTIES.items())
    # The stream goes on on the compacted table, and a second run finds nothing to do.
    lake.apply(w.batch(5))
    lake.assert_rows(w.expected)
    again = maintain_table(lake.spark, t, SMALL, Iceberg())
    assert not again.plan.due and again.after is None


def test_orphan_files_past_the_minimum_age_are_deleted_and_nothing_else(make_lake, warehouse):
    lake = make_lake()
    w = fill(lake, 3)
    t = lake.table()
    data_dir = warehouse / lake.namespace / "inventory_customers" / "data"
    referenced = sorted(data_dir.glob("*.parquet"))
    old_orphan, young_orphan = data_dir / "crashed-writer-old.parquet", data_dir / "in-flight-commit.parquet"
    for f in (old_orphan, young_orphan):
        f.write_bytes(referenced[0].read_bytes())
    four_days_ago = time.time() - 96 * 3600
    os.utime(old_orphan, (four_days_ago, four_days_ago))
    for f in referenced:  # old referenced files are never orphans, however old
        os.utime(f, (four_days_ago, four_days_ago))

    policy = MaintenancePolicy(remove_orphans=True, orphan_min_age_hours=72)
    report = maintain_table(lake.spark, t, policy, Iceberg())
    assert [r.line() for r in report.results] == ["orphans 1 orphan files deleted"]
    assert not old_orphan.exists() and young_orphan.exists()
    assert all(f.exists() for f in referenced)
    lake.assert_rows(w.expected)


def test_streaming_job_and_maintenance_job_maintain_tables_from_their_arguments(spark, warehouse, tmp_path, caplog):
    """The streaming job (files source) maintains between batches; the maintenance job, run by hand
    with --force, maintains every table of the namespace and exits 0. Both parse the command lines
    Glue would pass and run in this test's Spark session (a JVM per job would double the cost); the
    entry scripts themselves are run on invalid arguments, which they reject before starting Spark."""
    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.jobs.job import run_stream
    from cdclake.jobs.maintenance_job import build_job_settings, run_maintenance
    from job_runs import MAINTENANCE_JOB, run_job_script, write_lines

    caplog.set_level(logging.INFO, logger="cdclake")
    (tmp_path / "in").mkdir()
    w = Workload(seed=11, keys=20)
    for i in range(4):
        write_lines(tmp_path / "in" / f"{i:04d}.json", w.batch(5), embed=True)
    argv = [
        "--source", "files", "--files_path", str(tmp_path / "in"), "--max_files_per_trigger", "1",
        "--catalog_type", "hadoop", "--warehouse", str(warehouse), "--namespace", "maint_cli",
        "--checkpoint_location", str(tmp_path / "ckpt"), "--dead_letter_path", str(tmp_path / "dead"),
        "--run_once", "true", "--shuffle_partitions", "2",
        "--maintenance_every_batches", "1", "--maintenance_max_small_files", "2",
        "--maintenance_max_snapshots", "3", "--maintenance_retain_last_snapshots", "2",
        "--maintenance_snapshot_retention_minutes", "0", "--maintenance_min_input_files", "2",
    ]  # fmt: skip
    run_stream(spark, build_settings(parse_argv(argv)))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("maintenance maint_cli.")]
    assert lines and "compact 3->1 data files" in lines[0], lines
    assert "delete files 1->0" in lines[0], lines[0]  # the dangling deletes of compacted files are gone
    table = "glue_catalog.maint_cli.inventory_customers"
    assert_rows(spark, table, w.expected)

    caplog.clear()
    maint_argv = ["--catalog_type", "hadoop", "--warehouse", str(warehouse), "--namespace", "maint_cli"]
    assert run_maintenance(spark, build_job_settings(parse_argv([*maint_argv, "--force", "true"]))) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("maintenance maint_cli.inventory_customers: compact") for m in messages), messages
    # The table and its delete markers (cdclake/lake/deletes.py: the workload deletes rows).
    assert spark.catalog.tableExists(f"{table}__cdc_deletes")
    assert any(m.startswith("maintenance run: 2 table(s), 2 maintained, 0 failed") for m in messages), messages
    assert_rows(spark, table, w.expected)

    bad = run_job_script([*maint_argv, "--maintenance_orphan_min_age_hours", "1"], script=MAINTENANCE_JOB, timeout=300)
    assert bad.returncode == 2 and "--maintenance_orphan_min_age_hours must be >= 24" in bad.stdout, bad
    bad = run_job_script([*argv, "--maintenance_retain_last_snapshots", "3"], timeout=300)
    assert bad.returncode == 2 and "--maintenance_retain_last_snapshots must be below" in bad.stdout, bad
