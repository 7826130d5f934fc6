"""--transactions keep: the job never applies part of a source transaction. The records are a captured
session of transfers between accounts (tests/stack/capture_transactions.py, both engines, the
connector's `provide.transaction.metadata` on): each transfer two account updates and a transfer
row in one transaction, so a transfer applied in part breaks the accounts' balances."""

from __future__ import annotations

import logging
import time
from decimal import Decimal
from typing import Any

import pytest
from cdc_events import captured_session


def _balances(lake, ns: str) -> dict[int, Decimal]:
    return {r["id"]: Decimal(str(r["balance"])) for r in lake.rows(f"{ns}_account")}


def assert_transfers_balance(lake, ns: str, opening: dict[int, Decimal]) -> list[int]:
    """Every account's balance is its opening balance moved by the transfers the lake holds (the
    invariant a half-applied transfer breaks); the transfers' ids."""
    expected = dict(opening)
    transfers = lake.rows(f"{ns}_transfer")
    for t in transfers:
        amount = Decimal(str(t["amount"]))
        expected[t["from_id"]] -= amount
        expected[t["to_id"]] += amount
    assert _balances(lake, ns) == expected
    return [t["id"] for t in transfers]


def split_transfers(engine: str, ns: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The captured session in two batches: the transfer topic's fourth record onwards comes a batch
    later, so the account updates and the ENDs of the fourth to sixth transfers (the sixth a reversal
    deleting one) are read first, their transfer records not. (first, late, source rows)."""
    records, source = captured_session(f"{engine}/transactions/transfers.json")
    # Without the snapshot of `customer` and MariaDB's schema-change topic (no transaction of the
    # session touches them): a table fewer to write per batch.
    records = [r for r in records if r["topic"] not in ("salesdb", f"salesdb.{ns}.customer")]
    late = [r for r in records if r["topic"] == f"salesdb.{ns}.transfer" and r["offset"] >= 3]
    return [r for r in records if r not in late], late, source


@pytest.mark.parametrize(("engine", "ns"), [("mariadb", "salesdb"), ("postgres", "public")])
def test_captured_transfers_split_mid_transaction_are_applied_whole_once_across_a_restart_and_a_rerun(
    make_lake, tmp_path, engine, ns
):
    first, late, source = split_transfers(engine, ns)
    opening = _openings(source)
    paths = {"checkpoint_location": str(tmp_path / "ckpt"), "dead_letter_path": str(tmp_path / "dead")}
    lake = make_lake(transactions="keep", **paths)
    report = lake.apply(first, batch_id=0)
    # Held: those three (open) and the account-only transaction after them, records and BEGIN/ENDs.
    assert (report.held_records, report.held_open, report.dead) == (15, 3, 0)
    assert assert_transfers_balance(lake, ns, opening) == [1, 2, 3]  # nothing of the fourth, in any table
    lake = make_lake(transactions="keep", namespace=lake.namespace, **paths)  # a new process
    report = lake.apply(late, batch_id=1)
    assert (report.held_records, report.dead) == (0, 0)
    again = lake.apply(late, batch_id=1)  # Spark runs batch 1 again after a crash: same id, same offsets
    assert (again.changes, again.held_records) == (report.changes, 0)
    assert assert_transfers_balance(lake, ns, opening) == [t["id"] for t in source["transfer"]]
    assert _balances(lake, ns) == {a["id"]: Decimal(str(a["balance"])) for a in source["account"]}


def _openings(source: dict[str, Any]) -> dict[int, Decimal]:
    """The accounts' balances before any transfer: the source's at the end, its transfers undone."""
    out = {a["id"]: Decimal(str(a["balance"])) for a in source["account"]}
    for t in source["transfer"]:
        out[t["from_id"]] += Decimal(str(t["amount"]))
        out[t["to_id"]] -= Decimal(str(t["amount"]))
    return out


def test_ignore_applies_each_change_in_the_batch_that_reads_it(make_lake):
    first, _, source = split_transfers("mariadb", "salesdb")
    lake = make_lake()
    report = lake.apply(first, batch_id=0)
    assert report.held_records is None and report.dead == 0  # BEGIN/END records are no dead letters
    # The fourth to sixth transfers' account updates are in, their transfer records not: unbalanced.
    with pytest.raises(AssertionError):
        assert_transfers_balance(lake, "salesdb", _openings(source))


def test_a_transaction_that_never_ends_is_applied_after_the_hold_bound_with_a_warning(make_lake, caplog):
    first, _, _ = split_transfers("mariadb", "salesdb")
    lake = make_lake(transactions="keep", transaction_hold_seconds="1")
    assert lake.apply(first, batch_id=0).held_open == 3
    time.sleep(1.2)
    with caplog.at_level(logging.WARNING, logger="cdclake"):
        report = lake.apply([], batch_id=1)
    assert (report.released_open, report.held_records) == (3, 0)
    assert len(lake.rows("salesdb_account")) == 4 and len(lake.rows("salesdb_transfer")) == 3
    warned = [r.getMessage() for r in caplog.records if "--transaction_hold_seconds" in r.getMessage()]
    assert len(warned) == 3 and "file=binlog.000001,pos=12336" in warned[0]
