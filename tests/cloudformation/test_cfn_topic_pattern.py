"""The topics the Glue job reads follow the connector's names unless KafkaTopicPattern overrides them:
changing SourceDatabase, PgSchema or TopicPrefix cannot leave the job reading nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cdcdeploy import deploy
from cfn_helpers import EXISTING_NETWORK, failed_assertions, parameter_values, resolve_variant, sub_value


def topic_pattern(raw_template: dict[str, Any], **parameters: str) -> str:
    variant = resolve_variant(raw_template, **parameters)
    values = parameter_values(raw_template, **parameters)
    job_pattern = sub_value(
        variant["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]["--kafka_topic_pattern"], values
    )
    assert sub_value(variant["Outputs"]["KafkaTopicPattern"]["Value"], values) == job_pattern
    return job_pattern


@pytest.mark.parametrize(
    ("parameters", "topic", "not_topics"),
    [
        ({}, "salesdb.salesdb.customer", ["salesdb.schema-history", "salesdb.public.customer", "salesdbX"]),
        (
            # Another database than the demo's salesdb is your own (ExistingVpcId).
            {"SourceDatabase": "shop", "TopicPrefix": "prod", **EXISTING_NETWORK},
            "prod.shop.order_lines",
            ["salesdb.salesdb.customer", "prodXshop.t", "prod.shop", "prod.schema-history"],
        ),
        (
            {"SourceEngine": "postgres"},
            "salesdb.public.customer",
            ["salesdb-heartbeat.salesdb", "salesdb.salesdb.customer", "salesdb"],
        ),
        (
            {
                "SourceEngine": "postgres",
                "PgSchema": "sales",
                "TopicPrefix": "crm",
                "SourceDatabase": "erp",
                **EXISTING_NETWORK,
            },
            "crm.sales.customer",
            ["crm.public.customer", "crm.erp.customer", "crm-heartbeat.crm"],
        ),
    ],
)
def test_the_derived_pattern_matches_the_connectors_change_topics_only(
    raw_template: dict[str, Any], parameters: dict[str, str], topic: str, not_topics: list[str]
) -> None:
    pattern = topic_pattern(raw_template, **parameters)
    assert re.fullmatch(pattern, topic)  # Spark's subscribePattern matches whole topic names
    for other in not_topics:
        assert not re.fullmatch(pattern, other), other
    assert failed_assertions(raw_template, **parameters) == []


@pytest.mark.parametrize(("parameters", "topic"), [({}, "salesdb"), ({"TopicPrefix": "prod"}, "prod")])
def test_the_derived_mysql_pattern_also_matches_the_schema_change_topic(
    raw_template: dict[str, Any], parameters: dict[str, str], topic: str
) -> None:
    # The MySQL connector's DDL (include.schema.changes) is on the topic named by topic.prefix:
    # column renames and dropped tables come from it (docs/ARCHITECTURE.md, "Source DDL").
    assert re.fullmatch(topic_pattern(raw_template, **parameters), topic)


@pytest.mark.parametrize(
    ("parameters", "topic"),
    [({}, "salesdb.transaction"), ({"SourceEngine": "postgres", "TopicPrefix": "crm"}, "crm.transaction")],
)
def test_the_derived_pattern_also_matches_the_transaction_topic(
    raw_template: dict[str, Any], parameters: dict[str, str], topic: str
) -> None:
    # SourceTransactions keep: BEGIN/END records (provide.transaction.metadata) are on
    # <prefix>.transaction; the job needs them to apply a source transaction whole.
    assert re.fullmatch(topic_pattern(raw_template, **parameters), topic)


def test_an_explicit_pattern_is_used_as_given(raw_template: dict[str, Any]) -> None:
    assert topic_pattern(raw_template, KafkaTopicPattern=r"salesdb\.salesdb\.customer") == r"salesdb\.salesdb\.customer"


def test_the_other_engines_pattern_is_refused_before_anything_is_created(raw_template: dict[str, Any]) -> None:
    (pg,) = failed_assertions(raw_template, SourceEngine="postgres", KafkaTopicPattern=r"salesdb\.salesdb\..*")
    assert "<prefix>.<schema>.<table>" in pg
    (mysql,) = failed_assertions(raw_template, KafkaTopicPattern=r"salesdb\.public\..*")
    assert "<prefix>.<database>.<table>" in mysql


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        (["KafkaTopicPattern=salesdb\\.salesdb\\..*", "SourceDatabase=shop"], "shop"),
        (["SourceEngine=postgres", "KafkaTopicPattern=salesdb\\.salesdb\\..*"], "public"),
        (["KafkaTopicPattern=salesdb\\.salesdb\\.(customer"], "not a valid"),
    ],
)
def test_deploy_refuses_a_pattern_that_matches_none_of_the_connectors_topics(
    overrides: list[str], problem: str
) -> None:
    with pytest.raises(SystemExit, match=re.escape(problem)):
        deploy.check_topic_pattern(overrides)


def test_deploy_accepts_a_pattern_for_a_subset_of_the_topics_and_no_pattern_at_all() -> None:
    deploy.check_topic_pattern([])
    deploy.check_topic_pattern(["SourceDatabase=shop", "TopicPrefix=prod"])
    deploy.check_topic_pattern(
        ["SourceDatabase=shop", "TopicPrefix=prod", r"KafkaTopicPattern=prod\.shop\.(orders|customer)"]
    )
    deploy.check_topic_pattern(["SourceEngine=postgres", "PgSchema=sales", r"KafkaTopicPattern=salesdb\.sales\..*"])


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        (r"prod\.shop\..*", "prod.shop."),
        (r"^prod\.shop\.(a|b)", "prod.shop."),
        (r"prod\.shops?\..*", "prod.shop"),
        (r"prod\.s\w+\..*", "prod.s"),
        (r"prod\.a\..*|prod\.b\..*", ""),
        (r".*customer", ""),
    ],
)
def test_the_literal_beginning_of_a_pattern_is_what_every_match_starts_with(pattern: str, literal: str) -> None:
    assert deploy.literal_prefix(pattern) == literal
