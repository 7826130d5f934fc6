"""The runtime manifest (pom.xml) and its resolution with Maven (scripts/cdctools/pinned_jars.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
from cdctools import pinned_jars as runtime  # noqa: E402


def test_manifest_pins_glue_6_versions_of_spark_iceberg_and_the_aws_sdk() -> None:
    pins = runtime.versions()
    assert pins["spark"] == "4.1.1"
    assert pins["iceberg"] == "1.11.0"
    assert pins["spark-sql-kafka"] == pins["spark"]
    assert pins["glue-aws-sdk"].startswith("2.44.")  # Glue 6.0's line (2.44.6; pom.xml says why 2.44.3)
    assert pins["kafka"].startswith("3.7.")  # the Kafka Connect line MSK Connect runs


def test_pyspark_pin_in_requirements_matches_the_manifest() -> None:
    req = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert f"pyspark=={runtime.versions()['spark']}" in req


def test_every_profile_of_the_manifest_has_a_folder_and_is_resolved_by_setup() -> None:
    assert set(runtime.profiles()) == set(runtime.PROFILE_DIRS)
    for profile in set(runtime.profiles()) - runtime.ON_DEMAND:
        assert runtime.is_current(profile), f"{profile}: run make setup"
        assert runtime.jars(profile)


def test_resolved_jars_carry_the_pinned_versions() -> None:
    pins = runtime.versions()
    names = {j.name for p in set(runtime.profiles()) - runtime.ON_DEMAND for j in runtime.jars(p)}
    assert f"iceberg-spark-runtime-4.1_2.13-{pins['iceberg']}.jar" in names
    assert f"iceberg-aws-bundle-{pins['iceberg']}.jar" in names
    assert f"spark-sql-kafka-0-10_2.13-{pins['spark-sql-kafka']}.jar" in names
    assert f"aws-msk-iam-auth-{pins['aws-msk-iam-auth']}.jar" in names
    assert f"sts-{pins['glue-aws-sdk']}.jar" in names
    assert f"kafka_2.13-{pins['kafka']}.jar" in names
    assert f"connect-runtime-{pins['kafka']}.jar" in names
    assert f"debezium-connector-mysql-{pins['debezium-mysql']}.jar" in names
    assert f"debezium-connector-postgres-{pins['debezium-postgres']}.jar" in names


def test_the_glue_job_ships_the_msk_iam_client_alone_and_uses_glues_own_sdk() -> None:
    # Glue 6.0 ships the AWS SDK for Java v2, Jackson and SLF4J: a second copy would clash with them.
    names = [j.name for j in runtime.jars("glue-extra-jars")]
    assert names == [f"aws-msk-iam-auth-{runtime.versions()['aws-msk-iam-auth']}.jar"]


def test_the_avro_wire_format_gets_the_registry_converter_and_spark_avro_at_glues_spark() -> None:
    pins = runtime.versions()
    assert pins["spark-avro"] == pins["spark"]
    assert [j.name for j in runtime.jars("glue-avro-jars")] == [f"spark-avro_2.13-{pins['spark']}.jar"]
    converter = f"schema-registry-kafkaconnect-converter-{pins['glue-schema-registry']}.jar"
    assert [j.name for j in runtime.jars("glue-schema-registry")] == [converter]


def test_the_delta_profile_is_glue_6s_delta_lake_alone_and_leaves_scala_and_antlr_to_spark() -> None:
    # Glue 6.0's `--datalake-formats delta` is Delta Lake 4.2.0 with the Delta Kernel modules it calls;
    # pyspark's jars already hold the Scala library, ANTLR, Hadoop, Parquet, Jackson and the rest Delta
    # depends on (a second copy, at another version, would shadow Spark's).
    names = [j.name for j in runtime.jars("delta")]
    assert names == [
        "delta-kernel-api-4.2.0.jar",
        "delta-kernel-defaults-4.2.0.jar",
        "delta-kernel-unitycatalog-4.2.0.jar",
        "delta-spark_2.13-4.2.0.jar",
        "delta-storage-4.2.0.jar",
        "unitycatalog-client-0.4.1.jar",
    ]


def test_the_hudi_profile_is_glue_5s_hudi_bundle_for_spark_3_5_alone() -> None:
    # Glue 5.0's `--datalake-formats hudi` is Hudi 0.15.0; the bundle shades its dependencies, and
    # the one its pom adds (hive-storage-api) is pyspark's own.
    assert [j.name for j in runtime.jars("hudi")] == ["hudi-spark3.5-bundle_2.12-0.15.0.jar"]


def test_connector_plugins_leave_the_kafka_api_to_the_connect_worker() -> None:
    # A plugin carrying its own kafka-clients/connect-api would shadow the worker's classes.
    for profile in ("debezium-mysql", "debezium-postgres"):
        names = [j.name for j in runtime.jars(profile)]
        assert not [n for n in names if n.startswith(("kafka-clients", "connect-api", "slf4j"))], names


@pytest.fixture
def copied_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A private .local holding a copy of the small glue-extra-jars folder as setup left it."""
    profile = "glue-extra-jars"
    src = runtime.profile_dir(profile)
    monkeypatch.setenv("CDC_LOCAL_DIR", str(tmp_path / ".local"))
    shutil.copytree(src, runtime.profile_dir(profile))
    assert runtime.is_current(profile)
    return profile


def test_an_altered_jar_makes_the_resolution_stale(copied_profile: str) -> None:
    jar = runtime.jars(copied_profile)[0]
    jar.write_bytes(jar.read_bytes() + b"\0")
    assert not runtime.is_current(copied_profile)


def test_a_missing_jar_makes_the_resolution_stale(copied_profile: str) -> None:
    runtime.jars(copied_profile)[0].unlink()
    assert not runtime.is_current(copied_profile)


def test_unreachable_registry_gives_one_actionable_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A mirror on a closed loopback port and an empty local repository: Maven must download and cannot.
    settings = tmp_path / "settings.xml"
    settings.write_text(
        "<settings><mirrors><mirror><id>closed</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:9/maven2</url></mirror></mirrors></settings>"
    )
    monkeypatch.setenv("CDC_LOCAL_DIR", str(tmp_path / ".local"))
    monkeypatch.setenv("CDC_MAVEN_SETTINGS", str(settings))
    with pytest.raises(SystemExit) as exc:
        runtime.resolve("glue-extra-jars", quiet=True)
    message = str(exc.value)
    assert "could not download" in message and "make setup" in message, message
    assert not runtime.profile_dir("glue-extra-jars").exists()  # nothing half-written


def test_cli_rejects_an_unknown_command_with_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cdctools" / "pinned_jars.py"), "resolv"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "unknown command" in proc.stderr


def test_setup_resolves_every_profile_but_the_benchmark_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[str] = []
    monkeypatch.setattr(runtime, "resolve", lambda profile, quiet=False: resolved.append(profile))
    assert runtime.main(["resolve"]) == 0
    assert resolved and not set(resolved) & runtime.ON_DEMAND
    assert set(resolved) | runtime.ON_DEMAND == set(runtime.profiles())
    assert {"peer-flink", "peer-iceberg-sink"} <= set(runtime.profiles())


def test_editing_another_profile_leaves_a_resolution_current_and_editing_its_own_does_not(
    copied_profile: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pom = tmp_path / "pom.xml"
    text = runtime.POM.read_text()
    monkeypatch.setattr(runtime, "POM", pom)
    other = text.replace("<artifactId>flink-sql-gateway</artifactId>", "<artifactId>flink-sql-client</artifactId>")
    own = text.replace("<artifactId>aws-msk-iam-auth</artifactId>", "<artifactId>aws-msk-iam-auth-x</artifactId>")
    assert other != text and own != text
    pom.write_text(other)
    assert runtime.is_current(copied_profile)
    pom.write_text(own)
    assert not runtime.is_current(copied_profile)
