"""The raw zone (every record archived in the `files` format) rebuilds a table identical to the
streamed one, and dead letters replay through the same job once their cause is fixed."""

from __future__ import annotations

import json

from cdc_events import Events, customer, email_became_int_schema, load
from job_runs import run_job, run_job_script

DATA = ["id", "first_name", "last_name", "email", "balance", "created_at", "loyalty_tier", "_cdc_op", "_cdc_seq"]


def test_table_rebuilt_from_the_raw_zone_equals_the_streamed_table(make_lake, spark, warehouse, tmp_path):
    raw_zone = tmp_path / "raw"
    lake = make_lake(raw_zone_path=str(raw_zone))
    ev = Events()
    for i in range(1, 21):
        ev.record("r", {"id": i}, customer(i, f"snap{i}"))
    lake.apply(ev.take())
    for i in range(1, 21, 3):
        ev.record("u", {"id": i}, customer(i, f"upd{i}"))
    ev.record("d", {"id": 2}, before=customer(2))
    ev.tombstone({"id": 2})
    ev.raw("{}", "not json")  # archived too: the raw zone keeps everything as it arrived
    lake.apply(ev.take())
    msg = load("mariadb/c_insert_after_add_column.json")
    ev.raw(json.dumps(msg["key"]), json.dumps(msg["value"]))
    ev.record("d", {"id": 7}, before=customer(7))
    lake.apply(ev.take())

    rebuilt = run_job(tmp_path / "rebuild", warehouse, "rebuilt", "--files_path", str(raw_zone))
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]

    def content(table: str) -> list[tuple]:
        spark.catalog.refreshTable(table)
        return [tuple(r) for r in spark.sql(f"SELECT {', '.join(DATA)} FROM {table} ORDER BY id").collect()]

    streamed = content(lake.table())
    assert len(streamed) == 18  # 20 snapshot rows, 2 deleted (the captured insert hits id 5)
    assert content("glue_catalog.rebuilt.inventory_customers") == streamed


def test_dead_letters_replay_after_the_cause_is_fixed(lake, tmp_path, warehouse, spark):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    # The source turned `email` into an int: incompatible, so the events are dead-lettered.
    schema = email_became_int_schema()
    ev.record("u", {"id": 1}, customer(1) | {"email": 42}, value_schema=schema)
    ev.record("c", {"id": 2}, customer(2) | {"email": 7}, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 2 and report.dead_letter_folder

    # The fix an operator chooses: keep the old text column under another name.
    spark.sql(f"ALTER TABLE {lake.table()} RENAME COLUMN email TO email_text")
    replay = run_job(tmp_path / "replay", warehouse, lake.namespace, "--files_path", report.dead_letter_folder)
    assert replay.returncode == 0, replay.stderr[-3000:]
    spark.catalog.refreshTable(lake.table())
    rows = lake.by_id()  # fails if an id is stored twice
    # The renamed column no longer exists at the source, so the applied update leaves it null.
    assert rows[1]["email"] == 42 and rows[1]["email_text"] is None
    assert rows[2]["email"] == 7


def test_the_replay_run_scripts_replay_starts_on_aws_applies_dead_letters_beside_the_streams_checkpoint(
    make_lake, tmp_path, warehouse, spark
):
    """The argument overrides replay gives the deployed job's replay run, on the streaming
    job's own arguments, with a local folder as the lake bucket: the dead letters are applied and the
    stream's checkpoint is not touched (the replay has its own)."""

    from cdcdeploy.replay import replay_arguments

    bucket = tmp_path / "lake-bucket"
    stream_checkpoint = bucket / "checkpoints" / "cdc-iceberg"
    lake = make_lake(dead_letter_path=str(bucket / "dead-letters" / "cdc-iceberg"))
    ev = Events()
    ev.record("c", {"id": 1}, customer(1))
    lake.apply(ev.take())
    schema = email_became_int_schema()
    ev.record("c", {"id": 2}, customer(2) | {"email": 7}, value_schema=schema)
    report = lake.apply(ev.take())
    assert report.dead == 1
    spark.sql(f"ALTER TABLE {lake.table()} RENAME COLUMN email TO email_text")

    # The streaming job's arguments (as its DefaultArguments name them), then the run's overrides.
    stream = {
        "--source": "kafka",
        "--kafka_bootstrap_servers": "b-1.example:9098",
        "--kafka_topic_pattern": r"salesdb\.salesdb\..*",
        "--catalog_type": "hadoop",
        "--warehouse": str(warehouse),
        "--namespace": lake.namespace,
        "--checkpoint_location": str(stream_checkpoint),
        "--dead_letter_path": str(bucket / "dead-letters" / "cdc-iceberg"),
        "--shuffle_partitions": "2",
    }
    overrides = replay_arguments(str(bucket), report.dead_letter_folder, "r1", stream)
    argv = [a for kv in (stream | overrides).items() for a in kv]
    done = run_job_script(argv)
    assert done.returncode == 0, done.stderr[-3000:]

    spark.catalog.refreshTable(lake.table())
    assert lake.by_id()[2]["email"] == 7
    assert (bucket / "checkpoints" / "replays" / "r1" / "commits").is_dir()
    assert not stream_checkpoint.exists()  # the stream's own checkpoint is left alone
