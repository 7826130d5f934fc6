"""CloudFormation custom resource: the IAM bootstrap brokers of an MSK (Serverless) cluster.

AWS::MSK::ServerlessCluster returns only its ARN, yet MSK Connect and the Glue job need host:port.
Properties: ClusterArn. Returns (Fn::GetAtt): BootstrapBrokerStringSaslIam.

The reply to CloudFormation: cfn_reply.send (cloudformation/lambda/cfn_reply.py, packed next to this file).
Every failure is reported as FAILED with a reason naming the cluster and the cause, so a stack fails
fast instead of waiting an hour for a reply that never comes.
"""

from __future__ import annotations

import logging
from typing import Any

import boto3
from botocore.config import Config
from cfn_reply import send

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

# Bounded so that a throttled or unreachable API still leaves time to reply within the Lambda timeout.
BOTO_CONFIG = Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 5, "mode": "standard"})


class ResolveError(RuntimeError):
    """The cluster cannot give IAM bootstrap brokers; the message is the reason CloudFormation shows."""


def kafka_client() -> Any:
    return boto3.client("kafka", config=BOTO_CONFIG)


def resolve(kafka: Any, cluster_arn: str) -> dict[str, str]:
    """Bootstrap string of an ACTIVE cluster with IAM auth, as the custom resource's attributes."""
    state = kafka.describe_cluster_v2(ClusterArn=cluster_arn)["ClusterInfo"].get("State", "UNKNOWN")
    if state != "ACTIVE":
        raise ResolveError(f"MSK cluster {cluster_arn} is {state}, expected ACTIVE")
    brokers = kafka.get_bootstrap_brokers(ClusterArn=cluster_arn).get("BootstrapBrokerStringSaslIam")
    if not brokers:
        raise ResolveError(f"MSK cluster {cluster_arn} has no IAM bootstrap brokers: is IAM auth enabled?")
    return {"BootstrapBrokerStringSaslIam": brokers}


def handler(event: dict[str, Any], context: Any) -> None:
    request_type = event["RequestType"]
    log_stream = getattr(context, "log_stream_name", "unknown")
    # On Delete (and on an Update that fails) keep the id CloudFormation already has.
    physical_id = event.get("PhysicalResourceId") or f"bootstrap-brokers-{log_stream}"
    LOG.info("%s %s", request_type, event.get("LogicalResourceId"))
    try:
        data: dict[str, str] = {}
        if request_type in ("Create", "Update"):
            cluster_arn = event.get("ResourceProperties", {}).get("ClusterArn", "")
            if not cluster_arn:
                raise ResolveError("property ClusterArn is required")
            data = resolve(kafka_client(), cluster_arn)
            # A new cluster is a new resource: CloudFormation then sends Delete for the old id.
            physical_id = f"{cluster_arn}/bootstrap-brokers"
        elif request_type != "Delete":
            raise ResolveError(f"unknown RequestType {request_type!r}")
        send(event, "SUCCESS", physical_id, data, "")
    except Exception as exc:
        LOG.exception("failed")
        reason = f"{type(exc).__name__}: {exc} (log stream {log_stream})"
        send(event, "FAILED", physical_id, {}, reason)
