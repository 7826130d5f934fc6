"""Job arguments: Glue-style parsing, validation with actionable messages, and the documented table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cdclake.common.settings import (
    ARGS,
    ArgumentError,
    CatalogType,
    KafkaAuth,
    Source,
    Transactions,
    build_settings,
    parse_argv,
    parse_job_argv,
)

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {"warehouse": "/w", "checkpoint_location": "/c", "dead_letter_path": "/d"}


def test_glue_style_arguments_are_parsed_and_unknown_glue_arguments_kept():
    raw = parse_argv(["--JOB_ID", "j_1", "--source", "files", "--files_path=/in", "--run_once", "true"])
    s = build_settings(raw | REQUIRED)
    assert s.source is Source.FILES and s.files_path == "/in" and s.run_once is True
    assert (s.catalog_type, s.kafka_auth) == (CatalogType.GLUE, KafkaAuth.IAM)  # the defaults, as members
    assert s.extra == {"JOB_ID": "j_1"}


def test_defaults_match_the_argument_table():
    s = build_settings({"source": "files", "files_path": "/in"} | REQUIRED)
    assert s.catalog_name == "glue_catalog" and s.write_mode == "merge-on-read"
    assert s.namespace == "cdc" and s.trigger_interval_seconds == 10 and s.max_offsets_per_trigger == 100_000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source": "kinesis"}, "--source must be one of kafka, files"),
        ({"source": "kafka"}, "--kafka_bootstrap_servers is required"),
        ({"source": "kafka", "kafka_bootstrap_servers": "b:9098"}, "exactly one of --kafka_topics"),
        (
            {"source": "kafka", "kafka_bootstrap_servers": "b", "kafka_topic_pattern": "("},
            "--kafka_topic_pattern is not a valid regex",
        ),
        ({"source": "files"}, "--files_path is required"),
        ({"source": "files", "files_path": "/in", "max_offsets_per_trigger": "lots"}, "must be an integer"),
        ({"source": "files", "files_path": "/in", "run_once": "yes"}, "--run_once must be true or false"),
        ({"source": "files", "files_path": "/in", "table_name_template": "{schema}"}, "may use only {db} and {table}"),
        ({"source": "files", "files_path": "/in", "namespace": "my-db"}, "--namespace must be a plain identifier"),
        ({"source": "files", "files_path": "/in", "transactions": "yes"}, "--transactions must be one of keep, ignore"),
        ({"source": "files", "files_path": "/in", "transaction_hold_seconds": "0"}, "must be >= 1, got 0"),
    ],
)
def test_invalid_arguments_fail_with_an_actionable_message(args, message):
    with pytest.raises(ArgumentError, match=re.escape(message)):
        build_settings(REQUIRED | args)


def test_transactions_are_ignored_by_default_and_kept_on_request():
    s = build_settings({"source": "files", "files_path": "/in"} | REQUIRED)
    assert (s.transactions, s.transaction_hold_seconds) == (Transactions.IGNORE, 600)
    kept = build_settings(
        {"source": "files", "files_path": "/in", "transactions": "keep", "transaction_hold_seconds": "30"} | REQUIRED
    )
    assert (kept.transactions, kept.transaction_hold_seconds) == (Transactions.KEEP, 30)


def test_missing_required_path_is_named():
    with pytest.raises(ArgumentError, match="--checkpoint_location is required"):
        build_settings({"source": "files", "files_path": "/in", "warehouse": "/w", "dead_letter_path": "/d"})


def test_argument_without_value_is_rejected():
    with pytest.raises(ArgumentError, match="--source has no value"):
        parse_argv(["--source", "--run_once", "true"])


def test_target_table_name_comes_from_source_database_and_table():
    s = build_settings({"source": "files", "files_path": "/in", "namespace": "lake"} | REQUIRED)
    assert s.table_identifier("salesdb", "Customer-2") == "glue_catalog.lake.salesdb_customer_2"


def test_configuration_page_documents_every_job_argument_with_its_default():
    page = (ROOT / "docs" / "CONFIGURATION.md").read_text()
    for a in ARGS:
        row = re.search(rf"^\| `--{a.name}` \|([^|]*)\|", page, re.M)
        assert row, f"docs/CONFIGURATION.md has no row for --{a.name}"
        documented = row.group(1).strip().strip("`")
        assert documented == (a.default if a.default else "—"), f"--{a.name}: docs/CONFIGURATION.md says {documented!r}"


def test_unknown_argument_is_named_with_the_closest_valid_name():
    with pytest.raises(ArgumentError, match=re.escape("unknown argument --sourc: did you mean --source?")):
        parse_job_argv(["--sourc", "files"], ARGS)


@pytest.mark.parametrize(
    "glue_argument",
    ["--JOB_ID", "--JOB_NAME", "--JOB_RUN_ID", "--TempDir", "--job-bookmark-option", "--enable-metrics", "--conf"],
)
def test_glue_own_arguments_are_accepted_on_a_local_command_line(glue_argument):
    assert parse_job_argv([glue_argument, "x", "--source", "files"], ARGS)["source"] == "files"
