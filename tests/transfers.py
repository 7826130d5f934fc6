"""The transfers captured from MariaDB with transaction metadata on (tests/fixtures/debezium/mariadb/
transactions/transfers.json, tests/stack/capture_transactions.py), cut into two batches as Spark's Kafka
source may cut them, and the invariant every consistent read of them keeps."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from cdc_events import captured_session

ACCOUNT, TRANSFER = "salesdb_account", "salesdb_transfer"
# The MariaDB transfers fixture's transactions in commit order: the opening balances, five transfers,
# the reversal of the fifth, the owner's rename (tests/stack/capture_transactions.py).
OPENING, FIRST, SECOND, THIRD = (f"file=binlog.000001,pos={p}" for p in (10025, 10374, 11031, 11686))


def txid(record: dict[str, Any]) -> str | None:
    value = json.loads(record["value"]) if record["value"] else None
    payload = (value or {}).get("payload") or {}
    return (
        payload.get("id") if record["topic"] == "salesdb.transaction" else (payload.get("transaction") or {}).get("id")
    )


def split(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two batches as Spark's Kafka source may cut them: the first ends inside the third transfer
    (its account updates read, its transfer row and END not yet); tombstones and records outside any
    transaction (snapshot, DDL) go with the first."""
    early = {OPENING, FIRST, SECOND}
    first: list[dict[str, Any]] = []
    second: list[dict[str, Any]] = []
    for r in records:
        t = txid(r)
        inside_third = t == THIRD and r["topic"] == "salesdb.salesdb.account"
        (first if t is None or t in early or inside_third else second).append(r)
    return first, second


def ledger_holds(accounts: dict[int, dict[str, Any]], transfers: dict[int, dict[str, Any]]) -> bool:
    """Every balance is 100.00 plus what the account received minus what it sent."""
    for a in accounts.values():
        moved = sum(t["amount"] if t["to_id"] == a["id"] else -t["amount"] for t in transfers.values()
                    if a["id"] in (t["from_id"], t["to_id"]))  # fmt: skip
        if a["balance"] != Decimal("100.00") + moved:
            return False
    return True


def batches() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The two batches and the source's rows at the end."""
    records, source = captured_session("mariadb/transactions/transfers.json")
    return (*split(records), source)
