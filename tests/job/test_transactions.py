"""--transactions keep: the job never applies part of a source transaction. Change events carry the
transaction block and the transaction topic its BEGIN/END records, as MariaDB's connector writes
them with `provide.transaction.metadata=true` (ids `file=<binlog>,pos=<BEGIN pos>`)."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from cdc_events import Events, connect_json, customer

TXN_TOPIC = "mdb.transaction"
CUSTOMERS, ACCOUNTS = "inventory_customers", "inventory_accounts"
_STATUS_SCHEMA = {
    "type": "struct",
    "name": "io.debezium.connector.common.TransactionMetadataValue",
    "version": 1,
    "optional": False,
    "fields": [
        {"type": "string", "optional": False, "field": "status"},
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": True, "field": "event_count"},
        {
            "type": "array",
            "optional": True,
            "field": "data_collections",
            "items": {
                "type": "struct",
                "optional": False,
                "name": "event.collection",
                "version": 1,
                "fields": [
                    {"type": "string", "optional": False, "field": "data_collection"},
                    {"type": "int64", "optional": False, "field": "event_count"},
                ],
            },
        },
        {"type": "int64", "optional": False, "field": "ts_ms"},
    ],
}
_KEY_SCHEMA = {
    "type": "struct",
    "name": "io.debezium.connector.common.TransactionMetadataKey",
    "optional": False,
    "fields": [{"type": "string", "optional": False, "field": "id"}],
}


class Source:
    """Transactions over two tables (customers, accounts) and the transaction topic."""

    def __init__(self) -> None:
        self.customers = Events()
        self.accounts = Events(topic="mdb.inventory.accounts", table="accounts")
        self.txn_offset = 0
        self.pos = 1000  # the binlog position, across both tables
        self.rows: list[dict[str, Any]] = []

    def _status(self, status: str, txid: str, counts: dict[str, int] | None) -> None:
        payload = {"status": status, "id": txid, "event_count": None, "data_collections": None, "ts_ms": 1795303971000}
        if counts is not None:
            payload["event_count"] = sum(counts.values())
            payload["data_collections"] = [{"data_collection": c, "event_count": n} for c, n in counts.items()]
        self.rows.append(
            {
                "topic": TXN_TOPIC,
                "partition": 0,
                "offset": self.txn_offset,
                "timestamp": datetime.fromtimestamp(1795303971, UTC),
                "key": connect_json({"schema": _KEY_SCHEMA, "payload": {"id": txid}}),
                "value": connect_json({"schema": _STATUS_SCHEMA, "payload": payload}),
            }
        )
        self.txn_offset += 1

    def begin(self, pos: int) -> str:
        txid = f"file=mysql-bin.000004,pos={pos}"
        self._status("BEGIN", txid, None)
        return txid

    def change(self, txid: str, table: Events, id_: int, order: int, name: str = "Ann") -> None:
        rec = table.record("c", {"id": id_}, customer(id_, name), pos=self.pos)
        self.pos += 100
        value = json.loads(rec["value"])
        value["payload"]["transaction"] = {"id": txid, "total_order": order, "data_collection_order": order}
        rec["value"] = connect_json(value)
        self.rows.append(rec)

    def end(self, txid: str, customers: int = 0, accounts: int = 0) -> None:
        counts = {"inventory.customers": customers, "inventory.accounts": accounts}
        self._status("END", txid, {c: n for c, n in counts.items() if n})

    def take(self) -> list[dict[str, Any]]:
        self.customers.take()
        self.accounts.take()
        out, self.rows = self.rows, []
        return out


def first_batch(src: Source) -> str:
    """T0 whole (customer 1), then T1's BEGIN and two of its three changes: its END is not read yet."""
    t0 = src.begin(900)
    src.change(t0, src.customers, 1, 1)
    src.end(t0, customers=1)
    t1 = src.begin(1500)
    src.change(t1, src.customers, 2, 1)
    src.change(t1, src.accounts, 2, 2)
    return t1


def second_batch(src: Source, t1: str) -> None:
    src.change(t1, src.accounts, 3, 3)
    src.end(t1, customers=1, accounts=2)


def ids(lake, name: str) -> list[int]:
    if not lake.spark.catalog.tableExists(lake.table(name)):
        return []
    return sorted(lake.by_id(name))


def test_transaction_split_over_two_batches_is_applied_whole_once_across_a_restart_and_a_rerun(make_lake, tmp_path):
    paths = {"checkpoint_location": str(tmp_path / "ckpt"), "dead_letter_path": str(tmp_path / "dead")}
    first, src = make_lake(transactions="keep", **paths), Source()
    t1 = first_batch(src)
    report = first.apply(src.take(), batch_id=0)
    assert (ids(first, CUSTOMERS), ids(first, ACCOUNTS)) == ([1], [])  # nothing of T1, in any table
    assert (report.held_records, report.held_open, report.dead) == (3, 1, 0)  # T1's BEGIN and its two changes
    lake = make_lake(transactions="keep", namespace=first.namespace, **paths)  # a new process
    second_batch(src, t1)
    batch1 = src.take()
    report = lake.apply(batch1, batch_id=1)
    assert (ids(lake, CUSTOMERS), ids(lake, ACCOUNTS)) == ([1, 2], [2, 3])
    assert (report.changes, report.held_records, report.dead) == (3, 0, 0)
    again = lake.apply(batch1, batch_id=1)  # Spark runs batch 1 again after a crash: same id, same offsets
    assert (again.changes, again.held_records) == (3, 0)
    t2 = src.begin(2500)
    src.change(t2, src.customers, 4, 1)
    src.end(t2, customers=1)
    report = lake.apply(src.take(), batch_id=2)
    assert report.changes == 1  # T1's held records were applied by batch 1, not again by batch 2
    assert (ids(lake, CUSTOMERS), ids(lake, ACCOUNTS)) == ([1, 2, 4], [2, 3])


def test_ignore_applies_each_change_in_the_batch_that_reads_it(make_lake):
    lake, src = make_lake(), Source()
    first_batch(src)
    report = lake.apply(src.take(), batch_id=0)
    assert (ids(lake, CUSTOMERS), ids(lake, ACCOUNTS)) == ([1, 2], [2])
    assert report.held_records is None and report.dead == 0  # BEGIN/END records are no dead letters


def test_a_transaction_that_never_ends_is_applied_after_the_hold_bound_with_a_warning(make_lake, caplog):
    lake, src = make_lake(transactions="keep", transaction_hold_seconds="1"), Source()
    t1 = first_batch(src)
    assert lake.apply(src.take(), batch_id=0).held_records == 3
    time.sleep(1.2)
    with caplog.at_level(logging.WARNING, logger="cdclake"):
        report = lake.apply([], batch_id=1)
    assert (report.released_open, report.held_records) == (1, 0)
    assert (ids(lake, CUSTOMERS), ids(lake, ACCOUNTS)) == ([1, 2], [2])
    assert any(t1 in r.getMessage() and "--transaction_hold_seconds" in r.getMessage() for r in caplog.records)
