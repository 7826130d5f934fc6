"""Small files the job keeps beside the dead letters, each written whole through Hadoop's FileSystem
(S3 on Glue, a local folder elsewhere): what a job started again must know that no lake table holds.

    <dead_letter_path>/_early/<namespace>.<table>.json   partitioning read before the lake table existed
    <dead_letter_path>/_early/_partitions.json             PostgreSQL partitions -> their partitioned table

(set_aside.py keeps its marks and counts the same way.) The early files are listed once when the job
first plans a table and written only when what they hold changes: nothing on an ordinary batch."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from ..common.lake_contract import EARLY_FOLDER

# A table's partitioning (partition_ddl's JSON), its partition deletes and its divergence (Memory).
EarlyPartitions = tuple[str | None, tuple[tuple[int, str], ...], str | None]


class SmallFiles:
    """Whole small text files under one folder."""

    def __init__(self, spark: SparkSession, base: str) -> None:
        self.spark = spark
        self.base = base.rstrip("/")

    def _path(self, path: str) -> tuple[Any, Any]:
        jvm = self.spark.sparkContext._jvm
        p = jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
        return p.getFileSystem(self.spark.sparkContext._jsc.hadoopConfiguration()), p  # type: ignore[union-attr]

    def _write(self, path: str, text: str) -> None:
        fs, p = self._path(path)
        out = fs.create(p, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def _read(self, path: str) -> str | None:
        fs, p = self._path(path)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            return str(self.spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))  # type: ignore[union-attr]
        finally:
            stream.close()

    def _delete(self, path: str) -> None:
        fs, p = self._path(path)
        fs.delete(p, False)

    def _glob(self, pattern: str) -> list[str]:
        fs, p = self._path(pattern)
        return [str(s.getPath().toString()) for s in fs.globStatus(p) or []]


class EarlyStore(SmallFiles):
    """The partitioning of source tables read before their lake table exists (a snapshot's CREATE
    TABLE of a table with no row yet), so a job started again before the first row has it."""

    def _file(self, table: str) -> str:
        return f"{self.base}/{EARLY_FOLDER}/{'.'.join(table.split('.')[-2:])}.json"

    def load(self) -> dict[str, EarlyPartitions]:
        """Every table's (one listing), by lake table."""
        out = {}
        for path in self._glob(f"{self.base}/{EARLY_FOLDER}/*.*.json"):
            if text := self._read(path):
                d = json.loads(text)
                out[d["table"]] = (d["partitioning"], tuple((int(s), c) for s, c in d["deletes"]), d["diverged"])
        return out

    def save(self, table: str, early: EarlyPartitions | None) -> None:
        """Written whole; None: the lake table holds it now (its properties), the file goes."""
        if early is None:
            self._delete(self._file(table))
            return
        partitioning, deletes, diverged = early
        doc = {
            "table": table,
            "partitioning": partitioning,
            "deletes": [list(x) for x in deletes],
            "diverged": diverged,
        }
        self._write(self._file(table), json.dumps(doc))


class PartitionParents(SmallFiles):
    """Which PostgreSQL partition belongs to which partitioned table (the DDL log's attach and detach),
    so that a partition's changes, which a publication without publish_via_partition_root sends under
    the partition's name, reach its parent's lake table also in a job started again. Read once,
    written when a partition is attached, detached or renamed."""

    def _file(self) -> str:
        return f"{self.base}/{EARLY_FOLDER}/_partitions.json"

    def load(self) -> dict[tuple[str, str], tuple[str, str]]:
        text = self._read(self._file())
        return {(a, b): (c, d) for (a, b), (c, d) in json.loads(text)} if text else {}

    def save(self, parents: dict[tuple[str, str], tuple[str, str]]) -> None:
        self._write(self._file(), json.dumps(sorted([list(k), list(v)] for k, v in parents.items())))
