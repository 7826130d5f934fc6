"""Test events built from real Debezium messages (tests/fixtures/debezium/, captured from
Debezium 3.6 with MariaDB and PostgreSQL, JsonConverter with schemas enabled).

`Events` takes a real message as the template and changes only what a test needs (key, row
values, op, binlog position, Kafka offset), so every event keeps Debezium's exact envelope.
"""

from __future__ import annotations

import base64
import copy
import decimal
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "debezium"


def load(name: str) -> dict[str, Any]:
    """A fixture message: {"partition", "offset", "key", "value"} as Kafka Connect wrote them."""
    return json.loads((FIXTURES / name).read_text())


def captured() -> list[tuple[str, Any]]:
    """Every captured file as ("<dialect>/<file name>", its JSON), in name order: messages, and the
    type matrix's source rows (which are no message)."""
    return [(f"{f.parent.name}/{f.name}", json.loads(f.read_text())) for f in sorted(FIXTURES.glob("*/*.json"))]


def connect_json(obj: Any) -> str:
    """JSON text as Kafka Connect's JsonConverter writes it: compact, UTF-8, keys in order."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def captured_session(fixture: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A session captured on the local stack (tests/fixtures/debezium/<fixture>: its Kafka records as
    the job reads them, and the source's rows at the end, keyed by table)."""
    data = json.loads((FIXTURES / fixture).read_text())
    at = datetime.fromtimestamp(1795303971, UTC)
    records = [
        {
            "topic": m["topic"],
            "partition": m["partition"],
            "offset": m["offset"],
            "timestamp": at,
            "key": connect_json(m["key"]) if m["key"] is not None else None,
            "value": connect_json(m["value"]) if m["value"] is not None else None,
        }
        for m in data["records"]
    ]
    return records, data["source"]


def decimal_b64(value: Decimal | str, scale: int) -> str:
    """Connect Decimal encoding: base64 of the two's-complement big-endian unscaled integer."""
    with decimal.localcontext() as ctx:
        ctx.prec = 80  # the default 28 digits would round 38-digit values
        unscaled = int((Decimal(value) * (Decimal(10) ** scale)).to_integral_value())
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


@dataclass
class Events:
    """Builds a Kafka batch of Debezium records for one source table."""

    topic: str = "mdb.inventory.customers"
    db: str = "inventory"
    table: str = "customers"
    schema: str = "public"  # PostgreSQL's source.schema (MySQL messages have none)
    template_dir: str = "mariadb"
    partition: int = 0
    next_offset: int = 0
    binlog_file: str = "mysql-bin.000004"
    next_pos: int = 1000
    next_ddl_offset: int = 0  # offsets on the schema-change topic
    rows: list[dict[str, Any]] = field(default_factory=list)

    def _template(self, op: str) -> dict[str, Any]:
        name = {"r": "r_snapshot", "c": "c_insert", "u": "u_update", "d": "d_delete"}[op]
        if self.template_dir == "postgres" and op == "u":
            name = "u_update_replica_identity_full"
        if self.template_dir == "postgres" and op == "d":
            name = "d_delete_replica_identity_full"
        return copy.deepcopy(load(f"{self.template_dir}/{name}.json"))

    def record(
        self,
        op: str,
        key: dict[str, Any],
        after: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        *,
        pos: int | None = None,
        row: int = 0,
        file: str | None = None,
        lsn: int | None = None,
        ts_ms: int | None = None,
        offset: int | None = None,
        value_schema: dict[str, Any] | None = None,
        key_schema: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        msg = self._template(op)
        value = msg["value"]
        p = value["payload"]
        if value_schema is not None:
            value["schema"] = value_schema
        if key_schema is not None:
            msg["key"]["schema"] = key_schema
        msg["key"]["payload"] = key
        p["op"] = op
        p["after"] = after if op != "d" else None
        p["before"] = before if before is not None else (after if op == "d" else None)
        src = p["source"]
        src["db"], src["table"] = self.db, self.table
        if "schema" in src:
            src["schema"] = self.schema
        if "file" in src:
            src["file"] = file or self.binlog_file
            src["pos"] = pos if pos is not None else self.next_pos
            src["row"] = row
            self.next_pos = src["pos"] + 100
        if "lsn" in src and lsn is not None:
            src["lsn"] = lsn
        if ts_ms is not None:
            src["ts_ms"] = ts_ms
            p["ts_ms"] = ts_ms + 50
        src["snapshot"] = "true" if op == "r" else "false"
        off = offset if offset is not None else self.next_offset
        self.next_offset = max(self.next_offset, off + 1)
        rec = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": off,
            "timestamp": datetime.fromtimestamp(1795303971, UTC),
            "key": connect_json(msg["key"]),
            "value": connect_json(value),
        }
        self.rows.append(rec)
        return rec

    def schema_change(
        self,
        ddl: str,
        change: str = "ALTER",
        *,
        topic: str | None = None,
        pos: int | None = None,
        offset: int | None = None,
        snapshot: str = "false",
        table: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A schema-change event of this table on the connector's `topic.prefix` topic (default:
        this table topic's first part), as the MySQL connector writes one: `ddl` is the statement,
        `tableChanges` says which table it changed and how (`ALTER`, `DROP`, `CREATE`) and, when
        given, the table after it (`table`, e.g. `customers_table`)."""
        msg = load("mariadb/schema_change_alter.json")
        p = msg["value"]["payload"]
        msg["key"]["payload"] = {"databaseName": self.db}
        p["databaseName"] = self.db
        p["ddl"] = ddl
        [tc] = p["tableChanges"]
        tc["type"] = change
        tc["id"] = f'"{self.db}"."{self.table}"'
        # Unless given, the table after the statement is not known here (the captured one is
        # another table's): none, so the columns follow the row events these tests write.
        tc["table"] = table
        src = p["source"]
        src.update(db=self.db, table=self.table, file=self.binlog_file, snapshot=snapshot)
        src["pos"] = pos if pos is not None else self.next_pos
        self.next_pos = src["pos"] + 100
        off = offset if offset is not None else self.next_ddl_offset
        self.next_ddl_offset = off + 1
        rec = {
            "topic": topic or self.topic.split(".")[0],
            "partition": 0,
            "offset": off,
            "timestamp": datetime.fromtimestamp(1795303971, UTC),
            "key": connect_json(msg["key"]),
            "value": connect_json(msg["value"]),
        }
        self.rows.append(rec)
        return rec

    def tombstone(self, key: dict[str, Any]) -> dict[str, Any]:
        msg = load(f"{self.template_dir}/tombstone_after_delete.json")
        msg["key"]["payload"] = key
        rec = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.next_offset,
            "timestamp": datetime.fromtimestamp(1795303971, UTC),
            "key": connect_json(msg["key"]),
            "value": None,
        }
        self.next_offset += 1
        self.rows.append(rec)
        return rec

    def raw(self, key: str | None, value: str | None) -> dict[str, Any]:
        """A record with arbitrary key/value text (for malformed input)."""
        rec = {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.next_offset,
            "timestamp": datetime.fromtimestamp(1795303971, UTC),
            "key": key,
            "value": value,
        }
        self.next_offset += 1
        self.rows.append(rec)
        return rec

    def take(self) -> list[dict[str, Any]]:
        """The records built since the last take() — one Kafka micro-batch."""
        out, self.rows = self.rows, []
        return out


def customer(id_: int, first: str = "Sally", email: str | None = None, balance: str = "10.50", **extra: Any) -> dict:
    """A row of the MariaDB fixture table inventory.customers (balance DECIMAL(10,2) as Connect bytes)."""
    row = {
        "id": id_,
        "first_name": first,
        "last_name": "Thomas",
        "email": email or f"{first.lower()}{id_}@example.com",
        "balance": decimal_b64(balance, 2),
        "created_at": "2026-11-21T23:25:34Z",
    }
    row.update(extra)
    return row


def customers_table(*, drop: tuple[str, ...] = (), add: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """inventory.customers as the connector's `tableChanges` describe it after a statement: the
    captured ALTER's table (mariadb/schema_change_alter.json) without its added `loyalty_tier` and
    the `drop` columns, then each `add` column (name, its VARCHAR(255) default) last."""
    [tc] = load("mariadb/schema_change_alter.json")["value"]["payload"]["tableChanges"]
    table = copy.deepcopy(tc["table"])
    columns = [c for c in table["columns"] if c["name"] not in ("loyalty_tier", *drop)]
    like = next(c for c in table["columns"] if c["name"] == "last_name")
    columns += [like | {"name": name, "optional": False, "defaultValueExpression": default} for name, default in add]
    table["columns"] = [c | {"position": i} for i, c in enumerate(columns, 1)]
    return table


def value_schema_of(fixture: str) -> dict[str, Any]:
    return copy.deepcopy(load(fixture)["value"]["schema"])


def with_row_fields(schema: dict[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    """An envelope schema whose before/after row structs have `fields` (a Connect field list)."""
    s = copy.deepcopy(schema)
    for f in s["fields"]:
        if f["field"] in ("before", "after"):
            f["fields"] = copy.deepcopy(fields)
    return s


def row_fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return next(f for f in schema["fields"] if f["field"] == "after")["fields"]


def email_became_int_schema() -> dict[str, Any]:
    """The customers value schema after the source turned `email` (text in the lake) into an INT: an
    incompatible change, so the job dead-letters the events that carry it."""
    schema = copy.deepcopy(value_schema_of("mariadb/c_insert.json"))
    next(f for f in row_fields(schema) if f["field"] == "email")["type"] = "int32"
    return schema


def wider_balance_schema() -> dict[str, Any]:
    """customers with `balance` DECIMAL(10,2) -> DECIMAL(14,2) at the source (a safe widening)."""
    schema = value_schema_of("mariadb/c_insert_after_add_column.json")
    for f in row_fields(schema):
        if f["field"] == "balance":
            f["parameters"]["connect.decimal.precision"] = "14"
    return schema


def renamed_schema() -> dict[str, Any]:
    """wider_balance_schema with `last_name` renamed to `surname` at the source."""
    schema = wider_balance_schema()
    for f in row_fields(schema):
        if f["field"] == "last_name":
            f["field"] = "surname"
    return schema


def dropped_email_schema() -> dict[str, Any]:
    """renamed_schema after `email` was dropped at the source."""
    schema = renamed_schema()
    for f in (x for x in schema["fields"] if x["field"] in ("before", "after")):
        f["fields"] = [c for c in f["fields"] if c["field"] != "email"]
    return schema


def key_schema(table: str, *fields: tuple[str, str]) -> dict[str, Any]:
    """The Kafka key schema the MySQL connector writes for `inventory.<table>` keyed by `fields`
    ((Connect type, column) pairs, in key order)."""
    return {
        "type": "struct",
        "name": f"mdb.inventory.{table}.Key",
        "optional": False,
        "fields": [{"type": t, "optional": False, "field": name} for t, name in fields],
    }


# A table `inventory.order_lines` keyed by (order_id, line_no): a composite primary key.
ORDER_LINES_KEY_SCHEMA = key_schema("order_lines", ("int32", "order_id"), ("int32", "line_no"))


def order_lines_schema() -> dict[str, Any]:
    """The value schema of order_lines (order_id, line_no, sku), keyed by ORDER_LINES_KEY_SCHEMA."""
    return with_row_fields(
        value_schema_of("mariadb/c_insert.json"),
        [
            {"type": "int32", "optional": False, "field": "order_id"},
            {"type": "int32", "optional": False, "field": "line_no"},
            {"type": "string", "optional": True, "field": "sku"},
        ],
    )


def member_field(name: str, kind: str, allowed: str) -> dict[str, Any]:
    """A SET (`EnumSet`) or ENUM (`Enum`) column as the connector describes it (captured:
    mariadb/all_types_00_c.json's c_set, c_enum)."""
    return {"type": "string", "optional": True, "name": f"io.debezium.data.{kind}", "version": 1,
            "parameters": {"allowed": allowed}, "field": name}  # fmt: skip


def with_set_and_enum(allowed: str, grades: str = "a,b,c") -> tuple[dict[str, Any], dict[str, Any]]:
    """customers' value schema with a SET column `tags` and an ENUM column `grade` of these members, and
    the table as tableChanges describes it."""
    base = value_schema_of("mariadb/c_insert.json")
    fields = [member_field("tags", "EnumSet", allowed), member_field("grade", "Enum", grades)]
    schema = with_row_fields(base, [*row_fields(base), *fields])
    table = customers_table()
    like = next(c for c in table["columns"] if c["name"] == "last_name")
    for name, kind, members in (("tags", "SET", allowed), ("grade", "ENUM", grades)):
        quoted = [f"'{m}'" for m in members.split(",")]
        column = {"name": name, "typeName": kind, "typeExpression": kind, "optional": True, "enumValues": quoted}
        table["columns"].append(like | column | {"position": len(table["columns"]) + 1})
    return schema, table
