"""Delta Lake's own extras (Delta Lake 4.2.0), on ONE lake of the Delta lakes' server session
(format_lakes.py; the `lake_server:delta` group, with the every-format suite's Delta cases): real
Debezium messages in five batches (format_corpus.batches) applied by the job's BatchProcessor, then
read back with each table's history. What every format does alike is test_every_format.py's.
"""

from __future__ import annotations

import os
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import format_corpus
import lake_reads
import name_corpus as nc
import pytest
import transfers
from lake_reads import (
    dead_letter_offsets,
    infinite_timestamp_offsets,
    lake,
    postgres_rows,
    postgres_source_rows,
    read_differences,
    source_named_rows,
    type_differences,
)

pytestmark = pytest.mark.format_extra("delta")


def maintain(corpus: Any) -> dict[str, Any]:
    """The maintenance job (--table_format delta, every action forced) over customers' delete markers
    (two files to pack), in the lake's session; first an unreferenced file three days old and a young
    one in its folder. One table: each costs a VACUUM (a listing job) and two file counts."""
    folder = Path(corpus.paths()["warehouse"]) / "cdc.db" / "inventory_customers__cdc_deletes"
    old, young = folder / "part-00000-orphan-old.parquet", folder / "part-00000-orphan-young.parquet"
    for f in (old, young):
        f.write_bytes(b"written by no commit")
    three_days_ago = time.time() - 3 * 86400
    os.utime(old, (three_days_ago, three_days_ago))
    run = corpus.maintenance_job(tables="inventory_customers__cdc_deletes", force="true")
    return {"exit": run["exit"], "orphans_left": sorted(f.name for f in (old, young) if f.exists())}


def read_point(make: Any) -> list[dict[str, Any]]:
    """--transactions keep on Delta: the captured transfers in two batches (namespace `txn`); after each,
    the read point and the two tables read at the versions it names."""
    txn = make(namespace="txn", transactions="keep", dropped_column_policy="drop")
    first, second, _ = transfers.batches()
    points = []
    for records in (first, second):
        txn.apply(records)
        versions = {r["table_name"]: r["version"] for r in txn.query(f"SELECT * FROM {txn.table('cdc__read_point')}")}
        tables = {
            t: txn.query(f"SELECT * FROM {txn.table(t)} VERSION AS OF {versions[t]}")
            for t in (transfers.ACCOUNT, transfers.TRANSFER)
        }
        points.append({"versions": versions, "tables": tables})
    return points


@pytest.fixture(scope="module")
def delta(lake_format, lake_sessions) -> dict[str, Any]:
    from format_lakes import FormatLake

    def make(**overrides: str) -> Any:
        return FormatLake(lake_sessions(lake_format), lake_format, **overrides)

    corpus = make(namespace="cdc", dropped_column_policy="drop")
    reports = []
    for i, records in enumerate(format_corpus.batches()):
        r = corpus.apply(records)
        reports.append({t.table.rsplit(".", 1)[-1]: {"dead": t.dead, "schema": t.schema} for t in r.tables})
        if i == 0:
            reader = corpus.reader()
    feed = corpus.feed_after(reader)
    maintenance = maintain(corpus)
    points = read_point(make)
    tables = corpus.read_back(corpus.tables_now(), history="DESCRIBE HISTORY {table}")
    for t in tables.values():  # sorted here, not by Spark: a sort is one more Spark job per table
        t["history"] = sorted([h["version"], h["operation"]] for h in t["history"])
    return {
        "reports": reports, "tables": tables, "dead": corpus.dead_letters(), "maintenance": maintenance,
        "feed": feed, "read_point": points, "warehouse": corpus.paths()["warehouse"],
    }  # fmt: skip


def table(delta: dict[str, Any], name: str) -> dict[str, Any]:
    return delta["tables"][name if name.startswith(("salesdb_", "public_")) else f"inventory_{name}"]


def by_id(delta: dict[str, Any], name: str = "customers") -> dict[int, dict[str, Any]]:
    rows = table(delta, name)["rows"]
    assert len(rows) == len({r["id"] for r in rows}), "an id stored more than once"
    return {r["id"]: r for r in rows}


def operations(delta: dict[str, Any], name: str) -> list[str]:
    return [op for _, op in table(delta, name)["history"]]


def test_every_lake_table_and_its_delete_markers_are_delta_tables_with_the_lake_contract(delta):
    assert {t["provider"] for t in delta["tables"].values()} == {"delta"}
    assert table(delta, "customers")["properties"]["cdc.primary-key"] == "id"
    assert table(delta, "order_items")["properties"]["cdc.primary-key"] == "order_id,line_no"
    markers = delta["tables"]["inventory_customers__cdc_deletes"]["properties"]
    assert markers["cdc.delete-markers-of"] == "spark_catalog.cdc.inventory_customers"


def test_a_batchs_inserts_updates_and_deletes_of_a_table_are_one_delta_commit(delta):
    ops = operations(delta, "customers")
    # batch 1: the table created, then 4 inserts, an update and a delete in one MERGE; batch 2 (a
    # replay, stale changes and a newer update) one MERGE too.
    assert ops[:3] == ["CREATE TABLE", "MERGE", "MERGE"]
    assert delta["tables"]["inventory_customers__cdc_deletes"]["history"][1][1] == "WRITE"


def test_a_composite_key_a_truncate_and_a_table_rename_keep_the_sources_rows(delta):
    # order_lines: 3 lines and an update, a truncate, a line after it; then renamed to order_items.
    rows = table(delta, "order_items")["rows"]
    assert sorted((r["order_id"], r["line_no"], r["sku"]) for r in rows) == [(3, 1, "D"), (4, 1, "E")]
    assert "inventory_order_lines" not in delta["tables"]
    assert operations(delta, "order_items")[:2] == ["CREATE TABLE AS SELECT", "MERGE"]
    props = table(delta, "order_items")["properties"]
    assert props["cdc.primary-key"] == "order_id,line_no" and props["delta.columnMapping.mode"] == "name"
    markers = delta["tables"]["inventory_order_items__cdc_deletes"]["properties"]
    assert markers["cdc.delete-markers-of"] == "spark_catalog.cdc.inventory_order_items"
    assert "inventory_order_lines__cdc_deletes" not in delta["tables"]


def test_add_column_is_backfilled_with_its_default_and_a_widening_is_one_rewrite_commit(delta):
    schema = {n: t for n, t, _ in table(delta, "customers")["schema"]}
    assert schema["loyalty_tier"] == "string" and schema["balance"] == "decimal(14,2)"
    rows = by_id(delta)
    assert Decimal(str(rows[1]["balance"])) == Decimal("123456789.99")
    assert rows[2]["loyalty_tier"] == "bronze"  # the source default, given to rows written before
    assert "balance decimal(10,2)->decimal(14,2)" in delta["reports"][2]["inventory_customers"]["schema"]
    # Delta widens in place only with its typeWidening table feature, which the job leaves off (Athena): a rewrite.
    ops = operations(delta, "customers")
    assert ops.index("ADD COLUMNS") + 1 == ops.index("CREATE OR REPLACE TABLE AS SELECT")


def test_a_rename_and_a_drop_at_the_source_change_the_delta_columns_in_the_metadata_only(delta):
    t = table(delta, "customers")
    names = [n for n, _, _ in t["schema"] if not n.startswith("_cdc_")]
    assert names == ["id", "first_name", "surname", "balance", "created_at", "loyalty_tier"]
    assert t["properties"]["delta.columnMapping.mode"] == "name"
    # Batch 4: the rename, the drop, the changes recorded, then its two changes in one MERGE.
    ops = operations(delta, "customers")
    renamed = ops.index("RENAME COLUMN")
    assert ops[renamed : renamed + 4] == ["RENAME COLUMN", "DROP COLUMNS", "SET TBLPROPERTIES", "MERGE"]
    rows = by_id(delta)
    assert rows[4]["surname"] == "Thomas-Renamed" and rows[2]["surname"] == "Thomas"
    assert rows[5]["first_name"] == "Eva"


def test_real_column_types_map_to_the_same_lake_types_as_iceberg(delta):
    t = table(delta, "salesdb_all_types")
    schema = {n: ty for n, ty, _ in t["schema"]}
    assert schema["c_tinyint"] == "int" and schema["c_int_u"] == "bigint"
    assert schema["c_bigint_u"] == "decimal(20,0)" and schema["c_decimal_wide"] == "decimal(38,10)"
    assert schema["c_decimal_max"] == "string" and schema["c_float"] == "float" and schema["c_double"] == "double"
    assert schema["c_bit1"] == "boolean" and schema["c_bit12"] == "binary" and schema["c_json"] == "string"
    assert schema["c_datetime0"] == "timestamp_ntz" and schema["c_timestamp6"] == "timestamp"
    assert schema["c_time6"] == "string" and schema["c_year"] == "int" and schema["c_date"] == "date"
    assert delta["reports"][4]["salesdb_all_types"]["dead"] == 0
    import type_matrix as tm

    _, source = tm.load_fixtures("mariadb")
    assert sorted(r["id"] for r in t["rows"]) == sorted(source)


def test_columns_of_every_lake_type_added_to_an_existing_table_get_the_delta_features_they_need(delta):
    # salesdb_all_types was created in batch 1 with its key column only; batch 5's captured messages
    # added a column of every lake type. Delta holds a DATETIME (timestamp_ntz) added to an existing
    # table only once its timestampNtz feature is enabled: first, in its own commit.
    added = delta["reports"][4]["salesdb_all_types"]
    assert "+c_datetime0 timestamp_ntz" in added["schema"] and "+c_bit12 binary" in added["schema"]
    assert added["dead"] == 0
    # Batch 1 created it, batch 2 read batch 1 again (a MERGE that changes nothing), batch 5 enabled the
    # feature, then added the columns.
    ops = operations(delta, "salesdb_all_types")
    assert ops[:4] == ["CREATE TABLE", "MERGE", "MERGE", "SET TBLPROPERTIES"] and "ADD COLUMNS" in ops[4:]
    props = table(delta, "salesdb_all_types")["properties"]
    assert props["delta.feature.timestampNtz"] == "supported" and props["delta.columnMapping.mode"] == "name"
    assert type_differences(Path(delta["warehouse"]), "delta", "mariadb") == []


def test_a_table_named_and_keyed_with_every_kind_of_name_holds_the_sources_rows_under_its_names(delta):
    # name_corpus: spaces, punctuation, a reserved word, a leading digit, mixed case, letters outside
    # ASCII, the longest name MySQL allows, in the key too; renamed from and to such names; one added.
    assert [r[nc.LAKE_TABLE]["dead"] for r in delta["reports"][1:4]] == [0, 0, 0]
    t = delta["tables"][nc.LAKE_TABLE]
    expected = nc.expected()
    assert [n for n, _, _ in t["schema"] if not n.startswith("_cdc_")] == list(expected[(3, 1)])
    rows = source_named_rows(delta, nc.LAKE_TABLE, nc.KEY)
    assert {k: r | {"unit price": Decimal(str(r["unit price"]))} for k, r in rows.items()} == expected
    # Delta holds every name through its column mapping by name; a key name with a comma: a JSON list.
    assert t["properties"]["delta.columnMapping.mode"] == "name"
    assert t["properties"]["cdc.primary-key"] == '["Order Id", "line,no"]'


def test_the_maintenance_job_optimizes_and_vacuums_delta_tables_and_never_calls_iceberg_procedures(delta):
    # An Iceberg procedure or metadata table on a Delta table fails the action: exit code 1.
    assert delta["maintenance"]["exit"] == 0
    markers = operations(delta, "customers__cdc_deletes")
    assert markers[-4:] == ["OPTIMIZE", "SET TBLPROPERTIES", "VACUUM START", "VACUUM END"]
    props = table(delta, "customers__cdc_deletes")["properties"]
    assert props["delta.deletedFileRetentionDuration"] == "interval 120 minutes"  # the policy's default
    assert "VACUUM END" not in operations(delta, "customers")  # not in --tables
    # VACUUM deleted the unreferenced file older than the retention, kept the young one.
    assert delta["maintenance"]["orphans_left"] == ["part-00000-orphan-young.parquet"]
    assert "commit.retry.num-retries" not in props  # Iceberg's, not Delta's


def test_reconciles_reader_gives_every_delta_tables_rows_and_history_as_spark_reads_them(delta):
    # reconcile's reader (DuckDB's Delta extension): customers' renamed and dropped columns
    # are read through the column mapping, so rows written before the rename keep their surname.
    warehouse = Path(delta["warehouse"])
    assert lake.lake_format(warehouse, "cdc") == "delta"
    assert read_differences(delta, warehouse, "delta") == {}
    customers = lake.table_location(warehouse, "cdc", "inventory_customers", "delta")
    assert [c["operation"] for c in lake.commits(customers)] == operations(delta, "customers")
    *_, (_, latest) = lake.schema_history(customers)
    assert latest == [n for n, _, _ in table(delta, "customers")["schema"]]


def test_postgres_replica_identity_default_changes_and_toast_placeholders_keep_the_sources_rows(delta):
    assert postgres_rows(delta) == postgres_source_rows()


def test_postgres_column_types_hold_the_values_the_database_held(delta):
    schema = {n: ty for n, ty, _ in table(delta, "public_all_types")["schema"]}
    assert schema["c_numeric"] == "decimal(10,2)" and schema["c_numeric_huge"] == "string"
    assert schema["c_timestamptz"] == "timestamp" and schema["c_timestamp"] == "timestamp_ntz"
    assert schema["c_uuid"] == "string" and schema["c_jsonb"] == "string" and schema["c_int_array"] == "string"
    assert type_differences(Path(delta["warehouse"]), "delta") == []
    # The infinite timestamps no lake type holds are dead letters; the rest applied.
    assert dead_letter_offsets(delta, "salesdb.public.all_types") == infinite_timestamp_offsets()


def test_the_change_query_since_a_reader_read_the_first_batch_replays_to_the_table_as_it_is_now(delta):
    feed = delta["feed"]
    assert {r["change"] for r in feed["changes"]} == {"upsert", "delete"}
    assert lake_reads.feed_differences(feed) == {}


def test_the_read_point_names_delta_versions_that_hold_whole_transactions(delta):
    # The captured transfers with --transactions keep: batch 0 ends inside the third transfer.
    first, second = delta["read_point"]
    assert set(first["versions"]) == {"salesdb_customer", transfers.ACCOUNT, transfers.TRANSFER}
    for p in (first, second):
        accounts = {r["id"]: r | {"balance": Decimal(str(r["balance"]))} for r in p["tables"][transfers.ACCOUNT]}
        ledger = {r["id"]: r | {"amount": Decimal(str(r["amount"]))} for r in p["tables"][transfers.TRANSFER]}
        assert transfers.ledger_holds(accounts, ledger)
    assert len(first["tables"][transfers.TRANSFER]) == 2 and len(second["tables"][transfers.TRANSFER]) == 4
    assert int(second["versions"][transfers.ACCOUNT]) > int(first["versions"][transfers.ACCOUNT])
    assert second["versions"]["salesdb_customer"] == first["versions"]["salesdb_customer"]


def test_set_and_enum_columns_redefined_read_their_values_as_the_source_converts_them(delta):
    # Batch 2: MODIFY tags SET('c','b','a'), grade ENUM('A','b') after rows of batch 1, which it reads again.
    rows = {i: (r.get("tags"), r.get("grade")) for i, r in by_id(delta, "tagged").items()}  # JSON rows omit nulls
    assert rows == {1: ("b,a", "A"), 2: ("c,b", "b"), 3: (None, None), 4: ("c,a", "A"), 5: ("", "")}
