"""Build the deploy artifacts offline, reproducibly (same input bytes -> same zip bytes -> same S3 key).

- The Debezium MySQL (or, for SourceEngine=postgres, PostgreSQL) plugin zip for MSK Connect: exactly the
  jars of the runtime manifest's (pom.xml) profile debezium-mysql / debezium-postgres, the folder the
  local Kafka Connect loads as its plugin (scripts/cdctools/pinned_jars.py resolves it with Maven when missing).
- The Glue job's extra jars: the jars of the manifest's glue-extra-jars profile (the MSK IAM client).
- cdclake.zip (glue_scripts/cdclake/ as a package, for --extra-py-files).
- The custom-resource Lambda zips: each function's folder, the shared cloudformation/lambda/cfn_reply.py,
  and the wheels its requirements.txt pins (for the Lambda runtime's Python and architecture), unpacked.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cdctools import pinned_jars as runtime  # the manifest's versions and resolved folders

ROOT = Path(__file__).resolve().parents[2]

# SourceEngine -> (manifest profile, connector name)
PLUGINS = {
    "mysql": ("debezium-mysql", "MySQL"),
    "postgres": ("debezium-postgres", "PostgreSQL"),
}
# The template's DebeziumBuild -> the suffix of the engine's manifest profile: java11 is Debezium 2.7, the
# last line that runs on Java 11 (docs/DEPLOY.md, "The connector's Java").
DEBEZIUM_BUILDS = {"java17": "", "java11": "-java11"}
GLUE_EXTRA_JARS_PROFILE = "glue-extra-jars"
GLUE_AVRO_JARS_PROFILE = "glue-avro-jars"  # spark-avro: the job's from_avro (wire format avro)
GLUE5_AVRO_JARS_PROFILE = "glue5-avro-jars"  # the same for a job on GlueVersion 5.0 (Spark 3.5)
# The Glue Schema Registry's Avro converter joins every connector plugin: the wire format (the template's
# WireFormat) is then a connector setting, never another plugin (the local stack loads it alike).
CONVERTER_PROFILE = "glue-schema-registry"
# Fixed timestamp and modes: zip bytes depend only on file names and contents.
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Built:
    path: Path
    sha256: str

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_zip(out: Path, entries: Iterable[tuple[str, bytes]]) -> Built:
    """A deterministic zip: sorted entries, fixed timestamps and permissions."""
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    out.write_bytes(buf.getvalue())
    return Built(out, sha256_file(out))


def package_files(src: Path, arc_prefix: str) -> list[tuple[str, bytes]]:
    """Files of a source directory (no caches), named arc_prefix/relative/path."""
    entries = []
    for path in sorted(src.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        entries.append((f"{arc_prefix}/{path.relative_to(src).as_posix()}".lstrip("/"), path.read_bytes()))
    return entries


# ---------------------------------------------------------------- jars of the runtime manifest
def profile_jars(profile: str) -> list[Path]:
    """The jars of one manifest profile, resolved into .local/ first if missing or stale."""
    runtime.resolve(profile, quiet=True)
    jars = runtime.jars(profile)
    if not jars:
        raise FileNotFoundError(
            f"profile {profile} of {runtime.POM} resolved to no jar in {runtime.profile_dir(profile)}"
        )
    return jars


def plugin_folder(engine: str) -> str:
    """The plugin's folder name: the same in the zip as under .local/connect/plugins/."""
    return runtime.profile_dir(PLUGINS[engine][0]).name


def cached_zip(out: Path, entries: list[tuple[str, bytes]], label: str) -> Built:
    """write_zip's bytes for `entries`, kept under .local/plugin-zips/ by a hash of the entries: deflating
    a plugin's jars (the converter's alone is 57 MB) takes seconds, and build-artifacts builds two plugins
    on every run. One file per `label` (engine and build) is kept; a new content replaces it."""
    digest = hashlib.sha256()
    for name, data in sorted(entries):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    cache = runtime.local_dir() / "plugin-zips"
    cached = cache / f"{label}-{digest.hexdigest()[:24]}.zip"
    if not cached.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = cache / f".{cached.name}.{os.getpid()}.tmp"
        write_zip(tmp, entries)
        os.replace(tmp, cached)  # atomic: parallel builds never read half a zip
        for old in cache.glob(f"{label}-*.zip"):
            if old != cached:
                old.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out)
    return Built(out, sha256_file(out))


def build_plugin_zip(out: Path, engine: str = "mysql", build: str = "java17", cache: bool = True) -> Built:
    """The connector plugin of one source engine (mysql or postgres) in one Debezium build (java17 or
    java11): every jar of its manifest profile and the Glue Schema Registry's converter, in one folder,
    as the local Kafka Connect loads it. `cache` False: zipped afresh, never from .local/plugin-zips/."""
    if engine not in PLUGINS:
        raise ValueError(f"unknown source engine {engine!r}; one of {sorted(PLUGINS)}")
    if build not in DEBEZIUM_BUILDS:
        raise ValueError(f"unknown Debezium build {build!r}; one of {sorted(DEBEZIUM_BUILDS)}")
    profile, label = PLUGINS[engine][0] + DEBEZIUM_BUILDS[build], PLUGINS[engine][1]
    folder = plugin_folder(engine)
    jars = profile_jars(profile) + profile_jars(CONVERTER_PROFILE)
    entries = [(f"{folder}/{jar.name}", jar.read_bytes()) for jar in jars]
    entries.append((f"{folder}/{runtime.CONVERTER_MANIFEST_JAR}", runtime.converter_manifest_jar()))
    versions = runtime.versions()
    notes = (
        f"Debezium {label} connector {versions[profile]} for MSK Connect: the jars of profile "
        f"{profile} of pom.xml, and the AWS Glue Schema Registry's Avro converter "
        f"{versions[CONVERTER_PROFILE]} (profile {CONVERTER_PROFILE}), resolved from Maven Central by "
        "scripts/cdctools/pinned_jars.py.\n"
        "Built by build-artifacts. Kafka Connect provides kafka-clients, connect-*, slf4j.\n"
    )
    entries.append((f"{folder}/README.txt", notes.encode()))
    return cached_zip(out, entries, f"{engine}-{build}") if cache else write_zip(out, entries)


def glue_extra_jars(glue_version: str = "6.0") -> list[Path]:
    """The jars the Glue streaming job gets with --extra-jars on `glue_version` (profiles glue-extra-jars
    and glue-avro-jars, or glue5-avro-jars on 5.0)."""
    avro = GLUE5_AVRO_JARS_PROFILE if glue_version == "5.0" else GLUE_AVRO_JARS_PROFILE
    return profile_jars(GLUE_EXTRA_JARS_PROFILE) + profile_jars(avro)


def build_cdclake_zip(out: Path, package_dir: Path = ROOT / "glue_scripts" / "cdclake") -> Built:
    if not any(package_dir.glob("*.py")):
        raise FileNotFoundError(f"{package_dir} has no Python files")
    entries = package_files(package_dir, package_dir.name)
    init = f"{package_dir.name}/__init__.py"
    if init not in {name for name, _ in entries}:
        # zipimport does not find namespace packages: `import cdclake` needs a regular package.
        entries.append((init, b""))
    return write_zip(out, entries)


# The Lambda runtime the custom-resource functions run on (the template's Runtime, Architectures): the
# wheels of a function's requirements.txt are fetched for it.
LAMBDA_PYTHON = "3.12"
LAMBDA_ARCHITECTURE = "x86_64"
LAMBDA_PLATFORM = "manylinux_2_28_x86_64"  # Amazon Linux 2023 (glibc 2.34), the python3.12 runtime's OS
SHARED_LAMBDA_CODE = ROOT / "cloudformation" / "lambda" / "cfn_reply.py"


def lambda_wheel_dir() -> Path:
    return runtime.local_dir() / "lambda-wheels" / f"cp{LAMBDA_PYTHON.replace('.', '')}-{LAMBDA_PLATFORM}"


def lambda_wheels(requirements: Path) -> list[Path]:
    """The wheels of a function's pinned requirements for the Lambda runtime, downloaded from PyPI by
    pip into .local/lambda-wheels/ once (binary wheels only, no dependencies: the runtime provides boto3)."""
    pins = [line.split("#", 1)[0].strip() for line in requirements.read_text().splitlines()]
    pins = [pin for pin in pins if pin]
    if not all("==" in pin for pin in pins):
        raise ValueError(f"{requirements}: every requirement must be pinned with ==: {pins}")
    dest = lambda_wheel_dir()

    def find() -> list[Path]:
        found = []
        for pin in pins:
            name, version = (part.strip() for part in pin.split("=="))
            stem = f"{name.replace('-', '_').lower()}-{version}-"
            found += [w for w in dest.glob("*.whl") if w.name.lower().startswith(stem)][:1]
        return found

    dest.mkdir(parents=True, exist_ok=True)
    # One download at a time (test workers build the templates in parallel): no half-written wheel is read.
    with (dest / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if len(wheels := find()) == len(pins):
            return wheels
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
        cmd += ["--only-binary=:all:", "--platform", LAMBDA_PLATFORM, "--python-version", LAMBDA_PYTHON]
        cmd += ["--implementation", "cp", "--dest", str(dest), *pins]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0 or len(wheels := find()) != len(pins):
            raise RuntimeError(f"pip download of {requirements} for the Lambda runtime failed:\n{result.stderr}")
        return wheels


def wheel_entries(wheel: Path) -> list[tuple[str, bytes]]:
    """A wheel's files as `pip install --target` lays them out: packages and their .dist-info at the
    root (the signer reads its own version from its metadata)."""
    with zipfile.ZipFile(wheel) as zf:
        return [(name, zf.read(name)) for name in zf.namelist() if not name.endswith("/")]


def build_lambda_zip(out: Path, src: Path) -> Built:
    """Handler at the zip root (Handler: index.handler), the shared reply module beside it, and the
    unpacked wheels of src/requirements.txt when there is one."""
    entries = [e for e in package_files(src, "") if e[0] != "requirements.txt"]
    entries.append((SHARED_LAMBDA_CODE.name, SHARED_LAMBDA_CODE.read_bytes()))
    requirements = src / "requirements.txt"
    if requirements.is_file():
        for wheel in lambda_wheels(requirements):
            entries += wheel_entries(wheel)
    return write_zip(out, entries)
