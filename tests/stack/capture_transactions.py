"""Capture tests/fixtures/debezium/<dialect>/transactions/transfers.json from a live local stack.

    PYTHONPATH=tests:tests/stack .local/venv/bin/python tests/stack/capture_transactions.py --source mysql

starts a stack of its own (free ports, own state directory, torn down at the end) with the connector's
transaction metadata on (CDC_STACK_TRANSACTIONS=keep), runs multi-table transactions on two tables,
`account` and `transfer` (a transfer moves an amount between two accounts and records itself: the sum of
the balances never changes), and writes every record of the topics the job reads (the two tables', the
transaction topic `salesdb.transaction` with BEGIN/END and per-table event counts, and the others the
job's topic pattern matches), in the form of cdc_events.captured_session, with the source's rows of the
two tables at the end.

Run it under the shared lock (`flock /tmp/cdc-heavy.lock ...`): it starts a whole stack.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

import stack_types as st  # noqa: E402
from capture_avro_fixtures import settled  # noqa: E402
from cdcstack import sources  # noqa: E402
from stack_helpers import SQL, Stack  # noqa: E402

OUT = HERE.parent / "fixtures" / "debezium"
DIALECT = {"mysql": "mariadb", "postgres": "postgres"}
NAMESPACE = {"mysql": "salesdb", "postgres": "public"}
COLUMNS = {"account": ("id", "owner", "balance"), "transfer": ("id", "from_id", "to_id", "amount")}
TABLES = tuple(COLUMNS)
# Four accounts of 100.00 in one transaction, then transfers: each one transaction of two updates and an
# insert over both tables; one of them also deletes the transfer it reverses. A statement outside an
# explicit transaction is a transaction of its own.
OPENING = "INSERT INTO account VALUES (1, 'ann', 100.00), (2, 'bob', 100.00), (3, 'cy', 100.00), (4, 'di', 100.00);"
TRANSFERS = [(1, 1, 2, "10.00"), (2, 2, 3, "25.50"), (3, 3, 4, "5.25"), (4, 4, 1, "40.00"), (5, 1, 3, "0.75")]


def transfer(begin: str, n: int, src: int, dst: int, amount: str) -> str:
    return (
        f"{begin} UPDATE account SET balance = balance - {amount} WHERE id = {src};"
        f" UPDATE account SET balance = balance + {amount} WHERE id = {dst};"
        f" INSERT INTO transfer VALUES ({n}, {src}, {dst}, {amount}); COMMIT;"
    )


def workload(source: str) -> list[str]:
    pg = source == "postgres"
    begin = "BEGIN;" if pg else "START TRANSACTION;"
    create = (
        "CREATE TABLE account (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, balance DECIMAL(12,2) NOT NULL);"
        " CREATE TABLE transfer (id INT PRIMARY KEY, from_id INT NOT NULL, to_id INT NOT NULL,"
        " amount DECIMAL(12,2) NOT NULL);"
    )
    if pg:
        create = (
            f"SET ROLE salesdb_owner; {create} ALTER TABLE account REPLICA IDENTITY FULL;"
            " ALTER TABLE transfer REPLICA IDENTITY FULL; ALTER PUBLICATION dbz_publication ADD TABLE account, transfer;"
        )
    steps = [create, f"{begin} {OPENING} COMMIT;"]
    steps += [transfer(begin, *t) for t in TRANSFERS]
    # A reversal: the money goes back and the transfer it reverses is deleted, in one transaction.
    steps.append(
        f"{begin} UPDATE account SET balance = balance + 0.75 WHERE id = 1;"
        " UPDATE account SET balance = balance - 0.75 WHERE id = 3; DELETE FROM transfer WHERE id = 5; COMMIT;"
    )
    steps.append("UPDATE account SET owner = 'ann b' WHERE id = 1;")  # autocommit: a transaction of one change
    return [f"SET ROLE salesdb_owner; {s}" if pg and not s.startswith("SET ROLE") else s for s in steps]


def source_rows(stack: Stack, source: str) -> dict[str, Any]:
    """Each table's rows at the end, as JSON objects ordered by id."""
    out = {}
    for table, columns in COLUMNS.items():
        if source == "postgres":
            q = f"SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY id), '[]')::text FROM {table} t;"
        else:
            pairs = ", ".join(f"'{c}', {c}" for c in columns)
            q = f"SELECT COALESCE(JSON_ARRAYAGG(JSON_OBJECT({pairs}) ORDER BY id), '[]') FROM {table};"
        out[table] = json.loads(stack.sql(q).strip().splitlines()[-1])
    return out


def stack_topics(stack: Stack) -> list[str]:
    from confluent_kafka import Consumer

    probe = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "capture-probe"})
    try:
        return list(probe.list_topics(timeout=10).topics)
    finally:
        probe.close()


def capture(stack: Stack, source: str) -> Path:
    for statement in workload(source):
        stack.sql(statement)
    ns = NAMESPACE[source]
    settled(stack, [*(f"salesdb.{ns}.{t}" for t in TABLES), "salesdb.transaction"])
    # Every topic the job reads (its pattern): the snapshot, DDL and heartbeat-table records are in
    # transactions too (PostgreSQL's END records count the DDL capture's and heartbeat table's events).
    topics = sorted(
        t for t in stack_topics(stack) if re.fullmatch(sources.stack_config(source).engine.JOB_TOPIC_PATTERN, t)
    )
    records = [{"topic": t, **m} for t in topics for m in st.topic_messages(stack, t)]
    ends = [r for r in records if r["topic"] == "salesdb.transaction" and r["value"]["payload"]["status"] == "END"]
    assert len(ends) >= len(TRANSFERS) + 2, f"{len(ends)} END records: is the transaction metadata on?"
    out = OUT / DIALECT[source] / "transactions" / "transfers.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "_comment": (
            f"Captured from the local stack with provide.transaction.metadata on (tests/stack/capture_transactions.py "
            f"--source {source}): every record of the topics the job reads ({', '.join(topics)}) and the source's "
            "rows of account and transfer at the end."
        ),
        "records": records,
        "source": source_rows(stack, source),
    }
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out.relative_to(HERE.parents[1])}: {len(records)} records, {len(ends)} transactions")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=sorted(DIALECT), required=True)
    args = parser.parse_args()
    from conftest import private_stack

    init = SQL / "postgres" / "01_create_customer.sql" if args.source == "postgres" else SQL / "01_create_customer.sql"
    with private_stack("cdc-capture-", args.source, init, transactions="keep") as stack:
        os.environ.update({k: v for k, v in stack.env.items() if k.startswith("CDC_STACK_")})
        capture(stack, args.source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
