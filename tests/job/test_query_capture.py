"""--source jdbc (query-based capture) against a real MariaDB: polls, the high-water mark kept in the
lake, soft and hard deletes, a new column, and the refusals. One private mariadbd for the module
(the local stack's own code starts it: cdcstack.mariadb), on a free port, stopped at the end."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from processes import free_port

DB = "shop"
PASSWORD = "capture-pw"


class Source:
    def __init__(self, stack: Any, port: int) -> None:
        self.stack, self.port = stack, port
        self.url = f"jdbc:mysql://127.0.0.1:{port}/"

    def sql(self, statement: str) -> str:
        from cdcstack import mariadb

        return mariadb.run_sql(self.stack, statement, database=DB)


def _stack_config(env: dict[str, str]) -> Any:
    """The local stack's configuration (cdcstack.plumbing.StackConfig) from `env`, as its commands
    read it, its folders made."""
    from cdcstack import plumbing
    from cdcstack.sources import ENGINES

    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        stack = plumbing.StackConfig.from_env(ENGINES)
    for sub in ("logs", "run"):
        stack.path(sub).mkdir(parents=True, exist_ok=True)
    return stack


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    from cdcstack import mariadb, plumbing

    port = free_port()
    state = Path(tmp_path_factory.mktemp("qc"))
    env = {"CDC_STACK_DIR": str(state), "CDC_STACK_MARIADB_PORT": str(port), "CDC_STACK_SOURCE": "mysql"}
    stack = _stack_config(env)
    try:
        mariadb.start(stack, port)
        mariadb.run_sql(
            stack,
            f"CREATE DATABASE {DB}; CREATE USER 'cap'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}';"
            f" GRANT SELECT ON *.* TO 'cap'@'127.0.0.1';",
        )
        yield Source(stack, port)
    finally:
        plumbing.stop(stack, mariadb.COMPONENT, mariadb.SHUTDOWN)


@pytest.fixture
def capture(make_lake, source: Source, monkeypatch: pytest.MonkeyPatch):
    """A QueryCapture over a fresh lake namespace: `capture(tables, **args)`; a second call with the
    lake's namespace is a restarted job (new process memory, the same lake)."""
    from cdclake.jobs.jdbc_source import QueryCapture

    monkeypatch.setenv("QC_TEST_PASSWORD", PASSWORD)

    def make(tables: str, **overrides: str) -> QueryCapture:
        args = {
            "source": "jdbc",
            "jdbc_url": source.url,
            "jdbc_user": "cap",
            "jdbc_password": "env:QC_TEST_PASSWORD",
            "jdbc_tables": tables,
            "jdbc_lag_seconds": "0",
            **overrides,
        }
        lake = make_lake(**args)
        qc = QueryCapture(lake.spark, lake.settings, lake.processor)
        qc.lake = lake  # type: ignore[attr-defined]
        return qc

    return make


_batch = iter(range(1, 10_000))


def poll(qc: Any) -> int:
    return qc.poll(next(_batch))


def rows(qc: Any, table: str, order: str = "id") -> list[dict[str, Any]]:
    return qc.lake.rows(f"{DB}_{table}", order=order)


TYPES_TABLE = """CREATE TABLE {name} (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(40) NOT NULL,
  tier ENUM('gold','silver') NULL,
  balance DECIMAL(12,2) NULL,
  big BIGINT UNSIGNED NULL,
  born DATE NULL,
  seen DATETIME(6) NULL,
  stamp TIMESTAMP(6) NULL,
  at_time TIME(3) NULL,
  flag BIT(1) NULL,
  ratio DOUBLE NULL,
  blob_col VARBINARY(8) NULL,
  is_deleted TINYINT NOT NULL DEFAULT 0,
  updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
)"""


def test_inserts_updates_and_soft_deletes_reach_the_lake_with_the_log_paths_types(source, capture):
    source.sql(TYPES_TABLE.format(name="customer"))
    source.sql(
        "INSERT INTO customer (id, name, tier, balance, big, born, seen, stamp, at_time, flag, ratio, blob_col) VALUES "
        "(1, 'Ann', 'gold', -12.50, 18446744073709551615, '1984-03-12', '2024-01-03 09:15:00.123456',"
        " '2024-01-03 09:15:00.5', '-01:02:03.250', b'1', 0.25, X'00FF'),"
        "(2, 'Bob', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), (3, 'Cy', 'silver', 1, 0, NULL,"
        " NULL, NULL, NULL, b'0', NULL, NULL)"
    )
    qc = capture("shop.customer:updated_at", jdbc_soft_delete="is_deleted=1")
    assert poll(qc) == 1
    ann = rows(qc, "customer")[0]
    assert (ann["tier"], ann["balance"], ann["big"], str(ann["born"])) == (
        "gold",
        Decimal("-12.50"),
        Decimal("18446744073709551615"),
        "1984-03-12",
    )
    stamp = datetime(2024, 1, 3, 9, 15, 0, 500000, tzinfo=UTC).timestamp()  # written in the server's UTC
    assert (str(ann["seen"]), ann["stamp"].timestamp(), ann["at_time"]) == (
        "2024-01-03 09:15:00.123456",
        stamp,
        "-01:02:03.250000",
    )
    assert (ann["flag"], ann["ratio"], bytes(ann["blob_col"]), ann["_cdc_op"]) == (True, 0.25, b"\x00\xff", "u")
    types = {f.name: f.dataType.simpleString() for f in qc.lake.spark.table(qc.lake.table(f"{DB}_customer")).schema}
    assert [types[c] for c in ("id", "balance", "big", "born", "seen", "stamp", "flag")] == [
        "int",
        "decimal(12,2)",
        "decimal(20,0)",
        "date",
        "timestamp_ntz",
        "timestamp",
        "boolean",
    ]
    source.sql("UPDATE customer SET name = 'Bobby' WHERE id = 2; UPDATE customer SET is_deleted = 1 WHERE id = 3")
    assert poll(qc) == 1
    assert [(r["id"], r["name"]) for r in rows(qc, "customer")] == [(1, "Ann"), (2, "Bobby")]
    assert poll(qc) == 0  # nothing past the mark: no batch, no commit


def test_rows_at_one_timestamp_cut_by_the_poll_limit_are_all_read_and_the_next_poll_moves_past_them(source, capture):
    source.sql(
        "CREATE TABLE burst (id INT PRIMARY KEY, v INT, updated_at DATETIME(6) NOT NULL);"
        "INSERT INTO burst VALUES (1, 1, '2025-01-01 00:00:00'), (2, 2, '2025-01-01 00:00:01'),"
        " (3, 3, '2025-01-01 00:00:01'), (4, 4, '2025-01-01 00:00:01'), (5, 5, '2025-01-01 00:00:02')"
    )
    qc = capture("shop.burst:updated_at", jdbc_max_rows_per_poll="2")
    poll(qc)  # rows 1 and 2, completed by every row at 00:00:01 (3 and 4)
    assert [r["id"] for r in rows(qc, "burst")] == [1, 2, 3, 4]
    # The next poll starts at the mark, whose rows (2, 3, 4) outnumber the limit: it reads past them.
    poll(qc)
    assert [r["id"] for r in rows(qc, "burst")] == [1, 2, 3, 4, 5]


class Killed(Exception):
    """Where the job's fault hook would SIGKILL the process (local/faults.py): here it stops the run."""


class KillAfterCommit:
    """The point right after a poll's MERGEs committed, before the job moves its marks in memory."""

    def reached(self, point: str, batch_id: int) -> None:
        from cdclake.local import faults

        if point == faults.AFTER_COMMIT:
            raise Killed(batch_id)


def test_a_job_stopped_right_after_its_commit_restarts_from_the_lake_and_neither_skips_nor_repeats(source, capture):
    from cdclake.jobs.jdbc_source import run_polls

    source.sql(
        "CREATE TABLE orders (id INT PRIMARY KEY, qty INT, updated_at DATETIME(6) NOT NULL);"
        "INSERT INTO orders VALUES (1, 1, '2025-02-01 00:00:00'), (2, 2, '2025-02-01 00:00:01')"
    )
    first = capture("shop.orders:updated_at", run_once="true")
    with pytest.raises(Killed):  # the run-once loop, stopped after its first poll's commit
        run_polls(first.lake.spark, first.lake.settings, KillAfterCommit(), processor=first.lake.processor)
    before = {r["id"]: r["_cdc_ingested_at"] for r in rows(first, "orders")}
    assert sorted(before) == [1, 2]
    # Meanwhile one row changes and one is added; the next run knows only the lake.
    source.sql(
        "UPDATE orders SET qty = 20, updated_at = '2025-02-01 00:00:05' WHERE id = 2;"
        "INSERT INTO orders VALUES (3, 3, '2025-02-01 00:00:06')"
    )
    again = capture("shop.orders:updated_at", namespace=first.lake.namespace, run_once="true")
    mark = int(datetime(2025, 2, 1, 0, 0, 1, tzinfo=UTC).timestamp() * 1_000_000)
    assert list(again.marks.values()) == [mark]  # row 2's position, as the lake holds it
    assert run_polls(again.lake.spark, again.lake.settings, processor=again.lake.processor) == {}
    after = rows(again, "orders")
    assert [(r["id"], r["qty"]) for r in after] == [(1, 1), (2, 20), (3, 3)]
    assert after[0]["_cdc_ingested_at"] == before[1]  # row 1 was not applied again


def test_a_new_source_column_shows_up_in_the_lake_with_its_default_for_unchanged_rows(source, capture):
    source.sql(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(10), updated_at DATETIME(6) NOT NULL);"
        "INSERT INTO items VALUES (1, 'a', '2025-03-01 00:00:00'), (2, 'b', '2025-03-01 00:00:00')"
    )
    qc = capture("shop.items:updated_at")
    poll(qc)
    source.sql(
        "ALTER TABLE items ADD COLUMN colour VARCHAR(10) DEFAULT 'it''s green';"
        "UPDATE items SET colour = 'red', updated_at = '2025-03-01 00:00:01' WHERE id = 1"
    )
    poll(qc)
    # Row 2 did not change: it reads the column's default in the lake as at the source.
    assert [(r["id"], r["colour"]) for r in rows(qc, "items")] == [(1, "red"), (2, "it's green")]


def test_hard_deletes_are_found_by_the_key_reconciliation(source, capture):
    source.sql(
        "CREATE TABLE tags (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL);"
        "INSERT INTO tags VALUES (1, '2025-04-01'), (2, '2025-04-01'), (3, '2025-04-01')"
    )
    qc = capture("shop.tags:updated_at", jdbc_reconcile_every_polls="2")
    poll(qc)
    source.sql("DELETE FROM tags WHERE id = 2")
    assert poll(qc) == 1  # the second poll reconciles
    assert [r["id"] for r in rows(qc, "tags")] == [1, 3]


def test_a_table_without_its_modification_column_is_refused_with_the_fix_until_it_has_one(source, capture):
    from cdclake.jobs.jdbc_source import run_polls

    source.sql("CREATE TABLE plain (id INT PRIMARY KEY, v INT); INSERT INTO plain VALUES (1, 1)")
    qc = capture("shop.plain:updated_at,shop.later:updated_at", run_once="true")
    assert poll(qc) == 0  # neither read; the job goes on
    # A run-once run ends naming both (job.main: exit code 3 and a line each).
    unread = run_polls(qc.lake.spark, qc.lake.settings, processor=qc.lake.processor)
    assert sorted(unread) == ["shop.later", "shop.plain"]
    assert unread["shop.plain"].startswith("query capture could not read it: table shop.plain has no modification")
    assert "ON UPDATE CURRENT_TIMESTAMP" in qc.refused["shop.plain"]
    assert "not found" in qc.refused["shop.later"]
    assert not os.path.exists(qc.lake.dead_dir)
    # Fixed at the source (the DDL of sql/query_capture.sql): the next poll reads every row.
    source.sql(
        "ALTER TABLE plain ADD COLUMN updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
        " ON UPDATE CURRENT_TIMESTAMP(6)"
    )
    assert poll(qc) == 1 and "shop.plain" not in qc.refused
    assert [r["v"] for r in rows(qc, "plain")] == [1]


@pytest.fixture(scope="module")
def pg_stack() -> Iterator[Any]:
    """A private PostgreSQL as `local-stack up --source postgres` makes it (salesdb, the debezium
    user and its password file), without Kafka or Connect."""
    from cdcstack import plumbing, postgres

    port = free_port()
    # Outside pytest's tmp dir: that one is private to its owner, and the server runs as `postgres`.
    state = Path(tempfile.mkdtemp(prefix="cdc-qc-pg-"))
    state.chmod(0o755)
    env = {"CDC_STACK_DIR": str(state), "CDC_STACK_POSTGRES_PORT": str(port)}
    stack = _stack_config({**env, "CDC_STACK_SOURCE": "postgres"})
    try:
        postgres.start(stack, port)
        postgres.bootstrap(stack)
        yield stack, port
    finally:
        plumbing.stop(stack, postgres.COMPONENT, postgres.SHUTDOWN)
        shutil.rmtree(state, ignore_errors=True)


def test_postgres_demo_table_with_the_shipped_trigger_is_captured_through_the_same_path(pg_stack, make_lake):
    from cdclake.jobs.jdbc_source import QueryCapture
    from cdcstack import postgres

    stack, port = pg_stack
    root = Path(__file__).resolve().parents[2]
    for f in ("sql/postgres/01_create_customer.sql", "sql/postgres/query_capture.sql"):
        postgres.run_sql(stack, (root / f).read_text())
    lake = make_lake(
        source="jdbc",
        jdbc_url=f"jdbc:postgresql://127.0.0.1:{port}/salesdb",
        jdbc_user="debezium",
        jdbc_password=f"file:{postgres.secret_file(stack)}",
        jdbc_tables="public.customer:cdc_modified_at",
        jdbc_lag_seconds="0",
    )
    qc = QueryCapture(lake.spark, lake.settings, lake.processor)
    count = int(postgres.run_sql(stack, "SELECT count(*) FROM customer").strip())
    assert qc.poll(1) == 1
    assert len(lake.rows("public_customer", order="cust_id")) == count
    # The application sets updated_at itself; the trigger moves cdc_modified_at all the same.
    postgres.run_sql(stack, "UPDATE customer SET city = 'Bergen', updated_at = '2020-01-01' WHERE cust_id = 7")
    assert qc.poll(2) == 1
    row = {r["cust_id"]: r for r in lake.rows("public_customer", order="cust_id")}[7]
    assert (row["city"], row["mktsegment"], str(row["updated_at"]), row["_cdc_op"]) == (
        "Bergen",
        "HOUSEHOLD",
        "2020-01-01 00:00:00",
        "u",
    )
    assert qc.poll(3) == 0
