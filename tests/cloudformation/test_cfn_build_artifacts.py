"""build-artifacts: reproducible zips, content-hash keys, and a connector plugin that loads."""

from __future__ import annotations

import glob
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cdcdeploy import artifacts, build, templates
from cdctools import pinned_jars as runtime
from cfn_helpers import as_deployed


@pytest.fixture(scope="module")
def plugin_zip(tmp_path_factory: pytest.TempPathFactory) -> artifacts.Built:
    """Built from pom.xml's debezium-mysql profile (resolved into .local/ by scripts/cdctools/pinned_jars.py)."""
    return artifacts.build_plugin_zip(tmp_path_factory.mktemp("plugin") / "plugin.zip")


def zip_jars(built: artifacts.Built) -> dict[str, bytes]:
    """path in the zip -> bytes, of every jar in a plugin zip."""
    with zipfile.ZipFile(built.path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.endswith(".jar")}


def fake_sources(tmp_path: Path) -> dict[str, Path]:
    job = tmp_path / "cdc_lake_job.py"
    job.write_text("print('job')\n", encoding="utf-8")
    sql = tmp_path / "sql"
    (sql / "athena").mkdir(parents=True)
    (sql / "01_create_customer.sql").write_text("CREATE DATABASE IF NOT EXISTS salesdb;\n", encoding="utf-8")
    (sql / "athena" / "q.sql").write_text("SELECT 1;\n", encoding="utf-8")
    return {"job_script": job, "sql_dir": sql}


def test_plugin_zip_holds_exactly_the_jars_the_local_kafka_connect_loads(plugin_zip: artifacts.Built) -> None:
    folder = runtime.profile_dir("debezium-mysql")
    assert folder.name == "debezium-connector-mysql"
    # the connector's jars and, in the same folder (one class loader), the Glue Schema Registry converter
    loaded = runtime.jars("debezium-mysql") + runtime.jars("glue-schema-registry")
    local = {f"{folder.name}/{j.name}": j.read_bytes() for j in loaded}
    local[f"{folder.name}/{runtime.CONVERTER_MANIFEST_JAR}"] = runtime.converter_manifest_jar()
    assert zip_jars(plugin_zip) == local  # same names, same bytes
    names = zipfile.ZipFile(plugin_zip.path).namelist()
    assert all(n.startswith(f"{folder.name}/") for n in names)
    version = runtime.versions()["glue-schema-registry"]
    assert f"{folder.name}/schema-registry-kafkaconnect-converter-{version}.jar" in names
    # MSK Connect provides these; a second copy in the plugin would shadow the runtime's.
    jars = [n.split("/", 1)[1] for n in local]
    for provided in ("kafka-clients", "connect-runtime", "connect-api", "connect-json", "slf4j"):
        assert not any(j.startswith(provided) for j in jars), provided


def test_plugin_zip_carries_the_manifests_debezium_version(plugin_zip: artifacts.Built) -> None:
    version = runtime.versions()["debezium-mysql"]
    jars = [n.split("/", 1)[1] for n in zip_jars(plugin_zip)]
    assert f"debezium-connector-mysql-{version}.jar" in jars
    assert not any(j.startswith("debezium-connector-postgres") for j in jars)
    readme = zipfile.ZipFile(plugin_zip.path).read("debezium-connector-mysql/README.txt").decode()
    assert version in readme and "debezium-mysql" in readme


def test_the_shipped_mysql_connector_reads_the_binlog_position_of_mysql_8_4(plugin_zip: artifacts.Built) -> None:
    """MySQL 8.4 removed SHOW MASTER STATUS; the connector in the zip must know SHOW BINARY LOG STATUS."""
    version = runtime.versions()["debezium-mysql"]
    connector = zip_jars(plugin_zip)[f"debezium-connector-mysql/debezium-connector-mysql-{version}.jar"]
    with zipfile.ZipFile(io.BytesIO(connector)) as jar:
        classes = b"".join(jar.read(n) for n in jar.namelist() if n.startswith("io/debezium/connector/mysql/jdbc/"))
    assert b"SHOW BINARY LOG STATUS" in classes


def test_plugin_zip_of_an_unknown_engine_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown source engine 'oracle'"):
        artifacts.build_plugin_zip(tmp_path / "x.zip", "oracle")


def test_zips_are_byte_for_byte_reproducible(tmp_path: Path, plugin_zip: artifacts.Built, built_dir: Path) -> None:
    again = artifacts.build_plugin_zip(tmp_path / "again.zip", cache=False)  # zipped afresh, not copied
    assert again.sha256 == plugin_zip.sha256
    a = artifacts.build_cdclake_zip(tmp_path / "a.zip")
    b = artifacts.build_cdclake_zip(tmp_path / "b.zip")
    assert a.sha256 == b.sha256
    # The schema-history function's zip too, wheels included: a rebuild keeps its content-hash key.
    rebuilt = artifacts.build_lambda_zip(tmp_path / "history.zip", build.HISTORY_LAMBDA_SRC)
    assert rebuilt.sha256 == artifacts.sha256_file(built_dir / build.HISTORY_LAMBDA_ZIP)


def test_cdclake_zip_is_importable_as_a_package(tmp_path: Path) -> None:
    built = artifacts.build_cdclake_zip(tmp_path / "cdclake.zip")
    names = zipfile.ZipFile(built.path).namelist()
    assert "cdclake/__init__.py" in names and "cdclake/common/settings.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    # As Glue does with --extra-py-files: the zip on the path (ahead of the venv's install), then `import cdclake`.
    code = f"import cdclake.common.settings as s; assert s.__file__.startswith({str(built.path)!r}), s.__file__; print(len(s.ARGS))"
    env = {"PYTHONPATH": str(built.path), "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([sys.executable, "-s", "-c", code], env=env, check=True, capture_output=True, text=True)
    assert int(out.stdout) >= 10


def test_lambda_zip_has_the_handler_at_its_root(built_dir: Path) -> None:
    names = zipfile.ZipFile(built_dir / build.LAMBDA_ZIP).namelist()
    assert names == ["cfn_reply.py", "index.py"]  # the reply module every custom resource shares


def test_manifest_keys_are_content_hashes(tmp_path: Path, plugin_zip: artifacts.Built) -> None:
    src = fake_sources(tmp_path)
    first = build.build_artifacts(tmp_path / "b1", plugin_zip=plugin_zip.path, **src)
    second = build.build_artifacts(tmp_path / "b2", plugin_zip=plugin_zip.path, **src)
    assert [a["key"] for a in first["artifacts"]] == [a["key"] for a in second["artifacts"]]  # type: ignore[index]
    params: dict[str, Any] = first["parameters"]  # type: ignore[assignment]
    assert params["DebeziumPluginKey"] == f"plugins/debezium-mysql-{plugin_zip.short_hash}.zip"
    assert params["GlueScriptKey"].endswith("/cdc_lake_job.py")
    assert params["CdclakeZipKey"].rsplit("/", 1)[0] == params["GlueScriptKey"].rsplit("/", 1)[0]
    # The maintenance job runs the same cdclake version as the streaming job: same prefix.
    assert params["MaintenanceScriptKey"] == params["GlueScriptKey"].rsplit("/", 1)[0] + "/cdc_maintenance_job.py"
    assert first["seed_sql_files"] == ["01_create_customer.sql"]  # sql/athena/ is not seed data
    # The Glue job's extra jar: the manifest's glue-extra-jars jar, byte for byte, under its content hash.
    (jar,) = runtime.jars("glue-extra-jars")
    assert jar.name == f"aws-msk-iam-auth-{runtime.versions()['aws-msk-iam-auth']}.jar"
    (shipped,) = [a for a in first["artifacts"] if a["key"] == params["GlueExtraJarKey"]]  # type: ignore[union-attr]
    assert Path(shipped["path"]).read_bytes() == jar.read_bytes()
    assert params["GlueExtraJarKey"] == f"glue-jars/{artifacts.sha256_file(jar)[:12]}/{jar.name}"
    # A changed seed file is a new prefix, so the instance never reads a half-updated set.
    (src["sql_dir"] / "01_create_customer.sql").write_text("-- changed\n", encoding="utf-8")
    third = build.build_artifacts(tmp_path / "b3", plugin_zip=plugin_zip.path, **src)
    assert third["parameters"]["SeedSqlPrefix"] != params["SeedSqlPrefix"]  # type: ignore[index]
    assert third["parameters"]["GlueScriptKey"] == params["GlueScriptKey"]  # type: ignore[index]


def test_build_parameters_are_exactly_the_templates_artifact_parameters(
    tmp_path: Path, plugin_zip: artifacts.Built, template: dict[str, Any]
) -> None:
    manifest = build.build_artifacts(tmp_path / "b", plugin_zip=plugin_zip.path, **fake_sources(tmp_path))
    no_default = {k for k, v in template["Parameters"].items() if "Default" not in v}
    assert no_default == {"ArtifactsBucket", *manifest["parameters"]}  # type: ignore[misc]


def test_build_without_the_job_script_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="Glue job script"):
        build.build_artifacts(tmp_path / "b", job_script=tmp_path / "missing.py")


# ---------------------------------------------------------------- the plugin in a JVM
def test_plugin_alone_loads_validates_and_parses_ddl_on_a_kafka_connect_classpath(
    plugin_zip: artifacts.Built, template: dict[str, Any], tmp_path: Path
) -> None:
    """As on MSK Connect: Kafka Connect's jars on the class path, the plugin in its own class loader.

    The connector validates the rendered MSK configuration (the only error allowed is that no database
    answers), its MySQL DDL parser works and the Kafka schema history loads: no jar is missing.
    """
    import pyspark
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    with zipfile.ZipFile(plugin_zip.path) as zf:
        zf.extractall(tmp_path / "plugin")
    plugin_jars = sorted(glob.glob(str(tmp_path / "plugin" / "debezium-connector-mysql" / "*.jar")))
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
        # Kafka Connect runs plugin code with the plugin's loader as context loader; Debezium relies on it.
        jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)

        def new(name: str) -> Any:
            cls = jvm.java.lang.Class.forName(name, True, loader)
            no_args = gateway.new_array(jvm.java.lang.Class, 0)
            return cls.getDeclaredConstructor(no_args).newInstance(gateway.new_array(jvm.java.lang.Object, 0))

        connector = new("io.debezium.connector.mysql.MySqlConnector")
        assert connector.version() == runtime.versions()["debezium-mysql"]
        (conn,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::KafkaConnect::Connector"]
        config = as_deployed(conn)
        result = connector.validate(config)
        errors = {cv.name(): list(cv.errorMessages()) for cv in result.configValues() if cv.errorMessages().size()}
        assert set(errors) <= {"database.hostname"}, errors

        parser = new("io.debezium.connector.mysql.antlr.MySqlAntlrDdlParser")
        tables = new("io.debezium.relational.Tables")
        ddl = templates.ROOT / "sql" / "01_create_customer.sql"
        statement = "CREATE TABLE customer (cust_id INT PRIMARY KEY, acct_balance DECIMAL(12,2), at DATETIME(6))"
        parser.parse(statement if not ddl.is_file() else ddl.read_text(encoding="utf-8"), tables)
        assert [str(t) for t in tables.tableIds()][-1].endswith("customer")
        jvm.java.lang.Class.forName("io.debezium.storage.kafka.history.KafkaSchemaHistory", True, loader)
        jvm.java.lang.Class.forName("io.debezium.connector.mysql.MySqlConnectorTask", True, loader)
    finally:
        gateway.shutdown()
