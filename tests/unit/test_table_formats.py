"""The table format seam (lake/formats/) and `--table_format`: pure, no Spark session."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from cdclake.common.lake_contract import WriteMode
from cdclake.common.maintenance_policy import MaintenancePolicy
from cdclake.common.settings import ArgumentError, TableFormat, build_settings
from cdclake.jobs.job import stream_maintainer
from cdclake.lake.catalog import catalog_conf
from cdclake.lake.evolution import SchemaPlan, alter_sql
from cdclake.lake.formats import FORMATS, Capability, formats_table, table_format
from cdclake.lake.formats.delta import Delta
from cdclake.lake.formats.hudi import HUDI_META_COLUMNS, Hudi, hudi_table_services
from cdclake.lake.formats.iceberg import Iceberg, check_format_version, reads_vectorized
from pyspark.sql import types as T

BASE = {"source": "files", "files_path": "in", "warehouse": "wh", "checkpoint_location": "c", "dead_letter_path": "d"}
COLUMNS = [("id", T.IntegerType()), ("name", T.StringType())]


def test_table_format_defaults_to_iceberg_in_the_glue_catalog() -> None:
    s = build_settings(BASE)
    assert s.table_format == TableFormat.ICEBERG and s.catalog_name == "glue_catalog"
    assert isinstance(table_format(s), Iceberg)


def test_delta_puts_the_tables_in_the_session_catalog() -> None:
    s = build_settings({**BASE, "table_format": "delta"})
    assert s.catalog_name == "spark_catalog"
    assert s.table_identifier("inventory", "customers") == "spark_catalog.cdc.inventory_customers"


def test_delta_with_another_catalog_name_is_refused_naming_the_fix() -> None:
    with pytest.raises(ArgumentError, match="--catalog_name must be spark_catalog with --table_format delta"):
        build_settings({**BASE, "table_format": "delta", "catalog_name": "glue_catalog"})


def test_an_unknown_table_format_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ArgumentError, match="--table_format must be one of iceberg, delta, hudi; got 'paimon'"):
        build_settings({**BASE, "table_format": "paimon"})


def test_every_table_format_has_its_seam() -> None:
    assert set(FORMATS) == set(TableFormat)


def test_delta_session_is_deltas_catalog_over_the_warehouse_and_iceberg_keeps_its_own() -> None:
    delta = catalog_conf(build_settings({**BASE, "table_format": "delta", "catalog_type": "hadoop"}))
    assert delta["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert delta["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert delta["spark.sql.warehouse.dir"] == "wh" and delta["spark.sql.session.timeZone"] == "UTC"
    assert delta["spark.sql.parquet.datetimeRebaseModeInWrite"] == "CORRECTED"  # year-1 dates are written
    assert not [k for k in delta if "iceberg" in k]
    iceberg = catalog_conf(build_settings({**BASE, "catalog_type": "hadoop"}))
    assert iceberg["spark.sql.catalog.glue_catalog"] == "org.apache.iceberg.spark.SparkCatalog"
    assert iceberg["spark.sql.catalog.glue_catalog.type"] == "hadoop"
    # Glue 6.0's runtime (this venv) reads vectorized, Iceberg's default; Glue 5.0's could not.
    assert "spark.sql.iceberg.vectorization.enabled" not in iceberg


def test_iceberg_reads_vectorized_on_glue_6_runtime_and_row_based_on_glue_5() -> None:
    assert reads_vectorized("4.1.1") and reads_vectorized("4.2.0")
    assert not reads_vectorized("3.5.4") and not reads_vectorized("3.5.6")


def test_iceberg_tables_are_created_at_the_chosen_format_version_and_their_markers_too() -> None:
    for version in ("2", "3"):
        s = build_settings({**BASE, "iceberg_format_version": version})
        fmt = table_format(s)
        table = fmt.create_table_sql("glue_catalog.cdc.t", COLUMNS, ["id"], WriteMode.MERGE_ON_READ)
        markers = fmt.markers_sql("glue_catalog.cdc.t__deletes", "`id` int", "glue_catalog.cdc.t")
        assert f"'format-version'='{version}'" in table and f"'format-version'='{version}'" in markers
    assert build_settings(BASE).iceberg_format_version == "2"  # Athena reads v2 only


def test_iceberg_format_version_3_is_refused_on_glue_5_runtime_and_with_other_formats() -> None:
    check_format_version("3", "4.1.1")
    check_format_version("2", "3.5.4")
    with pytest.raises(ArgumentError, match=r"--iceberg_format_version 3 needs Glue 6.0 .*leave it out"):
        check_format_version("3", "3.5.4")
    with pytest.raises(ArgumentError, match="--iceberg_format_version must be one of 2, 3; got '4'"):
        build_settings({**BASE, "iceberg_format_version": "4"})
    with pytest.raises(ArgumentError, match="--iceberg_format_version applies to --table_format iceberg only"):
        build_settings({**BASE, "table_format": "delta", "iceberg_format_version": "3"})


def test_a_delta_table_maps_columns_by_name_and_carries_the_key_property_and_metadata_columns() -> None:
    sql = Delta().create_table_sql("spark_catalog.cdc.t", COLUMNS, ["id"], WriteMode.MERGE_ON_READ)
    assert sql.startswith("CREATE TABLE IF NOT EXISTS spark_catalog.cdc.t (`id` int NOT NULL, `name` string, `_cdc_op`")
    assert "USING delta" in sql and "'delta.columnMapping.mode'='name'" in sql and "'cdc.primary-key'='id'" in sql
    assert "write.merge.mode" not in sql and "_cdc_copy" not in sql


# Every lake type the job writes (events/connect_types.py): Delta gates timestamp_ntz alone behind a feature.
LAKE_TYPES = [
    T.IntegerType(),
    T.LongType(),
    T.FloatType(),
    T.DoubleType(),
    T.BooleanType(),
    T.StringType(),
    T.DecimalType(38, 10),
    T.DateType(),
    T.TimestampType(),
    T.BinaryType(),
]


def test_delta_enables_the_timestamp_ntz_feature_before_such_a_column_is_added_and_no_other_type_needs_one() -> None:
    enable = "ALTER TABLE t SET TBLPROPERTIES ('delta.feature.timestampNtz'='supported')"
    assert Delta().features_sql("t", [T.IntegerType()], [T.StringType(), T.TimestampNTZType()]) == enable
    assert Delta().features_sql("t", [T.TimestampNTZType()], [T.TimestampNTZType()]) is None  # has it already
    assert Delta().features_sql("t", [T.IntegerType()], LAKE_TYPES) is None
    for fmt in (Iceberg(), Hudi()):
        assert fmt.features_sql("t", [T.IntegerType()], [*LAKE_TYPES, T.TimestampNTZType()]) is None
    # Delta would enable it by itself at the creation: the job names it all the same.
    created = Delta().create_table_sql(
        "t", [("id", T.IntegerType()), ("at", T.TimestampNTZType())], ["id"], WriteMode.MERGE_ON_READ
    )
    assert "'delta.feature.timestampNtz'='supported'" in created
    assert "delta.feature" not in Delta().create_table_sql("t", COLUMNS, ["id"], WriteMode.MERGE_ON_READ)


def test_an_iceberg_table_is_format_v2_in_the_write_mode_and_a_keyless_one_numbers_copies() -> None:
    sql = Iceberg().create_table_sql("glue_catalog.cdc.t", COLUMNS, [], WriteMode.COPY_ON_WRITE, replace=True)
    assert sql.startswith("CREATE OR REPLACE TABLE glue_catalog.cdc.t (`id` int, `name` string, `_cdc_op`")
    assert "`_cdc_copy` int" in sql and "USING iceberg" in sql
    assert "'format-version'='2'" in sql and "'write.merge.mode'='copy-on-write'" in sql


def test_delta_widens_by_a_rewrite_not_an_alter_column_type() -> None:
    plan = SchemaPlan(
        create=False,
        add=[("tier", T.StringType())],
        widen=[("id", T.IntegerType(), T.LongType())],
        final=[("id", T.LongType()), ("name", T.StringType()), ("tier", T.StringType())],
    )
    assert not Delta.widens_in_place and Iceberg.widens_in_place
    iceberg = alter_sql("t", plan)
    assert iceberg[-1] == "ALTER TABLE t ALTER COLUMN `id` TYPE bigint"
    assert alter_sql("t", plan, widen=False) == ["ALTER TABLE t ADD COLUMN `tier` string AFTER `name`"]
    rewrite = Delta().rewrite_sql("t", ["id", "name", "tier"], [("id", T.LongType())], {"cdc.primary-key": "id"})
    assert rewrite == (
        "CREATE OR REPLACE TABLE t USING delta TBLPROPERTIES ('cdc.primary-key'='id') "
        "AS SELECT CAST(`id` AS bigint) AS `id`, `name`, `tier` FROM t"
    )
    assert Iceberg().rewrite_sql("t", ["id"], [("id", T.LongType())], {}).startswith("REPLACE TABLE t USING iceberg")


def test_a_rewrite_keeps_the_partitioning_described_by_spark_and_iceberg_puts_its_write_order_back() -> None:
    iceberg_described = [
        ("id", "bigint"), ("d-t", "timestamp"), ("", ""), ("# Partitioning", ""), ("Part 0", "bucket(4, id)"),
        ("Part 1", "days(`d-t`)"), ("", ""), ("# Metadata Columns", ""), ("_spec_id", "int"),
    ]  # fmt: skip
    delta_described = [
        ("id", "bigint"),
        ("# Partition Information", ""),
        ("# col_name", "data_type"),
        ("p-1", "string"),
    ]
    parts = Iceberg().partition_terms(iceberg_described)
    assert parts == ["bucket(4, id)", "days(`d-t`)"] and Delta().partition_terms(delta_described) == ["`p-1`"]
    assert Iceberg().partition_terms([("id", "bigint"), ("# Metadata Columns", ""), ("_file", "string")]) == []
    sql = Iceberg().rewrite_sql("t", ["id"], [("id", T.LongType())], {"k": "v"}, parts)
    assert sql.startswith("REPLACE TABLE t USING iceberg PARTITIONED BY (bucket(4, id), days(`d-t`)) TBLPROPERTIES")
    order = [
        ("d-t", "day", "DESC", "NULLS_LAST"),
        ("id", "bucket[16]", "ASC", "NULLS_FIRST"),
        ("n", "identity", "ASC", "NULLS_FIRST"),
    ]
    assert Iceberg().write_order_sql("t", order) == (
        "ALTER TABLE t WRITE ORDERED BY days(`d-t`) DESC NULLS LAST, bucket(16, `id`) ASC NULLS FIRST, `n` ASC NULLS FIRST"
    )
    assert Iceberg().write_order_sql("t", []) is None and Delta().write_order_sql("t", order) is None
    # REPLACE ... AS SELECT keeps the query's nullability: the key stays required through a rewrite.
    assert (
        Iceberg().session_conf(build_settings(BASE))["spark.sql.catalog.glue_catalog.use-nullable-query-schema"]
        == "false"
    )


KEY_COLUMNS = [("A", False), ("b", False), ("c", True), ("_cdc_seq", True)]


def test_iceberg_declares_the_key_as_identifier_fields_on_glue_6() -> None:
    set_ab = "ALTER TABLE t SET IDENTIFIER FIELDS `A`, `b`"
    assert Iceberg().key_fields_sql("t", [], ["a", "b"], KEY_COLUMNS, "4.1.1") == set_ab  # the column's own case
    assert Iceberg().key_fields_sql("t", ["b", "A"], ["a", "b"], KEY_COLUMNS, "4.1.1") is None  # already
    assert Iceberg().key_fields_sql("t", ["A"], ["a", "b"], KEY_COLUMNS, "4.1.1") == set_ab  # the key grew


def test_a_key_that_cannot_be_identifier_fields_is_not_declared_and_loses_a_stale_declaration() -> None:
    drop = "ALTER TABLE t DROP IDENTIFIER FIELDS `A`"
    assert Iceberg().key_fields_sql("t", ["A"], ["a", "c"], KEY_COLUMNS, "4.1.1") == drop  # c is optional
    assert Iceberg().key_fields_sql("t", ["A"], [], KEY_COLUMNS, "4.1.1") == drop  # keyless now
    assert Iceberg().key_fields_sql("t", ["A"], ["gone"], KEY_COLUMNS, "4.1.1") == drop  # no such column
    assert Iceberg().key_fields_sql("t", [], ["c"], KEY_COLUMNS, "4.1.1") is None


def test_glue_5_iceberg_drops_identifier_fields_it_cannot_merge_into() -> None:
    # Iceberg 1.7.1 fails every merge-on-read MERGE into a table that has them.
    assert (
        Iceberg().key_fields_sql("t", ["A", "b"], ["a", "b"], KEY_COLUMNS, "3.5.4")
        == "ALTER TABLE t DROP IDENTIFIER FIELDS `A`, `b`"
    )
    assert Iceberg().key_fields_sql("t", [], ["a", "b"], KEY_COLUMNS, "3.5.4") is None


def test_declared_identifier_fields_are_read_back_even_when_a_name_holds_a_comma() -> None:
    names = ["id", "a,b", "a", "b"]
    assert Iceberg().declared_key({"identifier-fields": "[a,b,id]"}, names) in (["a,b", "id"], ["a", "b", "id"])
    assert Iceberg().declared_key({"identifier-fields": "[a,b,id]"}, ["id", "a,b"]) == ["a,b", "id"]
    assert Iceberg().declared_key({"identifier-fields": "[id]"}, names) == ["id"]
    assert Iceberg().declared_key({}, names) == [] and Iceberg().declared_key({"identifier-fields": "[]"}, names) == []


def test_only_iceberg_declares_a_key_and_delta_reserves_its_column_id_counter() -> None:
    assert Delta().key_fields_sql("t", [], ["A"], KEY_COLUMNS) is None and not Delta.key_fields and Iceberg.key_fields
    assert Delta().declared_key({"identifier-fields": "[A]"}, ["A"]) == []
    assert "delta.columnMapping.maxColumnId" in Delta.reserved_properties


def test_marker_tables_name_their_lake_table_in_each_format() -> None:
    for fmt in (Iceberg(), Delta(), Hudi()):
        sql = fmt.markers_sql("ns.t__cdc_deletes", "`_cdc_key` string", "ns.t")
        assert f"USING {fmt.using}" in sql and "'cdc.delete-markers-of'='ns.t'" in sql
        moved = fmt.moved_markers_sql("ns.u__cdc_deletes", "ns.t__cdc_deletes", "ns.u")
        assert moved.endswith("AS SELECT * FROM ns.t__cdc_deletes") and "'cdc.delete-markers-of'='ns.u'" in moved


def test_hudi_puts_copy_on_write_tables_in_the_session_catalog_and_dead_letters_keyless_ones() -> None:
    s = build_settings({**BASE, "table_format": "hudi"})
    assert s.catalog_name == "spark_catalog" and s.write_mode == WriteMode.COPY_ON_WRITE
    assert s.keyless_table_policy == "dead_letter"
    assert isinstance(table_format(s), Hudi)
    with pytest.raises(ArgumentError, match="--catalog_name must be spark_catalog with --table_format hudi"):
        build_settings({**BASE, "table_format": "hudi", "catalog_name": "glue_catalog"})


def test_hudi_makes_merge_on_read_tables_when_asked_and_refuses_multiset_tables_naming_why() -> None:
    s = build_settings({**BASE, "table_format": "hudi", "write_mode": "merge-on-read"})
    assert s.write_mode == WriteMode.MERGE_ON_READ
    sql = table_format(s).create_table_sql("spark_catalog.cdc.t", COLUMNS, ["id"], s.write_mode)
    # No precombine field: Hudi 0.15 writes a delete's ordering value to a log file as a decimal(30,15).
    assert "'type'='mor'" in sql and "'primaryKey'='id'" in sql and "preCombineField" not in sql
    # Hudi's writer compacts a merge-on-read table inline after the maintenance's bound of delta commits.
    conf = catalog_conf(build_settings({**BASE, "table_format": "hudi", "maintenance_max_delete_files": "7"}))
    assert conf["hoodie.compact.inline.max.delta.commits"] == "7"
    with pytest.raises(ArgumentError, match=r"multiset is not offered with --table_format hudi: Hudi 0\.15.s MERGE"):
        build_settings({**BASE, "table_format": "hudi", "keyless_table_policy": "multiset"})
    s = build_settings(
        {**BASE, "table_format": "hudi", "write_mode": "copy-on-write", "keyless_table_policy": "dead_letter"}
    )
    assert s.write_mode == WriteMode.COPY_ON_WRITE


def test_hudi_session_is_hudis_catalog_with_kryo_and_schema_evolution_on_read() -> None:
    conf = catalog_conf(build_settings({**BASE, "table_format": "hudi", "catalog_type": "hadoop"}))
    assert conf["spark.sql.extensions"] == "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.hudi.catalog.HoodieCatalog"
    assert conf["spark.serializer"] == "org.apache.spark.serializer.KryoSerializer"
    assert conf["spark.kryo.registrator"] == "org.apache.spark.HoodieSparkKryoRegistrar"
    assert conf["hoodie.schema.on.read.enable"] == "true" and conf["spark.sql.warehouse.dir"] == "wh"
    assert conf["spark.sql.parquet.datetimeRebaseModeInRead"] == "CORRECTED"
    # No other format's settings (Hudi's own "delta commits" are its merge-on-read log writes).
    assert not [k for k in conf if "iceberg" in k or ("delta" in k and not k.startswith("hoodie."))]


def test_a_hudi_table_is_keyed_by_the_primary_key_and_ordered_by_the_source_position() -> None:
    sql = Hudi().create_table_sql("spark_catalog.cdc.t", COLUMNS, ["id", "name"], WriteMode.COPY_ON_WRITE)
    assert sql.startswith(
        "CREATE TABLE IF NOT EXISTS spark_catalog.cdc.t (`id` int NOT NULL, `name` string NOT NULL, `_cdc_op`"
    )
    assert "USING hudi" in sql and "'type'='cow'" in sql and "'primaryKey'='id,name'" in sql
    assert "'preCombineField'='_cdc_seq'" in sql and "'cdc.primary-key'='id,name'" in sql
    # Athena reads it with its Hudi 0.15.0 connector (the version Glue 5.0 writes), not its default 0.14.0.
    assert "'athena_enable_native_hudi_connector_implementation'='true'" in sql
    markers = Hudi().markers_sql("ns.t__cdc_deletes", "`_cdc_key` string", "ns.t")
    assert "primaryKey" not in markers and "preCombineField" not in markers  # every marker is kept
    with pytest.raises(ValueError, match=r"record key is fixed and Hudi 0\.15 has no REPLACE TABLE"):
        Hudi().create_table_sql("t", COLUMNS, ["id"], WriteMode.COPY_ON_WRITE, replace=True)


def test_hudi_stores_a_datetime_as_a_timestamp_and_changes_types_in_its_schema_only() -> None:
    assert Hudi().lake_type(T.TimestampNTZType()) == T.TimestampType()
    assert Hudi().lake_type(T.DecimalType(10, 2)) == T.DecimalType(10, 2)
    assert Iceberg().lake_type(T.TimestampNTZType()) == T.TimestampNTZType()
    assert Hudi.widens_in_place and Hudi.fixed_key and not Hudi.v2_writes
    assert Hudi().retype_sql("t", [("a", T.IntegerType(), T.StringType())]) == [
        "ALTER TABLE t ALTER COLUMN `a` TYPE string"
    ]
    assert Iceberg().retype_sql("t", []) is None and Delta().retype_sql("t", []) is None
    assert "_hoodie_record_key" in HUDI_META_COLUMNS and "option.path" in Hudi.reserved_properties


def test_hudis_inline_file_sizing_and_cleaning_follow_the_jobs_maintenance_limits() -> None:
    conf = catalog_conf(
        build_settings(
            {
                **BASE,
                "table_format": "hudi",
                "maintenance_target_file_size_mb": "64",
                "maintenance_retain_last_snapshots": "3",
            }
        )
    )
    assert conf["hoodie.parquet.max.file.size"] == str(64 * 1024 * 1024)
    assert conf["hoodie.parquet.small.file.limit"] == str(48 * 1024 * 1024)  # under 75% of the target: small
    assert conf["hoodie.cleaner.commits.retained"] == "3" and conf["hoodie.cleaner.policy"] == "KEEP_LATEST_COMMITS"
    # Hudi refuses archival that keeps fewer commits than cleaning retains.
    many = hudi_table_services(MaintenancePolicy(retain_last_snapshots=40, max_snapshots=200))
    assert int(many["hoodie.keep.min.commits"]) > 40 and int(many["hoodie.keep.max.commits"]) > int(
        many["hoodie.keep.min.commits"]
    )


# ------------------------------------------------------------------ the registry, the one place that lists formats
ROOT = Path(__file__).resolve().parents[2]
FORMAT_NAMES = {f.value for f in TableFormat}
FORMAT_CLASSES = {type(f).__name__ for f in FORMATS.values()}
# The modules that may name a format, each with why (paths relative to the repository).
NAMES_A_FORMAT = {
    "glue_scripts/cdclake/lake/formats/": "the registry and each format's own module",
    "glue_scripts/cdclake/common/settings.py": (
        "the `--table_format` argument (its choices, help and per-format checks): the lowest layer, which cannot "
        "import the lake layer's registry; its choices are the registry's (test_every_table_format_has_its_seam)"
    ),
    "scripts/cdctools/lake_reader.py": (
        "reads each format's files without Spark (DuckDB and pyarrow over Iceberg's metadata, Delta's log, Hudi's "
        "timeline), the local stand-in for Athena"
    ),
    "scripts/cdctools/pinned_jars.py": "pom.xml's jar folders, run by path with the standard library only at set-up",
    "scripts/cdcbench/": "the benchmarks compare the formats and the peers, and name the versions they measure",
}


def format_mentions(source: str, name: str) -> list[str]:
    """`file:line what` of each way `source` names a format or lists the formats: a string that is a
    format's name, a `TableFormat.<format>`, a format class, `TableFormat` iterated or passed whole."""
    out = []
    for node in ast.walk(ast.parse(source, name)):
        what = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in FORMAT_NAMES:
            what = repr(node.value)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "TableFormat":
            what = f"TableFormat.{node.attr}" if node.attr.lower() in FORMAT_NAMES else None
        elif (
            isinstance(node, ast.Name | ast.alias) and getattr(node, "id", getattr(node, "name", "")) in FORMAT_CLASSES
        ):
            what = getattr(node, "id", None) or f"import {node.name}"  # type: ignore[union-attr]
        elif isinstance(node, ast.For | ast.comprehension | ast.Call):
            whole = [node.iter] if not isinstance(node, ast.Call) else node.args
            what = (
                "TableFormat listed" if any(isinstance(a, ast.Name) and a.id == "TableFormat" for a in whole) else None
            )
        if what:
            line = node.iter.lineno if isinstance(node, ast.comprehension) else getattr(node, "lineno", 0)
            out.append((line, f"{name}:{line} {what}"))
    return [text for _, text in sorted(out)]


def test_no_module_but_the_registry_and_the_formats_names_a_format_or_lists_the_formats() -> None:
    files = sorted([*(ROOT / "glue_scripts").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")])
    found = [
        mention
        for p in files
        if not any(str(p.relative_to(ROOT)).startswith(allowed) for allowed in NAMES_A_FORMAT)
        for mention in format_mentions(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))
    ]
    assert not found, "ask the formats' registry (cdclake.lake.formats) or the format itself:\n" + "\n".join(found)


def test_the_format_name_check_finds_names_members_classes_and_the_list() -> None:
    source = (
        'x = "Delta"\ny = TableFormat.HUDI\nfrom .formats import Iceberg\nz = [f for f in TableFormat]\n'
        'w = set(TableFormat)\nok = TableFormat(name)\nfine = "delta.columnMapping.mode"\n'
    )
    assert format_mentions(source, "m.py") == [
        "m.py:1 'Delta'",
        "m.py:2 TableFormat.HUDI",
        "m.py:3 import Iceberg",
        "m.py:4 TableFormat listed",
        "m.py:5 TableFormat listed",
    ]


# ------------------------------------------------------------------ capability rows
def test_the_docs_format_table_is_the_one_the_capability_rows_give() -> None:
    text = (ROOT / "docs" / "TABLE_FORMATS.md").read_text(encoding="utf-8")
    assert formats_table() in text, "regenerate docs/TABLE_FORMATS.md's capability table from formats_table()"


def test_the_readmes_format_table_is_the_capability_rows_short_form() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    short = "\n".join("  " + line for line in formats_table(reasons=False).splitlines())
    assert short in text, "regenerate the README's format table (under Table format) from formats_table(reasons=False)"
    cells = {c.strip() for line in short.splitlines()[2:] for c in line.strip(" |").split(" | ")[1:]}
    assert cells == {"yes", "no"}, cells


def test_the_readmes_table_format_row_names_each_format_its_version_and_glue_version() -> None:
    by_glue: dict[str, list[str]] = {}
    for fmt in FORMATS.values():  # a format's first Glue version is the one its tables are written on
        by_glue.setdefault(fmt.glue_versions[0], []).append(fmt.title)
    row = ", ".join(f"{' or '.join(titles)} on Glue {glue}" for glue, titles in by_glue.items())
    assert f"| table format | {row} (below) |" in (ROOT / "README.md").read_text(encoding="utf-8"), row


def test_the_capability_rows_are_what_the_arguments_and_the_ddl_do() -> None:
    for name, fmt in FORMATS.items():
        s = {**BASE, "table_format": name.value}
        multiset = fmt.supports(Capability.KEYLESS_TABLES)
        try:
            build_settings({**s, "keyless_table_policy": "multiset"})
        except ArgumentError:
            multiset = not multiset
        assert multiset, f"{name}: --keyless_table_policy multiset taken or refused against its capability row"
        # A format that has merge-on-read tables makes another table for it (Iceberg's write modes, Hudi's `mor`).
        create = fmt.create_table_sql("t", COLUMNS, ["id"], WriteMode.MERGE_ON_READ)
        cow = fmt.create_table_sql("t", COLUMNS, ["id"], WriteMode.COPY_ON_WRITE)
        assert (create != cow) == fmt.supports(Capability.MERGE_ON_READ), name
        replaced = fmt.supports(Capability.RECREATED_WITH_ANOTHER_KEY)
        try:
            fmt.create_table_sql("t", COLUMNS, ["name"], WriteMode.COPY_ON_WRITE, replace=True)
        except ValueError:
            replaced = not replaced
        assert replaced, f"{name}: REPLACE TABLE against its capability row"
        # Both refusals come from a key fixed at the table's creation (the planner's `fixed_key`).
        assert (
            fmt.fixed_key
            == (not fmt.supports(Capability.KEY_CHANGE))
            == (not fmt.supports(Capability.RENAMED_KEY_COLUMN))
        )
        assert (stream_maintainer(build_settings(s)) is not None) == fmt.supports(Capability.STREAM_MAINTENANCE), name
        assert fmt.session_catalog == (build_settings(s).catalog_name == "spark_catalog"), name
        assert fmt.widens_in_place == fmt.supports(Capability.WIDEN_IN_PLACE), name


def test_every_refusal_says_why() -> None:
    for fmt in FORMATS.values():
        assert all(isinstance(c, Capability) and len(why) > 20 for c, why in fmt.refuses.items()), fmt.title
