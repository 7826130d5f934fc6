"""Debezium's schema-history topic, created before the connector starts, in a form MSK Serverless accepts.

Debezium's KafkaSchemaHistory creates `schema.history.internal.kafka.topic` itself with
retention.ms = Long.MAX_VALUE (a constant); MSK Serverless documents -1 for unlimited retention and
refuses topic configs outside its allowed values. When the topic already exists Debezium only logs
"already exist" and accepts retention.ms=-1, so creating it first takes Debezium's creation out of
the path. The custom resource of the stack (index.py, MSK IAM) and the local stack (scripts/cdcstack,
PLAINTEXT) both call ensure_topic, so the local tests run the code that runs on AWS.

The topic the history needs: one partition (Debezium reads it back in order), cleanup.policy=delete
(a compacted topic would drop its key-less records), nothing ever deleted (retention -1): losing a
line of it makes the connector unable to restart.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

PARTITIONS = 1
CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
# MSK Serverless lets retention.* change on an existing topic; cleanup.policy only at creation.
ALTERABLE = ("retention.ms", "retention.bytes")
TIMEOUT_S = 30.0


class TopicError(RuntimeError):
    """The topic cannot serve as the schema history; the message says why and what to do."""


def _error(exc: BaseException) -> KafkaError | None:
    arg = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return arg if isinstance(arg, KafkaError) else None


def partitions(admin: AdminClient, topic: str, timeout: float = TIMEOUT_S) -> int | None:
    """The topic's partition count, None when it does not exist. DescribeTopics, not a metadata
    request: asking a broker for a named topic's metadata may auto-create it with default configs."""
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    try:
        return len(future.result().partitions)
    except KafkaException as exc:
        err = _error(exc)
        if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise TopicError(f"describing topic {topic} failed: {exc}") from exc


def create(admin: AdminClient, topic: str, timeout: float = TIMEOUT_S) -> bool:
    """Creates the topic with CONFIGS; False when another client created it first."""
    # replication_factor -1: the cluster's default (MSK Serverless sets it; one broker locally).
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=-1, config=dict(CONFIGS))
    try:
        admin.create_topics([new], request_timeout=timeout)[topic].result()
    except KafkaException as exc:
        err = _error(exc)
        if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise TopicError(
            f"creating topic {topic} ({PARTITIONS} partition, {CONFIGS}) failed: {exc}. Debezium cannot create "
            "it either (it asks for retention.ms=9223372036854775807); create it with these settings and retry"
        ) from exc
    return True


def _created_partitions(admin: AdminClient, topic: str, timeout: float) -> int | None:
    """The partition count of a topic just created: a broker may describe it a moment after
    CreateTopics has answered (its metadata follows the controller's)."""
    deadline = time.monotonic() + timeout
    while (count := partitions(admin, topic, timeout)) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return count


def configs(admin: AdminClient, topic: str, timeout: float = TIMEOUT_S) -> dict[str, str | None]:
    """The values of CONFIGS' names on the topic."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    try:
        entries: dict[str, Any] = admin.describe_configs([resource], request_timeout=timeout)[resource].result()
    except KafkaException as exc:
        raise TopicError(f"reading the configs of topic {topic} failed: {exc}") from exc
    return {name: entries[name].value if name in entries else None for name in CONFIGS}


def set_unlimited(admin: AdminClient, topic: str, names: list[str], timeout: float = TIMEOUT_S) -> None:
    """IncrementalAlterConfigs: only the named configs change, the topic's other overrides stay."""
    entries = [ConfigEntry(n, CONFIGS[n], incremental_operation=AlterConfigOpType.SET) for n in names]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    try:
        admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result()
    except KafkaException as exc:
        raise TopicError(f"setting {', '.join(names)} of topic {topic} to -1 failed: {exc}") from exc


def ensure_topic(admin: AdminClient, topic: str, timeout: float = TIMEOUT_S) -> str:
    """Makes `topic` a schema-history topic Debezium will use as it is; returns what was done.

    Missing: created with CONFIGS. Present with a finite (or Long.MAX_VALUE) retention: set to -1.
    Present with several partitions or another cleanup.policy: TopicError (neither can change)."""
    count = partitions(admin, topic, timeout)
    created = count is None and create(admin, topic, timeout)
    if count is None:
        count = _created_partitions(admin, topic, timeout)
    if count != PARTITIONS:
        raise TopicError(
            f"topic {topic} has {count} partitions; Debezium's schema history needs exactly {PARTITIONS}. "
            "Partitions cannot be removed: delete the topic if no connector has used it yet, or give the "
            "connector another topic (TopicPrefix)"
        )
    current = configs(admin, topic, timeout)
    if current["cleanup.policy"] != CONFIGS["cleanup.policy"]:
        raise TopicError(
            f"topic {topic} has cleanup.policy={current['cleanup.policy']}; the schema history needs delete "
            "(MSK Serverless sets it only when a topic is created): delete the topic if no connector has "
            "used it yet, or give the connector another topic (TopicPrefix)"
        )
    wrong = [name for name in ALTERABLE if current[name] != CONFIGS[name]]
    if wrong:
        set_unlimited(admin, topic, wrong, timeout)
        was = ", ".join(f"{name}={current[name]}" for name in wrong)
        return f"{'created' if created else 'kept'} {topic}; set {', '.join(wrong)} to -1 (was {was})"
    return f"{'created' if created else 'kept'} {topic} (1 partition, {CONFIGS})"
