"""reconcile's comparison (`compare_rows`), on rows as the source and the lake return them:
counts decide, and each kind of difference is reported as what it is."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from cdctools import reconcile  # noqa: E402

COLUMNS = ["id", "name", "balance", "updated_at"]


def src(i: int, name: str = "n", balance: str = "1.50") -> dict:
    """A row as pymysql returns it."""
    return {"id": i, "name": name, "balance": Decimal(balance), "updated_at": datetime(2026, 1, 2, 3, 4, 5, 6)}


def lake(i: int, name: str = "n", balance: str = "1.50") -> dict:
    """The same row as DuckDB reads it from Iceberg: metadata columns, other spellings and types."""
    return {
        "ID": i,
        "Name": name,
        "balance": Decimal(balance).quantize(Decimal("0.01")),
        "updated_at": datetime(2026, 1, 2, 3, 4, 5, 6),
        "_cdc_op": "u",
        "_cdc_seq": Decimal(i),
    }


def compare(source: list[dict], lake_rows: list[dict], keys: tuple[str, ...] = ("id",)) -> reconcile.TableResult:
    return reconcile.compare_rows("customer", COLUMNS, list(keys), source, lake_rows)


def test_equal_tables_match():
    r = compare([src(1), src(2)], [lake(2), lake(1)])
    assert r.ok, r.report()
    assert r.report().endswith("OK (count and per-row checksums equal)")


def test_a_key_stored_twice_in_the_lake_is_a_difference_reported_as_a_duplicate():
    # The review's case: the dict keyed by id used to swallow the second copy of key 2.
    r = compare([src(1), src(2)], [lake(1), lake(2), lake(2)])
    assert not r.ok
    assert (r.source_rows, r.lake_rows) == (2, 3)
    assert r.duplicates == [((("id", "2"),), 1, 2)]
    assert not (r.missing or r.extra or r.different)
    assert "DIFFERENT: 1 key(s) stored more than once, e.g. id=2 source 1 lake 2" in r.report()


def test_a_row_missing_from_the_lake_is_reported_by_its_key():
    r = compare([src(1), src(2), src(3)], [lake(1), lake(3)])
    assert not r.ok
    assert r.missing == [(("id", "2"),)] and not (r.extra or r.different or r.duplicates)
    assert "1 missing in lake [id=2]" in r.report()


def test_an_extra_lake_row_is_reported_by_its_key():
    r = compare([src(1)], [lake(1), lake(9)])
    assert not r.ok
    assert r.extra == [(("id", "9"),)] and not (r.missing or r.different or r.duplicates)
    assert "1 extra in lake [id=9]" in r.report()


def test_a_changed_value_is_reported_with_its_key_and_column():
    r = compare([src(1), src(2, balance="2.00")], [lake(1), lake(2, balance="2.01")])
    assert not r.ok
    assert r.different == [((("id", "2"),), ["balance"])]
    assert "1 rows differ, e.g. id=2: ['balance'] (first: balance source '2.00' lake '2.01')" in r.report()


def test_values_are_compared_after_normalisation_of_each_type():
    # DECIMAL scale, TIME as timedelta vs text, timestamp with and without a zone: the same values.
    from datetime import UTC

    cols = ["id", "amount", "t", "at"]
    s = [{"id": 1, "amount": Decimal("1.5"), "t": timedelta(hours=1, seconds=2), "at": datetime(2026, 1, 1, 12)}]
    d = [{"id": 1, "amount": Decimal("1.50"), "t": "01:00:02.000000", "at": datetime(2026, 1, 1, 12, tzinfo=UTC)}]
    assert reconcile.compare_rows("t", cols, ["id"], s, d).different == [((("id", "1"),), ["amount"])]
    d[0]["amount"] = Decimal("1.5")
    assert reconcile.compare_rows("t", cols, ["id"], s, d).ok


def test_a_composite_key_names_every_key_column():
    cols = ["order_id", "line_no", "sku"]
    s = [{"order_id": 1, "line_no": 1, "sku": "A"}, {"order_id": 1, "line_no": 2, "sku": "B"}]
    d = [{"order_id": 1, "line_no": 1, "sku": "A"}]
    r = reconcile.compare_rows("lines", cols, ["order_id", "line_no"], s, d)
    assert r.missing == [(("order_id", "1"), ("line_no", "2"))]
    assert "missing in lake [{order_id=1, line_no=2}]" in r.report()


def test_a_keyless_table_is_compared_as_a_multiset_of_whole_rows():
    rows = [src(1, "a"), src(1, "a"), src(2, "b")]  # no key: the same row twice at the source is legitimate
    assert compare(rows, [lake(2, "b"), lake(1, "a"), lake(1, "a")], keys=()).ok
    assert compare(rows, [], keys=()).report().count("missing in lake") == 1

    once = compare(rows, [lake(1, "a"), lake(2, "b")], keys=())
    assert not once.ok and len(once.missing) == 1 and dict(once.missing[0])["name"] == "a"

    thrice = compare(rows, [lake(1, "a"), lake(1, "a"), lake(1, "a"), lake(2, "b")], keys=())
    assert not thrice.ok and [(s, n) for _, s, n in thrice.duplicates] == [(2, 3)]
    assert "row(s) stored more often than at the source" in thrice.report()

    changed = compare(rows, [lake(1, "a"), lake(1, "a"), lake(2, "c")], keys=())
    assert not changed.ok
    assert [dict(r)["name"] for r in changed.missing] == ["b"] and [dict(r)["name"] for r in changed.extra] == ["c"]


def test_a_lake_table_lacking_a_source_column_is_a_difference():
    r = reconcile.compare_rows("customer", [*COLUMNS, "status"], ["id"], [{**src(1), "status": "x"}], [lake(1)])
    assert not r.ok and r.problem == "column(s) ['status'] not in the lake table"


def test_a_generated_postgres_column_the_connector_never_sends_is_named_and_the_other_columns_compared():
    kinds = {"total": reconcile.UNSENT}
    source = [{**src(1), "total": 7}]
    r = reconcile.compare_rows("customer", [*COLUMNS, "total"], ["id"], source, [lake(1)], kinds)
    assert r.ok and r.report().endswith(
        "OK (count and per-row checksums equal; not compared: generated column(s) ['total'], which "
        "PostgreSQL's pgoutput does not send)"
    )
    changed = reconcile.compare_rows("customer", [*COLUMNS, "total"], ["id"], source, [{**lake(1), "Name": "x"}], kinds)
    assert not changed.ok and changed.different


def test_row_counts_decide_even_without_a_listed_difference():
    r = reconcile.TableResult("t", source_rows=2, lake_rows=3, keys=["id"])
    assert not r.ok and "DIFFERENT" in r.report()


def test_exit_codes_0_when_equal_1_when_different_2_on_a_connection_error(monkeypatch, capsys):
    equal = [compare([src(1)], [lake(1)])]
    dup = [compare([src(1)], [lake(1), lake(1)])]
    monkeypatch.setattr(reconcile.sources, "stack_config", lambda source=None: object())
    for results, code, verdict in ((equal, 0, "MATCH"), (dup, 1, "DIFFERENCE")):
        monkeypatch.setattr(reconcile, "reconcile_until", lambda *a, r=results: r)
        assert reconcile.main([]) == code
        out = capsys.readouterr().out
        assert f"[reconcile] {verdict}: 1 table(s) compared" in out

    def unreachable(*_a):
        raise reconcile.StackError("MariaDB is not running: local-stack up")

    monkeypatch.setattr(reconcile, "reconcile_until", unreachable)
    assert reconcile.main([]) == 2
    assert "MariaDB is not running" in capsys.readouterr().err


def test_a_keyless_match_says_how_it_was_compared():
    r = compare([src(1), src(1)], [lake(1), lake(1)], keys=())
    assert r.ok and r.report().endswith("OK (no key: count and every whole row equal)")


def test_a_lake_table_marked_dropped_at_the_source_matches_and_says_so():
    r = reconcile.gone_from_source("old_t", {"cdc.source-dropped": "2026-11-23T10:00:00.000000Z"}, 3, sends_ddl=True)
    assert r.ok and (r.source_rows, r.lake_rows) == (0, 3)
    assert "dropped at the source at 2026-11-23T10:00:00.000000Z; lake table kept, marked cdc.source-dropped" in (
        r.report()
    )


def test_an_unmarked_lake_table_without_its_mysql_source_table_is_a_difference_that_says_why():
    r = reconcile.gone_from_source("old_t", {}, 3, sends_ddl=True)
    assert not r.ok
    assert "the job has not applied the DROP TABLE" in r.report()


def test_a_postgres_table_gone_from_the_source_without_ddl_capture_is_listed_as_kept():
    r = reconcile.gone_from_source("old_t", {}, 3, sends_ddl=False)
    assert (
        r.ok and "PostgreSQL without the DDL capture (sql/postgres/ddl_capture.sql) sends no DROP TABLE" in r.report()
    )


def test_a_hudi_timestamp_in_utc_matches_the_sources_datetime_of_the_same_wall_clock_time():
    # Hudi 0.15 keeps a DATETIME as a timestamp holding its wall-clock time in UTC (TIMESTAMPTZ in DuckDB).
    from datetime import UTC

    row = lake(1) | {"updated_at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)}
    assert compare([src(1)], [row]).ok


def test_the_lake_format_is_found_from_its_tables_folders_and_a_mixed_lake_is_refused(tmp_path):
    import pytest
    from cdctools import lake_reader

    assert lake_reader.lake_format(tmp_path, "cdc") == "iceberg"  # no table yet: the default format
    (tmp_path / "cdc.db" / "salesdb_customer" / "_delta_log").mkdir(parents=True)
    (tmp_path / "cdc.db" / "salesdb_customer__cdc_deletes" / "_delta_log").mkdir(parents=True)
    assert lake_reader.lake_format(tmp_path, "cdc") == "delta"
    assert lake_reader.list_tables(tmp_path, "cdc", "delta") == ["salesdb_customer"]
    (tmp_path / "cdc.db" / "salesdb_orders" / ".hoodie").mkdir(parents=True)
    with pytest.raises(lake_reader.LakeReadError, match="delta and hudi tables"):
        lake_reader.lake_format(tmp_path, "cdc")


def test_hudi_column_changes_follow_each_column_by_its_id_across_commits():
    import json

    from cdctools import lake_reader

    def commit(*names: str) -> dict:
        fields = [{"id": i, "name": n} for i, n in enumerate(names) if n]
        return {"extraMetadata": {"latest_schema": json.dumps({"fields": fields})}}

    commits = [
        ("1", {"extraMetadata": {}}),  # before schema evolution: no internal schema yet
        ("2", commit("id", "last_name", "email")),
        ("3", commit("id", "last_name", "email", "tier")),  # an added column is no change to read
        ("4", commit("id", "surname", "email", "tier")),
        ("5", commit("id", "surname", "", "tier")),
    ]
    assert lake_reader.hudi_column_changes(commits) == [("4", "last_name -> surname"), ("5", "email dropped")]


def _one_column(kind: str, source_value: object, lake_value: object) -> reconcile.TableResult:
    s, d = [{"id": 1, "v": source_value}], [{"id": 1, "v": lake_value}]
    return reconcile.compare_rows("t", ["id", "v"], ["id"], s, d, {"v": kind})


def test_a_postgres_interval_matches_debeziums_iso_text_of_the_same_duration_and_no_other():
    # PostgreSQL's iso_8601 style leaves zero fields out; Debezium writes them all.
    assert _one_column(reconcile.INTERVAL, "P1M-2DT3H4M5.5S", "P0Y1M-2DT3H4M5.500000S").ok
    assert _one_column(reconcile.INTERVAL, "PT-0.000001S", "P0Y0M0DT0H0M-0.000001S").ok
    assert not _one_column(reconcile.INTERVAL, "P1M", "P0Y0M30DT0H0M0S").ok  # a month is not 30 days


def test_array_and_hstore_columns_compare_as_json_documents():
    assert _one_column(reconcile.JSON, "[1, null, -3]", "[1,null,-3]").ok
    assert _one_column(reconcile.JSON, '{"b": "2", "a": "1"}', '{"a":"1","b":"2"}').ok
    assert not _one_column(reconcile.JSON, '["1"]', "[1]").ok


def test_times_compare_by_their_microseconds_also_past_23_59_and_with_zones_as_utc():
    assert _one_column(reconcile.TIME, "24:00:00", "24:00:00.000000").ok
    assert not _one_column(reconcile.TIME, "12:00:00.000001", "12:00:00.000000").ok
    assert _one_column(reconcile.TIMETZ, "12:34:56.123456+05:30", "07:04:56.123456Z").ok
    assert _one_column(reconcile.TIMETZ, "00:00:00+14", "10:00:00Z").ok
    assert not _one_column(reconcile.TIMETZ, "12:34:56+05:30", "12:34:56Z").ok


def test_a_bit_string_matches_the_lakes_big_endian_bytes():
    assert _one_column(reconcile.BITS, "100000000001", bytes.fromhex("0801")).ok
    assert not _one_column(reconcile.BITS, "100000000001", bytes.fromhex("0800")).ok


def test_a_numeric_without_scale_compares_by_value_and_nan_never_equals_null():
    assert _one_column(reconcile.NUMBER, Decimal("12.50"), "12.5").ok
    assert not _one_column(reconcile.NUMBER, Decimal("12.51"), "12.5").ok
    assert not _one_column(reconcile.NUMBER, Decimal("NaN"), None).ok
    assert not compare([{**src(1), "name": float("nan")}], [{**lake(1), "Name": None}]).ok


def test_a_spatial_value_matches_the_lakes_wkb_and_srid_and_a_boolean_its_bit():
    wkb = "0101000000000000000000f03f0000000000000040"  # POINT(1 2)
    lake_json = json.dumps({"wkb": base64.b64encode(bytes.fromhex(wkb)).decode(), "srid": None, "x": 1.0, "y": 2.0})
    assert _one_column(reconcile.GEOMETRY, f"0:{wkb.upper()}", lake_json).ok
    assert not _one_column(reconcile.GEOMETRY, f"4326:{wkb.upper()}", lake_json).ok
    assert compare([{**src(1), "name": 1}], [{**lake(1), "Name": True}]).ok  # BIT(1) + 0 vs boolean
    assert not compare([{**src(1), "name": 0}], [{**lake(1), "Name": True}]).ok


def test_a_file_written_added_or_removed_anywhere_under_the_warehouse_changes_the_lake_state(tmp_path: Path):
    meta = tmp_path / "cdc" / "salesdb_customer" / "metadata"
    meta.mkdir(parents=True)
    (meta / "v1.metadata.json").write_text("{}")
    before = reconcile.lake_files(tmp_path)
    assert reconcile.lake_files(tmp_path) == before
    (meta / "v1.metadata.json").write_text('{"a": 1}')  # rewritten in place, another size
    rewritten = reconcile.lake_files(tmp_path)
    assert rewritten != before
    (meta / "v2.metadata.json").write_text("{}")
    added = reconcile.lake_files(tmp_path)
    assert added != rewritten
    (meta / "v2.metadata.json").unlink()
    assert reconcile.lake_files(tmp_path) == rewritten
    assert reconcile.lake_files(tmp_path / "missing") == frozenset()


def test_a_wait_compares_again_only_when_a_side_moved_its_position_is_unknown_or_the_recheck_is_due():
    lake_a, lake_b = frozenset({("t/v1", 1, 2)}), frozenset({("t/v2", 3, 4)})
    last = (("0-1-5", lake_a), 100.0)
    assert reconcile.compare_again(("0-1-5", lake_a), None, 100.0)  # nothing compared yet
    assert not reconcile.compare_again(("0-1-5", lake_a), last, 101.0)
    assert reconcile.compare_again(("0-1-6", lake_a), last, 101.0)  # the source committed
    assert reconcile.compare_again(("0-1-5", lake_b), last, 101.0)  # the lake committed
    assert reconcile.compare_again((None, lake_a), ((None, lake_a), 100.0), 101.0)  # position unreadable
    assert reconcile.compare_again(("0-1-5", lake_a), last, 100.0 + reconcile.RECOMPARE_SECONDS)
