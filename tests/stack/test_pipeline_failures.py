"""The whole local pipeline for real, through failures: the job killed before and after its Iceberg
commit, the broker, Kafka Connect and MariaDB restarted, a schema change while the job is down, a
burst far above the batch cap, poison records, and no secret in logs or process lists; each checked by
reconciling source and lake. It has its own stack and job (tests/stack/conftest.py's `job`), so it runs
beside test_pipeline_end_to_end.py in another worker. Its stack runs the wire format avro (the
connector's Avro converter against the local AWS Glue Schema Registry, the job decoding it): MariaDB's
end-to-end tests in Avro, as test_pipeline_end_to_end.py's are in JSON."""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest
from pipeline_job import (
    BATCH_CAP,
    batch_ids,
    batch_size,
    checkpoint,
    end_offsets,
    ingest_times,
    job_log_shows,
    job_log_since_start,
    job_running,
    settled_batch,
    start_job,
    table_version,
    wait_committed,
)
from stack_helpers import Stack, reconciled, run_script
from transfer_load import TransferLoad, transfers_through_a_crash, whole_throughout

pytestmark = [pytest.mark.stack, pytest.mark.usefixtures("job_is_running")]

WIRE_FORMAT = "avro"  # read by the `job` fixture
TRANSACTIONS = "keep"  # read by the `job` fixture: whole source transactions and a read point
BURST = 10_000  # changes: four batch caps (the throughput at 100,000 is the benchmark's, docs/BENCHMARKS.md)


def test_broker_restart_while_the_job_runs_keeps_topics_and_offsets_and_reconciles(job: Stack) -> None:
    # The broker keeps its log on disk: after a restart the topics, their records and offsets are
    # the same, Connect carries on from its committed source offsets, and the job from its
    # checkpoint. The job must not die while the broker is away (Spark's Kafka source retries).
    job.sql("UPDATE customer SET city = 'Before the broker restart' WHERE cust_id = 7")
    reconciled(job)
    ckpt = checkpoint(job)
    before = end_offsets(ckpt / "offsets", settled_batch(job))
    job.cli("down", "kafka")
    job.sql("UPDATE customer SET city = 'While the broker was down' WHERE cust_id = 8")
    job.insert_customer(400001)
    assert job_running(job)
    res = job.cli("up")
    assert "formatting" not in res.stdout and "connector: registered" not in res.stdout
    job.sql("UPDATE customer SET city = 'After the broker restart' WHERE cust_id = 9")
    job.insert_customer(400002)
    reconciled(job, wait=300)
    assert job_running(job)
    after = end_offsets(ckpt / "offsets", max(batch_ids(ckpt / "offsets")))
    # No topic was recreated: every partition's offset went on from where it was.
    assert all(after[tp] >= end for tp, end in before.items()), (before, after)
    assert "failOnDataLoss" not in job_log_since_start(job)


def test_a_burst_of_four_times_the_batch_cap_is_caught_up_in_capped_batches_and_applied_exactly(
    job: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reconciled(job)
    commits_before = batch_ids(checkpoint(job) / "commits")
    burst = tmp_path / "burst.sql"
    burst.write_text(
        # As fast as MariaDB makes them (its sequence engine): 5,000 inserts, 4,000 updates and
        # 1,000 deletes in three statements, i.e. three transactions of 1,000-5,000 row events.
        "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, acct_balance, created_at, updated_at)\n"
        "  SELECT 100000 + seq, CONCAT('Burst ', seq), CONCAT('b', seq, '@example.com'), 'BUILDING', 'GB',\n"
        "         seq / 100, NOW(), NOW(6) FROM seq_1_to_5000;\n"
        "UPDATE customer SET loyalty_points = loyalty_points + 1, acct_balance = acct_balance + 0.01\n"
        "  WHERE cust_id BETWEEN 100001 AND 104000;\n"
        "DELETE FROM customer WHERE cust_id BETWEEN 104001 AND 105000;\n"
    )
    t0 = time.monotonic()
    job.cli("sql", str(burst))
    produced = time.monotonic() - t0
    reconciled(job, wait=900)
    caught_up = time.monotonic() - t0
    ckpt = checkpoint(job)
    deadline = time.monotonic() + 60  # the lake can match a moment before the offsets are committed
    while batch_ids(ckpt / "offsets") - batch_ids(ckpt / "commits") and time.monotonic() < deadline:
        time.sleep(0.2)
    batches = batch_ids(ckpt / "commits") - commits_before
    # Memory stays bounded because no batch holds more than --max_offsets_per_trigger records.
    sizes = [batch_size(ckpt / "offsets", b) for b in sorted(batches)]
    assert sum(sizes) >= BURST and len(sizes) >= BURST // BATCH_CAP and max(sizes) <= BATCH_CAP, sizes
    with capsys.disabled():
        print(
            f"\n[burst] {BURST:,} changes: source wrote them in {produced:.1f}s; lake reconciled "
            f"{caught_up:.1f}s after the burst began ({BURST / caught_up:,.0f} changes/s end to end, "
            f"{len(batches)} batches of {min(sizes):,}-{max(sizes):,} records, cap {BATCH_CAP:,})"
        )


def crash_the_job_at(job: Stack, point: str, load: Path) -> tuple[int, str]:
    """Restart the job with the test-only fault hook armed (glue_scripts/cdclake/local/faults.py), run
    `load` at the source, wait for the job to SIGKILL itself at `point` of the load's first batch;
    returns that batch's id and its offset log entry (planned, not committed)."""
    run_script(job, "local-job", "stop")
    start_job(job, env={"CDC_TEST_CRASH_AT": point})
    job.cli("sql", str(load))
    deadline = time.monotonic() + 300
    while job_running(job):
        assert time.monotonic() < deadline, "the job never reached " + point
        time.sleep(0.2)
    killed = [line for line in job_log_since_start(job).splitlines() if f"SIGKILL at {point} of batch" in line]
    assert killed, job_log_since_start(job)[-3000:]
    batch = int(killed[-1].rsplit(" ", 1)[-1])
    ckpt = checkpoint(job)
    assert batch in batch_ids(ckpt / "offsets") and batch not in batch_ids(ckpt / "commits")
    return batch, (ckpt / "offsets" / str(batch)).read_text()


def restart_reruns_the_planned_batch(job: Stack, batch: int, planned: str) -> None:
    """Start the job again and wait until the killed batch is committed: Spark re-ran it from its
    logged offsets (the log entry was not planned anew)."""
    start_job(job)
    wait_committed(job, batch)
    assert (checkpoint(job) / "offsets" / str(batch)).read_text() == planned
    job_log_shows(job, f"batch {batch}: ")


def test_kill_9_before_the_iceberg_commit_then_restart_loses_and_duplicates_nothing(job: Stack, tmp_path: Path) -> None:
    reconciled(job)
    version = table_version(job, "salesdb_customer")
    load = tmp_path / "load.sql"
    load.write_text(
        "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, created_at, updated_at)\n"
        "  SELECT 300000 + seq, 'Crash', 'c@example.com', 'HOUSEHOLD', 'FR', NOW(), NOW(6) FROM seq_1_to_1000;\n"
        "UPDATE customer SET loyalty_points = loyalty_points + 10 WHERE cust_id BETWEEN 300001 AND 300500;\n"
    )
    batch, planned = crash_the_job_at(job, "before-iceberg-commit", load)
    assert table_version(job, "salesdb_customer") == version, "nothing of the batch may be in the lake yet"
    restart_reruns_the_planned_batch(job, batch, planned)
    reconciled(job)


def test_kill_9_after_the_iceberg_commit_before_the_offset_commit_then_restart_applies_it_once(
    job: Stack, tmp_path: Path
) -> None:
    # Rows of its own for the load to update and delete (the tests of this module run in any order).
    job.sql(
        "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, created_at, updated_at)\n"
        "  SELECT 310000 + seq, 'Before', 'b@example.com', 'HOUSEHOLD', 'FR', NOW(), NOW(6) FROM seq_1_to_800"
    )
    reconciled(job)
    version = table_version(job, "salesdb_customer")
    load = tmp_path / "load.sql"
    load.write_text(
        "UPDATE customer SET loyalty_points = loyalty_points + 5, city = 'Re-run' WHERE cust_id BETWEEN 310001 AND 310600;\n"
        "DELETE FROM customer WHERE cust_id BETWEEN 310601 AND 310800;\n"
        "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, created_at, updated_at)\n"
        "  SELECT 313000 + seq, 'After', 'a@example.com', 'MACHINERY', 'DE', NOW(), NOW(6) FROM seq_1_to_200;\n"
    )
    batch, planned = crash_the_job_at(job, "after-iceberg-commit", load)
    assert table_version(job, "salesdb_customer") > version, "the batch's MERGE had committed before the kill"
    # The rows the killed batch wrote, with the time they were written.
    written = ingest_times(job, "salesdb_customer", "WHERE cust_id BETWEEN 310001 AND 310600 AND city = 'Re-run'")
    assert written, "the killed batch committed rows of the load"
    restart_reruns_the_planned_batch(job, batch, planned)
    reconciled(job)  # exact multisets: no row is stored twice
    # Applied once: the re-run of the batch rewrote none of the rows its first run committed.
    after = ingest_times(job, "salesdb_customer", f"WHERE cust_id IN ({', '.join(map(str, written))})")
    assert after == written


def test_a_reader_of_the_read_point_never_sees_half_a_transfer_under_load_and_a_kill_9_between_two_tables(
    job: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1,220 transfers, each one source transaction over two tables, in batches of at most BATCH_CAP
    # records; a reader polls the read point all along (tests/stack/transfer_load.py).
    t0 = time.monotonic()
    reader, batch = transfers_through_a_crash(
        job, TransferLoad(pg=False, prefix="salesdb"), tmp_path, lambda env, extra: start_job(job, env, extra)
    )
    report = whole_throughout(reader, batch, "read point", time.monotonic() - t0)
    with capsys.disabled():
        print(report)


def test_kafka_connect_restart_then_changes_still_reconcile(job: Stack) -> None:
    job.cli("down", "connect")
    job.sql("UPDATE customer SET city = 'While Connect was down' WHERE cust_id = 1")
    job.cli("up")
    job.sql("UPDATE customer SET loyalty_points = loyalty_points + 1 WHERE cust_id = 2")
    reconciled(job)


def test_mariadb_restart_then_changes_still_reconcile(job: Stack) -> None:
    job.cli("down", "mariadb")
    job.cli("up")
    job.sql("UPDATE customer SET city = 'After MariaDB restart' WHERE cust_id = 4")
    job.sql("DELETE FROM customer WHERE cust_id = 5")
    reconciled(job)


def test_schema_change_while_the_job_is_down_is_applied_on_restart(job: Stack) -> None:
    run_script(job, "local-job", "stop")
    job.sql("ALTER TABLE customer ADD COLUMN vip TINYINT NOT NULL DEFAULT 0")
    # Defaults the old rows get without a binlog event: a quoted quote, a float, 20 digits.
    job.sql(
        "ALTER TABLE customer ADD COLUMN remark VARCHAR(20) DEFAULT 'it''s new', "
        "ADD COLUMN ratio DOUBLE DEFAULT 0.1, ADD COLUMN credit DECIMAL(20,2) DEFAULT 123456789012345678.91"
    )
    job.sql("UPDATE customer SET vip = 1 WHERE cust_id = 6")
    start_job(job)
    reconciled(job)


def test_poison_records_in_the_stream_are_dead_lettered_and_the_rest_applies(job: Stack) -> None:
    from confluent_kafka import Producer

    dead_dir = job.state / "lake" / "dead-letters"
    before = set(dead_dir.glob("batch=*")) if dead_dir.exists() else set()
    job.sql("UPDATE customer SET city = 'Before poison' WHERE cust_id = 1")
    p = Producer({"bootstrap.servers": job.bootstrap})
    poison = [(b'{"cust_id": 1}', b"\x00\x01 not json"), (b"not a key", b'{"payload": {"op": "c"}}')]
    for key, value in poison:
        p.produce("salesdb.salesdb.customer", key=key, value=value)
    assert p.flush(10) == 0
    job.sql("UPDATE customer SET city = 'After poison' WHERE cust_id = 2")
    reconciled(job)
    deadline = time.monotonic() + 60
    letters: list[dict] = []
    while time.monotonic() < deadline and len(letters) < len(poison):
        folders = set(dead_dir.glob("batch=*")) - before
        letters = [json.loads(x) for d in folders for f in d.glob("*.json") for x in f.read_text().splitlines()]
        time.sleep(0.5)
    assert sorted(d["reason"] for d in letters) == ["payload has no Debezium `op` field", "value is not a JSON object"]
    assert all(d["topic"] == "salesdb.salesdb.customer" and d["offset"] >= 0 for d in letters)


def _tree(pid: int) -> set[int]:
    """A process and all its descendants."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        out.add(p)
        children = Path(f"/proc/{p}/task/{p}/children")
        if children.exists():
            todo += [int(c) for c in children.read_text().split()]
    return out


def test_no_secret_in_logs_or_process_lists_and_services_listen_on_loopback_only(job: Stack) -> None:
    secret_file = job.state / "secrets" / "debezium.properties"
    password = next(
        line.split("=", 1)[1].strip() for line in secret_file.read_text().splitlines() if "password" in line
    )
    assert len(password) >= 16
    oct_mode = secret_file.stat().st_mode & 0o777
    assert oct_mode == 0o600, oct(oct_mode)
    for log in (job.state / "logs").glob("*.log"):
        assert password not in log.read_text(errors="replace"), f"password in {log}"
    pids = set()
    for rec in (job.state / "run").glob("*.json"):
        pids |= _tree(json.loads(rec.read_text())["pid"])
    assert len(pids) >= 5  # MariaDB, the broker, Connect, the job and its JVM
    for pid in pids:
        with suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
            assert password not in cmdline and password not in environ, f"password visible in process {pid}"
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    ours = [line for line in listening if any(f"pid={p}," in line for p in pids)]
    assert ours, "no listening sockets found for the stack's processes"
    exposed = [line for line in ours if not line.split()[3].startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:"))]
    assert exposed == [], f"listening beyond loopback: {exposed}"
