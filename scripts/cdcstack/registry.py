"""The stack's schema registry for the wire format `avro`: moto's AWS Glue API on 127.0.0.1
(registry_server.py), which Kafka Connect's Glue Schema Registry converter registers the schemas
with and the local job reads them from, as MSK Connect and the Glue job do with AWS Glue."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from cdcstack.plumbing import REGISTRY as COMPONENT
from cdcstack.plumbing import StackConfig, StackError, launch, say, wait_until
from cdcstack.registry_server import REGION

REGISTRY_NAME = "cdc-lake"  # the registry the connector's schemas go to
# moto checks no signature: any key pair will do, and none of the user's own reaches it.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}


def endpoint(s: StackConfig) -> str:
    return f"http://127.0.0.1:{s.ports[COMPONENT]}"


def client_env(s: StackConfig) -> dict[str, str]:
    """What a process needs to reach this registry with an AWS SDK: the credentials, the region, and
    (boto3's) Glue endpoint. The Java converter takes its endpoint from the connector settings."""
    return {**CREDENTIALS, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL_GLUE": endpoint(s)}


def health(port: int) -> tuple[bool, str]:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/data.json", timeout=2).close()
    except (urllib.error.URLError, OSError) as exc:
        return False, f"no answer on 127.0.0.1:{port}: {exc}"
    return True, "Glue API answers"


def start(s: StackConfig, port: int) -> None:
    state = s.path("registry", "registries.pickle")
    state.parent.mkdir(parents=True, exist_ok=True)
    server = Path(__file__).with_name("registry_server.py")
    say(f"registry: starting the Glue Schema Registry stand-in (moto) on 127.0.0.1:{port}")
    proc = launch(s, COMPONENT, [sys.executable, str(server), str(port), str(state)], port)
    secs = wait_until(s, COMPONENT, lambda: health(port), proc, "a Glue API that answers")
    say(f"registry: ready in {secs:.1f}s (pid {proc.pid})")


def ensure_registry(s: StackConfig) -> str:
    """Creates the connector's registry when it does not exist (the stack creates it on AWS)."""
    import boto3

    glue = boto3.client("glue", endpoint_url=endpoint(s), region_name=REGION, aws_access_key_id="local",
                        aws_secret_access_key="local")  # fmt: skip
    try:
        glue.create_registry(RegistryName=REGISTRY_NAME, Description="Debezium's Avro schemas (local stack)")
    except glue.exceptions.AlreadyExistsException:
        return f"registry {REGISTRY_NAME} exists"
    except Exception as exc:  # any other failure stops `up` with its message
        raise StackError(f"creating registry {REGISTRY_NAME} at {endpoint(s)} failed: {exc}") from None
    return f"registry {REGISTRY_NAME} created"


def converter_values(s: StackConfig) -> dict[str, str]:
    """The placeholders of the avro wire-format settings (cloudformation/connector/wire-format-avro.json)."""
    return {"AWS_REGION": REGION, "REGISTRY_NAME": REGISTRY_NAME}


def local_converter_settings(s: StackConfig) -> dict[str, str]:
    """What only the local stack adds to the converters: moto's endpoint (on AWS: Glue's own)."""
    return {f"{side}.converter.endpoint": endpoint(s) for side in ("key", "value")}
