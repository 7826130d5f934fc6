"""The job on the real broker when Kafka loses records it has not read (a topic deleted and created
again, a broker whose log was lost): it stops with an error that says what happened and what to do,
and leaves the lake as it was, instead of skipping to the new offsets.

Uses the session stack's broker only (its own topic, a namespace per test), with `--run_once` runs on
one checkpoint, as a Glue job run would restart on it: the run that reads the topic first in this
test's Spark session (a JVM of its own would double the test's cost), the one that meets the loss as
the entry script's process, whose exit code and output are what a user sees."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cdc_events import Events, customer
from cdctools import lake_reader as lake
from job_runs import local_argv, run_job_script
from stack_helpers import Stack

pytestmark = pytest.mark.stack

TOPIC = "lossdb.inventory.customers"


def produce(stack: Stack, records: list[dict]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": stack.bootstrap})
    for r in records:
        p.produce(r["topic"], key=r["key"], value=r["value"])
    assert p.flush(30) == 0


def create_topic(stack: Stack) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])[TOPIC].result(30)


def delete_topic_if_present(stack: Stack) -> None:
    from confluent_kafka.admin import AdminClient

    if TOPIC in AdminClient({"bootstrap.servers": stack.bootstrap}).list_topics(timeout=10).topics:
        delete_topic(stack)


def delete_topic(stack: Stack) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    admin.delete_topics([TOPIC])[TOPIC].result(30)
    deadline = time.monotonic() + 60  # deletion is asynchronous: wait until the broker lists it no more
    while TOPIC in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{TOPIC} still listed 60 s after its deletion"
        time.sleep(0.5)


def job_argv(stack: Stack, work: Path, warehouse: Path, namespace: str) -> list[str]:
    kafka = [
        "--source", "kafka", "--kafka_auth", "none", "--kafka_bootstrap_servers", stack.bootstrap,
        "--kafka_topic_pattern", r"lossdb\..*", "--run_once", "true",
    ]  # fmt: skip
    return local_argv(work, warehouse, namespace, *kafka)


def run_in_session(spark, argv: list[str]) -> None:
    """The job's run on `argv`, in this test's Spark session (whose catalog is the `warehouse` fixture's)."""
    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.jobs.job import run_stream

    run_stream(spark, build_settings(parse_argv(argv)))


def committed_batches(work: Path) -> list[int]:
    """Batch ids in Spark's commit log (it also keeps .crc files there)."""
    return sorted(int(p.name) for p in (work / "checkpoint" / "commits").iterdir() if p.name.isdigit())


def lake_ids(warehouse: Path, namespace: str) -> list[int]:
    location = lake.table_location(warehouse, namespace, "inventory_customers")
    con = lake.connect()
    try:
        return sorted(r["id"] for r in lake.rows(con, location))
    finally:
        con.close()


def test_a_topic_recreated_with_fewer_records_stops_the_job_with_a_data_loss_error_and_leaves_the_lake(
    stack: Stack, spark, warehouse: Path, tmp_path: Path
) -> None:
    argv = job_argv(stack, tmp_path, warehouse, "loss_recreated")
    delete_topic_if_present(stack)
    create_topic(stack)
    ev = Events(topic=TOPIC)
    for i in range(1, 7):
        ev.record("c", {"id": i}, customer(i, f"Name {i}"))
    produce(stack, ev.take())
    run_in_session(spark, argv)
    assert lake_ids(warehouse, "loss_recreated") == [1, 2, 3, 4, 5, 6]

    # The topic comes back holding 2 records: the checkpoint's offset 6 is beyond its end.
    delete_topic(stack)
    create_topic(stack)
    again = Events(topic=TOPIC)
    again.record("c", {"id": 7}, customer(7, "Seven"))
    again.record("u", {"id": 1}, customer(1, "Changed"))
    produce(stack, again.take())
    second = run_job_script(argv)

    assert second.returncode != 0
    out = second.stdout + second.stderr
    # Spark's own reason (Spark 3.5: "some data may have been missed"; Spark 4.1: "Some data may have been lost")
    assert "some data may have been lost" in out.lower(), out[-4000:]
    assert "the stream stopped: Kafka no longer holds records this checkpoint has not read" in out
    assert lake_ids(warehouse, "loss_recreated") == [1, 2, 3, 4, 5, 6]
    # Nothing of the new topic was applied: no batch ran after the first run's.
    assert committed_batches(tmp_path) == [0]


def test_records_removed_by_retention_before_the_job_read_them_stop_it_with_the_same_advice(
    stack: Stack, spark, warehouse: Path, tmp_path: Path
) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    argv = job_argv(stack, tmp_path, warehouse, "loss_retention")
    delete_topic_if_present(stack)
    create_topic(stack)
    ev = Events(topic=TOPIC)
    for i in range(1, 4):
        ev.record("c", {"id": i}, customer(i, f"Name {i}"))
    produce(stack, ev.take())
    run_in_session(spark, argv)
    for i in range(4, 8):
        ev.record("c", {"id": i}, customer(i, f"Name {i}"))
    produce(stack, ev.take())
    # What retention does to a partition: its start moves past records (offsets 3..5) the job has not read.
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    [done] = admin.delete_records([TopicPartition(TOPIC, 0, 6)]).values()
    assert done.result(30).low_watermark == 6

    again = run_job_script(argv)

    assert again.returncode != 0
    out = again.stdout + again.stderr
    assert "the stream stopped: Kafka no longer holds records this checkpoint has not read" in out, out[-4000:]
    assert lake_ids(warehouse, "loss_retention") == [1, 2, 3]
    assert committed_batches(tmp_path) == [0]
