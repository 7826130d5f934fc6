"""deploy and destroy helpers against moto: uploads are idempotent, the job is started
once, `cloudformation package` reuses its keys, and destroy empties versioned buckets before deleting.

moto does not implement glue.batch_stop_job_run: that one call is answered by a botocore Stubber.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from cdcdeploy import deploy, destroy
from moto import mock_aws
from moto.moto_api import state_manager
from moto.server import ThreadedMotoServer

REGION = "eu-west-1"


@pytest.fixture
def moto(aws_env: None) -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def glue_runs_stay_running() -> Iterator[None]:
    # A streaming run stays RUNNING: moto advances a run on every read; hold it for a few reads.
    state_manager.set_transition(model_name="glue::job_run", transition={"progression": "manual", "times": 3})
    yield
    state_manager.unset_transition(model_name="glue::job_run")


def artifact(tmp_path: Path, name: str, content: bytes, key: str) -> dict[str, str]:
    path = tmp_path / name
    path.write_bytes(content)
    from cdcdeploy.artifacts import sha256_file

    return {"path": str(path), "key": key, "sha256": sha256_file(path)}


# ---------------------------------------------------------------- deploy
def test_second_upload_of_unchanged_artifacts_uploads_nothing(moto: None, tmp_path: Path) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": REGION})
    items = [
        artifact(tmp_path, "plugin.zip", b"jars", "plugins/debezium-mysql-aaaa.zip"),
        artifact(tmp_path, "job.py", b"print(1)", "glue/bbbb/cdc_lake_job.py"),
    ]
    assert deploy.upload_artifacts(s3, "artifacts", items) == [i["key"] for i in items]
    assert deploy.upload_artifacts(s3, "artifacts", items) == []
    head = s3.head_object(Bucket="artifacts", Key=items[1]["key"])
    assert head["Metadata"]["sha256"] == items[1]["sha256"]
    # An object whose recorded hash differs (a failed or foreign upload) is replaced.
    s3.put_object(Bucket="artifacts", Key=items[0]["key"], Body=b"other", Metadata={"sha256": "0" * 64})
    assert deploy.upload_artifacts(s3, "artifacts", items) == [items[0]["key"]]
    assert s3.get_object(Bucket="artifacts", Key=items[0]["key"])["Body"].read() == b"jars"


def test_upload_to_a_missing_bucket_fails_loudly(moto: None, tmp_path: Path) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    with pytest.raises(Exception, match=r"NoSuchBucket|404|Not Found"):
        deploy.upload_artifacts(s3, "nope", [artifact(tmp_path, "a", b"a", "k")])


def test_job_is_started_once_and_left_alone_while_running(moto: None, glue_runs_stay_running: None) -> None:
    glue = boto3.client("glue", region_name=REGION)
    glue.create_job(Name="cdc", Role="r", Command={"Name": "gluestreaming", "ScriptLocation": "s3://b/j.py"})
    run_id = deploy.start_job_if_idle(glue, "cdc")
    assert run_id
    assert deploy.start_job_if_idle(glue, "cdc") is None
    assert len(glue.get_job_runs(JobName="cdc")["JobRuns"]) == 1


def test_parameter_overrides_put_the_bucket_and_artifacts_first_and_let_the_user_override() -> None:
    out = deploy.parameter_overrides({"GlueScriptKey": "k"}, "bkt", ["GlueNumberOfWorkers=4", "GlueScriptKey=x"])
    assert out == ["ArtifactsBucket=bkt", "GlueScriptKey=x", "GlueNumberOfWorkers=4"]
    with pytest.raises(ValueError, match="Key=Value"):
        deploy.parameter_overrides({}, "b", ["oops"])


def test_cloudformation_package_reuses_its_keys_on_a_second_run(
    moto_server: str, built_dir: Path, tmp_path: Path
) -> None:
    """The real `aws cloudformation package` against a moto server: same Lambda zips, same keys."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": REGION})
    functions = ("BootstrapBrokersFunction", "SchemaHistoryTopicFunction")
    keys = []
    for i in range(2):
        out = deploy.package(built_dir / "cdc-pipeline.yaml", "artifacts", tmp_path / f"p{i}.yaml", REGION)
        packaged = yaml.load(out.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
        codes = [packaged["Resources"][f]["Properties"]["Code"] for f in functions]
        assert {c["S3Bucket"] for c in codes} == {"artifacts"}
        keys.append(sorted(c["S3Key"] for c in codes))
    assert keys[0] == keys[1] and all(k.startswith("cfn/") for k in keys[0]) and len(set(keys[0])) == 2
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="artifacts")["Contents"]) == keys[0]


@pytest.fixture
def moto_server(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # the aws CLI and boto3 both honour it
    # The server shares moto's in-process state with mock_aws: start and leave it empty.
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", data=b"", method="POST")
    urllib.request.urlopen(reset, timeout=10).close()
    yield endpoint
    urllib.request.urlopen(reset, timeout=10).close()
    server.stop()


@pytest.mark.filterwarnings("ignore::UserWarning:moto.cloudformation.parsing")  # skipped BucketPolicy
def test_bootstrap_stack_deploys_and_a_second_deploy_changes_nothing(
    moto_server: str, built_dir: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The real `aws cloudformation deploy --no-fail-on-empty-changeset`, twice, against moto."""
    template = built_dir / "bootstrap.yaml"
    deploy.deploy_stack(template, "cdc-lake-bootstrap", REGION, None)
    capfd.readouterr()
    deploy.deploy_stack(template, "cdc-lake-bootstrap", REGION, None)
    assert "No changes to deploy" in capfd.readouterr().out
    cfn = boto3.client("cloudformation", region_name=REGION)
    (stack,) = cfn.describe_stacks(StackName="cdc-lake-bootstrap")["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert {"Key": "project", "Value": "cdc-lake"} in stack["Tags"]
    buckets = [b["Name"] for b in boto3.client("s3", region_name=REGION).list_buckets()["Buckets"]]
    assert len([b for b in buckets if b.startswith("cdc-lake-bootstrap-")]) == 2, buckets


# ---------------------------------------------------------------- destroy
STACK_TEMPLATE = {
    "Resources": {
        "LakeBucket": {"Type": "AWS::S3::Bucket", "Properties": {"VersioningConfiguration": {"Status": "Enabled"}}},
        "AccessLogsBucket": {"Type": "AWS::S3::Bucket"},
    },
    "Outputs": {
        "LakeBucketName": {"Value": {"Ref": "LakeBucket"}},
        "AccessLogsBucketName": {"Value": {"Ref": "AccessLogsBucket"}},
        "JobName": {"Value": "cdc"},
    },
}


def make_stack(name: str) -> dict[str, str]:
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(STACK_TEMPLATE))
    return deploy.stack_outputs(cfn, name)


def test_empty_bucket_removes_every_version_and_delete_marker(moto: None) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="lake", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_bucket_versioning(Bucket="lake", VersioningConfiguration={"Status": "Enabled"})
    for i in range(3):
        s3.put_object(Bucket="lake", Key="warehouse/t/data.parquet", Body=f"v{i}".encode())
    s3.delete_object(Bucket="lake", Key="warehouse/t/data.parquet")  # a delete marker
    s3.put_object(Bucket="lake", Key="checkpoints/offsets/0", Body=b"0")
    assert destroy.empty_bucket(s3, "lake") == 5
    listing = s3.list_object_versions(Bucket="lake")
    assert not listing.get("Versions") and not listing.get("DeleteMarkers")
    assert destroy.empty_bucket(s3, "no-such-bucket") == 0


def test_destroy_empties_the_stack_buckets_then_deletes_the_stack(moto: None) -> None:
    outputs = make_stack("cdc-lake")
    s3 = boto3.client("s3", region_name=REGION)
    for i in range(2):
        s3.put_object(Bucket=outputs["LakeBucketName"], Key="warehouse/x", Body=f"{i}".encode())
    s3.put_object(Bucket=outputs["AccessLogsBucketName"], Key="lake/log", Body=b"log")
    session = boto3.Session(region_name=REGION)
    assert destroy.destroy_stack(session, "cdc-lake", destroy.PIPELINE_BUCKETS) is True
    cfn = boto3.client("cloudformation", region_name=REGION)
    assert not destroy.stack_exists(cfn, "cdc-lake")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert outputs["LakeBucketName"] not in names and outputs["AccessLogsBucketName"] not in names
    assert destroy.destroy_stack(session, "cdc-lake", destroy.PIPELINE_BUCKETS) is False  # idempotent


def test_destroy_stops_running_job_runs_first(moto: None, glue_runs_stay_running: None) -> None:
    glue = boto3.client("glue", region_name=REGION)
    glue.create_job(Name="cdc", Role="r", Command={"Name": "gluestreaming", "ScriptLocation": "s3://b/j.py"})
    run_id = glue.start_job_run(JobName="cdc")["JobRunId"]
    stubbed = boto3.client("glue", region_name=REGION)
    stubber = Stubber(stubbed)
    stubber.add_response(
        "batch_stop_job_run",
        {"SuccessfulSubmissions": [{"JobName": "cdc", "JobRunId": run_id}], "Errors": []},
        {"JobName": "cdc", "JobRunIds": [run_id]},
    )
    stubber.activate()
    glue.batch_stop_job_run = stubbed.batch_stop_job_run  # type: ignore[method-assign]
    assert destroy.stop_job(glue, "cdc", timeout_s=30, poll_s=0) == [run_id]
    stubber.assert_no_pending_responses()
    assert deploy.active_runs(glue, "cdc") == []


def test_destroy_main_refuses_without_confirmation(
    moto: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_stack("cdc-lake")
    monkeypatch.setattr("builtins.input", lambda _prompt: "n")
    assert destroy.main(["--stack-name", "cdc-lake", "--region", REGION]) == 1
    assert destroy.stack_exists(boto3.client("cloudformation", region_name=REGION), "cdc-lake")


def test_destroy_main_removes_pipeline_and_bootstrap_stacks(moto: None) -> None:
    make_stack("cdc-lake")
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(
        StackName="cdc-lake-bootstrap",
        TemplateBody=json.dumps(
            {
                "Resources": {"ArtifactsBucket": {"Type": "AWS::S3::Bucket"}},
                "Outputs": {"ArtifactsBucketName": {"Value": {"Ref": "ArtifactsBucket"}}},
            }
        ),
    )
    glue = boto3.client("glue", region_name=REGION)
    glue.create_job(Name="cdc", Role="r", Command={"Name": "gluestreaming", "ScriptLocation": "s3://b/j.py"})
    assert destroy.main(["--stack-name", "cdc-lake", "--region", REGION, "--yes"]) == 0
    assert not destroy.stack_exists(cfn, "cdc-lake") and not destroy.stack_exists(cfn, "cdc-lake-bootstrap")


def test_a_stack_name_too_long_for_the_lambda_names_is_refused_before_anything_is_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cdcdeploy import templates

    longest, where = deploy.longest_stack_name(templates.render_template())
    # "<stack>-schema-history-topic" must fit Lambda's 64 characters: 64 - 21.
    assert longest == 43 and "SchemaHistoryTopicFunction" in where
    deploy.check_stack_name("s" * 43)
    with pytest.raises(SystemExit, match=r"has 44 characters.*at most 43: choose a shorter stack name"):
        deploy.main(["--region", REGION, "--stack-name", "s" * 44])
