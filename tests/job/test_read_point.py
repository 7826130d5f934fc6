"""The consistent read point (--transactions keep): after a batch the job names, for every table, the
version that holds the lake as of that batch, so a reader never sees half of a source transaction,
even between two tables' commits or after a batch that failed between them. Real transfers between
accounts captured from MariaDB's connector with transaction metadata on: each transfer debits one
account, credits another and records itself, so every account's balance is 100.00 plus what the
transfer table says it received minus what it sent."""

from __future__ import annotations

from typing import Any

import pytest
from cdc_events import Events, customer
from transfers import ACCOUNT, TRANSFER, batches, ledger_holds


def at(lake: Any, name: str, version: str | None = None) -> dict[int, dict[str, Any]]:
    travel = f" VERSION AS OF {version}" if version else ""
    return {r["id"]: r.asDict() for r in lake.spark.sql(f"SELECT * FROM {lake.table(name)}{travel}").collect()}


def point(lake: Any) -> dict[str, str]:
    return {r["table_name"]: r["version"] for r in lake.spark.table(lake.table("cdc__read_point")).collect()}


@pytest.fixture
def transfers() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    return batches()


def test_the_read_point_reads_whole_transactions_also_after_a_batch_failed_between_two_tables(
    make_lake, transfers, monkeypatch
):
    first, second, source = transfers
    lake = make_lake(transactions="keep", table_concurrency="1")  # account commits before transfer
    lake.apply(first, batch_id=0)
    after_first = point(lake)
    assert set(after_first) == {"salesdb_customer", ACCOUNT, TRANSFER}
    assert ledger_holds(at(lake, ACCOUNT, after_first[ACCOUNT]), at(lake, TRANSFER, after_first[TRANSFER]))
    assert len(at(lake, TRANSFER, after_first[TRANSFER])) == 2  # the third transfer was held whole

    execute = type(lake.processor)._execute

    def crash_before_transfer(self, batch, planned):
        if planned.ident.endswith(TRANSFER):
            raise RuntimeError("killed between the account's commit and the transfer's")
        return execute(self, batch, planned)

    monkeypatch.setattr(type(lake.processor), "_execute", crash_before_transfer)
    with pytest.raises(RuntimeError, match="killed between"):
        lake.apply(second, batch_id=1)
    # The tables as they are now show the account debited and credited without its transfer;
    # the read point still names the versions of batch 0.
    assert not ledger_holds(at(lake, ACCOUNT), at(lake, TRANSFER))
    assert point(lake) == after_first
    assert ledger_holds(at(lake, ACCOUNT, after_first[ACCOUNT]), at(lake, TRANSFER, after_first[TRANSFER]))

    monkeypatch.setattr(type(lake.processor), "_execute", execute)
    lake.apply(second, batch_id=1)  # Spark runs the batch again
    now = point(lake)
    accounts, transfers_now = at(lake, ACCOUNT, now[ACCOUNT]), at(lake, TRANSFER, now[TRANSFER])
    assert ledger_holds(accounts, transfers_now)
    assert {i: (r["owner"], float(r["balance"])) for i, r in accounts.items()} == {
        r["id"]: (r["owner"], r["balance"]) for r in source["account"]
    }
    assert sorted(transfers_now) == [r["id"] for r in source["transfer"]]
    assert now["salesdb_customer"] == after_first["salesdb_customer"]  # not written by batch 1: as before


def test_ignore_publishes_no_read_point(make_lake, transfers):
    first, _, _ = transfers
    lake = make_lake()
    lake.apply(first, batch_id=0)
    assert not lake.spark.catalog.tableExists(lake.table("cdc__read_point"))


def test_a_table_dropped_at_the_source_leaves_the_read_point_and_the_next_batches_go_on(make_lake, transfers):
    first, second, _ = transfers
    lake = make_lake(transactions="keep", dropped_table_policy="drop")
    lake.apply(first + second, batch_id=0)  # every transaction whole: nothing held
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))
    lake.apply(ev.take(), batch_id=1)
    assert "inventory_customers" in point(lake)
    ev.schema_change("DROP TABLE customers", change="DROP")
    assert lake.apply(ev.take(), batch_id=2).tables[0].source_dropped == "dropped"
    assert set(point(lake)) == {"salesdb_customer", ACCOUNT, TRANSFER}
