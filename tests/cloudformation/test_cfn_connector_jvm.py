"""deploy's check of the Java that runs the connector's workers (cdcdeploy/connector_jvm.py): read
from the lines a real Kafka Connect worker and a real JVM write, and from a log group on a moto server
while deploy waits."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from cdcdeploy import artifacts, connector_jvm, deploy
from cdctools import pinned_jars as runtime
from cfn_helpers import as_deployed, resolve_variant, sub_parts
from moto.server import ThreadedMotoServer

REGION = "eu-west-1"


def java() -> str:
    found = shutil.which("java")
    assert found, "java not found: make setup installs it"
    return found


def java_major() -> int:
    out = subprocess.run([java(), "-XshowSettings:properties", "-version"], capture_output=True, text=True).stderr
    version = re.search(r"java\.specification\.version = (\d+)", out)
    assert version, out
    return int(version.group(1))


@pytest.fixture(scope="module")
def worker_start_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """What a Kafka Connect 3.7 worker (the manifest's, as MSK Connect runs it) logs as it starts: its
    config points at no broker, so it stops after its first lines."""
    d = tmp_path_factory.mktemp("worker")
    (d / "log4j.properties").write_text(
        "log4j.rootLogger=INFO, out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c{1})%n\n"
    )
    (d / "worker.properties").write_text("bootstrap.servers=127.0.0.1:1\n")
    classpath = ":".join(str(j) for j in runtime.jars("kafka"))
    cmd = [java(), f"-Dlog4j.configuration=file:{d / 'log4j.properties'}", "-cp", classpath,
           "org.apache.kafka.connect.cli.ConnectStandalone", str(d / "worker.properties")]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "jvm.classpath" in line or len(lines) > 500:
                break
    finally:
        proc.kill()
        proc.wait()
    return lines


def test_the_workers_java_is_read_from_kafka_connects_start_lines(worker_start_lines: list[str]) -> None:
    seen = connector_jvm.java_of(worker_start_lines)
    assert seen is not None and seen.version == java_major()
    assert "jvm.spec" in seen.evidence


def test_a_class_too_new_for_the_jvm_names_the_jvms_version(tmp_path: Path) -> None:
    # A real JVM refusing a class compiled for a newer Java (as Java 11 refuses Debezium 3's, version 61).
    jar = next(j for j in runtime.jars("kafka") if j.name.startswith("kafka-clients-"))
    with zipfile.ZipFile(jar) as zf:
        data = bytearray(zf.read("org/apache/kafka/clients/admin/Admin.class"))
    data[6:8] = (44 + java_major() + 1).to_bytes(2, "big")  # the class file's major version
    (tmp_path / "org/apache/kafka/clients/admin").mkdir(parents=True)
    (tmp_path / "org/apache/kafka/clients/admin/Admin.class").write_bytes(bytes(data))
    out = subprocess.run([java(), "-cp", str(tmp_path), "org.apache.kafka.clients.admin.Admin"],
                         capture_output=True, text=True).stderr  # fmt: skip
    assert "UnsupportedClassVersionError" in out
    seen = connector_jvm.java_of(out.splitlines())
    assert seen is not None and seen.version == java_major()


def test_java_11_workers_get_the_templates_java_11_build_as_the_fix_and_17_none(template: dict[str, Any]) -> None:
    fix = connector_jvm.fix_for(connector_jvm.JavaSeen(11, "jvm.spec = ..., 11.0.25"), "mysql")
    assert fix and "Java 11" in fix and f"--parameter {connector_jvm.BUILD_PARAMETER}=java11" in fix
    assert "java11" in template["Parameters"][connector_jvm.BUILD_PARAMETER]["AllowedValues"]
    for engine in ("mysql", "postgres"):  # the version the fix names is the manifest's Java 11 build
        assert runtime.versions()[f"debezium-{engine}-java11"] == connector_jvm.JAVA11_DEBEZIUM
    assert f"Debezium {connector_jvm.JAVA11_DEBEZIUM}" in fix
    assert connector_jvm.fix_for(connector_jvm.JavaSeen(17, "jvm.spec = ..., 17.0.15"), "mysql") is None


# ---------------------------------------------------------------- the Java 11 build (DebeziumBuild=java11)
def test_debezium_build_java11_deploys_the_java_11_plugin_zip(raw_template: dict[str, Any]) -> None:
    for build, key, hash_ in (("java17", "DebeziumPluginKey", "DebeziumPluginHash"),
                              ("java11", "DebeziumJava11PluginKey", "DebeziumJava11PluginHash")):  # fmt: skip
        plugin = resolve_variant(raw_template, DebeziumBuild=build)["Resources"]["DebeziumPlugin"]["Properties"]
        assert plugin["Location"]["S3Location"]["FileKey"] == {"Ref": key}
        assert f"${{{hash_}}}" in sub_parts(plugin["Name"])[0]  # a new zip is a new (immutable) plugin


def class_file_major(jar: bytes, member: str) -> int:
    with zipfile.ZipFile(io.BytesIO(jar)) as zf:
        return int.from_bytes(zf.read(member)[6:8], "big")


def config_check(connector_class: str, config: dict[str, str], plugins: list[Path], tmp: Path) -> dict[str, Any]:
    """tests/cloudformation/java/ConnectorConfigCheck.java on Kafka Connect 3.7's class path: per plugin
    folder, the connector's version, its ConfigDef's keys and validate()'s errors."""
    props = tmp / "connector.properties"
    escape = str.maketrans({"\\": "\\\\", ":": "\\:", "=": "\\=", " ": "\\ ", "\n": "\\n"})
    props.write_text("".join(f"{k.translate(escape)}={v.translate(escape)}\n" for k, v in config.items()))
    source = Path(__file__).parent / "java" / "ConnectorConfigCheck.java"
    classpath = ":".join(str(j) for j in runtime.jars("kafka"))
    cmd = [java(), "-Xmx256m", "-cp", classpath, str(source), connector_class, str(props), *map(str, plugins)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = {}
    for line in out.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "plugin":
            current = result[rest] = {"keys": set(), "errors": {}}
        elif kind == "version":
            current["version"] = rest
        elif kind == "key":
            current["keys"].add(rest)
        elif kind == "error":
            name, _, message = rest.partition(": ")
            current["errors"][name] = message
    return result


# Debezium 3.x settings the Java 11 build (2.7) ignores without harm, each with why.
IGNORED_BY_2_7_HARMLESSLY = {
    # The publication is created beforehand with publish_via_partition_root = true (the template's set-up,
    # the local stack); where a user's is not, the job maps a partition's events to its partitioned table.
    "publish.via.partition.root",
}


@pytest.mark.parametrize("engine", ["mysql", "postgres"])
def test_the_java_11_plugin_runs_the_same_connector_configuration_as_debezium_3(
    engine: str, template: dict[str, Any], pg_template: dict[str, Any], tmp_path: Path
) -> None:
    """The rendered MSK configuration (one source file for both builds) against the real connector of
    the Java 11 zip build-artifacts makes (Debezium 2.7.4, Java 11 class files) and of the manifest's
    Debezium 3.x: validate() refuses nothing but the unreachable database, and every key Debezium 3.x
    defines is one 2.7 defines too, so no setting is silently ignored on the Java 11 build."""
    built = artifacts.build_plugin_zip(tmp_path / "java11.zip", engine, "java11")
    with zipfile.ZipFile(built.path) as zf:
        zf.extractall(tmp_path / "plugin")
        core = next(n for n in zf.namelist() if "/debezium-core-" in n)
        assert class_file_major(zf.read(core), "io/debezium/config/Configuration.class") == 55  # Java 11
    java11 = tmp_path / "plugin" / artifacts.plugin_folder(engine)
    current = runtime.profile_dir(artifacts.PLUGINS[engine][0])
    variant = template if engine == "mysql" else pg_template
    (conn,) = [r for r in variant["Resources"].values() if r["Type"] == "AWS::KafkaConnect::Connector"]
    config = as_deployed(conn)
    seen = config_check(config["connector.class"], config, [java11, current], tmp_path)
    old, new = seen[str(java11)], seen[str(current)]
    assert old["version"] == runtime.versions()[f"debezium-{engine}-java11"]
    assert new["version"] == runtime.versions()[artifacts.PLUGINS[engine][0]]
    assert set(old["errors"]) == {"database.hostname"}, old["errors"]  # the connection, nothing else
    unknown_to_2_7 = sorted((set(config) & new["keys"]) - old["keys"] - IGNORED_BY_2_7_HARMLESSLY)
    assert not unknown_to_2_7, (
        f"{unknown_to_2_7} of cloudformation/connector/debezium-{engine}.json are Debezium 3.x settings that "
        "2.7 does not define: the Java 11 build (DebeziumBuild=java11) would ignore them"
    )


@pytest.fixture
def logs_server(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    yield f"http://{host}:{port}"
    server.stop()


def test_deploy_reads_the_java_from_the_connectors_log_group_while_it_waits(
    logs_server: str, worker_start_lines: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    logs = boto3.client("logs", region_name=REGION)
    group = connector_jvm.log_group("orders", "mysql")
    with deploy.watch_connector_jvm(logs, "orders", "mysql", every_s=0.2) as watch:
        time.sleep(0.5)  # the group does not exist yet: nothing seen, no error
        assert watch.seen is None
        logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=group, logStreamName="worker-1")
        now = int(time.time() * 1000)
        events = [{"timestamp": now, "message": line.rstrip("\n")} for line in worker_start_lines if line.strip()]
        logs.put_log_events(logGroupName=group, logStreamName="worker-1", logEvents=events)
        deadline = time.monotonic() + 10
        while watch.seen is None and time.monotonic() < deadline:
            time.sleep(0.1)
    assert watch.seen is not None and watch.seen.version == java_major()
    assert f"[deploy] connector workers run Java {java_major()}" in capsys.readouterr().out
