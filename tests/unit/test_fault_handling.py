"""Fault handling decided without a cluster: Spark's Kafka source options on data loss, the
client reader's checkpoint across a recreated topic, and the test-only crash hook's switch."""

from __future__ import annotations

import pytest
from cdclake import faults
from cdclake.kafka_client import ClientCheckpoint
from cdclake.settings import build_settings
from cdclake.sources import kafka_options

MSK = {
    "kafka_bootstrap_servers": "b-1:9098",
    "kafka_topic_pattern": r"salesdb\..*",
    "warehouse": "/w",
    "checkpoint_location": "/c",
    "dead_letter_path": "/d",
}


def test_spark_kafka_source_fails_on_data_loss_instead_of_skipping_offsets():
    # Records removed by retention or a recreated topic must stop the query, not be skipped.
    opts = kafka_options(build_settings(MSK))
    assert opts["failOnDataLoss"] == "true"
    assert opts["startingOffsets"] == "earliest"  # only for a query without a checkpoint
    assert opts["maxOffsetsPerTrigger"] == "100000"  # the memory bound of a batch


def test_client_checkpoint_forgets_offsets_of_an_older_incarnation_of_a_topic(tmp_path):
    ckpt = ClientCheckpoint(str(tmp_path))
    ckpt.plan(0, {"t": {"0": [0, 499]}, "u": {"0": [0, 9]}}, {"t": "id-1", "u": "id-u"})
    ckpt.commit(0)
    ckpt.plan(1, {"t": {"0": [0, 29]}}, {"t": "id-2"})  # the topic was recreated: offsets restart
    ckpt.commit(1)
    positions, ids = ckpt.positions()
    assert positions == {("t", 0): 30, ("u", 0): 10}
    assert ids == {"t": "id-2", "u": "id-u"}


def test_client_checkpoint_reads_plans_written_before_topic_ids_were_recorded(tmp_path):
    ckpt = ClientCheckpoint(str(tmp_path))
    (ckpt.root / "offsets" / "0").write_text('{"t": {"0": [0, 99]}}')
    (ckpt.root / "commits" / "0").write_text("{}")
    (ckpt.root / "offsets" / "1").write_text('{"t": {"0": [100, 149]}}')
    assert ckpt.positions() == ({("t", 0): 100}, {})
    assert ckpt.pending() == (1, {"t": {"0": [100, 149]}}, {})


def test_the_crash_hook_is_off_unless_its_variable_names_a_point():
    assert faults.from_env({}) is None
    assert faults.from_env({faults.ENV: "after-iceberg-commit"}) == faults.CrashPoint("after-iceberg-commit")
    with pytest.raises(ValueError, match="before-iceberg-commit, after-iceberg-commit"):
        faults.from_env({faults.ENV: "after-commit"})
