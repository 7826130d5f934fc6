"""The Glue entry script, run as a process exactly as a user runs it locally: the `files`
source in run-once mode, with a durable checkpoint."""

from __future__ import annotations

import json
import logging
import re

from cdc_events import Events, customer
from job_runs import local_argv, run_job, run_status, status_rows, write_lines


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
    # The batch's figures as EMF lines on stdout, equal to its log line's, and status's table of them.
    emf = [json.loads(x) for x in first.stdout.splitlines() if x.startswith('{"_aws"')]
    customers = [x for x in emf if x.get("Table") == "inventory_customers"]
    (batch,) = [x for x in emf if "Table" not in x]
    # 3 reads/creates, 1 update, 1 delete; the line says the same (a tombstone is no change event)
    assert [(x["Inserts"], x["Updates"], x["Deletes"], x["Commits"], x["Stopped"]) for x in customers] == [
        (3, 1, 1, 1, 0)
    ]
    assert re.search(r"inventory_customers: \d+ ev -> c/r 3 u 1 d 1", first.stdout), first.stdout[-3000:]
    assert (batch["Job"], batch["BatchDeadLetters"], batch["StoppedTables"]) == ("cdc-lake", 1, 0)
    (tmp_path / "job.log").write_text(first.stdout)
    status = run_status(tmp_path / "job.log")
    assert status.returncode == 0, status.stderr
    assert "1 dead letters" in status.stdout and "0 table(s) stopped" in status.stdout
    assert status_rows(status.stdout)["inventory_customers"] == ["following", "3", "1", "1", "0", "1", "0"]

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
