"""TableFormat: iceberg (default) or delta. Both Glue jobs get the format's --datalake-formats and
--table_format; with delta, Spark's session catalog is backed by the Glue Data Catalog
(--enable-glue-datacatalog), the jobs name it (--catalog_name spark_catalog), and their roles may
read (and create) the database `default` that catalog reads when it starts."""

from __future__ import annotations

from typing import Any

import pytest
from cdclake.common.settings import build_settings
from cdclake.jobs.maintenance_job import build_job_settings
from cfn_helpers import parameter_values, resolve_variant

JOBS = {"CdcJob": "GlueJobRole", "MaintenanceJob": "MaintenanceJobRole"}


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
        assert "--enable-glue-datacatalog" not in args
    for role in JOBS.values():
        assert not [s for s in _statements(variant, role) if s.get("Sid") == "SessionCatalogDefaultDatabase"]


@pytest.mark.parametrize("job", sorted(JOBS))
def test_delta_gives_both_jobs_delta_lake_and_the_glue_data_catalog_as_sparks_session_catalog(raw_template, job):
    args = _arguments(resolve_variant(raw_template, TableFormat="delta"), job, TableFormat="delta")
    assert args["--datalake-formats"] == "delta" and args["--table_format"] == "delta"
    assert args["--enable-glue-datacatalog"] == "true"
    assert args["--catalog_name"] == "spark_catalog"
    # The job's own arguments as deployed are accepted by the job itself (Delta's catalog name included).
    # (The values the stack computes, e.g. with Fn::Sub, given as plain strings.)
    own = _job_arguments(args) | {"warehouse": "s3://lake/warehouse"}
    if job == "CdcJob":
        paths = {"checkpoint_location": "s3://lake/c/", "dead_letter_path": "s3://lake/d/"}
        settings = build_settings(own | paths | {"kafka_bootstrap_servers": "b:9098", "kafka_topic_pattern": "p\\..*"})
    else:
        settings = build_job_settings(own).catalog
    assert settings.table_format == "delta" and settings.catalog_name == "spark_catalog"


@pytest.mark.parametrize("role", sorted(JOBS.values()))
def test_with_delta_each_jobs_role_may_read_and_create_only_the_default_database_beyond_its_own(raw_template, role):
    statements = _statements(resolve_variant(raw_template, TableFormat="delta"), role)
    (default,) = [s for s in statements if s.get("Sid") == "SessionCatalogDefaultDatabase"]
    assert sorted(default["Action"]) == ["glue:CreateDatabase", "glue:GetDatabase"]
    resources = [r["Fn::Sub"] for r in default["Resource"]]
    assert [r.rsplit(":", 1)[-1] for r in resources] == ["catalog", "database/default"]
    (catalog,) = [s for s in statements if s.get("Sid") == "Catalog"]
    assert "glue:CreateDatabase" not in catalog["Action"]  # the job's own database is the stack's
