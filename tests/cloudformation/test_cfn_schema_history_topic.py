"""The schema-history topic custom resource (cloudformation/lambda/schema_history_topic/): its place in
the template, what its zip ships, its MSK IAM token wiring and its replies, all without a network.

What it does to a topic runs against a real Kafka broker in tests/stack/test_schema_history_topic.py.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from cdcdeploy import artifacts, build
from cdcdeploy.templates import CFN_DIR
from cfn_helpers import EXISTING_NETWORK, Replies, resolve_variant, walk
from confluent_kafka.admin import AdminClient
from processes import free_port

REGION = "eu-west-1"
SRC = CFN_DIR / "lambda" / "schema_history_topic"


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def index(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(SRC))  # history_topic, next to index.py in the zip
    return load(SRC / "index.py", "schema_history_topic_index")


def decoded(token: str) -> tuple[str, dict[str, list[str]]]:
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}/", parse_qs(parsed.query)


def event(url: str, request_type: str, **props: str) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/cdc/1",
        "RequestId": "req-1",
        "LogicalResourceId": "SchemaHistoryTopic",
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:eu-west-1:123456789012:function:f", **props},
    }


# ---------------------------------------------------------------- MSK IAM token (no network)
def test_the_iam_token_is_a_connect_request_presigned_with_the_functions_credentials(index: ModuleType) -> None:
    token, expiry = index.oauth_token(REGION)
    endpoint, query = decoded(token)
    assert endpoint == f"https://kafka.{REGION}.amazonaws.com/"
    assert query["Action"] == ["kafka-cluster:Connect"]
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    # Signed with the credentials of the environment (the function's role on Lambda), for MSK IAM.
    assert re.fullmatch(rf"testing/\d{{8}}/{REGION}/kafka-cluster/aws4_request", query["X-Amz-Credential"][0])
    assert re.fullmatch(r"[0-9a-f]{64}", query["X-Amz-Signature"][0])
    # librdkafka wants seconds; the signer gives milliseconds (a token "expiring" in 57,000 years).
    assert time.time() < expiry <= time.time() + 901


def test_the_admin_client_asks_the_token_provider_over_sasl_oauthbearer(
    index: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    issued: list[tuple[str, float]] = []
    real = index.oauth_token
    monkeypatch.setattr(index, "oauth_token", lambda region: issued.append(real(region)) or issued[-1])
    config = index.admin_config(f"127.0.0.1:{free_port()}", REGION)
    assert (config["security.protocol"], config["sasl.mechanisms"]) == ("SASL_SSL", "OAUTHBEARER")
    client = AdminClient({**config, "log_level": 0})  # nothing listens there: only the token is asked for
    deadline = time.monotonic() + 10
    while not issued and time.monotonic() < deadline:
        time.sleep(0.05)
    del client
    assert issued, "the admin client never called oauth_cb"
    assert decoded(issued[0][0])[1]["Action"] == ["kafka-cluster:Connect"]


# ---------------------------------------------------------------- replies to CloudFormation
def test_delete_replies_at_once_and_never_reaches_kafka(index: ModuleType, response_url: str) -> None:
    t0 = time.monotonic()
    # A Delete after the cluster is gone: any Kafka call would wait for its timeout.
    index.handler(
        {**event(response_url, "Delete", Topic="salesdb.schema-history", BootstrapServers="127.0.0.1:1"),
         "PhysicalResourceId": "salesdb.schema-history"},
        None,
    )  # fmt: skip
    assert time.monotonic() - t0 < 5
    (reply,) = Replies.received
    assert reply["body"]["Status"] == "SUCCESS" and reply["body"]["PhysicalResourceId"] == "salesdb.schema-history"


def test_create_against_an_unreachable_cluster_fails_within_its_timeout(
    index: ModuleType, response_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "KAFKA_TIMEOUT_S", 2.0)
    servers = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    index.handler(event(response_url, "Create", Topic="salesdb.schema-history", BootstrapServers=servers), None)
    assert time.monotonic() - t0 < 15
    (reply,) = Replies.received
    assert reply["body"]["Status"] == "FAILED"
    assert "TopicError: describing topic salesdb.schema-history failed" in reply["body"]["Reason"]


def test_create_without_its_properties_fails_naming_them(index: ModuleType, response_url: str) -> None:
    index.handler(event(response_url, "Create", Topic="salesdb.schema-history"), None)
    (reply,) = Replies.received
    assert reply["body"]["Status"] == "FAILED"
    assert "Topic and BootstrapServers are required" in reply["body"]["Reason"]


# ---------------------------------------------------------------- the zip
def test_the_zip_ships_the_handler_its_code_and_the_wheels_for_the_functions_runtime(
    built_dir: Path, template: dict[str, Any]
) -> None:
    props = template["Resources"]["SchemaHistoryTopicFunction"]["Properties"]
    assert props["Code"] == build.HISTORY_LAMBDA_ZIP
    assert props["Runtime"] == f"python{artifacts.LAMBDA_PYTHON}"
    assert props["Architectures"] == [artifacts.LAMBDA_ARCHITECTURE]
    assert artifacts.LAMBDA_PLATFORM.endswith(artifacts.LAMBDA_ARCHITECTURE)
    with zipfile.ZipFile(built_dir / build.HISTORY_LAMBDA_ZIP) as zf:
        names = set(zf.namelist())
        shipped = zf.read("history_topic.py")
    assert {"index.py", "history_topic.py", "cfn_reply.py"} <= names
    assert "requirements.txt" not in names
    abi = f"cpython-{artifacts.LAMBDA_PYTHON.replace('.', '')}-{artifacts.LAMBDA_ARCHITECTURE}-linux-gnu"
    assert f"confluent_kafka/cimpl.{abi}.so" in names  # the C extension the Lambda Python loads
    assert "aws_msk_iam_sasl_signer/MSKAuthTokenProvider.py" in names
    # The signer reads its own version from its metadata (its User-Agent): the dist-info ships too.
    assert "aws_msk_iam_sasl_signer_python-1.0.2.dist-info/METADATA" in names
    assert shipped == (SRC / "history_topic.py").read_bytes()


# What the Lambda Python runtime provides besides the standard library: boto3 and its dependencies.
LAMBDA_RUNTIME_PACKAGES = ("boto3", "botocore", "jmespath", "s3transfer", "dateutil", "urllib3", "six")


def test_the_zip_imports_and_signs_with_nothing_but_the_runtimes_boto3(built_dir: Path, tmp_path: Path) -> None:
    """The handler imported from the unpacked zip in an interpreter without site-packages, next to
    boto3 and its dependencies only (as on Lambda): it needs no package the zip lacks (the signer
    declares click, which it does not import) and finds the signer's metadata (its User-Agent). The
    zip's C extension is for Python 3.12: this uses the test environment's, of the same version."""
    code, runtime_dir = tmp_path / "code", tmp_path / "runtime"
    with zipfile.ZipFile(built_dir / build.HISTORY_LAMBDA_ZIP) as zf:
        zf.extractall(
            code, [n for n in zf.namelist() if not n.startswith(("confluent_kafka/", "confluent_kafka.libs/"))]
        )
    import confluent_kafka

    pinned = re.search(r"^confluent-kafka==(\S+)", (SRC / "requirements.txt").read_text(), re.MULTILINE)
    assert pinned and confluent_kafka.__version__ == pinned.group(1)
    here = Path(confluent_kafka.__file__).parent
    for package in (here, here.with_name("confluent_kafka.libs")):
        (code / package.name).symlink_to(package)
    runtime_dir.mkdir()
    for name in LAMBDA_RUNTIME_PACKAGES:
        module = importlib.import_module(name)
        location = Path(module.__file__)
        target = location.parent if location.name == "__init__.py" else location
        (runtime_dir / target.name).symlink_to(target)
    program = (
        "import sys, index; "
        "token, expiry = index.oauth_token('eu-west-1'); "
        "assert all(m.split('.')[0] != 'click' for m in sys.modules); print(len(token) > 100)"
    )
    # As Lambda's runtime: the function's code, then the runtime's packages; no site-packages (-S).
    env = {
        "PYTHONPATH": os.pathsep.join([str(code), str(runtime_dir)]),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "HOME": str(tmp_path),
    }
    out = subprocess.run([sys.executable, "-S", "-c", program], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_the_shipped_code_creates_the_topic_with_unlimited_retention(built_dir: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(built_dir / build.HISTORY_LAMBDA_ZIP) as zf:
        zf.extract("history_topic.py", tmp_path)
    shipped = load(tmp_path / "history_topic.py", "shipped_history_topic")
    assert shipped.CONFIGS == {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
    assert shipped.PARTITIONS == 1


# ---------------------------------------------------------------- the template
def dependencies(template: dict[str, Any], name: str) -> set[str]:
    """Every resource `name` waits for on create (and outlives on delete): DependsOn, Ref, GetAtt
    and ${...} of Sub strings, transitively."""
    resources = template["Resources"]
    seen: set[str] = set()
    todo = [name]
    while todo:
        body = resources[todo.pop()]
        direct = set(body.get("DependsOn", []) if isinstance(body.get("DependsOn"), list) else [body.get("DependsOn")])
        for _, node in walk(body.get("Properties", {})):
            if isinstance(node, dict) and "Ref" in node:
                direct.add(node["Ref"])
            elif isinstance(node, dict) and "Fn::GetAtt" in node:
                direct.add(node["Fn::GetAtt"][0])
            elif isinstance(node, dict) and "Fn::Sub" in node:
                text = node["Fn::Sub"] if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"][0]
                direct |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text)}
        for dep in direct & set(resources):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_the_mysql_connector_starts_only_once_its_history_topic_is_made(
    template: dict[str, Any], pg_template: dict[str, Any]
) -> None:
    resources = template["Resources"]
    assert "SchemaHistoryTopic" in resources["Connector"]["DependsOn"]
    topic = resources["SchemaHistoryTopic"]["Properties"]["Topic"]
    # The topic it makes is the connector's schema.history.internal.kafka.topic (from the one file).
    assert (
        topic == resources["Connector"]["Properties"]["ConnectorConfiguration"]["schema.history.internal.kafka.topic"]
    )
    assert resources["SchemaHistoryTopic"]["Properties"]["BootstrapServers"] == {
        "Fn::GetAtt": ["BootstrapBrokers", "BootstrapBrokerStringSaslIam"]
    }
    # The PostgreSQL connector keeps no schema history: nothing of it in that variant.
    assert not [name for name in pg_template["Resources"] if name.startswith("SchemaHistoryTopic")]


@pytest.mark.parametrize("mode", ["demo", "existing-network"])
def test_the_reply_path_is_created_before_and_deleted_after_the_topic_resource(
    raw_template: dict[str, Any], mode: str
) -> None:
    values = EXISTING_NETWORK if mode == "existing-network" else {}
    template = resolve_variant(raw_template, **values)
    deps = dependencies(template, "SchemaHistoryTopic")
    # Kafka from the function's group to MSK's, its role, its network interface's group.
    assert {"SchemaHistoryTopicToMsk", "MskFromSchemaHistoryTopic", "SchemaHistoryTopicRole"} <= deps
    assert {"SchemaHistoryTopicFunction", "SchemaHistoryTopicSecurityGroup", "MskCluster"} <= deps
    function = template["Resources"]["SchemaHistoryTopicFunction"]["Properties"]
    glue_subnet = template["Resources"]["GlueNetworkConnection"]["Properties"]["ConnectionInput"][
        "PhysicalConnectionRequirements"
    ]["SubnetId"]
    (subnet,) = function["VpcConfig"]["SubnetIds"]
    if mode == "demo":
        # The reply goes to S3 through the subnet's route table: its S3 gateway endpoint, its NAT route.
        assert {"PrivateSubnetARouteTable", "PrivateDefaultRoute", "S3GatewayEndpoint", "NatGateway"} <= deps
        assert subnet == glue_subnet == {"Ref": "PrivateSubnetA"}
    else:
        # The Glue job's subnet, the one whose route to S3 deploy's preflight checks.
        assert glue_subnet == {"Fn::Select": [0, {"Ref": "ExistingSubnetIds"}]}
        assert subnet == {"Fn::Select": [0, {"Fn::Split": [",", {"Fn::Join": [",", {"Ref": "ExistingSubnetIds"}]}]}]}


def test_the_function_may_only_create_describe_and_set_the_retention_of_its_one_topic(
    template: dict[str, Any],
) -> None:
    (policy,) = template["Resources"]["SchemaHistoryTopicRole"]["Properties"]["Policies"]
    statements = policy["PolicyDocument"]["Statement"]
    actions = {s["Sid"]: s["Action"] if isinstance(s["Action"], list) else [s["Action"]] for s in statements}
    kafka = {s["Sid"]: s for s in statements if any(a.startswith("kafka-cluster:") for a in actions[s["Sid"]])}
    assert kafka["Cluster"]["Action"] == "kafka-cluster:Connect"
    assert kafka["Cluster"]["Resource"] == {"Fn::GetAtt": ["MskCluster", "Arn"]}
    assert sorted(kafka["Topic"]["Action"]) == [
        "kafka-cluster:AlterTopicDynamicConfiguration",
        "kafka-cluster:CreateTopic",
        "kafka-cluster:DescribeTopic",
        "kafka-cluster:DescribeTopicDynamicConfiguration",
    ]
    arn = kafka["Topic"]["Resource"]["Fn::Sub"][0]
    assert arn.endswith(":topic/${Name}/${Uuid}/${TopicPrefix}.schema-history")
    assert set(kafka) == {"Cluster", "Topic"}
