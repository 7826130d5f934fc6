"""The stack parameters recovery needs: the raw zone (RawZoneEnabled, RawZoneRetentionDays) and the
checkpoint location (CheckpointName), and the streaming job role's reach over the prefixes that
replay uses."""

from __future__ import annotations

from typing import Any

from cfn_helpers import resolve_variant


def job_args(variant: dict[str, Any]) -> dict[str, Any]:
    return variant["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]


def lifecycle_rules(variant: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rules = variant["Resources"]["LakeBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    return {r["Id"]: r for r in rules}


def test_the_raw_zone_is_off_by_default_and_archives_under_raw_when_enabled(
    raw_template: dict[str, Any], template: dict[str, Any]
) -> None:
    assert "--raw_zone_path" not in job_args(template) and "RawZonePath" not in template["Outputs"]
    enabled = resolve_variant(raw_template, RawZoneEnabled="true")
    path = {"Fn::Sub": "s3://${LakeBucket}/raw/cdc-iceberg/"}
    assert job_args(enabled)["--raw_zone_path"] == path
    assert enabled["Outputs"]["RawZonePath"]["Value"] == path
    assert "expire-raw-zone" not in lifecycle_rules(enabled)  # kept until a retention is given


def test_raw_zone_retention_expires_only_the_raw_prefix(raw_template: dict[str, Any]) -> None:
    kept = resolve_variant(raw_template, RawZoneEnabled="true", RawZoneRetentionDays="30")
    rule = lifecycle_rules(kept)["expire-raw-zone"]
    assert (rule["Prefix"], rule["ExpirationInDays"]) == ("raw/", {"Ref": "RawZoneRetentionDays"})
    # Without the raw zone the retention parameter creates nothing.
    assert "expire-raw-zone" not in lifecycle_rules(resolve_variant(raw_template, RawZoneRetentionDays="30"))


def test_the_checkpoint_location_is_a_parameter_and_an_output(raw_template: dict[str, Any]) -> None:
    moved = resolve_variant(raw_template, CheckpointName="cdc-iceberg-2")
    location = {"Fn::Sub": "s3://${LakeBucket}/checkpoints/${CheckpointName}/"}
    assert job_args(moved)["--checkpoint_location"] == location
    assert moved["Outputs"]["CheckpointLocation"]["Value"] == location


def test_the_job_role_reaches_every_prefix_a_replay_or_rebuild_uses(template: dict[str, Any]) -> None:
    policy = template["Resources"]["GlueJobRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    (objects,) = [s for s in policy["Statement"] if s["Sid"] == "LakeObjects"]
    prefixes = {r["Fn::Sub"].split("/", 1)[1] for r in objects["Resource"]}
    # replays read dead-letters/ or raw/, checkpoint under checkpoints/, dead-letter under dead-letters/
    assert {"warehouse/*", "checkpoints/*", "dead-letters/*", "raw/*"} <= prefixes
    assert "s3:GetObject" in objects["Action"] and "s3:PutObject" in objects["Action"]
