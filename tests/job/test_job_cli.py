"""The Glue entry script, run as a process exactly as a user runs it locally: the `files`
source in run-once mode, with a durable checkpoint."""

from __future__ import annotations

import json
import logging

from cdc_events import Events, customer
from job_runs import local_argv, run_job, write_lines


def test_files_source_run_once_end_to_end_through_the_command_line(spark, warehouse, tmp_path, caplog):
    (tmp_path / "in").mkdir()
    ev = Events()
    ev.record("r", {"id": 1}, customer(1, "Sally"))
    ev.record("r", {"id": 2}, customer(2, "George"))
    ev.record("c", {"id": 3}, customer(3, "Edward"))
    write_lines(tmp_path / "in" / "0001.json", ev.take(), embed=True)
    ev.record("u", {"id": 1}, customer(1, "Sally-2"))
    ev.record("d", {"id": 2}, before=customer(2, "George"))
    ev.tombstone({"id": 2})
    write_lines(tmp_path / "in" / "0002.json", ev.take(), embed=False)
    (tmp_path / "in" / "0003.json").write_text("not json at all\n")

    first = run_job(tmp_path, warehouse, "cli")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "batch 0:" in first.stdout and "dead letters" in first.stdout
    table = "glue_catalog.cli.inventory_customers"
    spark.catalog.refreshTable(table)
    assert [(r.id, r.first_name) for r in spark.sql(f"SELECT * FROM {table} ORDER BY id").collect()] == [
        (1, "Sally-2"),
        (3, "Edward"),
    ]
    dead = [json.loads(x) for f in (tmp_path / "dead").glob("batch=*/*.json") for x in f.read_text().splitlines()]
    assert [d["value"] for d in dead] == ["not json at all"]

    # A second run picks up only the new file: the checkpoint the process left on disk remembers what
    # was applied. Run from the same command line in this test's session (a second JVM would double
    # the test's cost; the process run above is the command line's own check).
    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.jobs.job import run_stream

    ev.record("c", {"id": 4}, customer(4, "Anne"))
    write_lines(tmp_path / "in" / "0004.json", ev.take(), embed=True)
    caplog.set_level(logging.INFO, logger="cdclake")
    files = ["--source", "files", "--files_path", str(tmp_path / "in"), "--run_once", "true"]
    run_stream(spark, build_settings(parse_argv(local_argv(tmp_path, warehouse, "cli", *files))))
    second = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch ")]
    assert len(second) == 1 and second[0].startswith("batch 1: 1 records (1 changes"), second
    assert [r.id for r in spark.sql(f"SELECT id FROM {table} ORDER BY id").collect()] == [1, 3, 4]


def test_wrong_arguments_exit_2_with_a_clear_message(tmp_path, warehouse):
    bad = run_job(tmp_path, warehouse, "cli_bad", "--write_mode", "sometimes")
    assert bad.returncode == 2
    assert "--write_mode must be one of merge-on-read, copy-on-write; got 'sometimes'" in bad.stdout
