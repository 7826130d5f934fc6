"""The Glue job's MSK IAM wiring: the client signs with Glue 5.0's AWS SDK, and reaches a real broker.

First, on Glue 5.0's class path (Spark's jars, its Kafka client, the AWS SDK for Java v2 at the version
Glue 5.0 ships, from the manifest's glue-aws-sdk profile, and the jar the job ships): no class of the
SDK or the IAM client is in two jars, and the IAM login module and callback handler, driven as
Kafka's client drives them, produce an authentication payload whose SigV4 signature, recomputed here
from the environment's secret key, is right. A NoSuchMethodError or a missing class fails it.

Then, against a real Apache Kafka broker (the manifest's Kafka, KRaft).

The broker has a SASL_SSL listener that offers PLAIN only, so it answers the SASL handshake and
refuses AWS_MSK_IAM, as any broker but MSK would. Spark's Kafka source gets exactly the options the
job builds for `--kafka_auth iam` (cdclake.jobs.sources.kafka_options) plus a truststore for the broker's
self-signed certificate. With the glue-extra-jars jar on the class path (as --extra-jars gives the
Glue job) the read gets as far as the SASL handshake and is refused there; without it the same read
cannot even load the IAM classes.

Ports 29092 (SASL_SSL) and 29093 (KRaft controller), loopback only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.parse
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdclake.common.settings import build_settings
from cdclake.jobs.sources import kafka_options
from processes import free_port, port_open, stop_process

ROOT = Path(__file__).resolve().parents[2]
KAFKA_LIBS = ROOT / ".local" / "kafka" / "libs"
JARS = ROOT / ".local" / "jars"
STORE_PASSWORD = "test-store-pw"
CLASS_NOT_FOUND = ("ClassNotFoundException", "NoClassDefFoundError", "could not be found", "No LoginModule found")


BROKER_PORT, CONTROLLER_PORT = free_port(), free_port()


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
    if port_open(BROKER_PORT) or port_open(CONTROLLER_PORT):
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
        while not port_open(BROKER_PORT):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"broker did not start:\n{(d / 'broker.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{BROKER_PORT}"
    finally:
        stop_process(proc, grace=30)
        log.close()


# One Spark micro-batch in its own Python (and so its own JVM and class path): the job's IAM options from
# cdclake, the truststore added, the local session of cdclake.local.session (its jars: CDC_JARS_DIR).
_READ = r"""
import json, os, sys
from cdclake.local.session import local_session
from cdclake.common.settings import build_settings
from cdclake.jobs.sources import kafka_options

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
        "PYTHONPATH": str(ROOT / "glue_scripts"),
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
    assert list((JARS / "glue-extra").glob("aws-msk-iam-auth-*.jar")), "run make setup (glue-extra-jars)"
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


# ---------------------------------------------------------------- the shipped jar on Glue 5.0's AWS SDK
PYSPARK_JARS = Path(__import__("pyspark").__file__).parent / "jars"
HOST = "boot-abcd1234.c2.kafka-serverless.eu-west-1.amazonaws.com"
ACCESS_KEY, SECRET_KEY = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def glue_classpath() -> list[Path]:
    """Glue 5.0's class path as far as the IAM client sees it: Spark's own jars (Jackson 2.15.2, SLF4J,
    Apache HttpClient), the Kafka client of Spark's Kafka source, the SDK at Glue's version, and the
    jars the job ships with --extra-jars. Not iceberg-aws-bundle: it carries an SDK of its own version."""
    kafka = sorted((JARS / "spark").glob("kafka-clients-*.jar"))
    sdk, shipped = sorted((JARS / "glue-aws-sdk").glob("*.jar")), sorted((JARS / "glue-extra").glob("*.jar"))
    assert kafka and sdk and shipped, "run make setup (profiles spark, glue-aws-sdk, glue-extra-jars)"
    return [*sorted(PYSPARK_JARS.glob("*.jar")), *kafka, *sdk, *shipped]


def classes_in_more_than_one_jar(jars: list[Path], package: str = "software/amazon/") -> dict[str, list[str]]:
    seen: dict[str, list[str]] = {}
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                if name.startswith(package) and name.endswith(".class"):
                    seen.setdefault(name, []).append(jar.name)
    return {k: v for k, v in seen.items() if len(v) > 1}


def sigv4_presign_signature(payload: dict[str, str], secret_key: str) -> str:
    """The SigV4 query signature of GET https://<host>/?Action=<action> with the payload's date,
    credential scope and expiry: what MSK checks, computed here without the SDK."""
    query = {
        "Action": payload["action"],
        "X-Amz-Algorithm": payload["x-amz-algorithm"],
        "X-Amz-Credential": payload["x-amz-credential"],
        "X-Amz-Date": payload["x-amz-date"],
        "X-Amz-Expires": payload["x-amz-expires"],
        "X-Amz-SignedHeaders": payload["x-amz-signedheaders"],
    }
    quote = lambda v: urllib.parse.quote(v, safe="-_.~")  # noqa: E731
    canonical = "\n".join(
        [
            "GET",
            "/",
            "&".join(f"{quote(k)}={quote(v)}" for k, v in sorted(query.items())),
            f"host:{payload['host']}\n",
            "host",
            hashlib.sha256(b"").hexdigest(),
        ]
    )
    scope = payload["x-amz-credential"].split("/", 1)[1]
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", payload["x-amz-date"], scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + secret_key).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_the_shipped_jar_puts_no_second_copy_of_an_aws_sdk_class_on_glues_class_path() -> None:
    twice = classes_in_more_than_one_jar(glue_classpath())
    assert not twice, f"{len(twice)} classes in two jars, e.g. {next(iter(twice.items()))}"


def test_the_iam_callback_signs_an_authentication_payload_on_glue_5s_aws_sdk(tmp_path: Path) -> None:
    classpath = ":".join(str(j) for j in glue_classpath())
    source = Path(__file__).parent / "java" / "SignIamPayload.java"
    jvm = os.environ.get("CDC_JVM_OPTIONS", "").split()  # the suite's cheaper JIT and collector (tests/conftest.py)
    javac = ["javac", *(f"-J{o}" for o in jvm), "-cp", classpath, "-d", str(tmp_path), str(source)]
    subprocess.run(javac, check=True, capture_output=True)
    s = build_settings(
        {
            "source": "kafka", "kafka_bootstrap_servers": f"{HOST}:9098", "kafka_topic_pattern": "salesdb\\..*",
            "kafka_auth": "iam", "catalog_type": "hadoop", "warehouse": str(tmp_path / "wh"),
            "checkpoint_location": str(tmp_path / "cp"), "dead_letter_path": str(tmp_path / "dl"),
        }
    )  # fmt: skip
    opts = kafka_options(s)  # the job's own SASL settings
    # Credentials from the environment only: nothing of this machine's AWS configuration.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AWS_ACCESS_KEY_ID": ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "eu-west-1", "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    proc = subprocess.run(
        ["java", *jvm, "-cp", f"{tmp_path}:{classpath}", "SignIamPayload", opts["kafka.sasl.jaas.config"],
         opts["kafka.sasl.mechanism"], opts["kafka.sasl.client.callback.handler.class"], HOST],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PAYLOAD ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    payload = json.loads(lines[0].removeprefix("PAYLOAD "))
    assert payload["action"] == "kafka-cluster:Connect" and payload["host"] == HOST
    assert re.fullmatch(rf"{ACCESS_KEY}/\d{{8}}/eu-west-1/kafka-cluster/aws4_request", payload["x-amz-credential"])
    sdk = runtime_versions()["glue-aws-sdk"]
    assert f"aws-sdk-java/{sdk}" in payload["user-agent"], payload["user-agent"]  # Glue's SDK signed it
    assert payload["x-amz-signature"] == sigv4_presign_signature(payload, SECRET_KEY)


def runtime_versions() -> dict[str, str]:
    from cdctools import pinned_jars as runtime

    return runtime.versions()
