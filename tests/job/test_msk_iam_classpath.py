"""The Glue job's MSK IAM wiring, against a real Apache Kafka broker (the manifest's Kafka, KRaft).

The broker has a SASL_SSL listener that offers PLAIN only, so it answers the SASL handshake and
refuses AWS_MSK_IAM, as any broker but MSK would. Spark's Kafka source gets exactly the options the
job builds for `--kafka_auth iam` (cdclake.sources.kafka_options) plus a truststore for the broker's
self-signed certificate. With the glue-extra-jars jar on the class path (as --extra-jars gives the
Glue job) the read gets as far as the SASL handshake and is refused there; without it the same read
cannot even load the IAM classes.

Ports 29092 (SASL_SSL) and 29093 (KRaft controller), loopback only.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_LIBS = ROOT / ".local" / "kafka" / "libs"
JARS = ROOT / ".local" / "jars"
STORE_PASSWORD = "test-store-pw"
CLASS_NOT_FOUND = ("ClassNotFoundException", "NoClassDefFoundError", "could not be found", "No LoginModule found")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BROKER_PORT, CONTROLLER_PORT = _free_port(), _free_port()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    """A missing install step fails here instead of skipping quietly."""
    missing = [tool for tool in ("java", "keytool") if shutil.which(tool) is None]
    missing += [] if any(KAFKA_LIBS.glob("kafka_*.jar")) else [f"the manifest's Kafka in {KAFKA_LIBS}"]
    assert not missing, f"missing {', '.join(missing)}: run make setup"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A self-signed broker certificate for 127.0.0.1/localhost and a truststore holding it."""
    d = tmp_path_factory.mktemp("tls")
    keystore, cert, truststore = d / "broker.p12", d / "broker.crt", d / "trust.p12"
    common = ["-storetype", "PKCS12", "-storepass", STORE_PASSWORD, "-noprompt"]
    subprocess.run(
        ["keytool", "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
         "-dname", "CN=localhost", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-keystore", str(keystore),
         "-keypass", STORE_PASSWORD, *common],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["keytool", "-exportcert", "-alias", "broker", "-keystore", str(keystore), "-file", str(cert), *common],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["keytool", "-importcert", "-alias", "broker", "-file", str(cert), "-keystore", str(truststore), *common],
        check=True,
        capture_output=True,
    )
    return {"keystore": keystore, "truststore": truststore}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, tls: dict[str, Path]) -> Iterator[str]:
    """A single-node KRaft broker: SASL_SSL with PLAIN on 29092, the controller on 29093."""
    if _port_open(BROKER_PORT) or _port_open(CONTROLLER_PORT):
        pytest.fail(f"port {BROKER_PORT} or {CONTROLLER_PORT} is already in use")
    d = tmp_path_factory.mktemp("kafka")
    plain = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-pw" user_broker="broker-pw";'
    )
    props = d / "server.properties"
    props.write_text(
        textwrap.dedent(f"""\
        process.roles=broker,controller
        node.id=1
        controller.quorum.voters=1@127.0.0.1:{CONTROLLER_PORT}
        listeners=SASL_SSL://127.0.0.1:{BROKER_PORT},CONTROLLER://127.0.0.1:{CONTROLLER_PORT}
        advertised.listeners=SASL_SSL://127.0.0.1:{BROKER_PORT}
        listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
        controller.listener.names=CONTROLLER
        inter.broker.listener.name=SASL_SSL
        sasl.enabled.mechanisms=PLAIN
        sasl.mechanism.inter.broker.protocol=PLAIN
        listener.name.sasl_ssl.plain.sasl.jaas.config={plain}
        ssl.keystore.type=PKCS12
        ssl.keystore.location={tls["keystore"]}
        ssl.keystore.password={STORE_PASSWORD}
        ssl.key.password={STORE_PASSWORD}
        ssl.truststore.type=PKCS12
        ssl.truststore.location={tls["truststore"]}
        ssl.truststore.password={STORE_PASSWORD}
        ssl.endpoint.identification.algorithm=
        log.dirs={d / "data"}
        num.partitions=1
        offsets.topic.replication.factor=1
        transaction.state.log.replication.factor=1
        transaction.state.log.min.isr=1
        group.initial.rebalance.delay.ms=0
        """)
    )
    (d / "log4j.properties").write_text(
        "log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.stdout.layout.ConversionPattern=%d %p %c %m%n\n"
    )
    java = ["java", "-Xms128m", "-Xmx384m", f"-Dlog4j.configuration=file:{d / 'log4j.properties'}", "-cp",
            f"{KAFKA_LIBS}/*"]  # fmt: skip
    cluster_id = subprocess.run(
        [*java, "kafka.tools.StorageTool", "random-uuid"], check=True, capture_output=True, text=True
    ).stdout.split()[-1]
    subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
        check=True,
        capture_output=True,
    )
    log = (d / "broker.log").open("w")
    proc = subprocess.Popen([*java, "kafka.Kafka", str(props)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while not _port_open(BROKER_PORT):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"broker did not start:\n{(d / 'broker.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{BROKER_PORT}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


# One Spark micro-batch in its own Python (and so its own JVM and class path): the job's IAM options from
# cdclake, the truststore added, the local session of cdclake.session (its jars: CDC_JARS_DIR).
_READ = r"""
import json, os, sys
sys.path.insert(0, os.environ["GLUE_SCRIPTS"])
from cdclake.session import local_session
from cdclake.settings import build_settings
from cdclake.sources import kafka_options

s = build_settings({
    "source": "kafka", "kafka_bootstrap_servers": os.environ["BOOTSTRAP"], "kafka_topic_pattern": "salesdb\\..*",
    "kafka_auth": "iam", "catalog_type": "hadoop", "warehouse": os.environ["WORK"] + "/wh",
    "checkpoint_location": os.environ["WORK"] + "/cp", "dead_letter_path": os.environ["WORK"] + "/dl",
})
opts = kafka_options(s)
opts.update({
    "kafka.ssl.truststore.location": os.environ["TRUSTSTORE"], "kafka.ssl.truststore.password": os.environ["STOREPW"],
    "kafka.ssl.truststore.type": "PKCS12",
    "fetchOffset.numRetries": "1", "kafka.request.timeout.ms": "20000", "kafka.default.api.timeout.ms": "20000",
})
spark = local_session(s, app_name="msk-iam-classpath", master="local[1]")
outcome = {"options": {k: v for k, v in opts.items() if k.startswith("kafka.s")}}
try:
    q = (spark.readStream.format("kafka").options(**opts).load().writeStream.format("noop")
         .option("checkpointLocation", os.environ["WORK"] + "/cp").trigger(availableNow=True).start())
    q.awaitTermination(120)
    outcome["error"] = None if q.exception() is None else str(q.exception())
    q.stop()
except Exception as e:
    outcome["error"] = f"{type(e).__name__}: {e}"
print("OUTCOME " + json.dumps(outcome), flush=True)
spark.stop()
"""


def spark_read(broker: str, tls: dict[str, Path], work: Path, jars_dir: Path) -> dict[str, object]:
    env = {
        **os.environ,
        "GLUE_SCRIPTS": str(ROOT / "glue_scripts"),
        "BOOTSTRAP": broker,
        "WORK": str(work),
        "TRUSTSTORE": str(tls["truststore"]),
        "STOREPW": STORE_PASSWORD,
        "CDC_JARS_DIR": str(jars_dir),
        "CDC_SPARK_DRIVER_MEMORY": "768m",
    }
    proc = subprocess.run([sys.executable, "-c", _READ], env=env, capture_output=True, text=True, timeout=420)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("OUTCOME ")]
    assert lines, f"the read did not finish (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    outcome = json.loads(lines[-1].removeprefix("OUTCOME "))
    outcome["log"] = proc.stderr
    return outcome


def test_spark_kafka_source_with_the_jobs_iam_options_loads_the_msk_iam_classes_and_reaches_the_sasl_handshake(
    broker: str, tls: dict[str, Path], tmp_path: Path
) -> None:
    assert list((JARS / "glue-extra").glob("aws-msk-iam-auth-*-all.jar")), "run make setup (glue-extra-jars)"
    outcome = spark_read(broker, tls, tmp_path, JARS)
    # The job's own IAM options were used.
    assert outcome["options"]["kafka.sasl.mechanism"] == "AWS_MSK_IAM"  # type: ignore[index]
    assert outcome["options"]["kafka.security.protocol"] == "SASL_SSL"  # type: ignore[index]
    error = str(outcome["error"])
    # Refused at the handshake: the broker offers PLAIN, not AWS_MSK_IAM (TLS worked, the classes loaded).
    assert "UnsupportedSaslMechanismException" in error, error
    assert "'AWS_MSK_IAM' not enabled in the server" in error and "[PLAIN]" in error, error
    everything = error + str(outcome["log"])
    assert not any(marker in everything for marker in CLASS_NOT_FOUND), everything[-4000:]


def test_the_same_read_without_the_glue_extra_jar_cannot_load_the_msk_iam_classes(
    broker: str, tls: dict[str, Path], tmp_path: Path
) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark").symlink_to(JARS / "spark")  # Glue's runtime jars, no glue-extra/
    outcome = spark_read(broker, tls, tmp_path, jars)
    error = str(outcome["error"])
    assert any(marker in error for marker in CLASS_NOT_FOUND), error
    assert "software.amazon.msk.auth.iam" in error, error
    assert "UnsupportedSaslMechanismException" not in error
