"""TableFormat: iceberg (default), delta or hudi. Both Glue jobs get the format's --datalake-formats
and --table_format; with delta or hudi, Spark's session catalog is backed by the Glue Data Catalog
(--enable-glue-datacatalog), the jobs name it (--catalog_name spark_catalog), and their roles may
read (and create) the database `default` that catalog reads when it starts; with hudi, both jobs get
Hudi's Spark settings as --conf and the maintenance job no schedule (the stream maintains its Hudi
tables: Hudi 0.15 plans table services in single-writer mode)."""

from __future__ import annotations

from typing import Any

import pytest
from cdclake.common.settings import build_settings
from cdclake.jobs.maintenance_job import build_job_settings
from cfn_helpers import failed_assertions, parameter_values, resolve_variant

JOBS = {"CdcJob": "GlueJobRole", "MaintenanceJob": "MaintenanceJobRole"}
LOCAL_PATHS = {"source": "files", "files_path": "/in", "checkpoint_location": "/c", "dead_letter_path": "/d"}


def _arguments(variant: dict[str, Any], job: str, **parameters: str) -> dict[str, Any]:
    """The job's DefaultArguments, a `Ref` to a parameter replaced by the parameter's value."""
    values = parameter_values(variant, **parameters)
    args = variant["Resources"][job]["Properties"]["DefaultArguments"]
    return {
        k: values[v["Ref"]] if isinstance(v, dict) and set(v) == {"Ref"} and v["Ref"] in values else v
        for k, v in args.items()
    }


def _statements(variant: dict[str, Any], role: str) -> list[dict[str, Any]]:
    policies = variant["Resources"][role]["Properties"]["Policies"]
    return [s for p in policies for s in p["PolicyDocument"]["Statement"]]


def _job_arguments(args: dict[str, Any]) -> dict[str, str]:
    """The job's own arguments (no hyphen) that are plain strings, as Glue passes them."""
    return {k[2:]: v for k, v in args.items() if "-" not in k[2:] and isinstance(v, str)}


def test_iceberg_is_the_default_and_keeps_the_iceberg_catalog_without_the_session_catalog(raw_template):
    variant = resolve_variant(raw_template)
    for job in JOBS:
        args = _arguments(variant, job)
        assert args["--datalake-formats"] == "iceberg" and args["--table_format"] == "iceberg"
        assert args["--catalog_name"] == "glue_catalog"
        assert "--enable-glue-datacatalog" not in args and "--conf" not in args
    for role in JOBS.values():
        assert not [s for s in _statements(variant, role) if s.get("Sid") == "SessionCatalogDefaultDatabase"]


@pytest.mark.parametrize("job", sorted(JOBS))
@pytest.mark.parametrize("fmt", ["delta", "hudi"])
def test_delta_or_hudi_gives_both_jobs_the_format_and_the_glue_data_catalog_as_sparks_session_catalog(
    raw_template, job, fmt
):
    args = _arguments(resolve_variant(raw_template, TableFormat=fmt), job, TableFormat=fmt)
    assert args["--datalake-formats"] == fmt and args["--table_format"] == fmt
    assert args["--enable-glue-datacatalog"] == "true"
    assert args["--catalog_name"] == "spark_catalog"
    assert ("--conf" in args) == (fmt == "hudi")
    if job == "CdcJob":  # Hudi tables are copy-on-write: the stack's default merge-on-read is not passed
        assert args["--write_mode"] == ("copy-on-write" if fmt == "hudi" else "merge-on-read")
    # The job's own arguments as deployed are accepted by the job itself (Delta's catalog name included).
    # (The values the stack computes, e.g. with Fn::Sub, given as plain strings.)
    own = _job_arguments(args) | {"warehouse": "s3://lake/warehouse"}
    if job == "CdcJob":
        paths = {"checkpoint_location": "s3://lake/c/", "dead_letter_path": "s3://lake/d/"}
        settings = build_settings(own | paths | {"kafka_bootstrap_servers": "b:9098", "kafka_topic_pattern": "p\\..*"})
    else:
        settings = build_job_settings(own).catalog
    assert settings.table_format == fmt and settings.catalog_name == "spark_catalog"


@pytest.mark.parametrize("job", sorted(JOBS))
def test_hudi_gives_both_jobs_kryo_with_hudis_registrations_and_reads_through_hudi_not_plain_parquet(raw_template, job):
    conf = _arguments(resolve_variant(raw_template, TableFormat="hudi"), job, TableFormat="hudi")["--conf"]
    # One Glue `--conf` value carries several settings, joined by ` --conf ` (AWS Glue's documented form).
    settings = dict(kv.split("=", 1) for kv in conf.split(" --conf "))
    assert settings == {
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
        "spark.sql.hive.convertMetastoreParquet": "false",
    }
    # The job sets the same serializer itself: the two never disagree.
    from cdclake.lake.formats.hudi import Hudi

    session = Hudi().session_conf(build_settings({"table_format": "hudi", "warehouse": "/w", **LOCAL_PATHS}))
    assert {k: session[k] for k in ("spark.serializer", "spark.kryo.registrator")} == {
        k: settings[k] for k in ("spark.serializer", "spark.kryo.registrator")
    }


def test_with_hudi_the_maintenance_job_is_deployed_without_a_schedule_and_with_delta_or_iceberg_it_has_one(
    raw_template,
):
    for fmt in ("iceberg", "delta"):
        assert "MaintenanceTrigger" in resolve_variant(raw_template, TableFormat=fmt)["Resources"]
    hudi = resolve_variant(raw_template, TableFormat="hudi")["Resources"]
    assert "MaintenanceTrigger" not in hudi and "MaintenanceJob" in hudi
    # The stream maintains its Hudi tables between micro-batches, on the stack's interval.
    assert hudi["CdcJob"]["Properties"]["DefaultArguments"]["--maintenance_interval_minutes"] == {
        "Ref": "StreamMaintenanceIntervalMinutes"
    }


@pytest.mark.parametrize("role", sorted(JOBS.values()))
@pytest.mark.parametrize("fmt", ["delta", "hudi"])
def test_with_delta_or_hudi_each_jobs_role_may_read_and_create_only_the_default_database_beyond_its_own(
    raw_template, role, fmt
):
    statements = _statements(resolve_variant(raw_template, TableFormat=fmt), role)
    (default,) = [s for s in statements if s.get("Sid") == "SessionCatalogDefaultDatabase"]
    assert sorted(default["Action"]) == ["glue:CreateDatabase", "glue:GetDatabase"]
    resources = [r["Fn::Sub"] for r in default["Resource"]]
    assert [r.rsplit(":", 1)[-1] for r in resources] == ["catalog", "database/default"]
    (catalog,) = [s for s in statements if s.get("Sid") == "Catalog"]
    assert "glue:CreateDatabase" not in catalog["Action"]  # the job's own database is the stack's


def test_iceberg_format_version_defaults_to_2_and_3_reaches_only_the_streaming_job_of_an_iceberg_stack(
    raw_template,
):
    """Athena reads Iceberg v2 tables only: the stack's default stays 2, and its description says why
    (with the AWS page); 3 is passed to the job that creates tables, never with delta or hudi."""
    param = raw_template["Parameters"]["IcebergFormatVersion"]
    assert param["Default"] == "2" and param["AllowedValues"] == ["2", "3"]
    assert "Athena" in param["Description"] and "docs.aws.amazon.com" in param["Description"]
    default = _arguments(resolve_variant(raw_template), "CdcJob")
    assert default["--iceberg_format_version"] == "2"
    v3 = _arguments(resolve_variant(raw_template, IcebergFormatVersion="3"), "CdcJob", IcebergFormatVersion="3")
    assert v3["--iceberg_format_version"] == "3"
    assert "--iceberg_format_version" not in _arguments(resolve_variant(raw_template), "MaintenanceJob")
    own = _job_arguments(v3) | {
        "warehouse": "s3://lake/warehouse",
        "checkpoint_location": "s3://c/",
        "dead_letter_path": "s3://d/",
    }
    settings = build_settings(own | {"kafka_bootstrap_servers": "b:9098", "kafka_topic_pattern": "p\\..*"})
    assert settings.iceberg_format_version == "3"
    for fmt in ("delta", "hudi"):
        args = _arguments(resolve_variant(raw_template, TableFormat=fmt), "CdcJob", TableFormat=fmt)
        assert "--iceberg_format_version" not in args


def test_iceberg_format_version_3_is_refused_with_delta_hudi_or_glue_5(raw_template):
    assert failed_assertions(raw_template, IcebergFormatVersion="3") == []
    for wrong in ({"TableFormat": "delta"}, {"GlueVersion": "5.0"}, {"TableFormat": "hudi", "GlueVersion": "5.0"}):
        (failure,) = failed_assertions(raw_template, IcebergFormatVersion="3", **wrong)
        assert failure.startswith("IcebergFormatVersion=3 needs TableFormat=iceberg and GlueVersion=6.0")
    assert failed_assertions(raw_template, TableFormat="delta") == []  # 2 (the default) with any format
