"""The runtime manifest (pom.xml): its pinned versions, and its profiles resolved with Maven into .local/.

    python3 scripts/cdctools/pinned_jars.py resolve [PROFILE ...]   # resolve (all but the peers' by default); idempotent
    python3 scripts/cdctools/pinned_jars.py versions                # the pinned versions, as JSON
    python3 scripts/cdctools/pinned_jars.py jars PROFILE            # the resolved jars of one profile, one per line

CDC_MAVEN_SETTINGS: a Maven settings.xml to use (a mirror of Maven Central, a proxy).
Standard library only: scripts/setup-local runs it before the virtualenv exists.

Maven runs with a strict checksum policy (-C): a jar whose SHA-1 differs from the registry's is refused.
After a resolution the folder's SHA-256 sums are recorded with the pom's hash; a later run re-checks
them and calls Maven again only when the part of the pom that decides the profile changed (its own <profile>, the
<properties>, <build>) or a file is missing or altered.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
CENTRAL = "https://repo.maven.apache.org/maven2"


def local_dir() -> Path:
    return Path(os.environ.get("CDC_LOCAL_DIR", ROOT / ".local")).resolve()


# profile -> folder under .local it resolves into
PROFILE_DIRS: dict[str, str] = {
    "spark": "jars/spark",
    "glue-extra-jars": "jars/glue-extra",
    "glue-avro-jars": "jars/glue-avro",
    "delta": "jars/delta",
    "hudi": "jars/hudi",
    # Glue 5.0's runtime, which table format hudi stays on (local/session.py runs it beside Glue 6.0's)
    "glue5-spark": "jars/glue5/spark",
    "glue5-avro-jars": "jars/glue5/glue-avro",
    "glue-aws-sdk": "jars/glue-aws-sdk",
    "kafka": "kafka/libs",
    "debezium-mysql": "connect/plugins/debezium-connector-mysql",
    "debezium-postgres": "connect/plugins/debezium-connector-postgres",
    # Debezium 2.7 for Java 11 workers: a plugin.path of its own, the same folder names inside
    "debezium-mysql-java11": "connect/plugins-java11/debezium-connector-mysql",
    "debezium-postgres-java11": "connect/plugins-java11/debezium-connector-postgres",
    # not a plugin of its own: the local stack and the MSK Connect zip put it in the connector's plugin
    "glue-schema-registry": "connect/converters/glue-schema-registry",
    # the peers of `bench --peers`, outside connect/plugins so that the stack's Connect does
    # not load the sink unless the benchmark adds that folder to its plugin.path
    "peer-flink": "peers/flink/jars",
    "peer-iceberg-sink": "peers/connect-plugins/iceberg-kafka-connect",
}
# Resolved only on demand (by the peers' run), never by `resolve` without names (make setup).
ON_DEMAND = frozenset({"peer-flink", "peer-iceberg-sink"})


# The Glue Schema Registry's converter declares no service manifest, and a Kafka Connect worker that
# discovers plugins by theirs (plugin.discovery=service_load, the local stack's) does not find it: the
# connector's plugin carries this jar too, the manifest Kafka's `connect-plugin-path sync-manifests`
# would write for it.
CONVERTER_CLASS = "com.amazonaws.services.schemaregistry.kafkaconnect.AWSKafkaAvroConverter"
CONVERTER_MANIFEST_JAR = "glue-schema-registry-converter-manifest.jar"


def converter_manifest_jar() -> bytes:
    """The manifest jar's bytes: the same for every build (fixed timestamp and permissions)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        info = zipfile.ZipInfo("META-INF/services/org.apache.kafka.connect.storage.Converter", (1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, CONVERTER_CLASS + "\n")
    return buf.getvalue()


def versions(pom: Path = POM) -> dict[str, str]:
    """The <properties> of the manifest whose name ends in .version (e.g. iceberg.version -> iceberg),
    the project's and then each profile's own (a profile that pins its version itself)."""
    root = ElementTree.parse(pom).getroot()
    blocks = [root.find("m:properties", _NS), *root.findall("m:profiles/m:profile/m:properties", _NS)]
    out: dict[str, str] = {}
    for el in (el for props in blocks if props is not None for el in props):
        tag = el.tag.split("}", 1)[-1]
        if tag.endswith(".version") and el.text:
            out.setdefault(tag.removesuffix(".version"), el.text.strip())
    return out


def dependency_plugin(pom: Path = POM) -> str:
    """The maven-dependency-plugin version pinned in the manifest's <build> (called by its full name so
    that an unreachable registry shows as a download failure, not as an unknown plugin prefix)."""
    for plugin in ElementTree.parse(pom).getroot().findall("m:build/m:plugins/m:plugin", _NS):
        if plugin.findtext("m:artifactId", namespaces=_NS) == "maven-dependency-plugin":
            return plugin.findtext("m:version", namespaces=_NS) or ""
    raise SystemExit("runtime: pom.xml pins no maven-dependency-plugin in <build>")


def profiles(pom: Path = POM) -> list[str]:
    root = ElementTree.parse(pom).getroot()
    return [p.findtext("m:id", namespaces=_NS) or "" for p in root.findall("m:profiles/m:profile", _NS)]


def profile_dir(profile: str) -> Path:
    if profile not in PROFILE_DIRS:
        raise SystemExit(f"runtime: unknown profile {profile!r}; the manifest's profiles are {sorted(PROFILE_DIRS)}")
    return local_dir() / PROFILE_DIRS[profile]


def jars(profile: str) -> list[Path]:
    return sorted(profile_dir(profile).glob("*.jar"))


def _sums(folder: Path) -> str:
    lines = []
    for jar in sorted(folder.glob("*.jar")):
        lines.append(f"{hashlib.sha256(jar.read_bytes()).hexdigest()}  {jar.name}")
    return "\n".join(lines) + "\n"


def _stamp(profile: str) -> str:
    """A hash of what decides the profile's jars: its own <profile>, the <properties> and <build>. Editing
    another profile (the peers', say) leaves this one's resolution current."""
    root = ElementTree.parse(POM).getroot()
    parts = [root.find("m:properties", _NS), root.find("m:build", _NS)]
    parts += [p for p in root.findall("m:profiles/m:profile", _NS) if p.findtext("m:id", namespaces=_NS) == profile]
    text = b"".join(ElementTree.tostring(el) for el in parts if el is not None)
    return hashlib.sha256(text + profile.encode()).hexdigest()


def is_current(profile: str) -> bool:
    """True when the folder holds exactly what the current pom resolved to, unaltered."""
    folder = profile_dir(profile)
    stamp, sums = folder / ".pom.sha256", folder / "SHA256SUMS"
    if not (stamp.is_file() and sums.is_file()) or stamp.read_text().strip() != _stamp(profile):
        return False
    return sums.read_text() == _sums(folder)


def _maven_error(out: str) -> str:
    """One actionable line out of Maven's output."""
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)
    text = out.lower()
    if any(
        s in text
        for s in (
            "unknownhost",
            "could not transfer",
            "connect timed out",
            "connection refused",
            "network is unreachable",
            "no route to host",
            "plugin could not be resolved",
        )
    ):
        return (
            f"Maven could not download from {CENTRAL} (registry unreachable?). Check the network or a proxy "
            "(MAVEN_OPTS='-Dhttps.proxyHost=... -Dhttps.proxyPort=...'), then run `make setup` again."
        )
    if "checksum" in text:
        return "Maven refused a jar whose checksum differs from the registry's; delete .local/m2 and run `make setup` again."
    for line in out.splitlines():
        if "[ERROR]" in line and line.strip() != "[ERROR]":
            return line.replace("[ERROR]", "").strip()
    return "Maven failed (output above)"


def resolve(profile: str, quiet: bool = False) -> Path:
    folder = profile_dir(profile)
    if is_current(profile):
        return folder
    mvn = shutil.which("mvn")
    if not mvn:
        raise SystemExit("runtime: `mvn` not found; scripts/setup-local installs Debian's maven package")
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    repo = local_dir() / "m2"
    cmd = [
        mvn, "-B", "-q", "-C", "-f", str(POM), f"-Dmaven.repo.local={repo}", "-P", profile,
        f"org.apache.maven.plugins:maven-dependency-plugin:{dependency_plugin()}:copy-dependencies", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime",
    ]  # fmt: skip
    if settings := os.environ.get("CDC_MAVEN_SETTINGS"):  # e.g. a settings.xml naming a company mirror
        cmd[1:1] = ["-s", settings]
    if not quiet:
        print(
            f"[setup] resolving {profile} from Maven Central into {folder.relative_to(local_dir().parent)}", flush=True
        )
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit(f"runtime: resolving profile {profile} failed: {_maven_error(proc.stdout + proc.stderr)}")
    if not any(tmp.glob("*.jar")):
        raise SystemExit(f"runtime: profile {profile} resolved to no jar")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(folder)
    (folder / "SHA256SUMS").write_text(_sums(folder))
    (folder / ".pom.sha256").write_text(_stamp(profile) + "\n")
    return folder


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "resolve":
        for p in rest or [p for p in profiles() if p not in ON_DEMAND]:
            resolve(p)
        return 0
    if cmd == "versions":
        print(json.dumps(versions(), indent=2))
        return 0
    if cmd == "jars" and len(rest) == 1:
        for j in jars(rest[0]):
            print(j)
        return 0
    print(
        f"runtime: unknown command {' '.join(argv)!r} (resolve [PROFILE...] | versions | jars PROFILE)", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
