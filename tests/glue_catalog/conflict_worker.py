"""The process of test_glue_commit_conflict.py: `python conflict_worker.py <work dir> <job argv...>`.

The streaming job's batch path (BatchProcessor) on the template's catalog (GlueCatalog + S3FileIO on
moto, the job's own session), holding one micro-batch's MERGE after it has planned (MergeBarrier)
while the maintenance procedures compact the table in another thread of the same process, then
letting it commit: the MERGE's commit meets the compaction's. Writes what happened to result.json.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent

from cdc_events import Events  # noqa: E402
from cdc_workload import MergeBarrier, Workload, assert_rows  # noqa: E402


class Conflicts(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "commit conflict" in record.getMessage():
            self.lines.append(record.getMessage())


def main() -> None:
    from cdclake.common.records import RAW_SCHEMA
    from cdclake.common.settings import build_settings, parse_argv
    from cdclake.jobs.batch import BatchProcessor, Writes
    from cdclake.lake.executor import merge_changes
    from cdclake.lake.formats.iceberg import Iceberg
    from cdclake.lake.maintenance import MaintenancePolicy, maintain_table
    from cdclake.local.session import local_session

    work, argv = Path(sys.argv[1]), sys.argv[2:]
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    conflicts = Conflicts()
    logging.getLogger("cdclake").addHandler(conflicts)
    settings = build_settings(parse_argv(argv))
    spark = local_session(settings)
    barrier = MergeBarrier(work / "barrier")
    processor = BatchProcessor(spark, settings, writes=Writes(keyed=barrier.wrap(merge_changes)))
    # A table of its own: the tier's moto server (one per session) keeps the tables the other tests
    # of this tier wrote, inventory_customers among them.
    table = settings.table_identifier("inventory", "held_merge")
    w = Workload(seed=5, keys=20, events=Events(topic="mdb.inventory.held_merge", table="held_merge"))

    def apply(batch_id: int, records: list) -> None:
        rows = [tuple(r[c] for c in RAW_SCHEMA.names) for r in records]
        processor.process(spark.createDataFrame(rows, RAW_SCHEMA), batch_id)

    for batch_id in range(3):
        apply(batch_id, w.batch(6))
    policy = MaintenancePolicy(min_input_files=2, delete_file_threshold=1, conflict_retries=0)
    compaction: dict[str, str] = {}

    def compact_while_held() -> None:
        barrier.wait_paused()
        try:
            compaction["line"] = maintain_table(spark, table, policy, Iceberg(), force=True).line()
        finally:
            barrier.release()

    maintainer = threading.Thread(target=compact_while_held)
    maintainer.start()
    barrier.arm()
    apply(3, w.updates(5))  # position deletes against the files the compaction replaces
    maintainer.join()
    operations = [r["operation"] for r in spark.sql(f"SELECT operation FROM {table}.snapshots").collect()]
    try:
        assert_rows(spark, table, w.expected)
        state_error = None
    except AssertionError as e:
        state_error = str(e)
    result = {"conflicts": conflicts.lines, "compaction": compaction.get("line", ""), "operations": operations,
              "state_error": state_error}  # fmt: skip
    (work / "result.json").write_text(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main()
