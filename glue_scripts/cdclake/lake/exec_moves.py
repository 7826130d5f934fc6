"""The executor's catalog work outside a table's plan (lake_tables.py and jobs/batch.py call it):
the namespace, the reads before planning, a table's identifier fields, and a table renamed at the
source moved to its new name with its delete markers."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import types as T

from ..common.lake_contract import CDC_SEQ
from ..common.sqltext import table_properties
from .deletes import drop_markers_sql, marker_table, markers_to_move
from .execution import Statements

log = logging.getLogger("cdclake")


class TableMoves(Statements):
    """The namespace and its tables."""

    def create_namespace(self, namespace: str) -> None:
        self.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")

    def table_exists(self, ident: str) -> bool:
        return bool(self.spark.catalog.tableExists(ident))

    def table_names(self, namespace: str) -> list[str]:
        # The session catalog (Delta's) lists the session's temporary views too.
        return [r["tableName"] for r in self.sql(f"SHOW TABLES IN {namespace}").collect() if not r["isTemporary"]]

    # -------------------------------------------------------------- reads before planning
    def has_rows_after(self, ident: str, seq: int) -> bool:
        """Whether the lake table holds rows newer than `seq` (table_plan.drop_probe)."""
        return bool(self.sql(f"SELECT 1 FROM {ident} WHERE {CDC_SEQ} > {seq} LIMIT 1").count())

    def rows_after(self, ident: str, seq: int) -> int:
        return int(self.sql(f"SELECT count(*) AS n FROM {ident} WHERE {CDC_SEQ} > {seq}").first()["n"])  # type: ignore[index]

    # -------------------------------------------------------------- a table's key fields and moves
    def declare_key(
        self, ident: str, keys: Sequence[str], schema: T.StructType | None = None, props: dict[str, str] | None = None
    ) -> None:
        """Make the key the table's metadata declares its key `keys` (formats.Format.key_fields_sql):
        metadata only, nothing when it already is or the format declares none. `schema` and `props`:
        the table's, when the caller has just read them."""
        if not self.fmt.key_fields:
            return
        schema = schema or self.spark.table(ident).schema
        props = props if props is not None else table_properties(self.spark, ident)
        columns = [(f.name, f.nullable) for f in schema.fields]
        declared = self.fmt.declared_key(props, [n for n, _ in columns])
        statement = self.fmt.key_fields_sql(ident, declared, keys, columns)
        if statement is not None:
            self.sql(statement)
            log.info("table %s: key declared in its metadata (were %s): %s", ident, declared or "none", statement)

    def move_table(self, old: str, new: str, properties: dict[str, str]) -> None:
        """A table renamed at the source: the old name's lake table becomes the new name's, rows and
        `properties`, in one CREATE TABLE AS SELECT commit (the same on every catalog; the Hadoop
        catalog cannot rename), its delete markers follow, then the old one is dropped."""
        self.sql(self.fmt.copy_sql(new, old, properties))
        self.finish_move(old, new)

    def finish_move(self, old: str, new: str) -> None:
        """The rest of a move whose copy is made: the markers follow, the old table goes."""
        if markers_to_move(self.spark, old, new):
            self.sql(self.fmt.moved_markers_sql(marker_table(new), marker_table(old), new))
            self.sql(drop_markers_sql(old))
        self.markers.forget(old)
        self.markers.forget(new)
        self.sql(f"DROP TABLE {old}")
