"""The bootstrap-brokers custom resource: answers Create/Update/Delete, and fails with a clear reason.

MSK is moto's (create_cluster_v2, describe_cluster_v2). moto does not implement
kafka.get_bootstrap_brokers, so that one call is answered by a botocore Stubber, which still checks
the request and the response against the real API model. CloudFormation's pre-signed ResponseURL is a
local HTTP server that records the PUT.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cdcdeploy.templates import CFN_DIR
from cfn_helpers import Replies
from moto import mock_aws
from moto.kafka.models import kafka_backends

REGION = "eu-west-1"
ACCOUNT = "123456789012"
BROKERS = "boot-abc.c1.kafka-serverless.eu-west-1.amazonaws.com:9098"


def load_handler() -> ModuleType:
    path = CFN_DIR / "lambda" / "bootstrap_brokers" / "index.py"
    spec = importlib.util.spec_from_file_location("bootstrap_brokers_index", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def handler(aws_env: None) -> Iterator[ModuleType]:
    with mock_aws():
        yield load_handler()


def create_cluster(active: bool = True) -> str:
    kafka = boto3.client("kafka", region_name=REGION)
    arn = kafka.create_cluster_v2(
        ClusterName="cdc-lake-msk",
        Serverless={
            "VpcConfigs": [{"SubnetIds": ["subnet-a", "subnet-b"]}],
            "ClientAuthentication": {"Sasl": {"Iam": {"Enabled": True}}},
        },
    )["ClusterArn"]
    if active:
        # moto leaves clusters CREATING; the real CloudFormation waits for ACTIVE before GetAtt Arn.
        kafka_backends[ACCOUNT][REGION].clusters[arn].state = "ACTIVE"
    return arn


def kafka_client_with_stubbed_brokers(arn: str, brokers: str | None) -> Any:
    """A moto-backed client whose get_bootstrap_brokers is answered by a Stubber (moto lacks it)."""
    client = boto3.client("kafka", region_name=REGION)
    stubbed = boto3.client("kafka", region_name=REGION)
    stubber = Stubber(stubbed)
    response = {"BootstrapBrokerStringSaslIam": brokers} if brokers else {"BootstrapBrokerString": "b:9092"}
    stubber.add_response("get_bootstrap_brokers", response, {"ClusterArn": arn})
    stubber.activate()
    client.get_bootstrap_brokers = stubbed.get_bootstrap_brokers
    client._test_stubber = stubber
    return client


def event(request_type: str, url: str, arn: str | None, physical_id: str | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/cdc-lake/1",
        "RequestId": "req-1",
        "LogicalResourceId": "BootstrapBrokers",
        "ResourceType": "Custom::MskBootstrapBrokers",
        "ResourceProperties": {"ServiceToken": "arn:fn", **({"ClusterArn": arn} if arn else {})},
    }
    if physical_id:
        e["PhysicalResourceId"] = physical_id
    return e


class Context:
    log_stream_name = "2026/11/22/[$LATEST]abc"


def reply() -> dict[str, Any]:
    (only,) = Replies.received
    assert only["content_type"] == ""  # what the pre-signed URL was signed for
    return only["body"]


@pytest.mark.parametrize("request_type", ["Create", "Update"])
def test_create_and_update_return_the_iam_bootstrap_brokers(
    handler: ModuleType, response_url: str, monkeypatch: pytest.MonkeyPatch, request_type: str
) -> None:
    arn = create_cluster()
    client = kafka_client_with_stubbed_brokers(arn, BROKERS)
    monkeypatch.setattr(handler, "kafka_client", lambda: client)
    handler.handler(event(request_type, response_url, arn, physical_id="old-id"), Context())
    body = reply()
    assert body["Status"] == "SUCCESS"
    assert body["Data"] == {"BootstrapBrokerStringSaslIam": BROKERS}
    assert body["PhysicalResourceId"] == f"{arn}/bootstrap-brokers"
    assert (body["RequestId"], body["LogicalResourceId"]) == ("req-1", "BootstrapBrokers")
    client._test_stubber.assert_no_pending_responses()


def test_delete_succeeds_without_calling_msk(
    handler: ModuleType, response_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler, "kafka_client", lambda: pytest.fail("Delete must not call MSK"))
    handler.handler(event("Delete", response_url, "arn:gone", physical_id="arn:gone/bootstrap-brokers"), Context())
    body = reply()
    assert (body["Status"], body["PhysicalResourceId"], body["Data"]) == ("SUCCESS", "arn:gone/bootstrap-brokers", {})


def test_cluster_that_is_not_active_fails_with_its_state(handler: ModuleType, response_url: str) -> None:
    arn = create_cluster(active=False)
    handler.handler(event("Create", response_url, arn), Context())
    body = reply()
    assert body["Status"] == "FAILED"
    assert f"MSK cluster {arn} is CREATING, expected ACTIVE" in body["Reason"]
    assert Context.log_stream_name in body["Reason"]


def test_unknown_cluster_fails_with_the_service_error(handler: ModuleType, response_url: str) -> None:
    missing = f"arn:aws:kafka:{REGION}:{ACCOUNT}:cluster/none/00000000-0000-0000-0000-000000000000-s1"
    handler.handler(event("Create", response_url, missing), Context())
    body = reply()
    assert body["Status"] == "FAILED" and body["Reason"]
    assert body["PhysicalResourceId"].startswith("bootstrap-brokers-")


def test_cluster_without_iam_brokers_fails_with_a_hint(
    handler: ModuleType, response_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = create_cluster()
    client = kafka_client_with_stubbed_brokers(arn, None)
    monkeypatch.setattr(handler, "kafka_client", lambda: client)
    handler.handler(event("Create", response_url, arn), Context())
    body = reply()
    assert body["Status"] == "FAILED" and "is IAM auth enabled?" in body["Reason"]


def test_missing_cluster_arn_property_fails(handler: ModuleType, response_url: str) -> None:
    handler.handler(event("Create", response_url, None), Context())
    assert "property ClusterArn is required" in reply()["Reason"]


def test_reason_is_truncated_to_fit_cloudformations_reply_limit(
    handler: ModuleType, response_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> Any:
        raise RuntimeError("x" * 10_000)

    monkeypatch.setattr(handler, "kafka_client", boom)
    handler.handler(event("Update", response_url, "arn:x", physical_id="kept-id"), Context())
    body = reply()
    assert body["Status"] == "FAILED" and body["PhysicalResourceId"] == "kept-id"
    assert len(json.dumps(body)) < 4096
