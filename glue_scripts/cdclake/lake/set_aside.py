"""What the job keeps of tables set aside, beside the dead letters, so a restarted job knows it too.

    <dead_letter_path>/_set_aside/<namespace>.<table>/_mark.json          the mark (lake_contract.SetAsideMark)
    <dead_letter_path>/_set_aside/<namespace>.<table>/since-<id>-<digest>/batch-<id>-<digest>/part-*.json
                                                                          its changes, batch by batch, while set aside
    <dead_letter_path>/_set_aside/_attempts/<namespace>.<table>/<digest>  failed attempts of one batch (a count)

The changes are dead letters (deadletter.py's format): `--source files --files_path <since folder>`
replays them. The mark is written after the batch's changes of the table, before its offsets are
committed; the attempt count before the failed batch raises. Each is one small file written whole
through Hadoop's FileSystem (S3 on Glue, a local folder elsewhere), read when the job starts (the
marks: one listing) or when a table fails (its count): nothing on a batch without a failure.
"""

from __future__ import annotations

import hashlib
import logging
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..common.lake_contract import MARK_FILE, SET_ASIDE_FOLDER, SetAsideMark, set_aside_root
from ..events.decode import SchemaGroup, group_rows
from ..events.envelope import SCHEMA_CHANGE, TRUNCATE
from .deadletter import as_dead_letters, write_folder
from .small_files import SmallFiles

log = logging.getLogger("cdclake")


def digest(fingerprint: str) -> str:
    return hashlib.sha1(fingerprint.encode()).hexdigest()[:12]


def table_records(
    full: DataFrame, source: tuple[str, str], groups: list[SchemaGroup], reason: str, batch_id: int
) -> DataFrame:
    """A table's records of the batch as dead letters: its change events (by schema group), and the
    truncates and schema-change events (MySQL's DDL) that name its source table."""
    db, table = source
    named = (F.col("_src_db") == db) & (F.col("_src_table") == table)
    parts = [group_rows(full, g) for g in groups]
    parts.append(full.where(F.col("_status").isin(TRUNCATE, SCHEMA_CHANGE) & named))
    return as_dead_letters(reduce(DataFrame.unionByName, parts), reason, batch_id)


class SetAsideStore(SmallFiles):
    """The marks and attempt counts under one dead-letter path."""

    # -------------------------------------------------------------- marks
    def marks(self) -> dict[str, SetAsideMark]:
        """Every table's mark under this dead-letter path, by lake table (one listing)."""
        out = {}
        for path in self._glob(f"{self.base}/{SET_ASIDE_FOLDER}/*/{MARK_FILE}"):
            if text := self._read(path):
                mark = SetAsideMark.from_json(text)
                out[mark.table] = mark
        return out

    def mark(self, table: str) -> SetAsideMark | None:
        text = self._read(f"{set_aside_root(self.base, table)}/{MARK_FILE}")
        return SetAsideMark.from_json(text) if text else None

    def new_mark(self, table: str, reason: str, batch_id: int, fingerprint: str, at: str) -> SetAsideMark:
        folder = f"{set_aside_root(self.base, table)}/since-{batch_id}-{digest(fingerprint)}"
        return SetAsideMark(table, reason, batch_id, folder, at)

    def write_mark(self, mark: SetAsideMark) -> None:
        self._write(f"{set_aside_root(self.base, mark.table)}/{MARK_FILE}", mark.to_json())

    def clear_mark(self, table: str) -> None:
        self._delete(f"{set_aside_root(self.base, table)}/{MARK_FILE}")

    @staticmethod
    def write_changes(dead: DataFrame, mark: SetAsideMark, batch_id: int, fingerprint: str) -> str:
        """The table's changes of one batch, as dead letters in the mark's folder; the folder written."""
        return write_folder(dead, f"{mark.folder}/batch-{batch_id}-{digest(fingerprint)}")

    # -------------------------------------------------------------- attempts of a failing batch
    def count_attempt(self, table: str, fingerprint: str) -> int:
        """One more failed attempt of the table's batch with this fingerprint; the attempts so far."""
        name = ".".join(table.split(".")[-2:])
        path = f"{self.base}/{SET_ASIDE_FOLDER}/_attempts/{name}/{digest(fingerprint)}"
        n = int((self._read(path) or "0").strip() or 0) + 1
        self._write(path, str(n))
        return n
