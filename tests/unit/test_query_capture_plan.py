"""Query capture's pure part (events/query_capture.py): the poll's SQL, the mark, the refusals, the
Connect fields a source column becomes, and the --source jdbc arguments."""

from __future__ import annotations

import json

import pytest
from cdclake.common.settings import ArgumentError, build_settings
from cdclake.events import query_capture as qc
from cdclake.events.connect_types import row_columns

MARIADB = qc.Engine.MYSQL
T = qc.CaptureTable("shop", "orders", "updated_at")


def col(name: str, data_type: str, column_type: str = "", key: int | None = None, **kw) -> qc.SourceColumn:
    return qc.SourceColumn(name, data_type, column_type, kw.get("p"), kw.get("s"), kw.get("null", False), key)


COLUMNS = [col("id", "int", "int(11)", key=1), col("updated_at", "datetime", "datetime(6)")]
REQUIRED = {"warehouse": "/w", "checkpoint_location": "/c", "dead_letter_path": "/d"}


def test_mark_is_a_utc_timestamp_literal_to_the_microsecond():
    assert qc.mark_literal(1_704_273_300_123_456) == "'2024-01-03 09:15:00.123456'"
    assert qc.mark_literal(0) == "'1970-01-01 00:00:00.000000'"


def test_poll_reads_from_the_mark_inclusive_older_than_the_lag_in_position_then_key_order():
    sql = qc.poll_query(MARIADB, T, COLUMNS, qc.Poll(mark=1_000_000, lag_seconds=5, limit=100))
    assert "`updated_at` >= '1970-01-01 00:00:01.000000'" in sql
    assert "`updated_at` < NOW(6) - INTERVAL 5 SECOND" in sql
    assert sql.endswith("ORDER BY `updated_at`, `id` LIMIT 100")
    first = qc.poll_query(MARIADB, T, COLUMNS, qc.Poll(mark=None, lag_seconds=5, limit=100))
    assert ">=" not in first  # no mark yet: the whole table


def test_poll_past_the_mark_only_and_at_one_position_without_limit():
    strict = qc.poll_query(MARIADB, T, COLUMNS, qc.Poll(mark=1_000_000, lag_seconds=0, limit=10, strict=True))
    assert "`updated_at` > '1970-01-01 00:00:01.000000'" in strict
    at = qc.poll_query(MARIADB, T, COLUMNS, qc.Poll(mark=None, lag_seconds=0, limit=10, at=2_000_000))
    assert "`updated_at` = '1970-01-01 00:00:02.000000'" in at and "LIMIT" not in at


def test_postgres_poll_quotes_its_way_and_measures_the_lag_in_an_interval():
    t = qc.CaptureTable("public", "Orders", "modified")
    cols = [col("id", "integer", key=1), col("modified", "timestamp with time zone")]
    sql = qc.poll_query(qc.Engine.POSTGRES, t, cols, qc.Poll(mark=None, lag_seconds=3, limit=0))
    assert 'FROM "public"."Orders"' in sql and "now() - interval '3 seconds'" in sql and "LIMIT" not in sql


def test_table_without_the_modification_column_is_refused_naming_the_ddl():
    with pytest.raises(qc.CaptureRefused, match=r"no modification column 'updated_at'.*sql/query_capture.sql"):
        qc.check_capturable(MARIADB, T, [col("id", "int", key=1)])
    pg = qc.CaptureTable("public", "orders", "updated_at")
    with pytest.raises(qc.CaptureRefused, match=r"sql/postgres/query_capture\.sql"):
        qc.check_capturable(qc.Engine.POSTGRES, pg, [col("id", "integer", key=1)])


def test_nullable_or_non_timestamp_modification_column_and_keyless_table_are_refused():
    with pytest.raises(qc.CaptureRefused, match="must be a NOT NULL"):
        qc.check_capturable(MARIADB, T, [col("id", "int", key=1), col("updated_at", "datetime", null=True)])
    with pytest.raises(qc.CaptureRefused, match="must be a NOT NULL"):
        qc.check_capturable(MARIADB, T, [col("id", "int", key=1), col("updated_at", "bigint")])
    with pytest.raises(qc.CaptureRefused, match="no primary key"):
        qc.check_capturable(MARIADB, T, [col("id", "int"), col("updated_at", "timestamp")])
    qc.check_capturable(MARIADB, T, COLUMNS)


def test_source_columns_become_the_connect_fields_the_log_path_maps_to_the_same_lake_types():
    cols = [
        col("id", "int", "int(10) unsigned", key=1),
        col("amount", "decimal", "decimal(12,2)", p=12, s=2),
        col("huge", "decimal", "decimal(65,4)", p=65, s=4),
        col("big", "bigint", "bigint(20) unsigned"),
        col("born", "date"),
        col("seen", "datetime", "datetime(6)"),
        col("stamp", "timestamp", "timestamp(6)"),
        col("flag", "bit", "bit(1)"),
        col("raw", "blob", "blob"),
    ]
    fields = [qc.column_field(MARIADB, c)[0] for c in cols]
    specs = row_columns(json.loads(qc.value_schema(T, fields)))
    assert [s.spark_type.simpleString() for s in specs] == [
        "bigint",
        "decimal(12,2)",
        "string",
        "decimal(20,0)",
        "date",
        "timestamp_ntz",
        "timestamp",
        "boolean",
        "binary",
    ]


def test_a_column_type_it_cannot_read_is_refused_by_name():
    with pytest.raises(qc.CaptureRefused, match="'shape' has type geometry"):
        qc.column_field(MARIADB, col("shape", "geometry", "geometry"))


def test_jdbc_source_needs_url_and_tables_and_refuses_what_it_cannot_keep():
    base = {"source": "jdbc", "jdbc_url": "jdbc:mysql://h:3306/", "jdbc_tables": "shop.orders:updated_at", **REQUIRED}
    assert build_settings(base).jdbc_tables == "shop.orders:updated_at"
    for missing in ("jdbc_url", "jdbc_tables"):
        with pytest.raises(ArgumentError, match=f"--{missing} is required with --source jdbc"):
            build_settings({k: v for k, v in base.items() if k != missing})
    with pytest.raises(ArgumentError, match="jdbc:postgresql"):
        build_settings({**base, "jdbc_url": "jdbc:oracle:thin:@h"})
    with pytest.raises(ArgumentError, match=r"<db>\.<table>:<modification column>"):
        build_settings({**base, "jdbc_tables": "orders"})
    with pytest.raises(ArgumentError, match="is_deleted=1"):
        build_settings({**base, "jdbc_soft_delete": "is_deleted"})
    with pytest.raises(ArgumentError, match="transactions keep"):
        build_settings({**base, "transactions": "keep"})


def test_the_password_comes_from_a_variable_or_a_file_and_an_unknown_scheme_is_refused(tmp_path):
    from cdclake.jobs.jdbc_source import resolve_password

    assert resolve_password("env:PW", {"PW": "s3cret"}) == "s3cret"
    (tmp_path / "debezium.properties").write_text("user=debezium\npassword=from-file\n")
    assert resolve_password(f"file:{tmp_path / 'debezium.properties'}") == "from-file"
    (tmp_path / "plain").write_text("whole-file\n")
    assert resolve_password(f"file:{tmp_path / 'plain'}") == "whole-file"
    assert resolve_password("") == ""
    with pytest.raises(ArgumentError, match="not set"):
        resolve_password("env:MISSING", {})
    with pytest.raises(ArgumentError, match="secretsmanager:, env: or file:"):
        resolve_password("vault:x")
