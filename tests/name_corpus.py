"""A MariaDB table whose names are every kind the source allows quoted, as Debezium messages in three
batches: the table `Unit Prices` keyed by (`Order Id`, `line,no`), columns with spaces, punctuation,
a reserved word, a leading digit, mixed case, letters outside ASCII, a backtick, a dot, Hudi's own
column name and the longest name MySQL allows; then renames from and to such names and an added one.

Used by every format's job tier: format_corpus.batches (the Delta and Hudi extras) and
tests/job/test_source_names.py (Iceberg). `EXPECTED` is the source table after each batch's changes.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from cdc_events import Events, decimal_b64, key_schema, value_schema_of, with_row_fields

TABLE = "Unit Prices"
TOPIC = "mdb.inventory.Unit_Prices"  # Debezium puts `_` where a topic name cannot hold the character
LAKE_TABLE = "inventory_unit_prices"
KEY = ("Order Id", "line,no")
LONGEST = "the widest name MySQL allows: sixty-four characters, ünïcödé too"
PRICE = {
    "type": "bytes",
    "name": "org.apache.kafka.connect.data.Decimal",
    "version": 1,
    "parameters": {"scale": "2", "connect.decimal.precision": "10"},
}
# (column, Connect field schema) in table order, before the renames.
COLUMNS: list[tuple[str, dict[str, Any]]] = [
    ("Order Id", {"type": "int32", "optional": False}),
    ("line,no", {"type": "int32", "optional": False}),
    ("unit price", {**PRICE, "optional": True}),
    ("select", {"type": "string", "optional": True}),
    ("Größe", {"type": "string", "optional": True}),
    ("CamelCase", {"type": "string", "optional": True}),
    ("1st", {"type": "int32", "optional": True}),
    ("v.2", {"type": "string", "optional": True}),
    ("price`s", {"type": "string", "optional": True}),
    ("_hoodie_commit_time", {"type": "string", "optional": True}),
    (LONGEST, {"type": "string", "optional": True}),
    ("plain", {"type": "string", "optional": True}),
]
RENAMES = {"Größe": "size_cm", "plain": "new name!"}  # from such a name, and to one
ADDED = ("added (cm²)", {"type": "string", "optional": True})


def _schema(columns: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    fields = [{**spec, "field": name} for name, spec in columns]
    return with_row_fields(value_schema_of("mariadb/c_insert.json"), fields)


def _row(order: int, line: int, tag: str, columns: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {
        "Order Id": order,
        "line,no": line,
        "unit price": decimal_b64(f"{order}.{line}0", 2),
        "1st": order * 10 + line,
    }
    return {c: values.get(c, f"{tag} {c}") for c in columns}


def batches() -> list[list[dict[str, Any]]]:
    """Three batches: (1) rows inserted, one updated; (2) a column renamed from a name Avro refuses,
    one renamed to such a name, a row updated under the new names, one deleted; (3) a column added
    whose name Avro refuses, a row updated with it and one inserted."""
    ev = Events(topic=TOPIC, table=TABLE)
    keys = key_schema("Unit_Prices", *[("int32", k) for k in KEY])

    def change(op: str, order: int, line: int, tag: str, columns: list[tuple[str, dict[str, Any]]]) -> None:
        row = _row(order, line, tag, [n for n, _ in columns])
        key = {KEY[0]: order, KEY[1]: line}
        ev.record(op, key, row, before=row if op == "d" else None, value_schema=_schema(columns), key_schema=keys)

    for order, line in ((1, 1), (1, 2), (2, 1)):
        change("c", order, line, "v1", COLUMNS)
    change("u", 1, 2, "v2", COLUMNS)
    first = ev.take()
    renamed = [(RENAMES.get(n, n), spec) for n, spec in COLUMNS]
    ddl = "ALTER TABLE `Unit Prices` RENAME COLUMN `Größe` TO size_cm, RENAME COLUMN plain TO `new name!`"
    ev.schema_change(ddl)
    change("u", 1, 1, "v3", renamed)
    change("d", 2, 1, "v1", renamed)
    second = ev.take()
    added = [*renamed, ADDED]
    change("u", 1, 2, "v4", added)
    change("c", 3, 1, "v4", added)
    third = ev.take()
    return [first, second, third]


def expected() -> dict[tuple[int, int], dict[str, Any]]:
    """The source table after the three batches: (`Order Id`, `line,no`) -> row, under its names
    (the decimal as Decimal)."""
    final = [RENAMES.get(n, n) for n, _ in COLUMNS] + [ADDED[0]]
    rows = {(1, 1): "v3", (1, 2): "v4", (3, 1): "v4"}
    out = {}
    for (order, line), tag in rows.items():
        row: dict[str, Any] = {c: f"{tag} {c}" for c in final}  # each written under its name then
        row.update(
            {"Order Id": order, "line,no": line, "unit price": Decimal(f"{order}.{line}0"), "1st": order * 10 + line}
        )
        if tag == "v3":
            row[ADDED[0]] = None  # written before the column existed (no source default)
        out[(order, line)] = row
    return out
