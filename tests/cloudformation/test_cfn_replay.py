"""replay against moto: the streaming run is stopped, one run of the same job replays the
files with arguments of its own, and the stream is started again, also when the replay fails.

moto does not implement glue.batch_stop_job_run: that one call is answered by a botocore Stubber."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cdcdeploy import replay
from moto import mock_aws
from moto.moto_api import state_manager

REGION = "eu-west-1"
JOB = "cdc-lake-cdc-iceberg"
LAKE = "cdc-lake-lakebucket-1"
DEFAULTS = {
    "--source": "kafka",
    "--checkpoint_location": f"s3://{LAKE}/checkpoints/cdc-iceberg/",
    "--dead_letter_path": f"s3://{LAKE}/dead-letters/cdc-iceberg/",
}
FOLDER = f"s3://{LAKE}/dead-letters/cdc-iceberg/batch=12-0a1b2c3d4e5f/"


@pytest.fixture
def glue(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        # Runs advance one state per read after a few reads: the stream stays RUNNING for a while.
        state_manager.set_transition(model_name="glue::job_run", transition={"progression": "manual", "times": 3})
        client = boto3.client("glue", region_name=REGION)
        client.create_job(
            Name=JOB,
            Role="r",
            Command={"Name": "gluestreaming", "ScriptLocation": "s3://b/j.py"},
            DefaultArguments=DEFAULTS,
            ExecutionProperty={"MaxConcurrentRuns": 1},
        )
        yield client
        state_manager.unset_transition(model_name="glue::job_run")


def stub_stop(glue: Any, run_ids: list[str]) -> Stubber:
    stubbed = boto3.client("glue", region_name=REGION)
    stubber = Stubber(stubbed)
    stubber.add_response(
        "batch_stop_job_run",
        {"SuccessfulSubmissions": [{"JobName": JOB, "JobRunId": r} for r in run_ids], "Errors": []},
        {"JobName": JOB, "JobRunIds": run_ids},
    )
    stubber.activate()
    glue.batch_stop_job_run = stubbed.batch_stop_job_run
    return stubber


def test_replay_stops_the_stream_runs_once_over_the_files_and_starts_the_stream_again(glue: Any) -> None:
    streaming = glue.start_job_run(JobName=JOB)["JobRunId"]
    stubber = stub_stop(glue, [streaming])
    result = replay.replay(glue, JOB, LAKE, FOLDER, "r1", poll_s=0, timeout_s=30)
    stubber.assert_no_pending_responses()
    assert result["stopped"] == [streaming]
    assert result["replay_run"]["JobRunState"] == "SUCCEEDED"
    assert result["replay_run"]["Arguments"] == {
        "--source": "files",
        "--files_path": FOLDER,
        "--run_once": "true",
        "--checkpoint_location": f"s3://{LAKE}/checkpoints/replays/r1/",
        "--dead_letter_path": f"s3://{LAKE}/dead-letters/replays/r1/",
    }
    runs = {r["Id"]: r for r in glue.get_job_runs(JobName=JOB)["JobRuns"]}
    assert set(runs) == {streaming, result["replay_run"]["Id"], result["restarted"]}
    assert runs[result["restarted"]].get("Arguments", DEFAULTS) == DEFAULTS  # the stream, with its own arguments


def test_the_stream_is_started_again_when_the_replay_fails(glue: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every run Glue reports has failed (the replay's records break the job again, say) and ended.
    state_manager.set_transition(model_name="glue::job_run", transition={"progression": "immediate"})
    real_run, real_runs = glue.get_job_run, glue.get_job_runs

    def failed_run(**kwargs: Any) -> dict[str, Any]:
        answer = real_run(**kwargs)
        answer["JobRun"]["JobRunState"] = "FAILED"
        return answer

    def failed_runs(**kwargs: Any) -> dict[str, Any]:
        answer = real_runs(**kwargs)
        for run in answer["JobRuns"]:
            run["JobRunState"] = "FAILED"
        return answer

    monkeypatch.setattr(glue, "get_job_run", failed_run)
    monkeypatch.setattr(glue, "get_job_runs", failed_runs)
    result = replay.replay(glue, JOB, LAKE, FOLDER, "r2", poll_s=0, timeout_s=30)
    assert result["stopped"] == [] and result["replay_run"]["JobRunState"] == "FAILED"
    assert result["restarted"] is not None


def test_resume_runs_the_job_once_for_the_table_keeping_the_streams_dead_letter_path(glue: Any) -> None:
    streaming = glue.start_job_run(JobName=JOB)["JobRunId"]
    stubber = stub_stop(glue, [streaming])
    result = replay.replay(glue, JOB, LAKE, None, "r5", poll_s=0, timeout_s=30, resume="salesdb_customer")
    stubber.assert_no_pending_responses()
    assert result["arguments"] == {
        "--source": "files",
        "--run_once": "true",
        "--resume_table": "salesdb_customer",
        "--checkpoint_location": f"s3://{LAKE}/checkpoints/replays/r5/",
    }
    # The job finds the table's mark, and the folder it names, under the stream's --dead_letter_path.
    assert result["replay_run"]["Arguments"]["--dead_letter_path"] == DEFAULTS["--dead_letter_path"]
    assert result["restarted"] is not None


def test_no_restart_leaves_the_stream_stopped(glue: Any) -> None:
    result = replay.replay(glue, JOB, LAKE, FOLDER, "r3", restart=False, poll_s=0, timeout_s=30)
    assert result["restarted"] is None
    assert len(glue.get_job_runs(JobName=JOB)["JobRuns"]) == 1


def test_a_raw_zone_rebuild_archives_elsewhere_and_may_write_another_namespace() -> None:
    defaults = DEFAULTS | {"--raw_zone_path": f"s3://{LAKE}/raw/cdc-iceberg/"}
    args = replay.replay_arguments(f"s3://{LAKE}", f"s3://{LAKE}/raw/cdc-iceberg/", "rb", defaults, "cdc_lake_rebuilt")
    assert args["--raw_zone_path"] == f"s3://{LAKE}/raw/replays/rb/"  # never into the folder being read
    assert args["--namespace"] == "cdc_lake_rebuilt"


@pytest.mark.parametrize(
    "path",
    [f"s3://{LAKE}/warehouse/cdc_lake.db/", "s3://other-bucket/dead-letters/x/", f"s3://{LAKE}/dead-lettersX/"],
)
def test_files_the_jobs_role_cannot_read_are_refused_before_the_stream_is_stopped(glue: Any, path: str) -> None:
    streaming = glue.start_job_run(JobName=JOB)["JobRunId"]
    with pytest.raises(ValueError, match="must be under"):
        replay.replay(glue, JOB, LAKE, path, "r4", poll_s=0, timeout_s=30)
    assert [r["Id"] for r in glue.get_job_runs(JobName=JOB)["JobRuns"]] == [streaming]


def test_main_reads_the_job_and_bucket_from_the_stack_outputs(
    glue: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(replay, "stack_outputs", lambda _cfn, name: {"JobName": JOB, "LakeBucketName": LAKE})
    monkeypatch.setattr(replay.time, "sleep", lambda _s: None)
    assert replay.main([FOLDER, "--region", REGION, "--replay-id", "r5", "--timeout-minutes", "1"]) == 0
    out = capsys.readouterr().out
    assert "replay run" in out and "SUCCEEDED" in out and f"s3://{LAKE}/dead-letters/replays/r5/" in out
    assert replay.main([f"s3://{LAKE}/warehouse/", "--region", REGION]) == 2
