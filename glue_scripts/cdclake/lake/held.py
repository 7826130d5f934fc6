"""The records a batch holds for the rest of their source transaction (--transactions keep), kept
durably beside the streaming checkpoint until a later batch applies them:

    <checkpoint_location>/held-transactions/<batch_id>/part-*.parquet   the held raw records (records.py)
    <checkpoint_location>/held-transactions/<batch_id>/_state.json      written last: the folder is whole

Batch N reads the newest whole folder below N and takes its records into its raw batch; it writes
its own folder (`records: 0` when it holds nothing) before it applies anything, and removes the
folders below N-1 after. A batch run again after a crash (same id, same offsets) reads N-1 again
and overwrites N: no held record is lost or applied twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from ..common.records import RAW_COLUMNS, RAW_SCHEMA
from ..events.transactions import HoldState
from .small_files import SmallFiles

HELD_FOLDER = "held-transactions"
STATE_FILE = "_state.json"


@dataclass(frozen=True)
class Held:
    """A whole folder of held records: its batch, how many records, the state its decision left."""

    batch_id: int
    records: int
    state: HoldState


class HeldStore(SmallFiles):
    """The held records under `<checkpoint_location>/held-transactions`."""

    def __init__(self, spark: SparkSession, checkpoint_location: str) -> None:
        super().__init__(spark, f"{checkpoint_location.rstrip('/')}/{HELD_FOLDER}")

    def _folder(self, batch_id: int) -> str:
        return f"{self.base}/{batch_id}"

    def _whole(self) -> list[int]:
        """The batch ids of whole folders (one listing)."""
        ids = []
        for path in self._glob(f"{self.base}/*/{STATE_FILE}"):
            name = path.rstrip("/").split("/")[-2]
            if name.isdigit():
                ids.append(int(name))
        return sorted(ids)

    def previous(self, batch_id: int) -> Held | None:
        """The newest whole folder below `batch_id`, None when there is none."""
        below = [i for i in self._whole() if i < batch_id]
        if not below:
            return None
        doc = json.loads(self._read(f"{self._folder(below[-1])}/{STATE_FILE}") or "{}")
        state = HoldState(dict(doc.get("since", {})), tuple(doc.get("released", ())))
        return Held(below[-1], int(doc.get("records", 0)), state)

    def records(self, held: Held) -> DataFrame:
        return self.spark.read.schema(RAW_SCHEMA).parquet(self._folder(held.batch_id)).select(*RAW_COLUMNS)

    def write(self, batch_id: int, records: DataFrame | None, state: HoldState) -> int:
        """The batch's folder, written whole (its state file last); the number of records held."""
        folder = self._folder(batch_id)
        fs, p = self._path(folder)
        fs.delete(p, True)  # a batch run again overwrites what its first run wrote
        n = 0
        if records is not None:
            records.select(*RAW_COLUMNS).write.mode("overwrite").parquet(folder)
            n = self.spark.read.schema(RAW_SCHEMA).parquet(folder).count()  # from the files' footers
        doc = {"batch": batch_id, "records": n, "since": dict(state.since), "released": list(state.released)}
        self._write(f"{folder}/{STATE_FILE}", json.dumps(doc))
        return n

    def prune(self, batch_id: int) -> None:
        """Remove the folders below `batch_id - 1` (batch `batch_id`'s own is written)."""
        for path in self._glob(f"{self.base}/*"):
            name = path.rstrip("/").split("/")[-1]
            if name.isdigit() and int(name) < batch_id - 1:
                fs, p = self._path(path)
                fs.delete(p, True)
