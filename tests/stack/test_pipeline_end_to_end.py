"""The whole local pipeline for real: MariaDB -> Debezium on Kafka Connect -> Apache Kafka -> the Glue
job script (streaming, Spark's Kafka source) -> Iceberg, checked by reconciling source and lake (row
count + per-row checksum over all columns) after every step and every failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
import stack_types as st
import type_matrix as tm
from processes import free_port
from stack_helpers import CUSTOMER_TOPIC, SQL, Stack, apply_sql, reconciled, run_script, short_dir

pytestmark = pytest.mark.stack

BATCH_CAP = 20_000  # --max_offsets_per_trigger of the job under test


def reconciled_table(stack: Stack, table: str, rows: int, wait: float = 180) -> None:
    out = reconciled(stack, "--table", table, wait=wait)
    assert re.search(rf"source +{rows} +lake +{rows} +OK", out), out


def start_job(stack: Stack, env: dict[str, str] | None = None) -> None:
    # Batches well below the burst's size, so that it spans several of them.
    res = run_script(stack, "local-job", "start", "--", "--max_offsets_per_trigger", str(BATCH_CAP), env=env)
    assert res.returncode == 0, res.stdout + res.stderr


def job_log_since_start(stack: Stack) -> str:
    return (
        (stack.state / "logs" / "job.log").read_text(errors="replace").rsplit("scripts/local-stack starts job", 1)[-1]
    )


def job_log_shows(stack: Stack, pattern: str, timeout: float = 60) -> str:
    """The job's log since its start, once `pattern` is in it: the batch line is written after the commit
    that reconcile may already have seen."""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, log := job_log_since_start(stack)):
        assert time.monotonic() < deadline, f"{pattern!r} not in the job log within {timeout:.0f}s:\n{log[-3000:]}"
        time.sleep(0.5)
    return log


def job_running(stack: Stack) -> bool:
    return run_script(stack, "local-job", "status").returncode == 0


def wait_committed(stack: Stack, batch: int, timeout: float = 300) -> None:
    commits = checkpoint(stack) / "commits"
    deadline = time.monotonic() + timeout
    while batch not in batch_ids(commits):
        assert time.monotonic() < deadline, f"batch {batch} was not committed within {timeout:.0f}s"
        assert job_running(stack), job_log_since_start(stack)[-3000:]
        time.sleep(0.5)


def table_version(stack: Stack, table: str) -> int:
    """The Iceberg table's current metadata version (hadoop catalog): it moves on every commit."""
    hint = stack.state / "lake" / "warehouse" / "cdc" / table / "metadata" / "version-hint.text"
    return int(hint.read_text().strip())


def ingest_times(stack: Stack, table: str, where: str) -> dict[int, Any]:
    """`_cdc_ingested_at` of the lake rows matching `where`, by cust_id (read by DuckDB, not Spark)."""
    import lake

    con = lake.connect()
    try:
        location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", table)
        return {r["cust_id"]: r["_cdc_ingested_at"] for r in lake.rows(con, location, where)}
    finally:
        con.close()


def checkpoint(stack: Stack) -> Path:
    """Spark's streaming checkpoint: offsets/<batch> is written before a batch runs, commits/<batch> after."""
    return stack.state / "lake" / "checkpoints" / "cdc-job"


def end_offsets(offsets: Path, batch: int) -> dict[tuple[str, str], int]:
    """The Kafka source's end offsets of a batch in Spark's offset log: a version line, the batch's
    metadata, then one JSON line per source ({topic: {partition: offset}})."""
    source = json.loads((offsets / str(batch)).read_text().splitlines()[2])
    return {(topic, part): end for topic, parts in source.items() for part, end in parts.items()}


def batch_size(offsets: Path, batch: int) -> int:
    """Records in a batch: its end offsets minus the previous batch's (a new topic starts at 0)."""
    end = end_offsets(offsets, batch)
    start = end_offsets(offsets, batch - 1) if batch > 0 else {}
    return sum(e - start.get(tp, 0) for tp, e in end.items())


def batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.glob("*") if p.name.isdigit()} if folder.exists() else set()


@pytest.fixture(scope="module")
def job() -> Iterator[Stack]:
    """A stack of its own (these tests change the schema and data a lot) plus the job on it."""
    state = short_dir("cdc-pipeline-")
    ports = {"mariadb": free_port(), "kafka": free_port(), "connect": free_port()}
    env = {
        **os.environ,
        "CDC_STACK_DIR": str(state),
        "CDC_STACK_MARIADB_PORT": str(ports["mariadb"]),
        "CDC_STACK_KAFKA_PORT": str(ports["kafka"]),
        "CDC_STACK_KAFKA_CONTROLLER_PORT": str(free_port()),
        "CDC_STACK_CONNECT_PORT": str(ports["connect"]),
    }
    stack = Stack(env, state, ports)
    try:
        stack.cli("up", "--init-sql", str(SQL / "01_create_customer.sql"))
        start_job(stack)
        yield stack
    finally:
        run_script(stack, "local-job", "stop")
        stack.cli("down", check=False)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(autouse=True)
def job_is_running(job: Stack) -> None:
    """Each test starts with the job running, whatever the test before it left (a failed crash test
    leaves it stopped): one failure does not cascade into the tests after it."""
    if not job_running(job):
        start_job(job)


def test_snapshot_reaches_the_lake_and_reconciles(job: Stack) -> None:
    events = job.events(CUSTOMER_TOPIC, lambda ev: len({e.key["cust_id"] for e in ev if e.op == "r"}) >= 30)
    assert len({e.key["cust_id"] for e in events if e.op == "r"}) == 30  # the init script's rows
    # Other tests of this module may have changed customer already (any order): the lake equals the source.
    out = reconciled(job)
    assert re.search(r"customer +source +(\d+) +lake +\1 +OK", out), out


def test_inserts_updates_deletes_reach_the_lake(job: Stack) -> None:
    apply_sql(job, SQL / "02_changes.sql")
    assert job.sql("SELECT COUNT(*) FROM customer WHERE cust_id IN (3, 32)").split()[-1] == "0"


def test_add_column_reaches_the_lake_with_the_default_for_existing_rows(job: Stack) -> None:
    out = apply_sql(job, SQL / "03_add_status_column.sql")
    assert "OK" in out  # the per-row checksum includes the new `status` column ('Green' for old rows)


def test_a_second_table_created_while_streaming_is_captured(job: Stack) -> None:
    out = apply_sql(job, SQL / "04_second_table.sql")
    assert "orders" in out and "OK" in out


def test_truncate_reaches_the_lake_with_inserts_in_the_same_and_in_a_later_batch(job: Stack) -> None:
    job.sql(
        "CREATE TABLE trunc_t (id INT PRIMARY KEY, note VARCHAR(20)); INSERT INTO trunc_t VALUES (1,'a'),(2,'b'),(3,'c')"
    )
    reconciled_table(job, "trunc_t", rows=3)
    # Same batch: the job is stopped until the truncate and the insert after it are both in Kafka.
    run_script(job, "local-job", "stop")
    job.sql("TRUNCATE TABLE trunc_t; INSERT INTO trunc_t VALUES (4, 'after truncate')")
    events = job.events("salesdb.salesdb.trunc_t", lambda ev: any(e.op == "c" and e.key == {"id": 4} for e in ev))
    truncate = [e for e in events if e.op == "t"]
    assert len(truncate) == 1 and truncate[0].offset < max(e.offset for e in events if e.op == "c")
    start_job(job)
    reconciled_table(job, "trunc_t", rows=1)
    job_log_shows(job, r"salesdb_trunc_t: 1 ev -> c/r 1 u 0 d 0 TRUNCATED")
    # Later batch: the truncate alone, then an insert.
    job.sql("TRUNCATE TABLE trunc_t")
    reconciled_table(job, "trunc_t", rows=0)
    job.sql("INSERT INTO trunc_t VALUES (5, 'later')")
    reconciled_table(job, "trunc_t", rows=1)


def test_decimal_scale_change_rewrites_the_lake_column_and_later_updates_reconcile(job: Stack) -> None:
    reconciled(job)  # the lake table exists with DECIMAL(12,2) (the job may have only just started)
    job.sql("ALTER TABLE customer MODIFY acct_balance DECIMAL(16,4) NOT NULL DEFAULT 0")
    job.sql("UPDATE customer SET acct_balance = acct_balance + 0.0001 WHERE cust_id IN (1, 2)")
    job.sql("UPDATE customer SET acct_balance = 123456789012.3456 WHERE cust_id = 4")
    reconciled(job)
    log = job_log_shows(job, re.escape("acct_balance decimal(12,2)->decimal(16,4) (rewritten)"))
    assert "incompatible schema change" not in log


def lake_columns(stack: Stack, table: str) -> list[str]:
    """The lake table's current data columns, from its Iceberg metadata."""
    import lake

    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", table)
    meta = json.loads(lake.current_metadata(location).read_text())
    [schema] = [x for x in meta["schemas"] if x["schema-id"] == meta["current-schema-id"]]
    return [f["name"] for f in schema["fields"] if not f["name"].startswith("_cdc_")]


def test_column_renames_reach_the_lake_as_renames_whichever_batch_brings_the_ddl(job: Stack) -> None:
    job.sql(
        "CREATE TABLE ren_t (id INT PRIMARY KEY, city VARCHAR(20), note VARCHAR(20));"
        "INSERT INTO ren_t VALUES (1,'Leeds','a'),(2,'Lyon','b'),(3,'Milan','c')"
    )
    reconciled_table(job, "ren_t", rows=3)
    # The job streaming: the statement and the next change usually arrive in different batches.
    job.sql("ALTER TABLE ren_t RENAME COLUMN city TO town; UPDATE ren_t SET town = 'Bath' WHERE id = 1")
    reconciled_table(job, "ren_t", rows=3)  # rows 2 and 3 were not updated: their values followed the rename
    assert lake_columns(job, "salesdb_ren_t") == ["id", "town", "note"]
    # The job stopped: the statement and the changes around it in one batch.
    run_script(job, "local-job", "stop")
    job.sql(
        "UPDATE ren_t SET note = 'before' WHERE id = 2;"
        "ALTER TABLE ren_t CHANGE COLUMN note remark VARCHAR(40) NULL;"
        "UPDATE ren_t SET remark = 'after' WHERE id = 3"
    )
    start_job(job)
    reconciled_table(job, "ren_t", rows=3)
    assert lake_columns(job, "salesdb_ren_t") == ["id", "town", "remark"]
    log = job_log_shows(job, re.escape("note->remark (renamed)"))
    assert "incompatible" not in log


def test_a_renamed_table_and_an_online_schema_change_swap_reconcile(job: Stack) -> None:
    job.sql(
        "CREATE TABLE ren_a (id INT PRIMARY KEY, v INT); INSERT INTO ren_a VALUES (1,1),(2,2);"
        "CREATE TABLE swap_t (id INT PRIMARY KEY, v INT); INSERT INTO swap_t VALUES (1,1),(2,2),(3,3)"
    )
    reconciled_table(job, "swap_t", rows=3)
    reconciled_table(job, "ren_a", rows=2)
    # A rename; then the copy-and-swap pt-online-schema-change runs to add a column.
    job.sql(
        "RENAME TABLE ren_a TO ren_b; INSERT INTO ren_b VALUES (3,3);"
        "CREATE TABLE _swap_t_new (id INT PRIMARY KEY, v INT, bin VARCHAR(4) DEFAULT 'A1');"
        "INSERT INTO _swap_t_new (id, v) SELECT id, v FROM swap_t;"
        "RENAME TABLE swap_t TO _swap_t_old, _swap_t_new TO swap_t; DROP TABLE _swap_t_old;"
        "UPDATE swap_t SET bin = 'Z9' WHERE id = 2"
    )
    out = reconciled(job)
    assert re.search(r"ren_b +source +3 +lake +3 +OK", out), out
    assert re.search(r"swap_t +source +3 +lake +3 +OK", out), out
    assert not re.search(r"\bren_a\b", out), out  # moved, not left behind


def test_tables_swapped_and_rotated_by_one_rename_table_each_reconcile(job: Stack) -> None:
    job.sql(
        "CREATE TABLE sw_a (id INT PRIMARY KEY, v VARCHAR(10)); CREATE TABLE sw_b (id INT PRIMARY KEY, v VARCHAR(10));"
        "CREATE TABLE sw_c (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO sw_a VALUES (1,'a1'),(2,'a2');"
        "INSERT INTO sw_b VALUES (1,'b1'); INSERT INTO sw_c VALUES (1,'c1'),(2,'c2'),(3,'c3')"
    )
    for table, rows in (("sw_a", 2), ("sw_b", 1), ("sw_c", 3)):
        reconciled_table(job, table, rows=rows)
    swap = "RENAME TABLE sw_a TO sw_tmp, sw_b TO sw_a, sw_tmp TO sw_b;"
    # A swap with changes around it, a three-table rotation, then the same swap twice; read in one
    # batch (the job stopped meanwhile): while streaming, the schema-change topic may be read a batch
    # after a table's (README, Limitations).
    run_script(job, "local-job", "stop")
    job.sql(
        f"UPDATE sw_a SET v = 'a1+' WHERE id = 1; {swap} INSERT INTO sw_a VALUES (5, 'after');"
        "RENAME TABLE sw_a TO sw_tmp, sw_b TO sw_a, sw_c TO sw_b, sw_tmp TO sw_c;"
        f"{swap} {swap} UPDATE sw_b SET v = 'last' WHERE id = 1"
    )
    start_job(job)
    out = reconciled(job)
    for table, rows in (("sw_a", 2), ("sw_b", 3), ("sw_c", 2)):
        assert re.search(rf"{table} +source +{rows} +lake +{rows} +OK", out), out
    assert "sw_tmp" not in out, out


def test_a_column_dropped_and_added_again_or_renamed_onto_a_dropped_name_reconciles(job: Stack) -> None:
    job.sql(
        "CREATE TABLE readd_t (id INT PRIMARY KEY, note VARCHAR(20), v INT, tag VARCHAR(10), memo VARCHAR(10));"
        "INSERT INTO readd_t VALUES (1,'a',1,'x','m1'),(2,'b',2,'y','m2'),(3,'c',3,'z','m3')"
    )
    reconciled_table(job, "readd_t", rows=3)
    run_script(job, "local-job", "stop")  # one batch, as above
    job.sql(
        # Another type; the same type with a default; another column renamed onto a dropped name.
        "ALTER TABLE readd_t DROP COLUMN note; ALTER TABLE readd_t ADD COLUMN note DECIMAL(6,1);"
        "UPDATE readd_t SET note = 12.5 WHERE id = 1;"
        "ALTER TABLE readd_t DROP COLUMN memo; ALTER TABLE readd_t ADD COLUMN memo VARCHAR(10) DEFAULT 'd';"
        "UPDATE readd_t SET memo = 'new' WHERE id = 2;"
        "ALTER TABLE readd_t DROP COLUMN tag; ALTER TABLE readd_t RENAME COLUMN v TO tag;"
        "UPDATE readd_t SET tag = 7 WHERE id = 3; INSERT INTO readd_t (id) VALUES (4)"
    )
    start_job(job)
    reconciled_table(job, "readd_t", rows=4)
    assert st.dead_letters(job, "salesdb.salesdb.readd_t") == []
    assert lake_columns(job, "salesdb_readd_t") == [
        "id", "note__dropped", "tag", "tag__dropped", "memo__dropped", "note", "memo"
    ]  # fmt: skip
    # Later changes keep following: the table did not stop.
    job.sql("UPDATE readd_t SET note = -1.5, memo = 'later' WHERE id = 4")
    reconciled_table(job, "readd_t", rows=4)


def test_apply_sql_takes_4_byte_characters_and_fails_with_the_error_when_a_statement_fails(
    job: Stack, tmp_path: Path
) -> None:
    emoji = tmp_path / "emoji.sql"
    emoji.write_text(
        "CREATE TABLE emoji_t (id INT PRIMARY KEY, note VARCHAR(20)) DEFAULT CHARSET = utf8mb4;\n"
        "INSERT INTO emoji_t VALUES (1, 'party \U0001f389');\n"
    )
    out = apply_sql(job, emoji)
    assert re.search(r"emoji_t +source +1 +lake +1 +OK", out), out
    # A column that cannot hold the character: the statement fails at the source, and so does the command.
    bad = tmp_path / "bad.sql"
    bad.write_text(
        "CREATE TABLE emoji3_t (id INT PRIMARY KEY, note VARCHAR(20)) DEFAULT CHARSET = utf8mb3;\n"
        "INSERT INTO emoji3_t VALUES (1, '\U0001f389');\nINSERT INTO emoji3_t VALUES (2, 'never run');\n"
    )
    res = run_script(job, "apply-sql", str(bad), "--wait", "5")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Incorrect string value" in res.stderr and "a statement failed at the source" in res.stderr, res.stderr
    assert "MATCH" not in res.stdout
    assert job.sql("SELECT COUNT(*) FROM emoji3_t").split()[-1] == "0"


def test_a_dropped_table_is_kept_marked_and_its_recreation_reconciles(job: Stack) -> None:
    job.sql("CREATE TABLE drop_t (id INT PRIMARY KEY, v INT); INSERT INTO drop_t VALUES (1,1),(2,2)")
    reconciled_table(job, "drop_t", rows=2)
    job.sql("DROP TABLE drop_t")
    out = reconciled(job)
    assert re.search(r"drop_t +source +0 +lake +2 +OK \(dropped at the source at \S+; lake table kept", out), out
    job.sql("CREATE TABLE drop_t (id INT PRIMARY KEY, v INT); INSERT INTO drop_t VALUES (3,3)")
    reconciled_table(job, "drop_t", rows=1)


def test_a_table_without_a_primary_key_keeps_its_duplicates_and_reconciles(job: Stack) -> None:
    job.sql(
        "CREATE TABLE keyless_t (a INT, b VARCHAR(10));INSERT INTO keyless_t VALUES (1,'x'),(1,'x'),(1,'x'),(2,'y');"
    )
    out = reconciled(job)
    assert re.search(r"keyless_t +source +4 +lake +4 +OK \(no key", out), out
    job.sql("UPDATE keyless_t SET b = 'z' WHERE a = 1 LIMIT 1; DELETE FROM keyless_t WHERE a = 1 LIMIT 1")
    reconciled_table(job, "keyless_t", rows=3)
    job.sql("DELETE FROM keyless_t WHERE a = 2; INSERT INTO keyless_t VALUES (1,'x')")
    reconciled_table(job, "keyless_t", rows=3)


def test_a_primary_key_added_then_changed_by_alter_table_reconciles(job: Stack) -> None:
    job.sql(
        "CREATE TABLE rekey_t (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT);"
        "INSERT INTO rekey_t VALUES (1,'x',1),(2,'y',2),(3,'z',3);"
        "ALTER TABLE rekey_t ADD PRIMARY KEY (a);"
        "UPDATE rekey_t SET c = 10 WHERE a = 1; DELETE FROM rekey_t WHERE a = 2;"
    )
    reconciled_table(job, "rekey_t", rows=2)
    job.sql(
        "ALTER TABLE rekey_t DROP PRIMARY KEY, ADD PRIMARY KEY (a, b);"
        "INSERT INTO rekey_t VALUES (1,'w',5); UPDATE rekey_t SET c = 11 WHERE a = 1 AND b = 'x';"
    )
    reconciled_table(job, "rekey_t", rows=3)
    assert st.dead_letters(job, "salesdb.salesdb.rekey_t") == []


def test_every_mariadb_column_type_reaches_the_lake_with_the_exact_value(job: Stack) -> None:
    topic = f"salesdb.salesdb.{tm.TABLE}"
    try:
        job.sql(tm.MARIADB_SETUP + tm.MARIADB_CHANGES)
        diff = st.wait_until_equal(job, "mariadb", f"salesdb_{tm.TABLE}")
        assert diff == [], "\n".join(diff)
        assert st.dead_letters(job, topic) == []
        messages = st.raw_messages(job, topic, lambda ms: any(m["value"] is None for m in ms))
        st.capture("mariadb", messages, st.source_rows(job, "mariadb"))
    finally:
        # The module's later whole-database reconciles compare the customer tables only.
        job.sql(f"DROP TABLE IF EXISTS {tm.TABLE}")


def test_broker_restart_while_the_job_runs_keeps_topics_and_offsets_and_reconciles(job: Stack) -> None:
    # The broker keeps its log on disk: after a restart the topics, their records and offsets are
    # the same, Connect carries on from its committed source offsets, and the job from its
    # checkpoint. The job must not die while the broker is away (Spark's Kafka source retries).
    job.sql("UPDATE customer SET city = 'Before the broker restart' WHERE cust_id = 7")
    reconciled(job)
    ckpt = checkpoint(job)
    before = end_offsets(ckpt / "offsets", max(batch_ids(ckpt / "commits")))
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


def test_a_burst_of_100000_changes_is_caught_up_and_applied_exactly(
    job: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reconciled(job)
    commits_before = batch_ids(checkpoint(job) / "commits")
    burst = tmp_path / "burst.sql"
    burst.write_text(
        # As fast as MariaDB makes them (its sequence engine): 50,000 inserts, 40,000 updates and
        # 10,000 deletes in three statements, i.e. three transactions of 10,000-50,000 row events.
        "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, acct_balance, created_at, updated_at)\n"
        "  SELECT 100000 + seq, CONCAT('Burst ', seq), CONCAT('b', seq, '@example.com'), 'BUILDING', 'GB',\n"
        "         seq / 100, NOW(), NOW(6) FROM seq_1_to_50000;\n"
        "UPDATE customer SET loyalty_points = loyalty_points + 1, acct_balance = acct_balance + 0.01\n"
        "  WHERE cust_id BETWEEN 100001 AND 140000;\n"
        "DELETE FROM customer WHERE cust_id BETWEEN 140001 AND 150000;\n"
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
    assert sum(sizes) >= 100_000 and max(sizes) <= BATCH_CAP, sizes
    with capsys.disabled():
        print(
            f"\n[burst] 100,000 changes: source wrote them in {produced:.1f}s; lake reconciled "
            f"{caught_up:.1f}s after the burst began ({100_000 / caught_up:,.0f} changes/s end to end, "
            f"{len(batches)} batches of {min(sizes):,}-{max(sizes):,} records, cap {BATCH_CAP:,})"
        )


def crash_the_job_at(job: Stack, point: str, load: Path) -> int:
    """Restart the job with the test-only fault hook armed (glue_scripts/cdclake/local/faults.py), run
    `load` at the source, wait for the job to SIGKILL itself at `point` of the load's first batch;
    returns that batch's id."""
    run_script(job, "local-job", "stop")
    start_job(job, env={"CDC_TEST_CRASH_AT": point})
    job.cli("sql", str(load))
    deadline = time.monotonic() + 300
    while job_running(job):
        assert time.monotonic() < deadline, "the job never reached " + point
        time.sleep(0.2)
    killed = [line for line in job_log_since_start(job).splitlines() if f"SIGKILL at {point} of batch" in line]
    assert killed, job_log_since_start(job)[-3000:]
    return int(killed[-1].rsplit(" ", 1)[-1])


def test_kill_9_before_the_iceberg_commit_then_restart_loses_and_duplicates_nothing(job: Stack, tmp_path: Path) -> None:
    reconciled(job)
    version = table_version(job, "salesdb_customer")
    load = tmp_path / "load.sql"
    load.write_text(
        "INSERT INTO customer (cust_id, name, email, mktsegment, country_code, created_at, updated_at)\n"
        "  SELECT 300000 + seq, 'Crash', 'c@example.com', 'HOUSEHOLD', 'FR', NOW(), NOW(6) FROM seq_1_to_1000;\n"
        "UPDATE customer SET loyalty_points = loyalty_points + 10 WHERE cust_id BETWEEN 300001 AND 300500;\n"
    )
    batch = crash_the_job_at(job, "before-iceberg-commit", load)

    ckpt = checkpoint(job)
    assert batch in batch_ids(ckpt / "offsets") and batch not in batch_ids(ckpt / "commits")
    planned = (ckpt / "offsets" / str(batch)).read_text()
    assert table_version(job, "salesdb_customer") == version, "nothing of the batch may be in the lake yet"
    start_job(job)
    wait_committed(job, batch)
    # Spark re-ran the batch from its logged offsets (the log entry was not planned anew).
    assert (ckpt / "offsets" / str(batch)).read_text() == planned
    job_log_shows(job, f"batch {batch}: ")
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
    batch = crash_the_job_at(job, "after-iceberg-commit", load)

    ckpt = checkpoint(job)
    assert batch in batch_ids(ckpt / "offsets") and batch not in batch_ids(ckpt / "commits")
    planned = (ckpt / "offsets" / str(batch)).read_text()
    assert table_version(job, "salesdb_customer") > version, "the batch's MERGE had committed before the kill"
    # The rows the killed batch wrote, with the time they were written.
    written = ingest_times(job, "salesdb_customer", "WHERE cust_id BETWEEN 310001 AND 310600 AND city = 'Re-run'")
    assert written, "the killed batch committed rows of the load"
    start_job(job)
    wait_committed(job, batch)
    assert (ckpt / "offsets" / str(batch)).read_text() == planned
    job_log_shows(job, f"batch {batch}: ")
    reconciled(job)  # exact multisets: no row is stored twice
    # Applied once: the re-run of the batch rewrote none of the rows its first run committed.
    after = ingest_times(job, "salesdb_customer", f"WHERE cust_id IN ({', '.join(map(str, written))})")
    assert after == written


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
