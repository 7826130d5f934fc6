"""Delta Lake and Hudi tables in a persistent session catalog, as the Glue job gets them with
`--enable-glue-datacatalog`, and kill -9 on either side of the commit.

On Glue, `--datalake-formats delta|hudi` with `--enable-glue-datacatalog` backs Spark's session catalog
(Delta's and Hudi's catalog) with the Glue Data Catalog: Spark's Hive metastore client with Glue's
client under it. Glue's client is not on Maven Central, nor is an s3:// FileSystem in the local
runtime, so this tier cannot put these tables in moto's Glue and S3 as it does Iceberg's. What it runs
instead is the same layer above Glue's client: Spark's Hive metastore client (HiveExternalCatalog) over
an embedded Derby metastore (CDC_SESSION_METASTORE, cdclake.local.session), the warehouse on local disk.
The Hive table entries it reads back are what Glue's client stores as the Glue tables (parameters,
storage descriptor, SerDe, columns), and the catalog outlives the job's process, so a restarted job
finds its tables. Not covered: Glue's client and API themselves, and S3.

The template's job arguments for TableFormat=delta and hudi (Hudi's `--conf` passed to spark-submit).
One small corpus (two files of real Debezium messages, one table) per format, two processes: the entry
script killed after the commit of batch 0 (before Spark's commit log records it), then the job restarted
on the checkpoint and the lake read back (session_catalog_worker).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cdc_workload import Workload
from cdclake.local.session import runtime_env
from job_runs import STREAMING_JOB, write_lines
from test_glue_catalog_on_s3 import job_argv, local_arguments

HERE = Path(__file__).resolve().parent
TABLE = "inventory_customers"

# What Athena reads (Athena user guide): a Delta table is a Glue table whose location is the table's
# folder (Athena reads the schema from the Delta log); a copy-on-write Hudi table is a Glue table with
# Hudi's input format, the Parquet SerDe and output format, the columns and the location.
HUDI_INPUT_FORMAT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


def argv(job, work: Path) -> list[str]:
    """The template's arguments of the format, the warehouse on local disk, one file per batch;
    Glue's `--conf` (Hudi's) left out: `spark_submit_conf` gives it to the local run."""
    local = local_arguments(work) | {"--warehouse": str(work / "warehouse"), "--max_files_per_trigger": "1"}
    return job_argv(
        dataclasses.replace(job, arguments={k: v for k, v in job.arguments.items() if k != "--conf"}), local
    )


def spark_submit_conf(job) -> str:
    """Glue's `--conf` (`k=v --conf k=v ...`, the settings Glue gives spark-submit) as the local run's
    spark-submit arguments (PYSPARK_SUBMIT_ARGS); the session's own settings win where both set one."""
    conf = job.arguments.get("--conf")
    return "".join(f"--conf {kv} " for kv in conf.split(" --conf ")) + "pyspark-shell" if conf else ""


def run(work: Path, args: list[str], submit: str, crash_at: str | None = None, worker: bool = False):
    env = {k: v for k, v in os.environ.items() if k not in ("CDC_TEST_CRASH_AT", "PYSPARK_SUBMIT_ARGS")}
    env |= {"CDC_SESSION_METASTORE": str(work / "metastore"), "CDC_SPARK_MASTER": "local[2]"}
    env |= runtime_env(args[args.index("--table_format") + 1], env)  # hudi: Glue 5.0's Spark
    if submit:
        env["PYSPARK_SUBMIT_ARGS"] = submit
    if crash_at:
        env["CDC_TEST_CRASH_AT"] = crash_at
    script = [str(HERE / "session_catalog_worker.py"), str(work / "out.json")] if worker else [str(STREAMING_JOB)]
    return subprocess.run(
        [sys.executable, *script, *args], capture_output=True, text=True, env=env, cwd=work, timeout=900
    )


def killed_at(proc: subprocess.CompletedProcess, point: str) -> None:
    assert proc.returncode == -9, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert f"SIGKILL at {point} of batch 0" in proc.stdout + proc.stderr, proc.stdout[-3000:]


def spark_log(work: Path, log: str) -> list[int]:
    folder = work / "checkpoint" / log
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.exists() else []


def commits(location: Path, table_format: str) -> int:
    """The table's completed data commits: Delta's log versions after its creation, Hudi's timeline."""
    if table_format == "delta":
        return len(list((location / "_delta_log").glob("*.json"))) - 1
    return len(list((location / ".hoodie").glob("*.commit")))


@pytest.mark.parametrize("table_format", ["delta", "hudi"])
def test_a_batch_killed_after_its_commit_is_not_applied_again_by_a_restarted_job_and_the_catalog_is_athenas(
    session_catalog_jobs, tmp_path, table_format
):
    work, job = tmp_path, session_catalog_jobs[table_format]
    args, submit = argv(job, work), spark_submit_conf(job)
    assert job.arguments["--datalake-formats"] == table_format and job.arguments["--enable-glue-datacatalog"] == "true"
    (work / "in").mkdir()
    w = Workload(seed=21, keys=10)
    for n in range(2):
        write_lines(work / "in" / f"{n:04d}.json", w.batch(8), embed=True)
        os.utime(work / "in" / f"{n:04d}.json", (1_700_000_000 + n,) * 2)  # the file stream's order
        if n == 0:
            after_batch_0 = dict(w.expected)
    location = work / "warehouse" / f"{args[args.index('--namespace') + 1]}.db" / TABLE

    # Batch 0 committed to the table; killed before Spark's commit log records it. (A kill before the
    # commit writes nothing to any table whatever its format: the restart re-runs the planned batch from
    # Spark's offset log, as the Iceberg crash tests check; it is not repeated here per format.)
    killed_at(run(work, args, submit, "after-iceberg-commit@0"), "after-iceberg-commit")
    assert (spark_log(work, "offsets"), spark_log(work, "commits")) == ([0], [])
    assert commits(location, table_format) == 1
    killed = time.time()

    # Restarted again (a new process: the catalog must still know the tables): batch 0 re-run, then batch 1.
    restarted = run(work, args, submit, worker=True)
    assert restarted.returncode == 0, restarted.stdout[-3000:] + restarted.stderr[-6000:]
    assert spark_log(work, "commits") == [0, 1]
    out: dict[str, Any] = json.loads((work / "out.json").read_text())
    glue_conf = dict(kv.split("=", 1) for kv in submit.split()[1:-1:2])
    assert glue_conf.items() <= out["conf"].items(), glue_conf
    rows = {r["id"]: r for r in out["tables"][TABLE]["rows"]}
    assert len(rows) == len(out["tables"][TABLE]["rows"]), "a key stored twice"
    assert {k: r["first_name"] for k, r in rows.items()} == w.expected
    # Rows batch 1 left alone still carry batch 0's write: its re-run rewrote none of them.
    untouched = [k for k, v in after_batch_0.items() if w.expected.get(k) == v]
    assert untouched
    for k in untouched:
        written = datetime_seconds(rows[k]["_cdc_ingested_at"])
        assert written < killed, f"row {k} rewritten by the re-run of batch 0: {rows[k]}"

    for name, table in out["tables"].items():
        entry = table["entry"]
        folder = f"file:{work / 'warehouse'}/{location.parent.name}/{name}"
        assert entry["table_type"] == "MANAGED_TABLE" and entry["location"] == folder, entry
        assert entry["parameters"]["spark.sql.sources.provider"] == table_format, entry
        if table_format == "hudi":
            assert entry["input_format"] == HUDI_INPUT_FORMAT, entry
            assert (entry["serde"], entry["output_format"]) == (PARQUET_SERDE, PARQUET_OUTPUT_FORMAT), entry
            assert [c for c, _ in entry["columns"]][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                             "_hoodie_record_key", "_hoodie_partition_path",
                                                             "_hoodie_file_name"]  # fmt: skip
        else:
            # Spark's data source table: the location (all Athena needs, the schema is in the log).
            assert entry["serde_parameters"]["path"] == folder, entry
    assert set(out["tables"]) == {TABLE, f"{TABLE}__cdc_deletes"}


def datetime_seconds(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
