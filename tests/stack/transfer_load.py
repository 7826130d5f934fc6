"""Transfers between accounts driven into a stack's source (MariaDB or PostgreSQL), and a reader that
polls the lake's read point all along the way docs/OPERATIONS.md ("A consistent read point") tells
users to: read `cdc__read_point`, then each table at the snapshot it names, here with DuckDB, a reader
outside the job. Each transfer is one source transaction over both tables (two account updates and
a transfer row), so a reader that sees part of one breaks tests/transfers.py's ledger: every balance is
100.00 plus what the account received minus what it sent."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from pipeline_job import batch_ids, checkpoint, job_log_since_start, job_running, wait_committed
from stack_helpers import Stack, reconciled, run_script
from transfers import ledger_holds

ACCOUNTS = 20
POINT_TABLE = "cdc__read_point"
CRASH = "between-table-commits"  # glue_scripts/cdclake/local/faults.py
# Transfers: before the crash run (the read point names both tables), in the run the job is killed in,
# and while the restarted job catches up, in parts: the first while the job restarts, each later one
# once a read point holds the one before.
OPENING, KILLED, AFTER_PARTS = 20, 700, (300, 100, 100)
TOTAL = OPENING + KILLED + sum(AFTER_PARTS)


def transfer(n: int) -> tuple[int, int, str]:
    """Transfer `n`: from, to (never the same account) and an amount that differs from its neighbours'."""
    src = n % ACCOUNTS + 1
    dst = (src + n % (ACCOUNTS - 1)) % ACCOUNTS + 1
    return src, dst, f"{n % 50 + 1}.{n % 97:02d}"


@dataclass(frozen=True)
class TransferLoad:
    """The workload's SQL for one source engine; `prefix` is the lake tables' (`salesdb`, `public`)."""

    pg: bool
    prefix: str

    @property
    def tables(self) -> tuple[str, str]:
        return f"{self.prefix}_account", f"{self.prefix}_transfer"

    def opening(self) -> str:
        """The two tables and ACCOUNTS accounts of 100.00, opened in one transaction."""
        create = (
            "CREATE TABLE account (id INT PRIMARY KEY, owner VARCHAR(20) NOT NULL, balance DECIMAL(12,2) NOT NULL);\n"
            "CREATE TABLE transfer (id INT PRIMARY KEY, from_id INT NOT NULL, to_id INT NOT NULL,"
            " amount DECIMAL(12,2) NOT NULL);\n"
        )
        if self.pg:
            create += (
                "ALTER TABLE account REPLICA IDENTITY FULL; ALTER TABLE transfer REPLICA IDENTITY FULL;\n"
                "ALTER PUBLICATION dbz_publication ADD TABLE account, transfer;\n"
            )
        rows = ", ".join(f"({i}, 'owner {i}', 100.00)" for i in range(1, ACCOUNTS + 1))
        return self._session(create + f"{self._begin()} INSERT INTO account VALUES {rows}; COMMIT;\n")

    def transfers(self, first: int, count: int) -> str:
        """Transfers first .. first + count - 1, one source transaction each."""
        lines = []
        for n in range(first, first + count):
            src, dst, amount = transfer(n)
            lines.append(
                f"{self._begin()} UPDATE account SET balance = balance - {amount} WHERE id = {src};"
                f" UPDATE account SET balance = balance + {amount} WHERE id = {dst};"
                f" INSERT INTO transfer VALUES ({n}, {src}, {dst}, {amount}); COMMIT;\n"
            )
        return self._session("".join(lines))

    def run(self, stack: Stack, sql: str, folder: Path, name: str) -> None:
        path = folder / f"{name}.sql"
        path.write_text(sql)
        stack.cli("sql", str(path))

    def _begin(self) -> str:
        return "BEGIN;" if self.pg else "START TRANSACTION;"

    def _session(self, sql: str) -> str:
        return f"SET ROLE salesdb_owner;\n{sql}" if self.pg else sql


@dataclass
class Seen:
    """What the reader saw at one read point."""

    versions: tuple[str, str]  # the account's and the transfer's snapshot ids
    transfers: int
    whole: bool  # the ledger holds


@dataclass
class PointReader:
    """Polls the read point in a thread of its own while the job runs, and reads both tables at it."""

    warehouse: Path
    tables: tuple[str, str]
    seen: list[Seen] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PointReader:
        self._thread = threading.Thread(target=self._poll, name="read-point-reader", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _poll(self) -> None:
        from cdctools import lake_reader as lake

        con = lake.connect()
        point, read_at = lake.table_location(self.warehouse, "cdc", POINT_TABLE), None
        try:
            while not self._stop.is_set():
                # The point's metadata file read last time: the same point names the same snapshots,
                # which never change, so reading again would see what was seen (three scans, 5 times a second).
                meta = lake.current_metadata(point) if lake.exists(point) else None
                if meta is not None and meta == read_at:
                    self._stop.wait(0.2)
                    continue
                try:
                    seen, read_at = self.read(con), meta
                except Exception as e:  # kept and asserted on by the test: a read point the reader cannot read
                    self.errors.append(f"{type(e).__name__}: {e}")
                    seen = None
                if seen is not None and (not self.seen or self.seen[-1].versions != seen.versions):
                    self.seen.append(seen)
                self._stop.wait(0.2)
        finally:
            con.close()

    def read(self, con: Any) -> Seen | None:
        """Both tables at the read point, once it names both; None before."""
        from cdctools import lake_reader as lake

        location = lake.table_location(self.warehouse, "cdc", POINT_TABLE)
        if not lake.exists(location):
            return None
        point = {r["table_name"]: r["version"] for r in lake.rows(con, location)}
        if not all(t in point for t in self.tables):
            return None
        accounts, transfers = (self.at(con, t, point[t]) for t in self.tables)
        versions = (point[self.tables[0]], point[self.tables[1]])
        return Seen(versions, len(transfers), ledger_holds(accounts, transfers))

    def at(self, con: Any, table: str, version: str | None = None) -> dict[int, dict[str, Any]]:
        """The table's rows by id at an Iceberg snapshot (None: as it is now)."""
        from cdctools import lake_reader as lake

        meta = lake.current_metadata(lake.table_location(self.warehouse, "cdc", table))
        snapshot = f", snapshot_from_id = {int(version)}" if version else ""
        cur = con.execute(f"SELECT * FROM iceberg_scan('{meta}'{snapshot})")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        return {r["id"]: r for r in rows}

    def wait_for(self, transfers: int, timeout: float = 300) -> Seen:
        """The first read point that holds `transfers` transfers or more."""
        deadline = time.monotonic() + timeout
        while not (self.seen and self.seen[-1].transfers >= transfers):
            assert time.monotonic() < deadline, f"no read point with {transfers} transfers: {self.seen[-3:]}"
            assert not self.errors, self.errors
            time.sleep(0.2)
        return self.seen[-1]


def after_parts() -> list[tuple[int, int]]:
    """The transfers after the crash as (first, count), one per AFTER_PARTS."""
    firsts = accumulate(AFTER_PARTS[:-1], initial=OPENING + KILLED + 1)
    return list(zip(firsts, AFTER_PARTS, strict=True))


def killed_between_tables(stack: Stack, timeout: float = 300) -> int:
    """The batch the job SIGKILLed itself in at CRASH, once it is dead: planned, not committed."""
    deadline = time.monotonic() + timeout
    while job_running(stack):
        assert time.monotonic() < deadline, f"the job never reached {CRASH}"
        time.sleep(0.2)
    killed = [line for line in job_log_since_start(stack).splitlines() if f"SIGKILL at {CRASH} of batch" in line]
    assert killed, job_log_since_start(stack)[-3000:]
    batch = int(killed[-1].rsplit(" ", 1)[-1])
    assert batch in batch_ids(checkpoint(stack) / "offsets") and batch not in batch_ids(checkpoint(stack) / "commits")
    return batch


def transfers_through_a_crash(
    stack: Stack, source: TransferLoad, folder: Path, start: Callable[[dict[str, str], tuple[str, ...]], None]
) -> tuple[PointReader, int]:
    """TOTAL transfers into the running job's source while a PointReader polls the read point: the job is
    stopped and started (`start(env, job arguments)`) with the crash hook armed and one table at a time,
    killed between the account table's commit and the transfer table's, then started again while the
    source goes on; returns the reader, once the point holds every transfer, and the killed batch."""
    from cdctools import lake_reader as lake

    source.run(stack, source.opening() + source.transfers(1, OPENING), folder, "opening")
    with PointReader(stack.state / "lake" / "warehouse", source.tables) as reader:
        before = reader.wait_for(OPENING)
        run_script(stack, "local-job", "stop")
        start({"CDC_TEST_CRASH_AT": CRASH}, ("--table_concurrency", "1"))
        source.run(stack, source.transfers(OPENING + 1, KILLED), folder, "killed")
        batch = killed_between_tables(stack)
        con = lake.connect()
        try:
            # The tables as they are: money moved by transfers the transfer table does not hold yet
            # (the converse: what a reader of the current tables may see). The read point: the batch before.
            assert not ledger_holds(*(reader.at(con, t) for t in source.tables))
            assert reader.read(con) == before and before.whole
        finally:
            con.close()
        # The first part of the load goes in while the job restarts; each later part once a read point
        # holds the one before, so the reader sees at least four points however fast the job runs.
        first, *rest = after_parts()
        load = threading.Thread(target=source.run, args=(stack, source.transfers(*first), folder, "after-0"))
        load.start()
        start({}, ())
        wait_committed(stack, batch)
        load.join()
        for i, (begin, count) in enumerate(rest, 1):
            reader.wait_for(begin - 1)
            source.run(stack, source.transfers(begin, count), folder, f"after-{i}")
        out = reconciled(stack, "--table", "account", "--table", "transfer", wait=300)
        assert re.search(rf"transfer +source +{TOTAL} +lake +{TOTAL} +OK", out), out
        reader.wait_for(TOTAL)
    return reader, batch


def whole_throughout(reader: PointReader, batch: int, label: str, seconds: float) -> str:
    """Assert what a read-point test asserts of its reader (no error, at least four points, every one
    whole); the line it reports."""
    assert reader.errors == []
    broken = [s for s in reader.seen if not s.whole]
    assert not broken and len(reader.seen) >= 4, (broken, reader.seen)
    return (
        f"\n[{label}] {len(reader.seen)} read points read whole (transfers {reader.seen[0].transfers}"
        f"..{reader.seen[-1].transfers}), killed in batch {batch} between two tables; {seconds:.0f}s"
    )
