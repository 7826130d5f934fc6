"""PostgreSQL as the source, for real: PostgreSQL 15 (pgoutput) -> Debezium on Kafka Connect -> Apache
Kafka -> the Glue job script (streaming, Spark's Kafka source) -> Iceberg, reconciled with the source (row
count + per-row checksum over all columns) after every step, a restart and a refused configuration.
The stack runs the wire format avro (tests/stack/conftest.py's pg_stack: the AWS Glue Schema Registry
converter against the local registry, the job with --wire_format avro); the tests read the topics as
JsonConverter would have written them (tests/avro_topic.py), and one switches the connector to JSON and
back while the job runs."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import socket
import string
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest
import stack_types as st
import type_matrix as tm
from processes import free_port
from stack_helpers import CLI, SQL, Stack, apply_sql, by_key, reconciled, run_script
from transfer_load import TransferLoad, transfers_through_a_crash, whole_throughout

pytestmark = pytest.mark.stack

PG_SQL = SQL / "postgres"
CUSTOMER_TOPIC = "salesdb.public.customer"


@pytest.fixture(scope="module")
def pg_job(pg_stack: Stack) -> Iterator[Stack]:
    res = run_script(pg_stack, "local-job", "start", "--source", "postgres")
    assert res.returncode == 0, res.stdout + res.stderr
    try:
        yield pg_stack
    finally:
        run_script(pg_stack, "local-job", "stop")


def test_snapshot_events_carry_the_lsn_and_the_30_rows_reach_the_lake(pg_job: Stack) -> None:
    events = pg_job.events(CUSTOMER_TOPIC, lambda ev: len({e.key["cust_id"] for e in ev if e.op == "r"}) >= 30)
    snapshot = [e for e in events if e.op == "r"]
    sources = [e.payload["source"] for e in snapshot]
    assert {s["connector"] for s in sources} == {"postgresql"}
    assert all(s["lsn"] and s["schema"] == "public" and s["db"] == "salesdb" for s in sources)
    assert len({e.key["cust_id"] for e in snapshot}) == 30  # the init script's rows
    # Other tests of this module may have changed customer already (any order): the lake equals the source.
    out = reconciled(pg_job, "--source", "postgres")
    assert re.search(r"customer +source +(\d+) +lake +\1 +OK", out), out


def test_inserts_updates_deletes_reach_the_lake_with_full_before_images(pg_job: Stack) -> None:
    apply_sql(pg_job, PG_SQL / "02_changes.sql")
    events = pg_job.events(CUSTOMER_TOPIC, lambda ev: any(e.op == "d" for e in by_key(ev, cust_id=32)))
    [moved] = [e for e in by_key(events, cust_id=7) if e.op == "u"]
    assert moved.before["city"] == "Malmö" and moved.after["city"] == "Gothenburg"  # REPLICA IDENTITY FULL
    [twice] = [e for e in by_key(events, cust_id=10) if e.op == "u" and e.after["city"] == "Boston"]
    assert twice.payload["source"]["lsn"] > min(e.payload["source"]["lsn"] for e in by_key(events, cust_id=10))


def test_add_column_with_a_default_reaches_the_lake(pg_job: Stack) -> None:
    out = apply_sql(pg_job, PG_SQL / "03_add_status_column.sql")
    assert "OK" in out  # the per-row checksum includes `status` ('Green' for the rows nobody touched)


def test_added_columns_give_old_rows_a_quoted_text_a_nan_a_20_digit_a_date_and_a_timestamp_default_exactly(
    pg_job: Stack,
) -> None:
    # PostgreSQL writes no change for the rows an ADD COLUMN fills with its default: the lake has to
    # take the default from the connector's schema, which must parse `'it''s'` as it's.
    pg_job.sql(
        "ALTER TABLE customer ADD COLUMN remark text DEFAULT 'it''s new';"
        "ALTER TABLE customer ADD COLUMN score double precision DEFAULT 'NaN';"
        "ALTER TABLE customer ADD COLUMN credit numeric(20,2) DEFAULT 123456789012345678.91;"
        "ALTER TABLE customer ADD COLUMN since date DEFAULT '2024-01-01';"
        "ALTER TABLE customer ADD COLUMN due timestamp(3) DEFAULT '2024-01-02 03:04:05.250';"
        # PostgreSQL sends no DDL: the lake learns the columns from the next change of the table.
        "UPDATE customer SET remark = 'changed' WHERE cust_id = (SELECT min(cust_id) FROM customer);"
    )
    reconciled(pg_job, "--source", "postgres", "--table", "customer")


def test_json_and_jsonb_columns_added_then_set_by_update_reconcile(pg_job: Stack) -> None:
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE json_t (id INTEGER PRIMARY KEY, v INTEGER);"
        "ALTER TABLE json_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE json_t;"
        "INSERT INTO json_t VALUES (1, 1), (2, 2), (3, 3);"
    )
    reconciled(pg_job, "--source", "postgres", "--table", "json_t")
    pg_job.sql(
        "SET ROLE salesdb_owner; ALTER TABLE json_t ADD COLUMN doc jsonb; ALTER TABLE json_t ADD COLUMN raw json;"
        """UPDATE json_t SET doc = '{"b": [1, 2.50], "a": "x", "n": null}' WHERE id = 1;"""
        """UPDATE json_t SET raw = '{"z":1,  "a" : [true]}', doc = '"just text"' WHERE id = 2;"""
    )
    out = reconciled(pg_job, "--source", "postgres", "--table", "json_t")
    assert re.search(r"json_t +source +3 +lake +3 +OK", out), out


def test_a_second_table_with_a_composite_key_created_while_streaming_is_captured(pg_job: Stack) -> None:
    out = apply_sql(pg_job, PG_SQL / "04_second_table.sql")
    assert "orders" in out and "source       7  lake       7  OK" in out


def test_a_table_without_replica_identity_full_gets_a_warning_and_its_updates_and_deletes_still_apply(
    pg_job: Stack,
) -> None:
    res = pg_job.cli("sql", "-e", "SET ROLE salesdb_owner; CREATE TABLE plain (id INTEGER PRIMARY KEY, note TEXT);")
    assert "public.plain has REPLICA IDENTITY DEFAULT" in res.stderr
    assert "ALTER TABLE public.plain REPLICA IDENTITY FULL" in res.stderr
    assert "public.plain is not in publication dbz_publication" in res.stderr
    res = pg_job.cli(
        "sql",
        "-e",
        "SET ROLE salesdb_owner; ALTER PUBLICATION dbz_publication ADD TABLE plain;"
        "INSERT INTO plain VALUES (1, 'one'), (2, 'two'), (3, 'three');"
        "UPDATE plain SET note = 'one, changed' WHERE id = 1; DELETE FROM plain WHERE id = 2;",
    )
    assert "not in publication" not in res.stderr and "REPLICA IDENTITY DEFAULT" in res.stderr
    events = pg_job.events("salesdb.public.plain", lambda ev: any(e.op == "d" for e in ev))
    [update] = [e for e in events if e.op == "u"]
    [delete] = [e for e in events if e.op == "d"]
    assert update.before is None  # no before image without REPLICA IDENTITY FULL
    assert delete.key == {"id": 2} and delete.before == {"id": 2, "note": None}  # only the key
    out = reconciled(pg_job, "--table", "plain")
    assert "source       2  lake       2  OK" in out


def test_truncate_reaches_the_lake_with_inserts_in_the_same_and_in_a_later_batch(pg_job: Stack) -> None:
    def lake_equal(rows: int) -> None:
        out = reconciled(pg_job, "--source", "postgres", "--table", "trunc_t")
        assert re.search(rf"source +{rows} +lake +{rows} +OK", out), out

    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE trunc_t (id INTEGER PRIMARY KEY, note TEXT);"
        "ALTER TABLE trunc_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE trunc_t;"
        "INSERT INTO trunc_t VALUES (1, 'a'), (2, 'b'), (3, 'c');"
    )
    lake_equal(3)
    # Same batch: the job is stopped until the truncate and the insert after it are both in Kafka.
    run_script(pg_job, "local-job", "stop")
    pg_job.sql("SET ROLE salesdb_owner; TRUNCATE TABLE trunc_t; INSERT INTO trunc_t VALUES (4, 'after truncate');")
    events = pg_job.events("salesdb.public.trunc_t", lambda ev: any(e.op == "c" and e.key == {"id": 4} for e in ev))
    [truncate] = [e for e in events if e.op == "t"]
    assert truncate.payload["source"]["lsn"] is not None
    res = run_script(pg_job, "local-job", "start", "--source", "postgres")
    assert res.returncode == 0, res.stdout + res.stderr
    lake_equal(1)
    # Later batch: the truncate alone, then an insert.
    pg_job.sql("SET ROLE salesdb_owner; TRUNCATE TABLE trunc_t;")
    lake_equal(0)
    pg_job.sql("SET ROLE salesdb_owner; INSERT INTO trunc_t VALUES (5, 'later');")
    lake_equal(1)


def test_a_table_without_a_primary_key_keeps_its_duplicates_and_reconciles(pg_job: Stack) -> None:
    def lake_equal(rows: int) -> str:
        out = reconciled(pg_job, "--source", "postgres", "--table", "keyless_t")
        assert re.search(rf"source +{rows} +lake +{rows} +OK \(no key", out), out
        return out

    # REPLICA IDENTITY FULL: without a key an update or delete is identified by its whole before image.
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE keyless_t (a INTEGER, b TEXT);"
        "ALTER TABLE keyless_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE keyless_t;"
        "INSERT INTO keyless_t VALUES (1, 'x'), (1, 'x'), (1, 'x'), (2, 'y');"
    )
    lake_equal(4)
    one_copy = "ctid = (SELECT ctid FROM keyless_t WHERE a = 1 AND b = 'x' LIMIT 1)"
    pg_job.sql(
        f"SET ROLE salesdb_owner; UPDATE keyless_t SET b = 'z' WHERE {one_copy}; DELETE FROM keyless_t WHERE {one_copy};"
    )
    lake_equal(3)
    pg_job.sql("SET ROLE salesdb_owner; DELETE FROM keyless_t WHERE a = 2; INSERT INTO keyless_t VALUES (1, 'x');")
    lake_equal(3)


def _formats(stack: Stack, topic: str, until: int) -> list[str]:
    """The wire format of each record of the topic (tombstones left out), in topic order."""
    kinds = stack.consume(topic, lambda m: None if m.value() is None else "avro" if m.value()[0] == 3 else "json",
                          lambda ks: len([k for k in ks if k]) >= until)  # fmt: skip
    return [k for k in kinds if k]


def _switch(stack: Stack, wire_format: str, probes: list[str]) -> None:
    """Switch the connector's format; Connect restarts its task with the new converter in its own
    time, so insert probe rows until one is on its topic in the new format (`probes`: the formats of
    the probe topic so far, extended)."""
    assert f"{wire_format})" in stack.cli("up", "--format", wire_format).stdout  # "connector: ... (…s, json)"
    for _ in range(60):
        n = len(probes) + 1
        stack.sql(f"SET ROLE salesdb_owner; INSERT INTO switch_probe_t VALUES ({n});")
        probes[:] = _formats(stack, "salesdb.public.switch_probe_t", n)
        if probes[-1] == wire_format:
            return
        time.sleep(1)
    raise AssertionError(f"the connector still writes {probes[-1]} after it was switched to {wire_format}")


def test_the_connector_switched_to_json_and_back_while_the_job_runs_loses_nothing(pg_job: Stack) -> None:
    # docs/DEPLOY.md, "Switching a running pipeline": the connector's configuration changes in place
    # (same name, same source offsets); the job started with avro reads both formats, no restart.
    # Each phase's records are on the topic before the next switch; one reconcile at the end sees
    # every phase's changes (row 2 deleted and row 1 updated in JSON, row 4 inserted in JSON and
    # updated in Avro again).
    topic = "salesdb.public.switch_t"
    if pg_job.env["CDC_STACK_FORMAT"] == "json":  # CDC_CAPTURE_FIXTURES=1: the job must read both first
        run_script(pg_job, "local-job", "stop")
        pg_job.cli("up", "--format", "avro")
        restart_job(pg_job, env={"CDC_STACK_FORMAT": "avro"})
    job_pid = pg_job.pids()["job"]
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE switch_t (id INTEGER PRIMARY KEY, note TEXT, amount NUMERIC(10,2));"
        "ALTER TABLE switch_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE switch_t;"
        "INSERT INTO switch_t VALUES (1, 'avro', 1.10), (2, 'avro', 2.20), (3, 'avro', 3.30);"
        "CREATE TABLE switch_probe_t (id INTEGER PRIMARY KEY); ALTER TABLE switch_probe_t REPLICA IDENTITY FULL;"
        "ALTER PUBLICATION dbz_publication ADD TABLE switch_probe_t;"
    )
    assert _formats(pg_job, topic, 3) == ["avro"] * 3
    probes: list[str] = []
    _switch(pg_job, "json", probes)
    pg_job.sql(
        "SET ROLE salesdb_owner; UPDATE switch_t SET note = 'json', amount = 10.01 WHERE id = 1;"
        "DELETE FROM switch_t WHERE id = 2; INSERT INTO switch_t VALUES (4, 'json', 4.40);"
    )
    assert _formats(pg_job, topic, 6) == ["avro"] * 3 + ["json"] * 3
    _switch(pg_job, "avro", probes)
    pg_job.sql(
        "SET ROLE salesdb_owner; UPDATE switch_t SET note = 'avro again' WHERE id = 4;"
        "INSERT INTO switch_t VALUES (5, 'avro again', 5.50);"
    )
    assert _formats(pg_job, topic, 8) == ["avro"] * 3 + ["json"] * 3 + ["avro"] * 2
    out = reconciled(pg_job, "--source", "postgres", "--table", "switch_t")
    assert re.search(r"switch_t +source +4 +lake +4 +OK", out), out
    assert pg_job.pids()["job"] == job_pid  # the same job run read all three phases
    pg_job.cli("up")  # the module's format again


def test_every_postgres_column_type_reaches_the_lake_with_the_exact_value(pg_job: Stack) -> None:
    topic = f"salesdb.public.{tm.TABLE}"
    infinite = tuple(tm.PG_INFINITE_IDS)
    try:
        # Infinite timestamps fit no lake type: those changes are dead-lettered, naming the columns.
        pg_job.sql(tm.PG_SETUP + tm.PG_CHANGES + tm.PG_INFINITE)
        diff = st.wait_until_equal(pg_job, "postgres", f"public_{tm.TABLE}", skip=infinite)
        assert diff == [], "\n".join(diff)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not st.dead_letters(pg_job, topic):
            time.sleep(0.5)
        [letter] = st.dead_letters(pg_job, topic)
        assert letter["reason"] == (
            "could not decode column(s): c_timestamp (io.debezium.time.MicroTimestamp value does not fit "
            "timestamp_ntz), c_timestamptz (io.debezium.time.ZonedTimestamp value does not fit timestamp)"
        )
        assert json.loads(letter["value"])["payload"]["after"]["id"] in infinite
        messages = st.raw_messages(pg_job, topic, lambda ms: any(tm.is_infinite_row(m) for m in ms))
        st.capture("postgres", messages, st.source_rows(pg_job, "postgres", infinite))
        # The oracle users run agrees, for every type: reconcile reads each column as the lake
        # holds it (intervals, arrays, times with zone, bits, the limits of every type).
        pg_job.sql(f"SET ROLE salesdb_owner; DELETE FROM {tm.TABLE} WHERE id IN ({', '.join(map(str, infinite))});")
        reconciled(pg_job, "--table", tm.TABLE, wait=60)
        pg_job.sql(
            "SET ROLE salesdb_owner; CREATE TABLE money_t (id int PRIMARY KEY, m money); "
            "ALTER PUBLICATION dbz_publication ADD TABLE money_t; INSERT INTO money_t VALUES "
            "(1, '-92233720368547758.08'), (2, 1234.5), (3, NULL);"
        )
        # A new table: Debezium creates its topic on the first change and the job's pattern subscription
        # sees it at its next metadata refresh, then a batch: the default wait, not a short one.
        reconciled(pg_job, "--table", "money_t")
    finally:
        # Later whole-database reconciles compare the scenario's tables only.
        pg_job.sql("SET ROLE salesdb_owner; DROP TABLE IF EXISTS all_types, money_t; DROP TYPE IF EXISTS mood;")


def test_an_update_that_leaves_a_toasted_value_unchanged_keeps_it_in_the_lake(pg_job: Stack) -> None:
    rng = random.Random(6)
    # Random characters and bytes do not compress: PostgreSQL stores them out of line (TOAST).
    big = ["".join(rng.choices(string.ascii_letters + string.digits, k=10_000)) for _ in range(2)]
    blob = [rng.randbytes(9_000).hex() for _ in range(2)]
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE toasty (id integer PRIMARY KEY, note text, big text, blob bytea);"
        f"ALTER PUBLICATION dbz_publication ADD TABLE toasty;"
        f"INSERT INTO toasty VALUES (1, 'one', '{big[0]}', decode('{blob[0]}', 'hex'));"
    )
    reconciled(pg_job, "--table", "toasty")
    # REPLICA IDENTITY DEFAULT: an update of `note` is logged without the unchanged big values.
    pg_job.sql(
        "UPDATE toasty SET note = 'one, changed' WHERE id = 1;"
        f"INSERT INTO toasty VALUES (2, 'two', '{big[1]}', decode('{blob[1]}', 'hex'));"
        "UPDATE toasty SET note = 'two, changed' WHERE id = 2;"
    )
    topic = "salesdb.public.toasty"
    messages = st.raw_messages(pg_job, topic, lambda ms: sum(1 for m in ms if _op(m) == "u") >= 2)
    [update] = [m for m in messages if _op(m) == "u" and m["value"]["payload"]["after"]["id"] == 1]
    after = update["value"]["payload"]["after"]
    assert after["note"] == "one, changed" and after["big"] == "__debezium_unavailable_value"
    assert base64.b64decode(after["blob"]) == b"__debezium_unavailable_value"
    out = reconciled(pg_job, "--table", "toasty")
    assert "source       2  lake       2  OK" in out  # the per-row checksum covers big and blob
    if os.environ.get("CDC_CAPTURE_FIXTURES") == "1":
        [insert] = [m for m in messages if _op(m) == "c" and m["value"]["payload"]["after"]["id"] == 1]
        folder = tm.fixture_dir("postgres")
        for name, msg in (("toast_c_insert", insert), ("toast_u_update_unavailable_value", update)):
            (folder / f"{name}.json").write_text(json.dumps(msg, indent=1) + "\n")


def _op(message: dict) -> str | None:
    return (message["value"] or {}).get("payload", {}).get("op") if message["value"] else None


def _process_tree(pid: int) -> set[int]:
    out = {pid}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with suppress(OSError):
            for child in (task / "children").read_text().split():
                out |= _process_tree(int(child))
    return out


def test_the_debezium_role_is_least_privileged_and_its_password_is_nowhere_but_its_file(pg_job: Stack) -> None:
    secret_file = pg_job.state / "secrets" / "debezium-postgres.properties"
    assert secret_file.stat().st_mode & 0o777 == 0o600
    password = next(x.split("=", 1)[1] for x in secret_file.read_text().splitlines() if x.startswith("password="))
    assert len(password) >= 16
    role = pg_job.sql(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls, "
        "left(rolpassword, 14), (SELECT string_agg(b.rolname, ',') FROM pg_auth_members m "
        "JOIN pg_roles b ON b.oid = m.roleid WHERE m.member = a.oid) FROM pg_authid a WHERE rolname = 'debezium'"
    ).splitlines()[-1]
    # Only REPLICATION and the tables' owner role; PostgreSQL holds a SCRAM verifier, not the password.
    assert role.split("\t") == ["f", "f", "f", "t", "f", "SCRAM-SHA-256$", "salesdb_owner"]
    for log in (pg_job.state / "logs").glob("*.log"):
        assert password not in log.read_text(errors="replace"), f"password in {log}"
    pids: set[int] = set()
    for rec in (pg_job.state / "run").glob("*.json"):
        pids |= _process_tree(json.loads(rec.read_text())["pid"])
    for pid in pids:
        with suppress(OSError):
            assert password not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            assert password not in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    ours = [line for line in listening if any(f"pid={p}," in line for p in pids)]
    assert any(f":{pg_job.ports['postgres']} " in line for line in ours)
    assert [x for x in ours if not x.split()[3].startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:"))] == []


def test_up_again_leaves_the_running_postgres_stack_alone(pg_stack: Stack) -> None:
    pids = pg_stack.pids()
    res = pg_stack.cli("up")
    for component in ("postgres", "kafka", "connect"):
        assert f"{component}: already running (pid {pids[component]}" in res.stdout
    assert pg_stack.pids() == pids
    status = pg_stack.cli("status")
    assert "salesdb-pg-cdc: connector RUNNING, task 0 RUNNING" in status.stdout


def test_postgres_restart_then_changes_still_reconcile(pg_job: Stack) -> None:
    pg_job.cli("down", "postgres")
    res = pg_job.cli("up")
    assert "PostgreSQL was restarted, restarting the connector task" in res.stdout
    pg_job.sql("UPDATE customer SET city = 'After PostgreSQL restart' WHERE cust_id = 4")
    pg_job.sql("DELETE FROM customer WHERE cust_id = 5")
    reconciled(pg_job)


def test_a_reader_of_the_read_point_never_sees_half_a_transfer_under_load_and_a_kill_9_between_two_tables(
    pg_job: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As MariaDB's (test_pipeline_failures.py): 1,220 transfers, each one source transaction over two
    # tables, in batches of at most 2,500 records; a reader polls the read point all along.
    t0 = time.monotonic()

    def start(env: dict[str, str], extra: tuple[str, ...]) -> None:
        restart_job(pg_job, env, ("--max_offsets_per_trigger", "2500", *extra))

    reader, batch = transfers_through_a_crash(pg_job, TransferLoad(pg=True, prefix="public"), tmp_path, start)
    report = whole_throughout(reader, batch, "read point, postgres", time.monotonic() - t0)
    with capsys.disabled():
        print(report)


def test_wal_level_below_logical_is_refused_with_what_to_change(pg_job: Stack) -> None:
    pg_job.sql("ALTER SYSTEM SET wal_level = replica")
    pg_job.cli("down", "postgres")
    res = pg_job.cli("up", check=False)
    auto_conf = pg_job.state / "postgres" / "data" / "postgresql.auto.conf"
    assert res.returncode == 1
    assert "wal_level = replica" in res.stderr and "needs wal_level = logical" in res.stderr
    assert f"delete that line from {auto_conf}" in res.stderr
    # Do what the message says.
    auto_conf.write_text("".join(x for x in auto_conf.read_text().splitlines(True) if not x.startswith("wal_level")))
    pg_job.cli("up")
    pg_job.sql("UPDATE customer SET city = 'After the wal_level fix' WHERE cust_id = 6")
    reconciled(pg_job)


def test_a_taken_postgres_port_is_reported_with_the_variable_that_moves_it(stack_dir: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        env = {
            **os.environ,
            "CDC_STACK_DIR": str(stack_dir),
            "CDC_STACK_POSTGRES_PORT": str(taken),
            "CDC_STACK_KAFKA_PORT": str(free_port()),
            "CDC_STACK_KAFKA_CONTROLLER_PORT": str(free_port()),
            "CDC_STACK_CONNECT_PORT": str(free_port()),
        }
        res = subprocess.run([str(CLI), "up", "--source", "postgres"], env=env, capture_output=True, text=True)
    assert res.returncode == 1
    assert f"port {taken} on 127.0.0.1 for postgres is already in use" in res.stderr
    assert "CDC_STACK_POSTGRES_PORT" in res.stderr
    assert not list((stack_dir / "run").glob("*.json"))


# ---------------------------------------------------------------------------------------- DDL capture
# The stack installs sql/postgres/ddl_capture.sql: every DDL command on a table is a row of
# public.cdclake_ddl, streamed with the data changes. The job stops before each scenario so that the
# statements and the changes around them reach it in one batch (tests/job/test_postgres_ddl.py feeds
# the same captured messages in other batchings).
DDL_TOPIC = "salesdb.public.cdclake_ddl"
DDL_FIXTURES = tm.fixture_dir("postgres") / "ddl"


def lake_columns(stack: Stack, table: str) -> list[str]:
    """The lake table's data columns, from its Iceberg metadata."""
    from cdctools import lake_reader as lake

    location = lake.table_location(stack.state / "lake" / "warehouse", "cdc", table)
    meta = json.loads(lake.current_metadata(location).read_text())
    [schema] = [x for x in meta["schemas"] if x["schema-id"] == meta["current-schema-id"]]
    return [f["name"] for f in schema["fields"] if not f["name"].startswith("_cdc_")]


def restart_job(stack: Stack, env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> None:
    """`extra`: more job arguments."""
    res = run_script(stack, "local-job", "start", "--source", "postgres", *(("--", *extra) if extra else ()), env=env)
    assert res.returncode == 0, res.stdout + res.stderr


def capture_ddl_session(stack: Stack, name: str, tables: dict[str, int]) -> None:
    """CDC_CAPTURE_FIXTURES=1: keep the scenario's messages (its tables' topics and their rows of the
    DDL log, in topic order) and the source's rows as a fixture of tests/job/test_postgres_ddl.py."""
    if os.environ.get("CDC_CAPTURE_FIXTURES") != "1":
        return
    names = set(tables)
    records = []
    for topic in [DDL_TOPIC, *(f"salesdb.public.{t}" for t in sorted(names))]:
        messages = st.topic_messages(stack, topic)
        for m in messages:
            after = (m["value"] or {}).get("payload", {}).get("after") or {}
            if topic != DDL_TOPIC or {after.get("table_name"), after.get("old_table_name")} & names:
                records.append({"topic": topic, **m})
    source = {}
    for t, rows in tables.items():
        if rows:
            out = stack.sql(f"SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY id), '[]')::text FROM {t} t;")
            source[t] = json.loads(out.strip().splitlines()[-1])
        else:
            source[t] = None  # not at the source any more
    DDL_FIXTURES.mkdir(exist_ok=True)
    (DDL_FIXTURES / f"{name}.json").write_text(
        json.dumps({"records": records, "source": source}, indent=1, ensure_ascii=False) + "\n"
    )


def test_columns_dropped_and_added_again_and_renamed_onto_a_dropped_name_follow_the_ddl_log(pg_job: Stack) -> None:
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE readd_t (id INTEGER PRIMARY KEY, note VARCHAR(20), v INTEGER,"
        " tag VARCHAR(10), memo VARCHAR(10), city VARCHAR(20)); ALTER TABLE readd_t REPLICA IDENTITY FULL;"
        "ALTER PUBLICATION dbz_publication ADD TABLE readd_t;"
        "INSERT INTO readd_t VALUES (1,'a',1,'x','m1','Leeds'),(2,'b',2,'y','m2','Lyon'),(3,'c',3,'z','m3','Milan');"
    )
    reconciled(pg_job, "--table", "readd_t")
    run_script(pg_job, "local-job", "stop")
    pg_job.sql(
        "SET ROLE salesdb_owner;"
        # Another type; the same type (with a default); a rename; another column renamed onto a dropped name.
        "ALTER TABLE readd_t DROP COLUMN note; ALTER TABLE readd_t ADD COLUMN note NUMERIC(6,1);"
        "UPDATE readd_t SET note = 12.5 WHERE id = 1;"
        "ALTER TABLE readd_t DROP COLUMN memo; ALTER TABLE readd_t ADD COLUMN memo VARCHAR(10) DEFAULT 'd';"
        "UPDATE readd_t SET memo = 'new' WHERE id = 2;"
        "ALTER TABLE readd_t RENAME COLUMN city TO town;"
        "ALTER TABLE readd_t DROP COLUMN tag; ALTER TABLE readd_t RENAME COLUMN v TO tag;"
        "UPDATE readd_t SET tag = 7 WHERE id = 3; INSERT INTO readd_t (id, town) VALUES (4, 'Bath');"
    )
    restart_job(pg_job)
    out = reconciled(pg_job, "--table", "readd_t")
    assert re.search(r"readd_t +source +4 +lake +4 +OK", out), out
    assert st.dead_letters(pg_job, "salesdb.public.readd_t") == []
    assert lake_columns(pg_job, "public_readd_t") == [
        "id", "note__dropped", "tag", "tag__dropped", "memo__dropped", "town", "note", "memo"
    ]  # fmt: skip
    capture_ddl_session(pg_job, "columns", {"readd_t": 4})
    # Later changes keep following: the table did not stop.
    pg_job.sql("SET ROLE salesdb_owner; UPDATE readd_t SET note = -1.5, memo = 'later', town = 'York' WHERE id = 4;")
    reconciled(pg_job, "--table", "readd_t")


def test_a_renamed_table_and_two_tables_swapped_through_a_temporary_name_follow_the_ddl_log(pg_job: Stack) -> None:
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE ren_a (id INTEGER PRIMARY KEY, v TEXT);"
        "CREATE TABLE sw_a (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE sw_b (id INTEGER PRIMARY KEY, v TEXT);"
        "ALTER TABLE ren_a REPLICA IDENTITY FULL; ALTER TABLE sw_a REPLICA IDENTITY FULL;"
        "ALTER TABLE sw_b REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE ren_a, sw_a, sw_b;"
        "INSERT INTO ren_a VALUES (1, 'r1'), (2, 'r2'); INSERT INTO sw_a VALUES (1, 'a1'), (2, 'a2');"
        "INSERT INTO sw_b VALUES (1, 'b1');"
    )
    for table in ("ren_a", "sw_a", "sw_b"):
        reconciled(pg_job, "--table", table)
    run_script(pg_job, "local-job", "stop")
    pg_job.sql(
        "SET ROLE salesdb_owner; ALTER TABLE ren_a RENAME TO ren_b; INSERT INTO ren_b VALUES (3, 'r3');"
        "UPDATE sw_a SET v = 'a1+' WHERE id = 1;"
        "BEGIN; ALTER TABLE sw_a RENAME TO sw_tmp; ALTER TABLE sw_b RENAME TO sw_a; ALTER TABLE sw_tmp RENAME TO sw_b;"
        "COMMIT; INSERT INTO sw_a VALUES (5, 'after'); UPDATE sw_b SET v = 'last' WHERE id = 2;"
    )
    restart_job(pg_job)
    out = reconciled(pg_job)
    for table, rows in (("ren_b", 3), ("sw_a", 2), ("sw_b", 2)):
        assert re.search(rf"{table} +source +{rows} +lake +{rows} +OK", out), out
    assert not re.search(r"\bren_a\b|\bsw_tmp\b", out), out  # moved, not left behind
    capture_ddl_session(pg_job, "tables", {"ren_a": 0, "ren_b": 3, "sw_a": 2, "sw_b": 2, "sw_tmp": 0})


def test_an_enum_label_renamed_is_renamed_in_the_lake_and_a_using_retype_is_named_in_an_error(pg_job: Stack) -> None:
    from pipeline_job import job_log_shows

    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TYPE tone AS ENUM ('red', 'green', 'it''s');"
        "CREATE TABLE enum_t (id int PRIMARY KEY, c tone, cs tone[], note text,"
        " shout text GENERATED ALWAYS AS (upper(note)) STORED); ALTER TABLE enum_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE enum_t;"
        "INSERT INTO enum_t VALUES (1, 'red', '{red,green}', 'a'), (2, 'green', '{green}', 'b'), (3, 'it''s', NULL, 'c');"
        "CREATE TABLE using_t (id int PRIMARY KEY, price integer, qty integer, label text);"
        "ALTER TABLE using_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE using_t;"
        "INSERT INTO using_t VALUES (1, 1999, 1, 'x'), (2, 500, 2, 'y');"
    )
    reconciled(pg_job, "--table", "enum_t")
    # The running job reads the statements in whatever batches they come: each relabel is exact.
    pg_job.sql(
        # Rows 1 and 2 never change again: only the statement tells the lake their new labels.
        "SET ROLE salesdb_owner; ALTER TYPE tone RENAME VALUE 'red' TO 'crimson';"
        "UPDATE enum_t SET note = 'changed' WHERE id = 3; ALTER TYPE tone RENAME VALUE 'it''s' TO 'it''s new';"
        """INSERT INTO enum_t VALUES (4, 'crimson', '{crimson,"it''s new"}', 'd');"""
        "ALTER TABLE using_t ALTER COLUMN price TYPE numeric(10,2) USING price / 100.0, ALTER COLUMN qty TYPE bigint;"
        "ALTER TABLE using_t ALTER COLUMN label TYPE text USING upper(label); UPDATE using_t SET qty = 5 WHERE id = 2;"
    )
    out = reconciled(pg_job, "--table", "enum_t")
    # pgoutput sends no generated column: reconcile names it and compares the others.
    assert re.search(r"enum_t +source +4 +lake +4 +OK .*not compared: generated column\(s\) \['shout'\]", out), out
    job_log_shows(pg_job, r"source table public\.using_t no longer equals the lake: ALTER TABLE \.\.\. TYPE \.\.\. "
                  r"USING at position \d+ rewrote column\(s\) price ")  # fmt: skip
    job_log_shows(pg_job, r"USING at position \d+ rewrote column\(s\) label ")
    capture_ddl_session(pg_job, "enum_using", {"enum_t": 4, "using_t": 2})
    # Later whole-database reconciles compare the scenario's tables only.
    pg_job.sql("SET ROLE salesdb_owner; DROP TABLE enum_t, using_t; DROP TYPE tone;")


def test_a_numeric_nan_or_infinity_is_named_in_the_connectors_error_line_the_alarm_counts(pg_job: Stack) -> None:
    # decimal.handling.mode precise cannot encode them: the connector sends null and logs the line the
    # stack's NumericValuesNotSent alarm counts (tests/fixtures/debezium/postgres/connect_numeric_special_value.log).
    line = (tm.fixture_dir("postgres") / "connect_numeric_special_value.log").read_text()
    phrase = line[line.index("Got a special value") :].split(" column ")[0]
    log = pg_job.state / "logs" / "connect.log"
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE num_t (id int PRIMARY KEY, fixed numeric(10,2), free numeric);"
        "ALTER PUBLICATION dbz_publication ADD TABLE num_t;"
        "INSERT INTO num_t VALUES (1, 1.5, 15.0), (2, 'NaN', 1.000), (3, 2, 'Infinity');"
    )
    try:
        events = pg_job.events("salesdb.public.num_t", lambda ev: len(ev) >= 3)
        assert [(e.after["fixed"] is None, e.after["free"] is None) for e in events] == [
            (False, False), (True, False), (False, True)
        ]  # fmt: skip
        lines = [x for x in log.read_text(errors="replace").splitlines() if phrase in x]
        assert {x.split(" column ")[1].split()[0] for x in lines} == {"fixed", "free"}, lines
    finally:
        pg_job.sql("SET ROLE salesdb_owner; DROP TABLE num_t;")


def test_columns_added_with_defaults_to_a_table_never_changed_again_reach_the_lake_with_the_rows_values(
    pg_job: Stack,
) -> None:
    # PostgreSQL keeps a non-volatile default as the column's value for the rows it has (CURRENT_DATE
    # too: the ALTER's date) and writes no row change; the DDL capture records it with the statement.
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE pgdflt_t (id INTEGER PRIMARY KEY, v INTEGER);"
        "ALTER TABLE pgdflt_t REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE pgdflt_t;"
        "INSERT INTO pgdflt_t VALUES (1, 1), (2, 2);"
    )
    reconciled(pg_job, "--table", "pgdflt_t")
    pg_job.sql(
        "SET ROLE salesdb_owner; SET DateStyle = 'SQL, DMY';"
        "ALTER TABLE pgdflt_t ADD COLUMN since date DEFAULT CURRENT_DATE, ADD COLUMN note text DEFAULT 'it''s {x}',"
        " ADD COLUMN price numeric(10,2) DEFAULT 19.99, ADD COLUMN due timestamp(3) DEFAULT '2024-01-02 03:04:05.25',"
        " ADD COLUMN ok boolean DEFAULT true, ADD COLUMN r double precision DEFAULT 'NaN', ADD COLUMN plain text;"
        "ALTER TABLE pgdflt_t ALTER COLUMN price SET DEFAULT 5;"
    )
    reconciled(pg_job, "--table", "pgdflt_t")
    assert lake_columns(pg_job, "public_pgdflt_t") == ["id", "v", "since", "note", "price", "due", "ok", "r", "plain"]


def test_a_partitioned_table_is_one_lake_table_with_or_without_publishing_via_its_root_and_follows_detach_and_drop(
    pg_job: Stack,
) -> None:
    from pipeline_job import job_log_shows

    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE part_t (id int PRIMARY KEY, region text, v text) PARTITION BY RANGE (id);"
        "CREATE TABLE part_t_1 PARTITION OF part_t FOR VALUES FROM (MINVALUE) TO (100);"
        "CREATE TABLE part_t_2 PARTITION OF part_t FOR VALUES FROM (100) TO (200);"
        "CREATE TABLE part_t_3 PARTITION OF part_t FOR VALUES FROM (200) TO (300);"
        "CREATE TABLE part_t_d PARTITION OF part_t DEFAULT; ALTER PUBLICATION dbz_publication ADD TABLE part_t;"
        # The stack's publication publishes via the partition root: these arrive under part_t's name.
        "INSERT INTO part_t SELECT g, 'r' || g % 3, 'v' || g FROM generate_series(1, 420, 7) g;"
        # Moved across partitions: a delete from one and an insert into another.
        "UPDATE part_t SET id = 150 WHERE id = 8; UPDATE part_t SET id = 20, v = 'moved' WHERE id = 211;"
        # Without publish_via_partition_root they arrive under each partition's name: the job takes them to
        # part_t. No row events for what leaves with a partition: the bounds the DDL log recorded say which rows.
        "RESET ROLE; ALTER PUBLICATION dbz_publication SET (publish_via_partition_root = false); SET ROLE salesdb_owner;"
        "ALTER TABLE part_t DETACH PARTITION part_t_2; DROP TABLE part_t_3;"
        "INSERT INTO part_t VALUES (151, 'default now', 'x'), (2, 'leaf', 'y'); UPDATE part_t SET id = 3 WHERE id = 400;"
        # The default partition holds what no other one does: here every id from 100 on.
        "UPDATE part_t SET v = 'kept' WHERE id = 1; ALTER TABLE part_t DETACH PARTITION part_t_d;"
        "INSERT INTO part_t VALUES (4, 'after', 'z');"
    )
    try:
        out = reconciled(pg_job, "--table", "part_t")
    finally:
        pg_job.sql("ALTER PUBLICATION dbz_publication SET (publish_via_partition_root = true);")
    assert re.search(r"part_t +source +18 +lake +18 +OK", out), out
    warehouse = pg_job.state / "lake" / "warehouse"
    partitions = {f"public_part_t_{x}" for x in "123d"}
    assert not partitions & {p.name for p in warehouse.rglob("public_part_t_*")}  # one table, under its name
    # A table attached with rows brings them without row events: named, with the fix, never silently.
    pg_job.sql(
        "SET ROLE salesdb_owner; CREATE TABLE part_x (LIKE part_t); INSERT INTO part_x VALUES (500, 'x', 'x');"
        "ALTER TABLE part_t ATTACH PARTITION part_x FOR VALUES FROM (500) TO (600);"
    )
    job_log_shows(pg_job, r"no longer equals the lake: .*ATTACH PARTITION public\.part_x: the rows it brings")
    pg_job.sql("SET ROLE salesdb_owner; DROP TABLE part_t, part_t_2, part_t_d;")
