"""CloudFormation custom resource: Debezium's schema-history topic on MSK Serverless, made before the
MySQL connector starts (history_topic.py says why and what the topic must be).

Properties: BootstrapServers (the cluster's IAM bootstrap string), Topic. Runs in the VPC, next to the
connector, and authenticates with MSK IAM: SASL/OAUTHBEARER with a token the AWS signer library makes
from the function's role (no network call: a SigV4-presigned kafka-cluster:Connect request).

Create and Update make the topic fit (history_topic.ensure_topic) and reply; a topic that cannot be
made fit is a FAILED reply naming what to do. Delete replies at once and keeps the topic: the history
must outlive a replaced resource, and the cluster's own deletion removes it with the stack. Every
Kafka call is bounded, so the reply always goes out within the function's timeout.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
from cfn_reply import send
from confluent_kafka.admin import AdminClient
from history_topic import ensure_topic

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)
KAFKA_TIMEOUT_S = 20.0  # per admin request; five requests at most stay well inside the 120 s timeout


class PropertyError(ValueError):
    """A property the resource needs is missing."""


def oauth_token(region: str) -> tuple[str, float]:
    """An MSK IAM token from the default credentials (the function's role), and its expiry in
    seconds since the epoch: the signer gives milliseconds, librdkafka's oauth_cb wants seconds."""
    token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(region)
    return token, expiry_ms / 1000


def admin_config(bootstrap_servers: str, region: str) -> dict[str, Any]:
    """An admin client of an MSK cluster with IAM auth (port 9098, TLS with the system's CAs)."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "OAUTHBEARER",
        "oauth_cb": lambda _config: oauth_token(region),
        # The wheel's OpenSSL does not know the system's CA path: look in the usual places.
        "ssl.ca.location": "probe",
        "allow.auto.create.topics": False,
        "socket.connection.setup.timeout.ms": 10000,
    }


def handler(event: dict[str, Any], context: Any) -> None:
    request_type = event["RequestType"]
    log_stream = getattr(context, "log_stream_name", "unknown")
    props = event.get("ResourceProperties", {})
    # On Delete (and on an Update that fails) keep the id CloudFormation already has.
    physical_id = event.get("PhysicalResourceId") or props.get("Topic") or f"schema-history-{log_stream}"
    LOG.info("%s %s", request_type, event.get("LogicalResourceId"))
    try:
        data: dict[str, str] = {}
        if request_type in ("Create", "Update"):
            topic, servers = props.get("Topic", ""), props.get("BootstrapServers", "")
            if not topic or not servers:
                raise PropertyError("properties Topic and BootstrapServers are required")
            t0 = time.monotonic()
            admin = AdminClient(admin_config(servers, os.environ["AWS_REGION"]))
            outcome = ensure_topic(admin, topic, KAFKA_TIMEOUT_S)
            LOG.info("%s (%.1f s)", outcome, time.monotonic() - t0)
            # A new name is a new resource: CloudFormation then sends Delete for the old one.
            physical_id, data = topic, {"Topic": topic, "Outcome": outcome}
        elif request_type != "Delete":
            raise PropertyError(f"unknown RequestType {request_type!r}")
        send(event, "SUCCESS", physical_id, data, "")
    except Exception as exc:
        LOG.exception("failed")
        send(event, "FAILED", physical_id, {}, f"{type(exc).__name__}: {exc} (log stream {log_stream})")
