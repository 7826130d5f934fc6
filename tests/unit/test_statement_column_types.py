"""The lake type of a MySQL column read from a schema-change event's `tableChanges` is the type the
row events' Connect schema gives it (connect_types.py): checked on the captured MariaDB all-types
table, whose CREATE TABLE event and row events were captured from one session on the local stack."""

from __future__ import annotations

import json

from cdc_events import FIXTURES
from cdclake.common.lake_contract import TableState
from cdclake.events.connect_types import row_columns
from cdclake.events.source_ddl import (
    NO_BACKFILL,
    StatementColumn,
    mysql_default_sql,
    mysql_lake_type,
    mysql_statement_columns,
)
from cdclake.lake.table_plan import (
    AlterSchema,
    BackfillDefaults,
    ColumnDefaults,
    GroupFacts,
    Memory,
    Policies,
    StatementSchema,
    TableDDL,
    Write,
    plan_table,
)
from pyspark.sql import types as T
from type_matrix import MARIADB_COLUMNS


def _all_types_definitions() -> list[dict]:
    event = json.loads((FIXTURES / "mariadb" / "all_types_schema_change.json").read_text())
    (change,) = event["value"]["payload"]["tableChanges"]
    assert change["type"] == "CREATE"
    return change["table"]["columns"]


def test_every_mariadb_column_type_from_the_statement_is_the_type_its_row_events_give():
    row = json.loads((FIXTURES / "mariadb" / "all_types_00_c.json").read_text())
    from_events = {c.name: c.spark_type for c in row_columns(row["value"]["schema"])}
    definitions = _all_types_definitions()
    assert [c["name"] for c in definitions] == ["id"] + [c.name for c in MARIADB_COLUMNS]
    differ = {
        c["name"]: (c["typeName"], mysql_lake_type(c), from_events[c["name"]])
        for c in definitions
        if mysql_lake_type(c) != from_events[c["name"]]
    }
    assert not differ


def test_a_definition_the_statement_cannot_tell_exactly_is_left_to_the_row_events():
    # FLOAT(p) may be a double, MariaDB's UUID/INET types have no mapping checked against events,
    # a zoned TIMESTAMP literal depends on the server's time zone, a zero date is no date.
    assert mysql_lake_type({"typeName": "FLOAT", "length": 30}) is None
    assert mysql_lake_type({"typeName": "UUID"}) is None
    assert mysql_lake_type({"typeName": "DECIMAL", "length": None}) is None
    ts = {"typeName": "TIMESTAMP", "defaultValueExpression": "2024-01-01 00:00:00"}
    assert mysql_default_sql(ts, T.TimestampType()) is None
    assert mysql_default_sql({"typeName": "DATE", "defaultValueExpression": "0000-00-00"}, T.DateType()) is None
    # CURRENT_TIMESTAMP arrives as the epoch, in the statement as in the row events: no backfill.
    now = {"typeName": "TIMESTAMP", "defaultValueExpression": "1970-01-01 00:00:00"}
    assert mysql_default_sql(now, T.TimestampType()) == NO_BACKFILL
    known, unknown = mysql_statement_columns(
        {"columns": [{"name": "a", "typeName": "INT", "autoIncremented": True}, {"name": "b", "typeName": "UUID"}]}
    )
    assert known == [] and unknown == ["a", "b"]


def _statement(seq: int, columns: dict[str, tuple[T.DataType, str | None]]) -> StatementSchema:
    return StatementSchema(seq, tuple(StatementColumn(n, t, d) for n, (t, d) in columns.items()), ("id",))


def test_a_statement_without_row_events_adds_its_columns_and_backfills_their_defaults():
    state = TableState([("id", T.IntegerType()), ("name", T.StringType())], ["id"])
    ddl = TableDDL(schemas=[_statement(100, {"id": (T.IntegerType(), None), "name": (T.StringType(), None),
                                             "qty": (T.IntegerType(), "CAST(7 AS int)")})])  # fmt: skip
    plan = plan_table(state, [], ddl, Policies(), Memory())
    (alter,) = plan.of(AlterSchema)
    assert alter.plan.add == [("qty", T.IntegerType())]
    assert plan.of(ColumnDefaults)[0].literals == (("qty", "CAST(7 AS int)"),)
    assert plan.of(BackfillDefaults)[0].added == frozenset({"qty"})
    assert plan.of(Write) == []
    # The next row event carries the column: nothing to change.
    after = GroupFacts(1, 200, columns=(("id", T.IntegerType()), ("name", T.StringType()), ("qty", T.IntegerType())),
                       keys=("id",), defaults=frozenset({"qty"}))  # fmt: skip
    again = plan_table(plan.state, [after], None, Policies(), Memory())
    assert [type(s).__name__ for s in again.steps] == ["Write"]


def test_a_statement_does_not_take_a_lossy_type_change_or_a_key_change_for_the_row_events():
    state = TableState([("id", T.IntegerType()), ("name", T.StringType())], ["id"])
    lossy = _statement(100, {"id": (T.IntegerType(), None), "name": (T.IntegerType(), None)})
    assert plan_table(state, [], TableDDL(schemas=[lossy]), Policies(), Memory()).steps == []
    rekeyed = StatementSchema(101, (*lossy.columns[:1], StatementColumn("k", T.IntegerType(), None)), ("k",))
    assert plan_table(state, [], TableDDL(schemas=[rekeyed]), Policies(), Memory()).steps == []
