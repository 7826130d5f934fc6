"""A real commit conflict between maintenance and the streaming MERGE on the Glue-catalog tier:
the job's batch path and the maintenance procedures on the template's GlueCatalog + S3FileIO (moto),
the MERGE held between its planning and its commit while a compaction commits.

What this proves and what it cannot: moto's Glue `UpdateTable` does not enforce the table version
(test_glue_catalog_on_s3.py::test_moto_glue_update_table_ignores_a_stale_version_id), so the race of
two commits landing at the same instant is not exercised here; the cross-process proof of that stays
on the JDBC catalog (tests/job/test_maintenance_concurrency_jdbc.py). The conflict here is the one a
deployed stack meets most: the compaction has committed before the MERGE commits; Iceberg's
GlueTableOperations sees the table's metadata location moved, refreshes, and the MERGE's validation
fails on the data files the compaction replaced; the job plans the MERGE again (merge.MERGE_RETRY)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_glue_catalog_on_s3 import job_argv, local_arguments

HERE = Path(__file__).resolve().parent


def test_a_compaction_committed_under_a_held_merge_on_glue_makes_it_conflict_and_plan_again(
    streaming_job, glue_stack_resources, job_env, tmp_path
):
    argv = job_argv(streaming_job, local_arguments(tmp_path))
    run = subprocess.run(
        [sys.executable, str(HERE / "conflict_worker.py"), str(tmp_path), *argv],
        capture_output=True, text=True, timeout=900, env=job_env,
    )  # fmt: skip
    assert run.returncode == 0, f"{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    result = json.loads((tmp_path / "result.json").read_text())
    print(f"on Glue (moto): {result['compaction']} | {result['conflicts']}")
    assert "compact" in result["compaction"], result
    assert "replace" in result["operations"], result["operations"]  # the compaction committed
    assert result["conflicts"], "the held MERGE met the compaction's commit and was planned again"
    assert "MERGE into" in result["conflicts"][0], result["conflicts"]
    assert result["state_error"] is None, result["state_error"]  # every key once, the expected values
