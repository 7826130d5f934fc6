"""CaptureMode: log (default) deploys Debezium on MSK Connect and MSK Serverless; query deploys neither
(nor the schema registry) and gives the Glue job --source jdbc on the database, reached through the Glue
connection's security group, with the Debezium user's secret."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cfn_helpers import failed_assertions, resolve_variant, walk

LOG_ONLY_TYPES = {
    "AWS::MSK::ServerlessCluster",
    "AWS::KafkaConnect::Connector",
    "AWS::KafkaConnect::CustomPlugin",
    "AWS::KafkaConnect::WorkerConfiguration",
    "AWS::Glue::Registry",
}


def _types(variant: dict[str, Any]) -> set[str]:
    return {r["Type"] for r in variant["Resources"].values()}


def _job_arguments(variant: dict[str, Any]) -> dict[str, Any]:
    return variant["Resources"]["CdcJob"]["Properties"]["DefaultArguments"]


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_query_mode_deploys_no_msk_connect_or_registry_and_nothing_refers_to_them(raw_template, engine):
    log = resolve_variant(raw_template, SourceEngine=engine, WireFormat="avro")
    query = resolve_variant(raw_template, SourceEngine=engine, WireFormat="avro", CaptureMode="query")
    assert LOG_ONLY_TYPES - {"AWS::Glue::Registry"} <= _types(log)
    assert not LOG_ONLY_TYPES & _types(query)
    removed = set(log["Resources"]) - set(query["Resources"])
    assert {"MskCluster", "ConnectRole", "BootstrapBrokers"} <= removed
    named = set()  # every resource the query variant refers to: Ref, GetAtt, DependsOn, ${...} of Sub
    for _, v in walk(query):
        if isinstance(v, dict):
            named |= {v["Ref"]} if isinstance(v.get("Ref"), str) else set()
            named |= {v["Fn::GetAtt"][0]} if "Fn::GetAtt" in v else set()
            text = v["Fn::Sub"][0] if isinstance(v.get("Fn::Sub"), list) else v.get("Fn::Sub", "")
            named |= {n.split(".")[0] for n in re.findall(r"\$\{([^}!]+)\}", text if isinstance(text, str) else "")}
    depends = {
        d
        for r in query["Resources"].values()
        for d in ([r.get("DependsOn")] if isinstance(r.get("DependsOn"), str) else r.get("DependsOn", []))
    }
    assert not (named | depends) & removed
    assert not {"ConnectorArn", "MskClusterArn", "BootstrapBrokers"} & set(query.get("Outputs", {}))


def test_query_mode_job_polls_the_database_through_the_glue_connection_with_the_debezium_secret(raw_template):
    query = resolve_variant(raw_template, CaptureMode="query")
    args = _job_arguments(query)
    assert args["--source"] == "jdbc"
    assert not [a for a in args if a.startswith("--kafka_")]
    assert {"--jdbc_url", "--jdbc_user", "--jdbc_password", "--jdbc_tables", "--jdbc_reconcile_every_polls"} <= set(
        args
    )
    assert "GlueNetworkConnection" in str(query["Resources"]["CdcJob"]["Properties"]["Connections"])
    ingress = query["Resources"]["DatabaseFromGlue"]["Properties"]
    assert ingress["SourceSecurityGroupId"] == {"Ref": "GlueSecurityGroup"}
    statements = [
        s for p in query["Resources"]["GlueJobRole"]["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]
    ]
    sids = {s.get("Sid") for s in statements}
    assert "SourceSecret" in sids and not {"KafkaCluster", "KafkaChangeTopics", "KafkaGroups"} & sids
    log_args = _job_arguments(resolve_variant(raw_template))
    assert log_args["--source"] == "kafka" and not [a for a in log_args if a.startswith("--jdbc_")]
    assert "DatabaseFromGlue" not in resolve_variant(raw_template)["Resources"]


def test_query_mode_refuses_source_transactions(raw_template):
    assert failed_assertions(raw_template, CaptureMode="query", SourceTransactions="keep")
    assert not failed_assertions(raw_template, CaptureMode="query")


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_query_mode_demo_client_seeds_the_modification_column_after_the_tables(raw_template, engine):
    def seeds(variant: dict[str, Any]) -> list[str]:
        found = [
            v["SeedFileList"] for _, v in walk(variant["Resources"]) if isinstance(v, dict) and "SeedFileList" in v
        ]
        (joined,) = found
        return [
            x for part in joined["Fn::Join"][1] for x in (part["Fn::Join"][1] if isinstance(part, dict) else [part])
        ]

    query = resolve_variant(raw_template, SourceEngine=engine, CaptureMode="query")
    assert seeds(query)[-1] == "query_capture.sql"
    assert "query_capture.sql" not in str(seeds(resolve_variant(raw_template, SourceEngine=engine)))
