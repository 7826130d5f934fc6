"""The SourceEngine=postgres variant of the pipeline template: RDS for PostgreSQL with logical
replication, the Debezium PostgreSQL connector from its one source file, a client bootstrap that
creates the replication user, and a plugin zip with the PostgreSQL connector's jars."""

from __future__ import annotations

import copy
import glob
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cdcdeploy import artifacts, build, deploy, templates
from cdctools import pinned_jars as runtime
from cfn_helpers import as_deployed, resolve_variant, resources_of, sub_parts, walk
from cfnlint.api import lint as cfn_lint
from project_rules import expected_family

SOURCE = templates.CFN_DIR / "connector" / "debezium-postgres.json"
RULES_DIR = str(templates.CFN_DIR / "lint_rules")


def pg_user_data(pg_template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    script, variables = pg_template["Resources"]["ClientInstance"]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
    return script, variables


def lint_errors(template: dict[str, Any]) -> list[str]:
    config = {"append_rules": [RULES_DIR], "regions": ["eu-west-1"]}
    found = cfn_lint(templates.dump_template(template), config=config)  # type: ignore[arg-type]
    return [f"{m.rule.id} {m.message}" for m in found if m.rule.id.startswith("E")]


# ---------------------------------------------------------------- database
def test_postgres_parameter_group_turns_logical_replication_on_in_the_family_of_the_engine_version(
    pg_template: dict[str, Any], raw_template: dict[str, Any]
) -> None:
    group = pg_template["Resources"]["PgParameterGroup"]["Properties"]
    assert group["Parameters"]["rds.logical_replication"] == "1"
    assert group["Parameters"]["rds.force_ssl"] == "1"
    assert group["Parameters"]["max_slot_wal_keep_size"] == {"Ref": "PgMaxSlotWalKeepSizeMb"}
    db = pg_template["Resources"]["Database"]["Properties"]
    assert (db["Engine"], db["EngineVersion"]) == ("postgres", {"Ref": "PgEngineVersion"})
    assert db["DBParameterGroupName"] == {"Ref": "PgParameterGroup"}
    assert db["EnableCloudwatchLogsExports"] == ["postgresql"]
    # The family follows the engine version for every version the stack accepts.
    assert group["Family"] == {"Fn::Sub": "postgres${PgEngineVersion}"}
    for version in raw_template["Parameters"]["PgEngineVersion"]["AllowedValues"]:
        assert expected_family("postgres", version) == f"postgres{version}"
    # One database, one parameter group per variant.
    assert "DbParameterGroup" not in pg_template["Resources"]
    assert "PgParameterGroup" not in resources_of(templates.load_template(templates.SOURCE_TEMPLATE), "x")


def test_the_lint_rules_check_the_postgres_variant_too(raw_template: dict[str, Any]) -> None:
    pg = copy.deepcopy(raw_template)
    pg["Parameters"]["SourceEngine"]["Default"] = "postgres"
    assert lint_errors(pg) == []
    pg["Resources"]["PgParameterGroup"]["Properties"]["Family"] = "postgres15"  # PgEngineVersion is 16
    assert any(e.startswith("E9004 PgParameterGroup: Family 'postgres15'") for e in lint_errors(pg))


def test_database_ports_follow_the_engine(pg_template: dict[str, Any], template: dict[str, Any]) -> None:
    for variant, port in ((pg_template, 5432), (template, 3306)):
        rules = {}
        for name, r in variant["Resources"].items():
            if r["Type"] not in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
                continue
            props = r["Properties"]
            groups = (props.get("GroupId", {}).get("Ref"), props.get("DestinationSecurityGroupId", {}).get("Ref"))
            if "DatabaseSecurityGroup" in groups:
                rules[name] = props
        assert len(rules) == 4
        assert {(p["FromPort"], p["ToPort"]) for p in rules.values()} == {(port, port)}


# ---------------------------------------------------------------- connector
def pg_connector(pg_template: dict[str, Any]) -> dict[str, Any]:
    (conn,) = resources_of(pg_template, "AWS::KafkaConnect::Connector").values()
    return conn


def test_exactly_one_connector_per_engine(pg_template: dict[str, Any], template: dict[str, Any]) -> None:
    assert list(resources_of(pg_template, "AWS::KafkaConnect::Connector")) == ["PgConnector"]
    assert list(resources_of(template, "AWS::KafkaConnect::Connector")) == ["Connector"]
    # It starts only once the client instance has created the roles, the publication and the seed.
    assert pg_connector(pg_template)["DependsOn"] == "SourceReady"
    assert "${ClientInstance}" in pg_template["Resources"]["SourceReady"]["Properties"]["Value"]["Fn::Sub"]
    assert pg_template["Outputs"]["ConnectorArn"]["Value"] == {"Fn::GetAtt": ["PgConnector", "ConnectorArn"]}


def test_the_postgres_connector_configuration_comes_whole_from_its_one_source_file(
    raw_template: dict[str, Any],
) -> None:
    # The WireFormat json variant: with avro only the converters change (test_cfn_wire_format).
    pg_template = resolve_variant(raw_template, SourceEngine="postgres", WireFormat="json")
    config = pg_connector(pg_template)["Properties"]["ConnectorConfiguration"]
    raw = json.loads(SOURCE.read_text(encoding="utf-8"))
    names = set(pg_template["Parameters"]) | set(pg_template["Resources"]) | {"AWS::StackName", "AWS::Region"}
    for key, value in raw.items():
        if key.startswith("_"):
            continue
        if "${" not in value:
            assert config[key] == value, key
            continue
        sub, variables = (config[key], {}) if isinstance(config[key], str) else sub_parts(config[key])
        for ref in re.findall(r"\$\{([^}]+)\}", sub):
            assert ref in variables or ref.split(".")[0] in names, f"{key}: ${{{ref}}}"
        assert not templates.PLACEHOLDER.search(sub), f"{key} still has a source placeholder"
    assert config["plugin.name"] == "pgoutput" and config["publication.autocreate.mode"] == "filtered"
    assert config["slot.name"] == {"Fn::Sub": "${PgSlotName}"}
    assert config["database.dbname"] == {"Fn::Sub": "${SourceDatabase}"}
    assert config["schema.include.list"] == {"Fn::Sub": "${PgSchema}"}
    # MSK only: TLS to RDS (rds.force_ssl) and topic creation on MSK Serverless.
    assert config["database.sslmode"] == "require" and config["topic.creation.enable"] == "true"
    assert config["database.password"] == {
        "Fn::Sub": [
            "{{resolve:secretsmanager:${DbSecret}:SecretString:password}}",
            {"DbSecret": {"Ref": "DebeziumSecret"}},
        ]
    }


def test_postgres_settings_are_not_copied_into_the_template_by_hand() -> None:
    text = templates.SOURCE_TEMPLATE.read_text(encoding="utf-8")
    for key in templates.source_keys(SOURCE):
        if key == "connector.class":
            continue
        assert f"{key}:" not in text, f"{key} is written in cdc-pipeline.yaml; it belongs in {SOURCE.name}"


def test_both_connectors_send_heartbeats_to_a_topic_their_role_may_write(
    pg_template: dict[str, Any], template: dict[str, Any]
) -> None:
    def topic_arns(t: dict[str, Any]) -> list[str]:
        policy = t["Resources"]["ConnectRole"]["Properties"]["Policies"][0]["PolicyDocument"]
        (topics,) = [s for s in policy["Statement"] if s["Sid"] == "Topics"]
        return [r["Fn::Sub"][0] for r in topics["Resource"]]

    for t, connector in ((pg_template, "PgConnector"), (template, "Connector")):
        config = t["Resources"][connector]["Properties"]["ConnectorConfiguration"]
        assert int(config["heartbeat.interval.ms"]) > 0
        assert config["topic.heartbeat.prefix"] == {"Fn::Sub": "${TopicPrefix}-heartbeat"}
        assert any(a.endswith("/${TopicPrefix}-heartbeat.*") for a in topic_arns(t))


def test_the_postgres_heartbeat_writes_the_row_the_bootstrap_creates_in_the_captured_schema(
    pg_template: dict[str, Any],
) -> None:
    config = pg_template["Resources"]["PgConnector"]["Properties"]["ConnectorConfiguration"]
    assert config["heartbeat.action.query"]["Fn::Sub"].startswith('INSERT INTO "${PgSchema}".cdclake_heartbeat ')
    script = pg_user_data(pg_template)[0]
    # heartbeat.sql creates the table (in the schema the filtered publication takes), before the DDL
    # capture and after the seed, which runs only into a schema without tables.
    loop = script.index("for script in heartbeat ddl_capture; do")
    assert loop > script.index("/opt/cdc/sql/postgres/$name")
    assert "-v schema='${PgSchema}'" in script[loop:] and '-f "/opt/cdc/sql/postgres/$script.sql"' in script[loop:]
    assert (templates.ROOT / "sql" / "postgres" / "heartbeat.sql").is_file()


def test_an_alarm_watches_the_replication_slots_lag_of_the_postgres_source(
    pg_template: dict[str, Any], template: dict[str, Any]
) -> None:
    alarm = pg_template["Resources"]["ReplicationSlotLag"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/RDS", "OldestReplicationSlotLag")
    (dimension,) = alarm["Dimensions"]
    assert dimension["Name"] == "DBInstanceIdentifier"
    assert dimension["Value"] == {"Ref": "Database"}  # the demo database (the default variant)
    assert (
        alarm["Threshold"] == {"Ref": "MaxReplicationSlotLagMb"}
        and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    )
    assert "ReplicationSlotLag" not in template["Resources"]  # MySQL has no slot


# ---------------------------------------------------------------- client bootstrap
def test_the_client_creates_the_replication_user_without_a_manual_step(pg_template: dict[str, Any]) -> None:
    script, variables = pg_user_data(pg_template)
    assert 'GRANT rds_replication TO "$dbz_user";' in script
    assert 'GRANT ${SourceDatabase}_owner TO "$dbz_user";' in script  # filtered publication: owner rights
    assert "CREATE PUBLICATION dbz_publication" in script
    assert "ALTER PUBLICATION dbz_publication OWNER TO ${SourceDatabase}_owner;" in script
    assert "dnf install -y -q postgresql${PgEngineVersion}" in script and "PGSSLMODE=require" in script
    assert "sql -d '${SourceDatabase}' -f \"/opt/cdc/sql/postgres/$name\"" in script
    # The DDL capture, after the seed (its table would count as one and skip the seed).
    assert script.index("for script in heartbeat ddl_capture") > script.index("/opt/cdc/sql/postgres/$name")
    assert variables == {"SeedFileList": {"Fn::Join": [",", {"Ref": "SeedSqlFiles"}]}}
    assert script.rstrip().splitlines()[-1].strip() == "signal 0"
    # Neither password is on a command line or in a statement: env vars and a SCRAM verifier.
    assert "PASSWORD '$dbz_verifier'" in script and "$dbz_password" not in script
    assert "export PGUSER PGPASSWORD" in script and "--password" not in script


def test_the_client_script_is_valid_bash(pg_template: dict[str, Any], tmp_path: Path) -> None:
    script = re.sub(r"\$\{[A-Za-z0-9:.]+\}", "x", pg_user_data(pg_template)[0])
    path = tmp_path / "user-data.sh"
    path.write_text(script, encoding="utf-8")
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_the_clients_scram_verifier_is_the_one_postgres_checks(pg_template: dict[str, Any]) -> None:
    # Run the script's own verifier code, then derive the verifier independently from its salt.
    from cdcstack import postgres

    script = pg_user_data(pg_template)[0]
    code = re.search(r"python3 -c '\n(.*?)'\)", script, re.S)
    assert code is not None
    out = subprocess.run(
        [sys.executable, "-c", code.group(1)], input="s3cret-Pw\n", capture_output=True, text=True, check=True
    ).stdout.strip()
    import base64

    salt = base64.b64decode(out.split("$")[1].split(":")[1])
    assert out == postgres.scram_verifier("s3cret-Pw", salt=salt)


def test_no_secret_is_a_literal_in_the_postgres_variant(pg_template: dict[str, Any]) -> None:
    for path, value in walk(pg_template):
        if path and isinstance(path[-1], str) and re.search("password", path[-1], re.I) and isinstance(value, str):
            pytest.fail(f"literal password at {path}")


# ---------------------------------------------------------------- artifacts
@pytest.fixture(scope="module")
def pg_plugin_zip(tmp_path_factory: pytest.TempPathFactory) -> artifacts.Built:
    return artifacts.build_plugin_zip(tmp_path_factory.mktemp("pg-plugin") / "plugin.zip", "postgres")


def test_the_postgres_plugin_zip_holds_exactly_the_manifests_postgres_connector_folder(
    pg_plugin_zip: artifacts.Built,
) -> None:
    folder = runtime.profile_dir("debezium-postgres")
    with zipfile.ZipFile(pg_plugin_zip.path) as zf:
        jars = {n: zf.read(n) for n in zf.namelist() if n.endswith(".jar")}
        assert all(n.startswith(f"{folder.name}/") for n in zf.namelist())
    # the connector's jars, the Glue Schema Registry converter and its service manifest (wire format avro)
    loaded = runtime.jars("debezium-postgres") + runtime.jars("glue-schema-registry")
    expected = {f"{folder.name}/{j.name}": j.read_bytes() for j in loaded}
    expected[f"{folder.name}/{runtime.CONVERTER_MANIFEST_JAR}"] = runtime.converter_manifest_jar()
    assert jars == expected
    names = [n.split("/", 1)[1] for n in jars]
    assert f"debezium-connector-postgres-{runtime.versions()['debezium-postgres']}.jar" in names
    for provided in ("kafka-clients", "connect-", "slf4j", "debezium-connector-mysql"):
        assert not any(j.startswith(provided) for j in names), provided
    assert artifacts.build_plugin_zip(pg_plugin_zip.path.with_name("again.zip"), "postgres").sha256 == (
        pg_plugin_zip.sha256
    )


def test_the_build_ships_the_plugin_of_the_source_engine_and_the_postgres_seed_sql(
    tmp_path: Path, pg_plugin_zip: artifacts.Built
) -> None:
    manifest = build.build_artifacts(tmp_path / "b", source_engine="postgres", plugin_zip=None)
    keys = [a["key"] for a in manifest["artifacts"]]  # type: ignore[index, union-attr]
    assert manifest["parameters"]["DebeziumPluginKey"] == f"plugins/debezium-postgres-{pg_plugin_zip.short_hash}.zip"  # type: ignore[index]
    assert "postgres/01_create_customer.sql" in manifest["seed_sql_files"]  # type: ignore[operator]
    prefix = manifest["parameters"]["SeedSqlPrefix"]  # type: ignore[index]
    assert f"{prefix}/postgres/04_second_table.sql" in keys and f"{prefix}/01_create_customer.sql" in keys
    assert deploy.source_engine(["GlueNumberOfWorkers=3", "SourceEngine=postgres"]) == "postgres"
    assert deploy.source_engine([]) == "mysql"


def test_the_postgres_plugin_alone_loads_and_validates_its_msk_configuration(
    pg_plugin_zip: artifacts.Built, pg_template: dict[str, Any], tmp_path: Path
) -> None:
    """As on MSK Connect: Kafka Connect's jars on the class path, the plugin in its own class loader;
    the rendered configuration validates (the only error allowed is that no database answers)."""
    import pyspark
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    with zipfile.ZipFile(pg_plugin_zip.path) as zf:
        zf.extractall(tmp_path / "plugin")
    plugin_jars = sorted(glob.glob(str(tmp_path / "plugin" / "debezium-connector-postgres" / "*.jar")))
    py4j_jar = glob.glob(str(Path(pyspark.__file__).parent / "jars" / "py4j-*.jar"))[0]
    # The Kafka Connect worker of the manifest (profile kafka), as the local stack runs it.
    port = launch_gateway(classpath=":".join(str(j) for j in runtime.jars("kafka")), jarpath=py4j_jar, die_on_exit=True)
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
    try:
        jvm = gateway.jvm
        urls = gateway.new_array(jvm.java.net.URL, len(plugin_jars))
        for i, jar in enumerate(plugin_jars):
            urls[i] = jvm.java.io.File(jar).toURI().toURL()
        loader = jvm.java.net.URLClassLoader(urls, jvm.java.lang.ClassLoader.getSystemClassLoader())
        jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
        cls = jvm.java.lang.Class.forName("io.debezium.connector.postgresql.PostgresConnector", True, loader)
        connector = cls.getDeclaredConstructor(gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
            gateway.new_array(jvm.java.lang.Object, 0)
        )
        assert connector.version() == runtime.versions()["debezium-postgres"]
        config = as_deployed(pg_connector(pg_template))
        result = connector.validate(config)
        errors = {cv.name(): list(cv.errorMessages()) for cv in result.configValues() if cv.errorMessages().size()}
        assert set(errors) <= {"database.hostname"}, errors
        for name in (
            "io.debezium.connector.postgresql.PostgresConnectorTask",
            "io.debezium.connector.postgresql.connection.pgoutput.PgOutputMessageDecoder",
            "org.postgresql.Driver",
        ):
            jvm.java.lang.Class.forName(name, True, loader)
    finally:
        gateway.shutdown()
