"""Streaming commits with the streaming job's maintenance between them, the limits low enough that
every maintenance point acts (each action runs again and again, as over months of a real stream).
Data files, delete files, snapshots and manifests per table stay within the configured limits (plus
what the batches between two maintenance points add), storage holds nothing the kept snapshots do
not reference, and the table is exactly the source's state.

The commits have the streaming MERGE's shape on a table created by the job's own `create_table_sql` (formats.iceberg.Iceberg)
(merge-on-read, file-granular position deletes): each batch is one row-delta commit with one data
file holding the new row images and one position-delete file per data file holding a row the batch
updates or deletes. They are written with Iceberg's Java API instead of a Spark MERGE, so a batch
costs milliseconds; the maintenance itself (planning, `rewrite_data_files`,
`rewrite_position_delete_files`, `rewrite_manifests`, `expire_snapshots`) is the job's, through
`StreamMaintainer`. Maintenance after real MERGEs is covered by test_maintenance.py, maintenance
beside concurrent MERGEs by test_maintenance_concurrency_jdbc.py.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections import defaultdict
from typing import Any

from cdc_workload import assert_rows
from cdclake.lake.formats.iceberg import Iceberg
from cdclake.lake.maintenance import Action, Cadence, StreamMaintainer
from pyspark.sql import types as T

BATCHES = int(os.environ.get("CDC_MAINTENANCE_TEST_BATCHES", "40"))
CHANGES_PER_BATCH = 2
KEYS = 20
EVERY_BATCHES = 5  # the streaming job's maintenance cadence in this run
LIMITS = {
    "maintenance_max_small_files": "12",
    "maintenance_max_delete_files": "8",
    "maintenance_max_snapshots": "8",
    "maintenance_retain_last_snapshots": "3",
    "maintenance_snapshot_retention_minutes": "0",
    "maintenance_max_manifests": "16",
    "maintenance_min_input_files": "2",
    "maintenance_delete_file_threshold": "2",
}


class StreamingCommits:
    """Row-delta commits shaped like the streaming MERGE's, through Iceberg's Java API."""

    def __init__(self, spark: Any, table: str) -> None:
        self.spark, self.name, self.jvm = spark, table, spark._jvm
        self.table = self.jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
        self.factory = self.jvm.org.apache.iceberg.data.GenericAppenderFactory(self.table.schema(), self.table.spec())
        self.parquet = self.jvm.org.apache.iceberg.FileFormat.PARQUET
        self.where: dict[int, tuple[str, int]] = {}  # key -> (data file, row position) of its live row
        # What the table would hold without maintenance: no row-delta commit removes a file.
        self.written = {"data": 0, "deletes": 0, "snapshots": 0}

    def _output(self, kind: str) -> Any:
        path = f"{self.table.location()}/data/{kind}-{uuid.uuid4().hex}.parquet"
        return self.jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
            self.table.io().newOutputFile(path)
        )

    def commit(self, changes: dict[int, str | None]) -> None:
        """One batch: key -> new first_name, or None for a delete (newest change per key)."""
        delta = self.table.newRowDelta()
        old_rows: dict[str, list[int]] = defaultdict(list)
        for key in changes:
            if key in self.where:
                path, pos = self.where.pop(key)
                old_rows[path].append(pos)
        for path, positions in sorted(old_rows.items()):  # one delete file per data file touched
            writer = self.factory.newPosDeleteWriter(self._output("deletes"), self.parquet, None)
            for pos in sorted(positions):
                writer.write(self.jvm.org.apache.iceberg.deletes.PositionDelete.create().set(path, pos))
            writer.close()
            delta.addDeletes(writer.toDeleteFile())
            self.written["deletes"] += 1
        images = [(k, v) for k, v in changes.items() if v is not None]
        if images:
            writer = self.factory.newDataWriter(self._output("data"), self.parquet, None)
            for k, v in images:
                record = self.jvm.org.apache.iceberg.data.GenericRecord.create(self.table.schema())
                record.setField("id", k)
                record.setField("first_name", v)
                record.setField("_cdc_op", "u")
                writer.write(record)
            writer.close()
            data_file = writer.toDataFile()
            delta.addRows(data_file)
            self.written["data"] += 1
            for pos, (k, _v) in enumerate(images):
                self.where[k] = (data_file.location(), pos)
        delta.commit()
        self.written["snapshots"] += 1

    def after_maintenance(self) -> None:
        """Maintenance committed through Spark: the table's new metadata, and where each live row
        is now (compaction moved them), from Spark's metadata columns."""
        self.table.refresh()
        rows = self.spark.sql(f"SELECT id, _file, _pos FROM {self.name}").collect()
        self.where = {r["id"]: (r["_file"], r["_pos"]) for r in rows}

    def counts(self) -> dict[str, int]:
        """The current snapshot's data and delete files and manifests, and the snapshots kept: from
        the table metadata, no Spark job."""
        snap = self.table.currentSnapshot()
        summary = snap.summary()
        return {
            "data": int(summary["total-data-files"]),
            "deletes": int(summary["total-delete-files"]),
            "snapshots": len(self.table.snapshots()),
            "manifests": len(snap.allManifests(self.table.io())),
        }


def test_many_batches_keep_files_deletes_and_snapshots_within_the_limits(make_lake, warehouse):
    lake = make_lake(maintenance_every_batches=str(EVERY_BATCHES), maintenance_interval_minutes="0", **LIMITS)
    s = lake.settings  # the limits went through the job's argument validation (build_settings)
    p = s.maintenance
    limit = {"data": p.max_small_files, "deletes": p.max_delete_files, "snapshots": p.max_snapshots}
    limit["manifests"] = p.max_manifests
    table = lake.table()
    lake.spark.sql(
        Iceberg().create_table_sql(
            table, [("id", T.IntegerType()), ("first_name", T.StringType())], ["id"], s.write_mode
        )
    )
    stream = StreamingCommits(lake.spark, table)
    maintainer = StreamMaintainer(p, Cadence(s.maintenance_every_batches, s.maintenance_interval_minutes), Iceberg())
    rnd, expected = random.Random(42), {}
    peak = dict.fromkeys(limit, 0)
    ran: dict[Action, int] = defaultdict(int)
    runs, t0 = 0, time.monotonic()
    spent = {"commits": 0.0, "checks": 0.0, "maintenance": 0.0}
    for batch in range(BATCHES):
        changes: dict[int, str | None] = {}
        for i in range(CHANGES_PER_BATCH):
            k = rnd.randint(1, KEYS)
            if k in expected and rnd.random() < 0.25:
                changes[k] = None
                del expected[k]
            else:
                changes[k] = expected[k] = f"b{batch}c{i}"
        t = time.monotonic()
        stream.commit(changes)
        now = stream.counts()  # what readers see right after the batch
        peak = {n: max(peak[n], now[n]) for n in peak}
        t1 = time.monotonic()
        reports = maintainer.after_batch(lake.spark, [table])
        spent["commits"] += t1 - t
        spent["maintenance" if reports and reports[0].plan.due else "checks"] += time.monotonic() - t1
        if (batch + 1) % EVERY_BATCHES:
            assert reports == []
            continue
        (m,) = reports  # due by cadence; an exception inside would have left no report
        assert not m.failed, m.line()
        if m.plan.due:
            runs += 1
            for r in m.results:
                ran[r.action] += 1
            stream.after_maintenance()
            now = stream.counts()
            assert m.after is not None and (m.after.data_files, m.after.delete_files) == (now["data"], now["deletes"])
            assert (m.after.snapshots, m.after.manifests) == (now["snapshots"], now["manifests"])
        # After each maintenance point every count is within its limit.
        assert all(now[n] <= limit[n] for n in limit), (batch, now, m.line())
    seconds = time.monotonic() - t0
    end = stream.counts()
    table_dir = warehouse / lake.namespace / "inventory_customers"
    on_disk = {f.name for f in (table_dir / "data").iterdir() if f.suffix == ".parquet"}
    referenced = {
        r["file_path"].rsplit("/", 1)[-1]
        for r in lake.spark.sql(f"SELECT DISTINCT file_path FROM {table}.all_files").collect()
    }
    print(
        f"{BATCHES} batches, maintenance checked every {EVERY_BATCHES}, ran {runs}x ({ {str(a): n for a, n in ran.items()} }), "
        f"{seconds:.0f}s ({ {k: round(v) for k, v in spent.items()} }) | "
        f"limits {limit} | peak right after a batch {peak} | end {end} | {len(on_disk)} files on disk | "
        f"without maintenance: {stream.written}"
    )
    # Between two maintenance points the batches add at most one data file, a delete file per
    # change, one snapshot and two manifests each.
    growth = {"data": 1, "deletes": CHANGES_PER_BATCH, "snapshots": 1, "manifests": 2}
    assert all(peak[n] <= limit[n] + EVERY_BATCHES * growth[n] for n in limit), peak
    # The bound held because maintenance acted again and again (without it the table would hold
    # every file written: `stream.written`), not because a run or two happened to fit.
    assert min(ran[a] for a in (Action.COMPACT, Action.DELETES, Action.EXPIRE)) >= 3 and ran[Action.MANIFESTS] >= 2, ran
    assert_rows(lake.spark, table, expected)
    # Storage holds only what the kept snapshots reference: expiry deleted everything else.
    assert on_disk == referenced
