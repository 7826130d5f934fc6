"""deploy against a moto server, twice: a changed worker property (or plugin) makes MSK Connect
replace the connector, which CloudFormation cannot do under its old name, so the second deploy gives
it a new one; a comment edit changes nothing. moto does not create the whole pipeline (it skips the
MSK Connect resources and fails on attributes of skipped ones), so the stack here is the rendered
template's connector-naming parameters and its worker configuration, deployed by the real aws CLI."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import boto3
import pytest
from cdcdeploy import deploy, templates

REGION = "eu-west-1"
STACK = "cdc-naming"
PLUGIN = "a1b2c3d4e5f6"
JAVA11_PLUGIN = "f6e5d4c3b2a1"  # the Java 11 build's zip (DebeziumBuild=java11)
NAMING = (
    "ArtifactsBucket", "DebeziumPluginHash", "DebeziumJava11PluginHash", "DebeziumBuild", "ConnectorNameSuffix",
    "PgSlotName", "SourceEngine",
)  # fmt: skip

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:moto.cloudformation.parsing")  # skipped MSK Connect


@pytest.fixture
def cfn_dir(tmp_path: Path) -> Path:
    """A copy of cloudformation/ whose worker properties a test may edit."""
    out = tmp_path / "cloudformation"
    shutil.copytree(templates.CFN_DIR, out, ignore=shutil.ignore_patterns("lambda", "lint_rules"))
    return out


def naming_stack(cfn_dir: Path, out: Path) -> Path:
    """The rendered template, cut to the parameters that name the connector and the worker configuration."""
    full = templates.render_template(cfn_dir / "cdc-pipeline.yaml")
    worker_configuration = {k: v for k, v in full["Resources"]["WorkerConfiguration"].items() if k != "Condition"}
    template: dict[str, Any] = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {k: full["Parameters"][k] for k in NAMING},
        # Without its condition (log capture): the cut template keeps none of the conditions.
        "Resources": {"WorkerConfiguration": worker_configuration},
    }
    out.write_text(templates.dump_template(template), encoding="utf-8")
    return out


def run_deploy(cfn_dir: Path, tmp_path: Path, *parameters: str, plugin: str = PLUGIN) -> dict[str, str]:
    """What deploy does about the connector's name, then `aws cloudformation deploy`; returns the
    deployed stack's parameters."""
    cfn = boto3.client("cloudformation", region_name=REGION)
    worker = cfn_dir / "connector" / "msk-worker.properties"
    naming = deploy.connector_naming(cfn, STACK, plugin, list(parameters), worker, java11_hash=JAVA11_PLUGIN)
    built = {"DebeziumPluginHash": plugin, "DebeziumJava11PluginHash": JAVA11_PLUGIN}
    overrides = deploy.parameter_overrides(built, "art", list(parameters))
    path = naming_stack(cfn_dir, tmp_path / "naming.yaml")
    deploy.deploy_stack(path, STACK, REGION, None, overrides + naming)
    (stack,) = cfn.describe_stacks(StackName=STACK)["Stacks"]
    return {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]}


def test_a_changed_worker_property_deploys_the_connector_under_a_new_name(
    aws: str, cfn_dir: Path, tmp_path: Path
) -> None:
    first = run_deploy(cfn_dir, tmp_path)
    assert first["ConnectorNameSuffix"] == ""
    worker = cfn_dir / "connector" / "msk-worker.properties"
    worker.write_text(worker.read_text() + "offset.flush.interval.ms=20000\n")
    second = run_deploy(cfn_dir, tmp_path)
    assert second["ConnectorNameSuffix"].startswith("-") and len(second["ConnectorNameSuffix"]) == 9
    # A comment edit is no change: the rendered stack is the same and the name stays (moto answers the
    # unchanged deploy with an error where AWS makes an empty change set, so it is not deployed here).
    before = naming_stack(cfn_dir, tmp_path / "before.yaml").read_text()
    worker.write_text("# reviewed\n" + worker.read_text())
    assert naming_stack(cfn_dir, tmp_path / "after.yaml").read_text() == before
    cfn = boto3.client("cloudformation", region_name=REGION)
    assert deploy.connector_naming(cfn, STACK, PLUGIN, [], worker) == []
    # A new plugin is a new name again, never one used before (its stored offsets would be stale).
    third = run_deploy(cfn_dir, tmp_path, plugin="0" * 12)
    assert third["ConnectorNameSuffix"] not in ("", second["ConnectorNameSuffix"])


def test_the_deployed_suffix_given_again_for_a_changed_worker_is_refused_with_the_fix(
    aws: str, cfn_dir: Path, tmp_path: Path
) -> None:
    run_deploy(cfn_dir, tmp_path, "ConnectorNameSuffix=-v2")
    worker = cfn_dir / "connector" / "msk-worker.properties"
    worker.write_text(worker.read_text() + "offset.flush.interval.ms=20000\n")
    with pytest.raises(SystemExit, match=r"ConnectorNameSuffix='-v2' is the deployed one\. Leave the parameter out"):
        run_deploy(cfn_dir, tmp_path, "ConnectorNameSuffix=-v2")
    assert run_deploy(cfn_dir, tmp_path, "ConnectorNameSuffix=-v3")["ConnectorNameSuffix"] == "-v3"


def test_a_postgres_connector_replaced_without_a_new_slot_is_refused_with_the_slot_to_give(
    aws: str, cfn_dir: Path, tmp_path: Path
) -> None:
    run_deploy(cfn_dir, tmp_path, "SourceEngine=postgres")
    worker = cfn_dir / "connector" / "msk-worker.properties"
    worker.write_text(worker.read_text() + "offset.flush.interval.ms=20000\n")
    with pytest.raises(
        SystemExit, match=r"--parameter PgSlotName=cdc_lake_[0-9a-f]{8} \(then drop the old slot"
    ) as exc:
        run_deploy(cfn_dir, tmp_path, "SourceEngine=postgres")
    slot = str(exc.value).split("--parameter PgSlotName=")[1].split(" ")[0]
    deployed = run_deploy(cfn_dir, tmp_path, "SourceEngine=postgres", f"PgSlotName={slot}")
    assert deployed["PgSlotName"] == slot and deployed["ConnectorNameSuffix"] == f"-{slot[-8:]}"


def test_switching_the_debezium_build_renames_the_connector_and_a_deploy_without_it_keeps_the_build(
    aws: str, cfn_dir: Path, tmp_path: Path
) -> None:
    assert run_deploy(cfn_dir, tmp_path)["ConnectorNameSuffix"] == ""
    # Another plugin zip (Debezium 2.7 for Java 11): MSK Connect replaces the connector, under a new name.
    java11 = run_deploy(cfn_dir, tmp_path, "DebeziumBuild=java11")
    assert java11["DebeziumBuild"] == "java11" and len(java11["ConnectorNameSuffix"]) == 9
    # Not given again, the aws CLI keeps the deployed java11: the same plugin, no new name.
    cfn = boto3.client("cloudformation", region_name=REGION)
    worker = cfn_dir / "connector" / "msk-worker.properties"
    assert deploy.connector_naming(cfn, STACK, PLUGIN, [], worker, java11_hash=JAVA11_PLUGIN) == []
    back = run_deploy(cfn_dir, tmp_path, "DebeziumBuild=java17")
    assert back["ConnectorNameSuffix"] not in ("", java11["ConnectorNameSuffix"])
