"""status's reading of the job's EMF lines (read_figures, render): counts add up over batches,
the state and the lag are the latest batch's, a restart starts the counts again. The lines are the
job's own (cdclake.common.metrics.emit of batch reports); tests/job/test_job_cli.py and
test_set_aside.py run status over the log of a real run."""

from __future__ import annotations

import io
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from cdclake.common.metrics import batch_metrics, emit, maintenance_metrics  # noqa: E402
from cdclake.common.report import BatchReport, TableReport  # noqa: E402
from cdctools import status  # noqa: E402
from job_runs import status_rows  # noqa: E402

NOW = 1_790_000_000_000


def log_of(*reports: tuple[BatchReport, list[str]]) -> list[str]:
    out = io.StringIO()
    out.write("2026-11-28 10:00:00,000 INFO cdclake: streaming from kafka into glue_catalog.cdc\n")
    for report, aside in reports:
        out.write(f"2026-11-28 10:00:01,000 INFO cdclake: {report.line()}\n")
        emit(batch_metrics("cdc-lake", report, aside, NOW), out)
    return out.getvalue().splitlines()


def batch(batch_id: int, *tables: TableReport, behind: float | None = 2.0) -> BatchReport:
    return BatchReport(batch_id, records=sum(t.events for t in tables), tables=list(tables), behind_seconds=behind)


def test_counts_add_up_over_batches_and_the_state_and_lag_are_the_latest_batchs():
    first = batch(
        0, TableReport("c.cdc.customer", events=5, inserts=5), TableReport("c.cdc.orders", events=2, updates=2)
    )
    second = batch(1, TableReport("c.cdc.customer", events=3, updates=1, deletes=2), behind=None)
    f = status.read_figures(log_of((first, []), (second, [])))
    assert {k: f.tables[("cdc-lake", "customer")][k] for k in status.SUMMED} == {
        "Inserts": 5, "Updates": 1, "Deletes": 2, "DeadLetters": 0, "Commits": 2,
    }  # fmt: skip
    job = f.batches["cdc-lake"]
    assert (job["batches"], job["Records"], job["Batch"], job["BehindSourceSeconds"]) == (2, 10, 1, None)
    rows = status_rows(status.render(f))
    assert rows["customer"][:4] == ["following", "5", "1", "2"] and rows["orders"][-1] == "0"


def test_a_table_set_aside_shows_stopped_until_a_batch_reports_it_following_again():
    aside = TableReport("c.cdc.orders", events=2, dead=2, set_aside="AnalysisException: x", set_aside_since=0)
    lines = log_of(
        (batch(0, aside), []), (batch(1, TableReport("c.cdc.customer", events=1, inserts=1)), ["c.cdc.orders"])
    )
    text = status.render(status.read_figures(lines))
    assert status_rows(text)["orders"][:1] == ["STOPPED"] and "1 table(s) stopped" in text
    lines += log_of((batch(2, TableReport("c.cdc.orders", events=1, inserts=1)), []))
    assert status_rows(status.render(status.read_figures(lines)))["orders"][0] == "following"


def test_only_the_lines_after_the_jobs_latest_start_count():
    text = "\n".join(log_of((batch(0, TableReport("c.cdc.customer", events=4, inserts=4)), [])))
    text += "\n===== 2026-11-28 10:05:00 local-stack starts job\n"
    text += "\n".join(log_of((batch(1, TableReport("c.cdc.customer", events=1, inserts=1)), [])))
    f = status.read_figures(status.since_latest_start(text).splitlines())
    assert f.tables[("cdc-lake", "customer")]["Inserts"] == 1


def test_maintenance_results_get_their_own_rows(tmp_path):
    out = io.StringIO()
    emit([maintenance_metrics("cdc-maintenance", "c.cdc.customer", (7, 2), True, 4.0, NOW)], out)
    log = tmp_path / "job.log"
    log.write_text(out.getvalue())
    text, ok = status.snapshot(log)
    assert ok and "maintained table" in text
    assert text.splitlines()[-1].split() == ["customer", "7", "2", "yes", "4.0"]


def test_a_log_without_figures_says_so_and_exits_1(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("2026-11-28 10:00:00,000 INFO cdclake: streaming from kafka into glue_catalog.cdc\n")
    assert status.main(["--once", "--log", str(log)]) == 1
    assert status.main(["--once", "--log", str(tmp_path / "missing.log")]) == 1
