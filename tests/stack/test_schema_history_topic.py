"""Debezium's schema-history topic is made before the connector starts, by the code the stack's custom
resource runs on MSK Serverless (cloudformation/lambda/schema_history_topic/history_topic.py), here
against the session stack's real Kafka broker.

Debezium would create the topic with retention.ms=9223372036854775807, which MSK Serverless does not
document as allowed (-1 is its unlimited); made first with -1, Debezium finds it and only logs
"already exist".
"""

from __future__ import annotations

import time
import uuid
from types import ModuleType

import pytest
from cdcstack import kafka
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from stack_helpers import Stack

UNLIMITED = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
DEBEZIUM_RETENTION_MS = str(2**63 - 1)  # what Debezium 3.6's KafkaSchemaHistory asks for


@pytest.fixture(scope="module")
def history_topic() -> ModuleType:
    return kafka.history_topic_module()


@pytest.fixture
def admin(stack: Stack) -> AdminClient:
    return AdminClient({"bootstrap.servers": stack.bootstrap, "log_level": 2})


def topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(30).items()}


def make_topic(admin: AdminClient, partitions: int = 1, **config: str) -> str:
    name = f"history-test-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)])[name].result(
        30
    )
    return name


def test_stack_makes_the_schema_history_topic_with_unlimited_retention_before_debezium(
    stack: Stack, admin: AdminClient
) -> None:
    topic = "salesdb.schema-history"  # schema.history.internal.kafka.topic of the connector file
    configs = topic_configs(admin, topic)
    # Had Debezium created it, retention.ms would be 9223372036854775807.
    assert {k: configs[k] for k in UNLIMITED} == UNLIMITED
    assert len(admin.list_topics(timeout=30).topics[topic].partitions) == 1
    # Debezium found the topic (so it did not create it) and its own check of an existing topic's
    # settings, which runs in the background after the task starts, accepts retention.ms=-1.
    log = stack.state / "logs" / "connect.log"
    checked = f"Database schema history topic '{topic}' has correct settings"
    deadline = time.monotonic() + 60
    while checked not in log.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.5)
    text = log.read_text(errors="replace")
    assert checked in text
    assert f"Database schema history topic '(name={topic}," not in text  # Debezium's "created" line
    assert f"Database schema history topic '{topic}' option" not in text  # its "should be" warnings


def test_a_missing_topic_is_created_with_unlimited_retention_and_a_second_run_changes_nothing(
    admin: AdminClient, history_topic: ModuleType
) -> None:
    topic = f"history-test-{uuid.uuid4().hex[:8]}"
    assert history_topic.ensure_topic(admin, topic).startswith(f"created {topic} (1 partition")
    assert {k: topic_configs(admin, topic)[k] for k in UNLIMITED} == UNLIMITED
    assert history_topic.ensure_topic(admin, topic).startswith(f"kept {topic} (1 partition")
    assert len(admin.list_topics(timeout=30).topics[topic].partitions) == 1


@pytest.mark.parametrize(
    "retention",
    [
        {"retention.ms": DEBEZIUM_RETENTION_MS},  # as Debezium creates it
        {"retention.ms": "604800000", "retention.bytes": "1073741824"},  # a broker's finite defaults
    ],
    ids=["debeziums-long-max", "finite"],
)
def test_an_existing_topic_gets_unlimited_retention_and_keeps_its_other_settings(
    admin: AdminClient, history_topic: ModuleType, retention: dict[str, str]
) -> None:
    topic = make_topic(admin, **retention, **{"max.message.bytes": "2097152"})
    outcome = history_topic.ensure_topic(admin, topic)
    assert outcome.startswith(f"kept {topic}; set {', '.join(retention)} to -1"), outcome
    configs = topic_configs(admin, topic)
    assert {k: configs[k] for k in UNLIMITED} == UNLIMITED
    assert configs["max.message.bytes"] == "2097152"  # an incremental change: other overrides stay


@pytest.mark.parametrize(
    ("partitions", "config", "message"),
    [
        (1, {"cleanup.policy": "compact"}, "has cleanup.policy=compact"),
        (3, {}, "has 3 partitions"),
    ],
    ids=["compacted", "three-partitions"],
)
def test_a_topic_whose_form_cannot_change_is_refused_with_what_to_do(
    admin: AdminClient, history_topic: ModuleType, partitions: int, config: dict[str, str], message: str
) -> None:
    topic = make_topic(admin, partitions, **config)
    with pytest.raises(history_topic.TopicError, match=message) as err:
        history_topic.ensure_topic(admin, topic)
    assert "delete the topic if no connector has used it yet" in str(err.value)
    assert topic_configs(admin, topic)["retention.ms"] == "604800000"  # left as it was
