"""PostgreSQL as the source: table naming by schema, and what REPLICA IDENTITY DEFAULT changes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cdc_events import Events, load

ROW = {"first_name": "x", "last_name": "y", "email": "e", "balance": "1.00", "created_at": "2026-11-21T23:53:06Z"}


def pg_events(schema: str = "public") -> Events:
    return Events(topic=f"pg.{schema}.customers", db="inventory", schema=schema, template_dir="postgres")


def fixture_record(name: str, offset: int) -> dict[str, Any]:
    """A captured PostgreSQL message exactly as Debezium wrote it, as one Kafka record."""
    msg = load(f"postgres/{name}.json")
    return {
        "topic": "pg.public.customers",
        "partition": 0,
        "offset": offset,
        "timestamp": datetime.fromtimestamp(1795303971, UTC),
        "key": json.dumps(msg["key"]),
        "value": json.dumps(msg["value"]),
    }


def test_postgres_tables_are_named_by_schema_so_same_named_tables_in_two_schemas_stay_apart(lake):
    # One connector captures one database; its schemas are what tell tables apart (as in the
    # topic names <prefix>.<schema>.<table>), so the target is <namespace>.<schema>_<table>.
    public, archive = pg_events("public"), pg_events("archive")
    public.record("c", {"id": 1}, {"id": 1, **ROW, "first_name": "current"}, lsn=100)
    archive.record("c", {"id": 1}, {"id": 1, **ROW, "first_name": "archived"}, lsn=110, offset=0)
    archive.record("c", {"id": 2}, {"id": 2, **ROW, "first_name": "archived too"}, lsn=120, offset=1)
    report = lake.apply(public.take() + archive.take())
    assert sorted(t.table.split(".")[-1] for t in report.tables) == ["archive_customers", "public_customers"]
    assert [(r["id"], r["first_name"]) for r in lake.rows("public_customers")] == [(1, "current")]
    assert [(r["id"], r["first_name"]) for r in lake.rows("archive_customers")] == [
        (1, "archived"),
        (2, "archived too"),
    ]


def test_replica_identity_default_updates_and_deletes_still_apply(lake):
    # Without REPLICA IDENTITY FULL an update arrives with before=null and a delete's before holds
    # only the key (other columns empty): the job needs neither, it upserts `after` and deletes by key.
    ev = pg_events()
    ev.record("c", {"id": 1}, {"id": 1, **ROW}, lsn=26000000, offset=0)
    ev.record("c", {"id": 2}, {"id": 2, **ROW}, lsn=26000001, offset=1)
    lake.apply(ev.take())
    update = fixture_record("u_update_replica_identity_default", offset=2)
    delete = fixture_record("d_delete_replica_identity_default", offset=3)
    assert json.loads(update["value"])["payload"]["before"] is None
    lake.apply([update, delete])
    rows = lake.rows("public_customers")
    assert [(r["id"], r["email"], r["_cdc_op"]) for r in rows] == [(1, "sally.t@example.com", "u")]
