"""Apache Hudi's own extras (Hudi 0.15.0), on ONE lake of the Hudi lakes' server session
(format_lakes.py; the `lake_server:hudi` group, with the every-format suite's Hudi cases): the
corpus's real Debezium messages in five batches (format_corpus.batches) and a sixth of Hudi's own (a
renamed key column) applied by the job's BatchProcessor, then read back with each table's Hudi
timeline; the maintenance job with `--table_format hudi` on customers' delete markers; customers'
changes into a merge-on-read table and its compaction. What every format does alike is
test_every_format.py's.
"""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import format_corpus
import lake_reads
import name_corpus as nc
import pytest
from cdclake.common.names import source_name
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

pytestmark = pytest.mark.format_extra("hudi")

# The timeline's completed actions that change a table's data or schema (Hudi 0.15's layout:
# `.hoodie/<instant>.<action>`, the commit metadata as JSON).
ACTIONS = ("commit", "deltacommit", "replacecommit", "schemacommit")


def history(location: Path) -> list[list[str]]:
    """The table's completed commits in order: [instant, action, Hudi's operation type]."""
    out = []
    for f in sorted((location / ".hoodie").iterdir()):
        instant, _, action = f.name.partition(".")
        if action in ACTIONS and instant.isdigit():
            text = f.read_text()
            op = json.loads(text).get("operationType", "") if text.strip() else ""
            out.append([instant, action, op or ""])
    return out


def cleans(location: Path) -> int:
    return len(list((location / ".hoodie").glob("*.clean")))


def log_files(location: Path) -> int:
    return len([f for f in location.glob(".*.log.*") if not f.name.endswith(".crc")])


def older_change_without_the_guard(corpus: Any, key: int) -> dict[str, Any]:
    """MERGE a change of row `key` older than the stored one (position 1), no guard: Hudi decides."""
    table = corpus.table()
    values = {"first_name": "'Older'", "_cdc_seq": "CAST(1 AS decimal(38,0))"}
    select = ", ".join(f"{values.get(c, f'`{c}`')} AS `{c}`" for c in corpus.schema())
    corpus.query(
        f"MERGE INTO {table} t USING (SELECT {select} FROM {table} WHERE id = {key}) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET *"
    )
    [row] = corpus.query(f"SELECT first_name, CAST(_cdc_seq AS string) AS seq FROM {table} WHERE id = {key}")
    return row


def files_and_timeline(corpus: Any, name: str, location: Path) -> dict[str, Any]:
    """One table's rows (without Hudi's columns), latest base files, base files on disk and timeline."""
    latest = corpus.query(f"CALL show_fsview_latest(table => 'cdc.{name}', partition_path => '')")
    return {
        "rows": sorted(corpus.rows(name), key=lambda r: json.dumps(r, sort_keys=True)),
        "base_files": len(latest),
        "parquet_files": sorted(f.name for f in location.glob("*.parquet")),
        "history": history(location),
        "cleans": cleans(location),
        "archived": len(
            [f for f in (location / ".hoodie" / "archived").glob("*archive*") if not f.name.endswith(".crc")]
        ),
    }


def maintain(corpus: Any, warehouse: Path) -> dict[str, Any]:
    """The maintenance job (--table_format hudi) in the lake's session over customers' delete markers,
    their state before and after. One table, and not customers itself: the module's other tests read
    customers' timeline and file versions from the lake as the batches left them. First two young
    markers of keys the source never had are appended in a file group of their own (Hudi's small file
    limit 0 for this write only, as a stream whose inserts found no small file to fill leaves them),
    then one older than the job's 30 days of delete memory (into a small file, a new version of it).
    The limits: more than 1 small base file, more than 5 commits, 1 commit retained (the stream
    retains 2)."""
    name = "inventory_customers__cdc_deletes"
    markers, location = corpus.table(name), warehouse / "cdc.db" / name

    def marker(key: int, days: int) -> str:
        return (
            f"('{{\"id\":{key}}}', CAST(1 AS decimal(38,0)), CAST(0 AS bigint), "
            f"current_timestamp() - INTERVAL {days} DAYS, CAST(NULL AS string))"
        )

    limit = corpus.set_conf({"hoodie.parquet.small.file.limit": "0"})
    corpus.query(f"INSERT INTO {markers} VALUES {marker(901, 0)}, {marker(902, 0)}")
    corpus.set_conf(limit)
    corpus.query(f"INSERT INTO {markers} VALUES {marker(903, 40)}")
    before = files_and_timeline(corpus, name, location)
    run = corpus.maintenance_job(
        tables=name,
        maintenance_max_small_files="1",
        maintenance_max_snapshots="5",
        maintenance_retain_last_snapshots="1",
    )
    return run | {"before": before, "after": files_and_timeline(corpus, name, location)}


def merge_on_read(make: Any, warehouse: Path, copy: Path) -> dict[str, Any]:
    """customers' changes (format_corpus.merge_on_read_batches) into a merge-on-read table, its rows
    through the real-time (snapshot) view and a copy of it, then the maintenance job with
    `--maintenance_max_delete_files 1`, and after it the rows through both views."""
    mor = make(namespace="mor", write_mode="merge-on-read", dropped_column_policy="drop")
    for records in format_corpus.merge_on_read_batches():
        mor.apply(records)
    location = warehouse / "mor.db" / "inventory_customers"
    before = {"rows": mor.rows(), "log_files": log_files(location), "history": history(location)}
    shutil.copytree(location, copy)  # for the reconcile reader
    run = mor.maintenance_job(tables="inventory_customers", maintenance_max_delete_files="1")
    read_optimized = mor.read_path(str(location), **{"hoodie.datasource.query.type": "read_optimized"})
    latest = mor.query("CALL show_fsview_latest(table => 'mor.inventory_customers', partition_path => '')")
    after = {
        "rt": mor.rows(),
        "ro": sorted(read_optimized, key=lambda r: r["id"]),
        "history": history(location),
        "log_files": sum(r["num_delta_files"] for r in latest),
    }
    return {"properties": mor.properties(), "before": before, "exit": run["exit"], "lines": run["lines"], "after": after,
            "copy": str(copy)}  # fmt: skip


def incremental_since(corpus: Any, instant: str) -> dict[str, Any]:
    """Hudi's incremental query of customers after `instant` (the SQL function `hudi_table_changes`,
    latest_state: each row written after the instant, as it is now), or the error reading it."""
    sql = f"SELECT id, first_name FROM hudi_table_changes('cdc.inventory_customers', 'latest_state', '{instant}')"
    try:
        return {"instant": instant, "rows": corpus.query_apart(sql)}
    except RuntimeError as e:  # what a reader meets is the result
        return {"instant": instant, "error": str(e)[:2000]}


def read_corpus(corpus: Any, warehouse: Path) -> dict[str, Any]:
    """The batches applied, what a reader saw and the unguarded MERGE, then every table read back."""
    reports = []
    for i, records in enumerate([*format_corpus.batches(), format_corpus.renamed_key_batch()]):
        r = corpus.apply(records)
        if i == 0:
            reader = corpus.reader()
            # The table's newest completed commit instant: a downstream reader's mark on Hudi's timeline.
            [commit] = corpus.query("CALL show_commits(table => 'cdc.inventory_customers', limit => 1)")
        reports.append({t.table.rsplit(".", 1)[-1]: {"dead": t.dead, "schema": t.schema, "reasons": t.dead_reasons}
                        for t in r.tables})  # fmt: skip
    feed = corpus.feed_after(reader)  # before the probe below writes to customers
    alone = older_change_without_the_guard(corpus, 2)
    tables = corpus.read_back(corpus.tables_now())
    for name, t in tables.items():  # Hudi's inline cleaning: the completed cleans, and the data file versions left
        location = warehouse / "cdc.db" / name
        t |= {"history": history(location), "cleans": cleans(location)}
        t["parquet_files"] = len(list(location.glob("*.parquet")))
    return {"reports": reports, "tables": tables, "hudi_alone": alone, "feed": feed, "reader": reader,
            "instant": commit["commit_time"]}  # fmt: skip


@pytest.fixture(scope="module")
def hudi(lake_format, lake_sessions, tmp_path_factory) -> dict[str, Any]:
    from format_lakes import FormatLake

    def make(**overrides: str) -> Any:
        return FormatLake(lake_sessions(lake_format), lake_format, **overrides)

    # Hudi's inline cleaning keeps the file versions of the newest 2 commits: the job's
    # `--maintenance_retain_last_snapshots 2`, a session setting (formats.hudi.hudi_table_services).
    corpus = make(namespace="cdc", dropped_column_policy="drop", maintenance_retain_last_snapshots="2")
    previous = corpus.lake_conf()
    try:
        warehouse = Path(corpus.paths()["warehouse"])
        out = read_corpus(corpus, warehouse)
        maintenance = maintain(corpus, warehouse)
        mor = merge_on_read(make, warehouse, tmp_path_factory.mktemp("hudi") / "mor_before_compaction")
    finally:
        corpus.set_conf(previous)
    # `tables` is what the lake holds at the end (the reconcile reader's tests read the same lake).
    out["tables"]["inventory_customers__cdc_deletes"]["rows"] = maintenance["after"]["rows"]
    # Last, in a session apart: after Hudi's incremental query, reading another table of its session
    # failed ("cannot prune col: _cdc_key which does not exist in hudi table"). The change query is
    # read again, before it.
    changes = corpus.feed_since(out["reader"]["mark"])
    incremental = {**incremental_since(corpus, out["instant"]), "changes": changes}
    return out | {"incremental": incremental, "dead": corpus.dead_letters(), "maintenance": maintenance, "mor": mor,
                  "warehouse": str(warehouse)}  # fmt: skip


def table(hudi: dict[str, Any], name: str) -> dict[str, Any]:
    return hudi["tables"][name if name.startswith(("salesdb_", "public_")) else f"inventory_{name}"]


def by_id(hudi: dict[str, Any]) -> dict[int, dict[str, Any]]:
    rows = table(hudi, "customers")["rows"]
    assert len(rows) == len({r["id"] for r in rows}), "an id stored more than once"
    return {r["id"]: r for r in rows}


def operations(hudi: dict[str, Any], name: str) -> list[str]:
    """Hudi's operation type of each completed commit on the table's timeline, oldest first."""
    return [op for _, _, op in table(hudi, name)["history"]]


def test_lake_tables_are_copy_on_write_hudi_tables_keyed_by_the_primary_key_and_ordered_by_position(hudi):
    assert {t["provider"] for t in hudi["tables"].values()} == {"hudi"}
    customers = table(hudi, "customers")["properties"]
    assert customers["primaryKey"] == "id" and customers["preCombineField"] == "_cdc_seq"
    assert customers["type"] == "cow" and customers["cdc.primary-key"] == "id"
    assert customers["athena_enable_native_hudi_connector_implementation"] == "true"  # Athena's Hudi 0.15 reader
    assert table(hudi, "order_items")["properties"]["primaryKey"] == "order_id,line_no"
    # Hudi's own columns are read past: the lake's columns are the source's and the _cdc_* ones.
    assert table(hudi, "customers")["meta"] and not [
        n for n, _, _ in table(hudi, "customers")["schema"] if n.startswith("_hoodie")
    ]
    markers = hudi["tables"]["inventory_customers__cdc_deletes"]["properties"]
    assert markers["cdc.delete-markers-of"] == "spark_catalog.cdc.inventory_customers" and "primaryKey" not in markers


def test_a_change_older_than_the_stored_row_loses_in_hudi_itself_without_the_merge_guard(hudi):
    # After the batches the fixture MERGEs an update of customer 2 at position 1 with no guard:
    # the precombine field (_cdc_seq) keeps the stored, newer row.
    assert hudi["hudi_alone"]["first_name"] == "Bea"
    assert hudi["hudi_alone"]["seq"] == str(by_id(hudi)[2]["_cdc_seq"])
    assert operations(hudi, "customers")[-1] == "UPSERT"  # the MERGE ran and committed


def test_each_batchs_inserts_updates_and_deletes_of_a_table_are_one_hudi_commit(hudi):
    # CREATE TABLE commits nothing; then per batch one UPSERT (batch 1: 4 inserts, an update and a
    # delete; batch 2: a replay, stale changes, a newer update); batch 3 adds a column and widens
    # one (two schema commits), backfills the default (UPDATE), then its UPSERT; batch 4 renames
    # and drops a column, then its UPSERT; the last is the fixture's unguarded MERGE.
    assert operations(hudi, "customers") == [
        "UPSERT", "UPSERT",
        "ALTER_SCHEMA", "ALTER_SCHEMA", "UPSERT_PREPPED", "UPSERT",
        "ALTER_SCHEMA", "ALTER_SCHEMA", "UPSERT",
        "UPSERT",
    ]  # fmt: skip
    assert operations(hudi, "customers__cdc_deletes") == ["INSERT", "INSERT"]  # batches 1 and 2 (a replay)


def test_hudi_cleans_inline_keeping_the_file_versions_of_the_newest_commits_the_job_retains(hudi):
    # The lake runs with --maintenance_retain_last_snapshots 2: after each commit Hudi's writer
    # cleans the file versions older commits needed. Six of customers' commits write a new version
    # of its one file group (the other four change its schema); without the cleaning all six stay.
    customers = table(hudi, "customers")
    assert customers["cleans"] >= 1
    assert customers["parquet_files"] <= 3


def test_a_composite_key_a_truncate_and_a_table_rename_keep_the_sources_rows(hudi):
    # order_lines: 3 lines and an update, a truncate, a line after it; then renamed to order_items.
    rows = table(hudi, "order_items")["rows"]
    assert sorted((r["order_id"], r["line_no"], r["sku"]) for r in rows) == [(3, 1, "D"), (4, 1, "E")]
    assert "inventory_order_lines" not in hudi["tables"] and "inventory_order_lines__cdc_deletes" not in hudi["tables"]
    # The move is one CREATE TABLE AS SELECT (Hudi's bulk insert) with the key carried, then the MERGE.
    assert operations(hudi, "order_items") == ["BULK_INSERT", "UPSERT"]
    props = table(hudi, "order_items")["properties"]
    assert props["preCombineField"] == "_cdc_seq" and props["cdc.primary-key"] == "order_id,line_no"
    assert "option.path" not in props or props["option.path"].endswith("inventory_order_items")
    markers = hudi["tables"]["inventory_order_items__cdc_deletes"]
    assert markers["properties"]["cdc.delete-markers-of"] == "spark_catalog.cdc.inventory_order_items"
    assert [r["_cdc_key"] for r in markers["rows"]] == ["*"]  # the truncate's marker moved with it


def test_add_column_is_backfilled_and_a_decimal_widening_is_a_schema_commit_not_a_rewrite(hudi):
    schema = {n: t for n, t, _ in table(hudi, "customers")["schema"]}
    assert schema["loyalty_tier"] == "string" and schema["balance"] == "decimal(14,2)"
    rows = by_id(hudi)
    assert Decimal(str(rows[1]["balance"])) == Decimal("123456789.99")
    assert rows[2]["loyalty_tier"] == "bronze"  # the source default, given to rows written before
    assert "balance decimal(10,2)->decimal(14,2)" in hudi["reports"][2]["inventory_customers"]["schema"]
    assert "BULK_INSERT" not in operations(hudi, "customers")  # no table rewrite


def test_real_column_types_map_to_the_lake_types_with_datetime_as_a_utc_timestamp(hudi):
    t = table(hudi, "salesdb_all_types")
    schema = {n: ty for n, ty, _ in t["schema"]}
    assert schema["c_tinyint"] == "int" and schema["c_int_u"] == "bigint"
    assert schema["c_bigint_u"] == "decimal(20,0)" and schema["c_decimal_wide"] == "decimal(38,10)"
    assert schema["c_decimal_max"] == "string" and schema["c_float"] == "float" and schema["c_double"] == "double"
    assert schema["c_bit1"] == "boolean" and schema["c_bit12"] == "binary" and schema["c_json"] == "string"
    # Hudi 0.15 cannot write timestamp_ntz: a DATETIME is the same wall-clock time as a UTC timestamp.
    assert schema["c_datetime0"] == "timestamp" and schema["c_timestamp6"] == "timestamp"
    assert schema["c_time6"] == "string" and schema["c_year"] == "int" and schema["c_date"] == "date"
    assert hudi["reports"][4]["salesdb_all_types"]["dead"] == 0
    import type_matrix as tm

    _, source = tm.load_fixtures("mariadb")
    rows = {r["id"]: r for r in t["rows"]}
    assert sorted(rows) == sorted(source)
    for i, src in source.items():
        for column in ("c_date", "c_datetime0"):
            # The year-1000 values too: written and read as they are (proleptic Gregorian).
            lake = rows[i].get(column)
            assert (lake is None) == (src[column] is None), (i, column)
            if lake is not None:
                assert lake.replace("T", " ").startswith(src[column][:19]), (i, column, lake, src[column])


def test_columns_of_every_lake_type_added_to_an_existing_table_hold_the_databases_values(hudi):
    # salesdb_all_types was created in batch 1 with its key column only; batch 5 added the others.
    added = hudi["reports"][4]["salesdb_all_types"]
    assert "+c_datetime0 timestamp" in added["schema"] and "+c_bit12 binary" in added["schema"]
    assert type_differences(Path(hudi["warehouse"]), "hudi", "mariadb") == []


def test_a_table_named_and_keyed_with_every_kind_of_name_holds_the_sources_rows_under_escaped_names(hudi):
    # name_corpus: the names Avro refuses (a space, punctuation, a leading digit, letters outside ASCII,
    # Hudi's own column name) are escaped (common/names.py), each recorded with its source name.
    assert [r[nc.LAKE_TABLE]["dead"] for r in hudi["reports"][1:4]] == [0, 0, 0]
    t = hudi["tables"][nc.LAKE_TABLE]
    lake_names = [n for n, _, _ in t["schema"] if not n.startswith("_cdc_")]
    assert [source_name(n) for n in lake_names] == list(nc.expected()[(3, 1)])
    assert "select" in lake_names and "CamelCase" in lake_names and "_x_unit_20_price" in lake_names
    rows = source_named_rows(hudi, nc.LAKE_TABLE, nc.KEY)
    assert {k: r | {"unit price": Decimal(str(r["unit price"]))} for k, r in rows.items()} == nc.expected()
    props = t["properties"]
    assert (
        props["cdc.source-name._x_unit_20_price"] == "unit price"
        and props["cdc.source-name._x_new_20_name_21_"] == "new name!"
    )
    assert props["primaryKey"] == "_x_Order_20_Id,_x_line_2c_no"


def test_reconciles_reader_gives_every_hudi_tables_rows_as_spark_reads_them(hudi):
    # reconcile's reader (hudi-rs into DuckDB), Hudi's columns left out. customers had a column
    # renamed and one dropped, then rows written: copy-on-write rewrote its file with the new columns.
    warehouse = Path(hudi["warehouse"])
    assert lake.lake_format(warehouse, "cdc") == "hudi"
    assert read_differences(hudi, warehouse, "hudi") == {}
    customers = lake.table_location(warehouse, "cdc", "inventory_customers", "hudi")
    assert [c["operation"] for c in lake.commits(customers)] == operations(hudi, "customers")
    *_, (_, latest) = lake.schema_history(customers)
    assert latest == [n for n, _, _ in table(hudi, "customers")["schema"]]


def test_reconcile_refuses_a_hudi_table_whose_file_predates_a_column_rename(hudi, tmp_path):
    # customers as it was right after the rename's schema commit, before a write rewrote its file
    # (the later instants cut from a copy of its timeline): hudi-rs would read `surname` as null.
    from cdctools import reconcile

    copy = tmp_path / "inventory_customers"
    shutil.copytree(lake.table_location(Path(hudi["warehouse"]), "cdc", "inventory_customers", "hudi"), copy)

    def schema_of(commit: Path) -> str:
        return json.loads(commit.read_text()).get("extraMetadata", {}).get("latest_schema", "")

    commits = sorted((copy / ".hoodie").glob("*.commit"))
    renamed = next(c.name.partition(".")[0] for c in commits if '"name":"surname"' in schema_of(c))
    for f in (copy / ".hoodie").iterdir():
        instant = f.name.partition(".")[0]
        if instant.isdigit() and instant > renamed:
            f.unlink()
    rows, why = reconcile.read_lake_table(lake.connect(), copy)
    assert rows is None and "last_name -> surname" in why, why


def test_the_maintenance_job_prunes_old_markers_cleans_clusters_and_archives_keeping_every_other_row(hudi):
    m = hudi["maintenance"]
    assert m["exit"] == 0, m["lines"]
    before, after = m["before"], m["after"]
    # The marker older than the 30 days of delete memory is pruned (a DELETE), every other one kept.
    old = [r for r in before["rows"] if r["_cdc_key"] == '{"id":903}']
    assert len(old) == 1 and after["rows"] == [r for r in before["rows"] if r not in old]
    # Cleaning to the newest commit (--maintenance_retain_last_snapshots 1; the stream kept 2): the
    # versions older than the latest of each file group, on disk before, are gone.
    assert after["cleans"] == before["cleans"] + 1
    assert [f for f in before["parquet_files"] if f not in after["parquet_files"]]
    # Two small file groups (the stream's markers, the three appended): one after clustering.
    assert (before["base_files"], after["base_files"]) == (2, 1)
    # The prune's and clustering's commits took the timeline past 5: archived to the retained one + 1.
    assert [op for _, _, op in before["history"]] == ["INSERT"] * 4
    assert [op for _, _, op in after["history"]] == ["DELETE_PREPPED", "CLUSTER"] and after["archived"] >= 1
    [line] = [x for x in m["lines"] if " | base files " in x]
    assert line.startswith("maintenance cdc.inventory_customers__cdc_deletes: clean ") and "FAILED" not in line
    assert [x for x in m["lines"] if "1 delete marker(s) older than 30 days removed" in x]


def test_a_renamed_primary_key_column_is_not_followed_and_its_events_are_dead_letters_naming_the_fix(hudi):
    # Batch 6 (Hudi's own): order_items' key column line_no renamed at the source to line, then a line
    # inserted under the new name. Hudi's record key fields are fixed: the lake keeps line_no.
    [letter] = [d for d in hudi["dead"] if d["topic"] == "mdb.inventory.order_items"]
    assert letter["reason"].startswith("primary key column renamed at the source ('line_no' -> 'line'); ")
    assert "drop the lake table, take a new Debezium snapshot of the table, then replay" in letter["reason"]
    assert hudi["reports"][5]["inventory_order_items"]["dead"] == 1
    items = table(hudi, "order_items")
    assert [n for n, _, _ in items["schema"]][:3] == ["order_id", "line_no", "sku"]
    assert items["properties"]["primaryKey"] == "order_id,line_no" and len(items["rows"]) == 2


def test_postgres_replica_identity_default_changes_and_toast_placeholders_keep_the_sources_rows(hudi):
    assert postgres_rows(hudi) == postgres_source_rows()


def test_postgres_column_types_hold_the_values_the_database_held(hudi):
    schema = {n: ty for n, ty, _ in table(hudi, "public_all_types")["schema"]}
    assert schema["c_numeric"] == "decimal(10,2)" and schema["c_numeric_huge"] == "string"
    assert schema["c_timestamptz"] == "timestamp" and schema["c_uuid"] == "string" and schema["c_jsonb"] == "string"
    # Hudi 0.15 cannot write timestamp_ntz: a PostgreSQL timestamp is the same wall-clock time in UTC.
    assert schema["c_timestamp"] == "timestamp" and schema["c_int_array"] == "string"
    assert type_differences(Path(hudi["warehouse"]), "hudi") == []
    # The infinite timestamps no lake type holds are dead letters; the rest applied.
    assert dead_letter_offsets(hudi, "salesdb.public.all_types") == infinite_timestamp_offsets()


def test_the_change_query_since_a_reader_read_the_first_batch_replays_to_the_table_as_it_is_now(hudi):
    feed = hudi["feed"]
    assert {r["change"] for r in feed["changes"]} == {"upsert", "delete"}
    assert lake_reads.feed_differences(feed) == {}


def test_hudis_incremental_query_since_the_readers_instant_gives_every_changed_row_as_it_is_now_and_no_deleted_one(
    hudi,
):
    # hudi_table_changes(<table>, 'latest_state', <instant>): the rows written after the reader's
    # instant. It holds every upsert the change query gives (more: a row any later commit wrote again,
    # here the probe's MERGE of row 2, which the change query does not show), each as the table holds it
    # now, and no deleted row: deletes are read from the delete markers.
    inc = hudi["incremental"]
    assert "error" not in inc, inc.get("error")
    rows = {r["id"]: r["first_name"] for r in inc["rows"]}
    now = {r["id"]: r["first_name"] for r in table(hudi, "customers")["rows"]}
    changed = {json.loads(c["row_json"])["id"] for c in inc["changes"] if c["change"] == "upsert"}
    deleted = {json.loads(c["row_json"])["id"] for c in inc["changes"] if c["change"] == "delete" and c["row_json"]}
    assert changed and changed <= rows.keys(), (changed, rows)
    assert {k: now.get(k) for k in rows} == rows
    assert deleted and not deleted & rows.keys()


# ---------------------------------------------------------------- merge-on-read (merge_on_read above)
def mor_names(rows: list[dict[str, Any]]) -> dict[int, tuple[str, str]]:
    return {r["id"]: (r["first_name"], r["loyalty_tier"]) for r in rows}


# customers after batches 1-3 and the MoR run's own fourth: 3 deleted in batch 1 and 5 in batch 4 (after
# its update in the same batch), 1's and 2's stale changes kept out, 4 updated twice, the added column.
MOR_ROWS = {1: ("Al", "silver"), 2: ("Bea", "bronze"), 4: ("Dee2", "bronze")}


def test_merge_on_read_tables_are_hudi_mor_tables_whose_updates_and_deletes_go_to_log_files(hudi):
    mor = hudi["mor"]
    # No precombine field: Hudi 0.15 cannot write a delete's ordering value as large as a source position
    # into a log file (the guard in the MERGE's source keeps older changes out).
    assert mor["properties"]["type"] == "mor" and "preCombineField" not in mor["properties"]
    assert mor["properties"]["primaryKey"] == "id"
    # Every write a delta commit (the schema changes too), changes appended to log files; no compaction
    # inline (Hudi's writer waits for --maintenance_max_delete_files, 20, delta commits of a file group).
    history = mor["before"]["history"]
    assert {action for _, action, _ in history} == {"deltacommit"} and "ALTER_SCHEMA" in [op for *_, op in history]
    assert mor["before"]["log_files"] > 1  # more than the maintenance's limit (1)


def test_merge_on_read_keeps_source_order_across_batches_and_a_delete_after_an_update_in_one_batch(hudi):
    # Read through the real-time view (Spark's snapshot query merges the log files) before compaction.
    rows = hudi["mor"]["before"]["rows"]
    assert mor_names(rows) == MOR_ROWS
    assert Decimal(str(rows[0]["balance"])) == Decimal("123456789.99")  # the widened decimal
    # The same rows as the copy-on-write table's for the keys both hold the same changes of.
    cow = by_id(hudi)
    assert rows[1]["first_name"] == cow[2]["first_name"] and rows[1]["_cdc_seq"] == cow[2]["_cdc_seq"]


def test_the_maintenance_compacts_a_merge_on_read_tables_log_files_and_both_views_read_the_same_rows(hudi):
    mor = hudi["mor"]
    assert mor["exit"] == 0, mor["lines"]
    [line] = [x for x in mor["lines"] if " | base files " in x]
    assert line.startswith("maintenance mor.inventory_customers: ") and "compact logs 2 file group(s) compacted" in line
    assert f"log files {mor['before']['log_files']}->0" in line
    after = mor["after"]
    assert after["log_files"] == 0 and after["history"][-1][1] == "commit", after["history"]  # the compaction
    # The read-optimized view reads base files only: after compaction it holds every change.
    assert after["ro"] == after["rt"] == mor["before"]["rows"]


def test_reconciles_reader_merges_a_merge_on_read_tables_log_files_as_spark_reads_them(hudi):
    # The table as it was before compaction (the fixture's copy): hudi-rs merges its log files.
    from cdctools import lake_reader

    copy = Path(hudi["mor"]["copy"])
    rows = sorted(lake_reader.hudi_snapshot(copy).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["first_name"], r["_cdc_seq"]) for r in rows] == [
        (r["id"], r["first_name"], Decimal(str(r["_cdc_seq"]))) for r in hudi["mor"]["before"]["rows"]
    ]


def test_set_and_enum_columns_redefined_read_their_values_as_the_source_converts_them(hudi):
    # Batch 2: MODIFY tags SET('c','b','a'), grade ENUM('A','b') after rows of batch 1, which it reads again.
    rows = {r["id"]: (r.get("tags"), r.get("grade")) for r in table(hudi, "tagged")["rows"]}  # JSON omits nulls
    assert rows == {1: ("b,a", "A"), 2: ("c,b", "b"), 3: (None, None), 4: ("c,a", "A"), 5: ("", "")}
