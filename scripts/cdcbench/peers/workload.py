"""The source changes every system gets: the same statements, from the same seeds, on its own tables.

Each change is one row statement; inserted rows are latency probes (their source commit is the wall
time after COMMIT returned). Mix: 70% updates, 20% inserts, 10% deletes of live rows."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# The orders table every system and the end-to-end section (cdcbench/endtoend.py) change.
ORDERS_COLUMNS = """
  id          INT            NOT NULL,
  customer_id INT            NOT NULL,
  status      VARCHAR(16)    NOT NULL,
  amount      DECIMAL(12, 2) NOT NULL,
  qty         INT            NOT NULL,
  weight_g    BIGINT         NULL,
  note        VARCHAR(64)    NULL,
  version     INT            NOT NULL,
  created_at  DATETIME(6)    NOT NULL,
  updated_at  DATETIME(6)    NOT NULL,
  PRIMARY KEY (id)"""
TICK = 0.02  # one source transaction every 20 ms at a fixed rate


def paced_ticks(rate: int, seconds: float) -> Iterator[tuple[int, int]]:
    """A source transaction every TICK for `seconds`: (tick number, changes due in it). The fraction
    of a change left over is carried to the next tick, so the total keeps up with `rate` x time."""
    per_tick, due, given, tick = rate * TICK, 0.0, 0, 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if (delay := start + tick * TICK - time.monotonic()) > 0:
            time.sleep(delay)
        tick += 1
        due += per_tick
        n = int(due) - given
        given += n
        yield tick, n


# The DDL sequence, in the middle of changes: add a column, widen a decimal's scale, rename a column.
DDL_STEPS = (
    "ALTER TABLE {t} ADD COLUMN channel VARCHAR(16) NULL",
    "ALTER TABLE {t} MODIFY amount DECIMAL(14, 3) NOT NULL",
    "ALTER TABLE {t} CHANGE qty quantity INT NOT NULL",
)


def create_sql(table: str) -> str:
    return f"CREATE TABLE {table} ({ORDERS_COLUMNS}\n) ENGINE = InnoDB"


def row(i: int) -> tuple:
    return (i, i % 9973, (i * 37 % 1_000_000) / 100, i % 7 + 1, i % 1000 * 13, f"order {i}")


INSERT = (
    "INSERT INTO {t} (id, customer_id, status, amount, qty, weight_g, note, version, created_at, updated_at) "
    "VALUES (%s, %s, 'NEW', %s, %s, %s, %s, 0, NOW(6), NOW(6))"
)
UPDATE = "UPDATE {t} SET status = 'PAID', version = version + 1, note = %s, updated_at = NOW(6) WHERE id = %s"
DELETE = "DELETE FROM {t} WHERE id = %s"


@dataclass
class Source:
    """The live keys of each table and the next id, so that every system gets the same changes."""

    tables: list[str]
    live: dict[str, list[int]] = field(default_factory=dict)
    next_id: int = 10_000_000
    probes: dict[tuple[str, int], float] = field(default_factory=dict)  # (table, id) -> commit time

    def load(self, conn, table: str, rows: int) -> None:
        with conn.cursor() as cur:
            for start in range(1, rows + 1, 5000):
                ids = range(start, min(start + 5000, rows + 1))
                cur.executemany(INSERT.format(t=table), [row(i) for i in ids])
                conn.commit()
        self.live[table] = list(range(1, rows + 1))

    def change(
        self, cur, rng: random.Random, table: str, tick: int, inserts: bool = True, track: bool = True
    ) -> int | None:
        """One change to `table`; returns the inserted id, if it was an insert. `inserts=False`: an update
        instead (the INSERT names the original columns, which a rename changed). `track=False`: an inserted
        row is never changed later (a latency probe: the file it is found in is the one that first held it)."""
        live = self.live[table]
        r = rng.random()
        if (r < 0.7 or (not inserts and r < 0.9)) and live:
            cur.execute(UPDATE.format(t=table), (f"tick {tick}", live[rng.randrange(len(live))]))
        elif r < 0.9 or not live:
            i = self.next_id
            self.next_id += 1
            cur.execute(INSERT.format(t=table), row(i))
            if track:
                live.append(i)
            return i
        else:
            k = rng.randrange(len(live))
            live[k], live[-1] = live[-1], live[k]
            cur.execute(DELETE.format(t=table), (live.pop(),))
        return None

    def at_rate(self, conn, rate: int, seconds: float, tables: list[str], seed: int) -> tuple[int, float]:
        """Changes at `rate` per second for `seconds`, spread over `tables`; returns (changes, achieved/s)."""
        rng = random.Random(seed)
        self.probes = {}
        changes = 0
        start = time.monotonic()
        with conn.cursor() as cur:
            for tick, n in paced_ticks(rate, seconds):
                inserted = []
                for _ in range(n):
                    t = tables[rng.randrange(len(tables))]
                    if (i := self.change(cur, rng, t, tick, track=False)) is not None:
                        inserted.append((t, i))
                conn.commit()
                committed = time.time()
                for p in inserted:
                    self.probes[p] = committed
                changes += n
        return changes, changes / (time.monotonic() - start)

    def burst(self, conn, changes: int, table: str, seed: int, per_commit: int = 1000) -> tuple[float, int]:
        """`changes` changes as fast as MariaDB takes them; returns (first commit time, last inserted id)."""
        rng = random.Random(seed)
        first = time.time()
        last = -1
        with conn.cursor() as cur:
            for k in range(changes):
                if (i := self.change(cur, rng, table, k)) is not None:
                    last = i
                if (k + 1) % per_commit == 0:
                    conn.commit()
            conn.commit()
        # the last change a probe: an insert, so that "visible" has a row to look for
        with conn.cursor() as cur:
            last = self.next_id
            self.next_id += 1
            cur.execute(INSERT.format(t=table), row(last))
            self.live[table].append(last)
        conn.commit()
        return first, last

    def ddl(self, conn, table: str, changes_between: int, seed: int) -> int:
        """Changes, then each DDL step followed by more changes (updates also write amounts with three
        decimals once the scale is 3); returns the last inserted id."""
        rng = random.Random(seed)
        with conn.cursor() as cur:
            renamed = False
            for step in (None, *DDL_STEPS):
                if step:
                    cur.execute(step.format(t=table))
                    renamed = renamed or " CHANGE " in step
                for k in range(changes_between):
                    self.change(cur, rng, table, k, inserts=not renamed)
                if step and "DECIMAL(14, 3)" in step:
                    cur.execute(f"UPDATE {table} SET amount = amount + 0.125 WHERE MOD(id, 10) = 0")
                if step and "channel" in step:
                    cur.execute(f"UPDATE {table} SET channel = 'web' WHERE MOD(id, 10) = 1")
                conn.commit()
            last = self.next_id
            self.next_id += 1
            cur.execute(
                f"INSERT INTO {table} (id, customer_id, status, amount, quantity, weight_g, note, version, created_at, "
                "updated_at, channel) VALUES (%s, 1, 'NEW', 1.125, 1, 1, 'ddl', 0, NOW(6), NOW(6), 'app')",
                (last,),
            )
            self.live[table].append(last)
        conn.commit()
        return last


def columns_of(conn, table: str) -> list[tuple[str, str]]:
    """(name, MySQL column type) of a source table, in order."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, column_type FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name = %s ORDER BY ordinal_position",
            (table,),
        )
        return [(r[0], r[1]) for r in cur.fetchall()]
