"""A long-running CDC workload for maintenance tests: random inserts, updates and deletes over a
small key space (so every batch touches files written by earlier ones), built with `Events` from
the real Debezium fixtures, and the state the lake table must hold afterwards."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cdc_events import Events, customer


class Workload:
    def __init__(self, seed: int = 7, keys: int = 60, events: Events | None = None) -> None:
        self.rnd = random.Random(seed)
        self.keys = keys
        self.ev = events or Events()
        self.expected: dict[int, str] = {}  # id -> first_name, what the lake must hold
        self.batches = 0

    def batch(self, changes: int = 4) -> list[dict[str, Any]]:
        """One micro-batch of Kafka records; several changes may hit the same key (the newest wins)."""
        for i in range(changes):
            k = self.rnd.randint(1, self.keys)
            name = f"b{self.batches}c{i}"
            if k in self.expected and self.rnd.random() < 0.25:
                self.ev.record("d", {"id": k}, before=customer(k, self.expected[k]))
                self.ev.tombstone({"id": k})
                del self.expected[k]
            elif k in self.expected:
                self.ev.record("u", {"id": k}, customer(k, name), customer(k, self.expected[k]))
                self.expected[k] = name
            else:
                self.ev.record("c", {"id": k}, customer(k, name))
                self.expected[k] = name
        self.batches += 1
        return self.ev.take()

    def updates(self, changes: int = 4) -> list[dict[str, Any]]:
        """A batch that only updates existing rows: the MERGE writes deletes against old files."""
        for i, k in enumerate(self.rnd.sample(sorted(self.expected), min(changes, len(self.expected)))):
            name = f"b{self.batches}u{i}"
            self.ev.record("u", {"id": k}, customer(k, name), customer(k, self.expected[k]))
            self.expected[k] = name
        self.batches += 1
        return self.ev.take()


def assert_rows(
    spark: Any,
    table: str,
    expected: list[dict[str, Any]] | dict[Any, Any],
    key: str | Sequence[str] = "id",
    column: str = "first_name",
) -> None:
    """Assert the table holds exactly `expected`: `count(*) == count(distinct key) == len(expected)`
    (a key stored twice fails here, even when every stored value is right), then the values.

    `expected`: row dicts (the key columns and the columns to compare; every dict the same
    columns), or a mapping key -> value of `column` (a single-column key, e.g. Workload.expected)."""
    keys = [key] if isinstance(key, str) else list(key)
    if isinstance(expected, dict):
        assert len(keys) == 1, "a mapping of expected values needs a single-column key"
        expected = [{keys[0]: k, column: v} for k, v in expected.items()]
    spark.catalog.refreshTable(table)  # another process (the job as a subprocess) may have committed
    kq = ", ".join(f"`{k}`" for k in keys)
    c = spark.sql(f"SELECT count(*) AS n, count(DISTINCT {kq}) AS k FROM {table}").first()
    assert (c["n"], c["k"]) == (len(expected), len(expected)), (
        f"{table}: {c['n']} rows, {c['k']} distinct keys ({', '.join(keys)}); expected {len(expected)} rows, one per key"
    )
    cols = list(dict.fromkeys([*keys, *(expected[0] if expected else [])]))
    select = ", ".join(f"`{col}`" for col in cols)
    actual = [r.asDict() for r in spark.sql(f"SELECT {select} FROM {table} ORDER BY {kq}").collect()]
    want = sorted(({col: e[col] for col in cols} for e in expected), key=lambda r: tuple(r[k] for k in keys))
    assert actual == want, f"{table}: rows differ"


WRITES = ("added-records", "deleted-records", "added-position-deletes", "added-equality-deletes")


def commits(spark: Any, table: str) -> list[dict[str, Any]]:
    """The table's snapshots in commit order: operation and what each wrote (WRITES, 0 if absent).
    A MERGE whose every change is behind the stored position still commits a snapshot, an empty
    one: a re-run is told from a second application by what its commit wrote, not by its count."""
    spark.catalog.refreshTable(table)
    rows = spark.sql(f"SELECT operation, summary FROM {table}.snapshots ORDER BY committed_at").collect()
    return [{"operation": r["operation"], **{w: int(r["summary"].get(w, "0")) for w in WRITES}} for r in rows]


def wrote_nothing(commit: dict[str, Any]) -> bool:
    return all(commit[w] == 0 for w in WRITES)


class MergeBarrier:
    """Holds one streaming MERGE after it has planned against the table's current snapshot and
    before it commits, until another writer has committed: a commit race that happens every time,
    not only when timing allows. The MERGE's source rows pass through a Python UDF; once armed, the
    first row parks there (the flag files work across threads and processes)."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        folder.mkdir(parents=True, exist_ok=True)

    def hold_off(self, timeout: float = 300) -> None:
        """Ask the other writer to stop compacting until the held MERGE, and wait until it has: the
        files of the next batches are then still there for it to compact while the MERGE is held."""
        (self.dir / "hold-off").touch()
        deadline = time.monotonic() + timeout
        while not (self.dir / "holding-off").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the other writer never held off")
            time.sleep(0.05)

    def should_hold_off(self) -> bool:
        """For the other writer: True while it should leave the table alone (it acknowledges)."""
        if (self.dir / "hold-off").exists() and not self.paused():
            (self.dir / "holding-off").touch()
            return True
        return False

    def arm(self) -> None:
        for name in ("paused", "released"):
            (self.dir / name).unlink(missing_ok=True)
        (self.dir / "armed").touch()

    def paused(self) -> bool:
        return (self.dir / "paused").exists()

    def wait_paused(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not self.paused():
            if time.monotonic() > deadline:
                raise TimeoutError("the MERGE never reached the barrier")
            time.sleep(0.05)

    def release(self) -> None:
        (self.dir / "released").touch()
        for name in ("hold-off", "holding-off"):
            (self.dir / name).unlink(missing_ok=True)

    def wrap(self, merge_changes: Callable[..., Any]) -> Callable[..., Any]:
        """merge_changes(table, changes, ...) whose source rows pass the barrier."""
        from pyspark.sql import functions as F

        folder = str(self.dir)

        def park(value: Any) -> Any:  # nested: pickled by value into the Python worker
            import os
            import time

            try:
                os.rename(os.path.join(folder, "armed"), os.path.join(folder, "paused"))
            except FileNotFoundError:
                return value  # not armed, or another row already parked
            deadline = time.monotonic() + 300
            while not os.path.exists(os.path.join(folder, "released")) and time.monotonic() < deadline:
                time.sleep(0.05)
            return value

        udf = F.udf(park, "string")

        def merge_through_barrier(table: str, changes: Any, *args: Any, **kwargs: Any) -> None:
            merge_changes(table, changes.withColumn("_cdc_op", udf(F.col("_cdc_op"))), *args, **kwargs)

        return merge_through_barrier
