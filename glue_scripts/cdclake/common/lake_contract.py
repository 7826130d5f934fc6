"""The lake table's contract: what the job adds to a source table and reads back from it.

Every module and script that writes or reads these names takes them from here (no Spark needed);
tests/unit/test_lake_contract.py fails on a copy elsewhere.

Metadata columns, after the source's columns in every lake table:

    _cdc_op           the change that wrote the row: c (insert), r (snapshot read), u, d
    _cdc_seq          decimal(38,0), the change's position in the source log (ordering.py)
    _cdc_offset       bigint, its Kafka offset: the tie-breaker at equal positions
    _cdc_source_ts    when the source committed the change
    _cdc_ingested_at  when the job applied it
    _cdc_copy         int, tables without a primary key only: the copy's number among identical rows

Delete markers, the table `<table>__cdc_deletes` beside it (deletes.py): `_cdc_key`, `_cdc_seq`,
`_cdc_offset`, `_cdc_deleted_at`, `_cdc_row`.

Table properties, each `cdc.<name>`: see the constants below. `TableState.from_properties` is what
the job reads back from them.

The policies are the job arguments that decide what happens to a table (docs/CONFIGURATION.md),
parsed once into these enums by settings.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import types as T


# The column renames and drops applied to a table, with their source positions, as its property
# COLUMN_CHANGES_PROPERTY holds them (events/source_ddl.py reads them from the source's DDL).
_KEEP_CHANGES = 200  # a table's recorded changes; older ones concern events long read

RENAME, DROP = "rename", "drop"
# A column dropped at the source that the lake keeps (--dropped_column_policy keep): recorded so that
# a column added again under its name is told from it (table_plan: a kept column set aside).
KEPT = "kept"


@dataclass(frozen=True)
class ColumnChange:
    kind: str  # RENAME or DROP
    old: str
    new: str | None  # None for DROP
    seq: int  # the statement's position in the source log

    def to_json(self) -> list:
        return [self.kind, self.old, self.new, str(self.seq)]

    @classmethod
    def from_json(cls, item: list) -> ColumnChange:
        return cls(item[0], item[1], item[2], int(item[3]))


def dumps(changes: list[ColumnChange]) -> str:
    """The property's text: each change once, by position; changes at one position (a column set
    aside and its name taken, by one statement) in the order given, not in a set's order, which
    changes with the process's hash seed."""
    once = list(dict.fromkeys(changes))
    return json.dumps([c.to_json() for c in sorted(once, key=lambda c: c.seq)[-_KEEP_CHANGES:]])


def loads(text: str | None) -> list[ColumnChange]:
    return [ColumnChange.from_json(i) for i in json.loads(text)] if text else []


# ------------------------------------------------------------------ metadata columns
METADATA_PREFIX = "_cdc_"
CDC_OP = "_cdc_op"
CDC_SEQ = "_cdc_seq"
CDC_OFFSET = "_cdc_offset"
CDC_SOURCE_TS = "_cdc_source_ts"
CDC_INGESTED_AT = "_cdc_ingested_at"
CDC_COPY = "_cdc_copy"
# Every lake table's metadata columns, in table order (a keyless table has CDC_COPY after them).
METADATA_COLUMNS = (CDC_OP, CDC_SEQ, CDC_OFFSET, CDC_SOURCE_TS, CDC_INGESTED_AT)
ALL_METADATA_COLUMNS = (*METADATA_COLUMNS, CDC_COPY)
# A change's position: the MERGE's guard compares these, greatest wins.
POSITION_COLUMNS = (CDC_SEQ, CDC_OFFSET)

# ------------------------------------------------------------------ delete markers
MARKER_SUFFIX = "__cdc_deletes"
CDC_KEY = "_cdc_key"  # the deleted key as JSON (keyless: a hash of the row image)
CDC_DELETED_AT = "_cdc_deleted_at"
CDC_ROW = "_cdc_row"  # the deleted row's image as JSON

# ------------------------------------------------------------------ the consistent read point
# With --transactions keep, the namespace's table `cdc__read_point` (read_point.py): one row per lake
# table, its version after the newest batch that committed every table it wrote.
READ_POINT_TABLE = "cdc__read_point"
READ_POINT_COLUMNS = ("table_name", "version", "batch_id", "source_position", "source_ts", "published_at")


def is_job_table(name: str) -> bool:
    """A table the job keeps beside the source tables' (delete markers, the read point): no source table's."""
    return name.endswith(MARKER_SUFFIX) or name == READ_POINT_TABLE


# ------------------------------------------------------------------ table properties
PROPERTY_PREFIX = "cdc."
# The source's primary key, comma-separated: the MERGE's key columns.
KEY_PROPERTY = "cdc.primary-key"
# Where the source's primary key last changed (ALTER TABLE), and the fingerprint of the batch that applied it.
KEY_POSITION_PROPERTY = "cdc.primary-key-position"
KEY_BATCH_PROPERTY = "cdc.primary-key-batch"
# The column renames and drops applied so far, with their positions (`dumps` below).
COLUMN_CHANGES_PROPERTY = "cdc.column-changes"
# A DROP TABLE at the source the lake table outlived (--dropped_table_policy keep): when, and where in the log.
SOURCE_DROPPED_PROPERTY = "cdc.source-dropped"
SOURCE_DROPPED_POSITION_PROPERTY = "cdc.source-dropped-position"
# The RENAME TABLE step (`position:offset`) that gave a lake table its name.
RENAMED_AT_PROPERTY = "cdc.renamed-at"
# Every RENAME TABLE step a lake table went through, carried along when it moves again:
# `cdc.renamed.<position>.<offset>.<step>` = `[[old db, old table], [new db, new table]]`. A job started
# again rebuilds from them the renames that late events of an old name follow (lake_tables.recorded_renames).
RENAMED_PREFIX = "cdc.renamed."
# A source default not yet given to rows written before its column existed: `cdc.backfill.<column>`.
BACKFILL_PREFIX = "cdc.backfill."
# A column the table format holds under another name (common/names.py): `cdc.source-name.<lake name>`
# = the source's name.
SOURCE_NAME_PREFIX = "cdc.source-name."
# On a marker table: the lake table it belongs to.
MARKERS_OF_PROPERTY = "cdc.delete-markers-of"
# A table set aside (jobs/batch.py): its batches failed in a way running them again does not cure, so
# its changes go to the dead letters until it is resumed. The value: `SetAsideMark.to_json`.
SET_ASIDE_PROPERTY = "cdc.set-aside"
# MySQL/MariaDB partitioning of the source table as its statements define it (events/partition_ddl.py,
# `Partitioning.to_json`), and the partitions' rows deleted for DROP/TRUNCATE PARTITION so far:
# `[[position, condition], ...]`, applied again when changes older than one are read later.
SOURCE_PARTITIONING_PROPERTY = "cdc.source-partitioning"
PARTITION_DELETES_PROPERTY = "cdc.source-partition-deletes"
# The source changed the table's rows without change events in a way the job cannot follow (e.g. a
# DROP PARTITION of a HASH-partitioned table): what and where. The table no longer equals the source
# until it is rebuilt from a new snapshot.
SOURCE_DIVERGED_PROPERTY = "cdc.source-diverged"
# SET and ENUM columns the source redefined (ALTER TABLE … MODIFY/CHANGE):
# `{column: [position, [member, ...], "SET" | "ENUM"]}` (no kind: SET), the newest definition each;
# rows written before it read as the source reads them under it (members/case/removed members).
SET_ORDERS_PROPERTY = "cdc.source-set-orders"
# The drop mark: set together, removed together.
SOURCE_DROP_PROPERTIES = (SOURCE_DROPPED_PROPERTY, SOURCE_DROPPED_POSITION_PROPERTY)


def backfill_property(column: str) -> str:
    return BACKFILL_PREFIX + column


def keys_text(keys: list[str]) -> str:
    """KEY_PROPERTY's value: the names comma-separated, or a JSON list when a name holds a comma or
    starts with `[` (a source allows both in a quoted name)."""
    if any("," in k or k.startswith("[") for k in keys):
        return json.dumps(keys, ensure_ascii=False)
    return ",".join(keys)


def keys_of(text: str) -> list[str]:
    """`keys_text` read back."""
    if text.startswith("["):
        return [str(k) for k in json.loads(text)]
    return [k for k in text.split(",") if k]


def is_metadata_column(name: str) -> bool:
    return name.startswith(METADATA_PREFIX)


@dataclass
class TableState:
    """What the job knows of a lake table between batches."""

    columns: list[tuple[str, T.DataType]]  # data columns, without the metadata columns
    keys: list[str]
    pending_backfill: dict[str, str] = field(default_factory=dict)  # left by a crash mid-evolution
    column_changes: list[ColumnChange] = field(default_factory=list)  # applied renames and drops
    dropped_seq: int | None = None  # position of a DROP TABLE at the source that the lake table outlived
    # The primary key changed at the source (ALTER TABLE): events older than `key_position` carry
    # the key before it; `key_batch` is the fingerprint of the batch that changed it.
    key_position: int | None = None
    key_batch: str | None = None
    set_aside: SetAsideMark | None = None  # the table is set aside (SET_ASIDE_PROPERTY)
    partitioning: str | None = None  # SOURCE_PARTITIONING_PROPERTY
    partition_deletes: list[tuple[int, str]] = field(default_factory=list)  # PARTITION_DELETES_PROPERTY
    diverged: str | None = None  # SOURCE_DIVERGED_PROPERTY
    set_orders: dict[str, tuple[int, tuple[str, ...], str]] = field(default_factory=dict)  # SET_ORDERS_PROPERTY

    @classmethod
    def from_properties(cls, columns: list[tuple[str, T.DataType]], props: dict[str, str]) -> TableState:
        """The state of a table with these data columns and table properties."""
        sets = props.get(SET_ORDERS_PROPERTY) or "{}"
        dropped = props.get(SOURCE_DROPPED_POSITION_PROPERTY)
        key_position = props.get(KEY_POSITION_PROPERTY)
        return cls(
            columns,
            keys_of(props.get(KEY_PROPERTY, "")),
            {k[len(BACKFILL_PREFIX) :]: v for k, v in props.items() if k.startswith(BACKFILL_PREFIX)},
            loads(props.get(COLUMN_CHANGES_PROPERTY)),
            int(dropped) if dropped else None,
            int(key_position) if key_position else None,
            props.get(KEY_BATCH_PROPERTY),
            SetAsideMark.from_json(props[SET_ASIDE_PROPERTY]) if props.get(SET_ASIDE_PROPERTY) else None,
            props.get(SOURCE_PARTITIONING_PROPERTY),
            [(int(seq), cond) for seq, cond in json.loads(props.get(PARTITION_DELETES_PROPERTY) or "[]")],
            props.get(SOURCE_DIVERGED_PROPERTY),
            {c: (int(v[0]), tuple(v[1]), v[2] if len(v) > 2 else "SET") for c, v in json.loads(sets).items()},
        )


# ------------------------------------------------------------------ a table set aside
SET_ASIDE_FOLDER = "_set_aside"  # under --dead_letter_path; `_`: Spark's file listing skips it
EARLY_FOLDER = "_early"  # under --dead_letter_path: lake/small_files.py
MARK_FILE = "_mark.json"


@dataclass(frozen=True)
class SetAsideMark:
    """Why and since when a table is set aside, and the folder its changes go to meanwhile."""

    table: str  # the lake table, `<catalog>.<namespace>.<name>`
    reason: str
    batch_id: int  # the batch that set it aside
    folder: str  # `<dead_letter_path>/_set_aside/<namespace>.<name>/since-<batch id>-<digest>`
    at: str  # when, UTC ISO 8601

    def to_json(self) -> str:
        return json.dumps(
            {"table": self.table, "reason": self.reason, "batch": self.batch_id, "folder": self.folder, "at": self.at}
        )

    @classmethod
    def from_json(cls, text: str) -> SetAsideMark:
        d = json.loads(text)
        return cls(d["table"], d["reason"], int(d["batch"]), d["folder"], d["at"])


def set_aside_root(dead_letter_path: str, table: str) -> str:
    """The folder of a table's set-aside changes and its mark (`MARK_FILE`): one per lake table."""
    return f"{dead_letter_path.rstrip('/')}/{SET_ASIDE_FOLDER}/{'.'.join(table.split('.')[-2:])}"


# ------------------------------------------------------------------ policies (job arguments)
class SchemaChangePolicy(StrEnum):
    """--schema_change_policy: a column type change Iceberg cannot promote in place."""

    EVOLVE = "evolve"  # rewrite the table when every stored value converts exactly
    FAIL = "fail"  # a lossy change fails the batch
    DEAD_LETTER = "dead_letter"  # every such change goes to the dead letters


class DropPolicy(StrEnum):
    """--dropped_table_policy and --dropped_column_policy: what the lake does with what the source dropped."""

    KEEP = "keep"
    DROP = "drop"


class KeylessTablePolicy(StrEnum):
    """--keyless_table_policy: a table without a primary key."""

    MULTISET = "multiset"  # whole rows are the identity, duplicates kept
    DEAD_LETTER = "dead_letter"


class WriteMode(StrEnum):
    """--write_mode: Iceberg's row-level write mode of the tables the job creates."""

    MERGE_ON_READ = "merge-on-read"
    COPY_ON_WRITE = "copy-on-write"
