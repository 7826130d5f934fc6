"""Installs the peers into .local/peers, only when the peers' run (or their smoke test) asks:

* Flink 1.20: the jars of PyPI's `apache-flink-libraries` (requirements-peers.txt, hash-checked by
  pip) unpacked into .local/peers/flink/dist, plus pom.xml's profile `peer-flink` (mysql-cdc, the
  MySQL JDBC driver, Iceberg's Flink runtime, Hadoop's client, the SQL gateway);
* the Apache Iceberg Kafka Connect sink: pom.xml's profile `peer-iceberg-sink`, a Connect plugin
  folder under .local/peers/connect-plugins.

Idempotent: a second call checks stamps and returns. `python3 scripts/cdcbench/peers/install.py`
installs both and prints what it took."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
from cdctools import pinned_jars as runtime  # noqa: E402

REQUIREMENTS = ROOT / "requirements-peers.txt"
FLINK_PROFILE = "peer-flink"
SINK_PROFILE = "peer-iceberg-sink"
# From the sdist's deps/: lib/ is a Flink distribution's lib/; of opt/ the SQL client needs itself and
# flink-python (its option parser loads a class of it, even for SQL files).
_KEEP = re.compile(r"^[^/]+/deps/(lib/[^/]+\.jar|opt/flink-(sql-client|python)-[^/]+\.jar)$")


class InstallError(RuntimeError):
    pass


@dataclass(frozen=True)
class FlinkInstall:
    dist: Path  # lib/ and opt/ of the Flink distribution
    jars: Path  # the connector jars of pom.xml's peer-flink profile

    def classpath(self) -> str:
        jars = [*sorted((self.dist / "lib").glob("*.jar")), *sorted((self.dist / "opt").glob("*.jar"))]
        return ":".join(str(j) for j in [*jars, *runtime.jars(FLINK_PROFILE)])


def peers_dir() -> Path:
    return runtime.local_dir() / "peers"


def _flink_pin() -> str:
    for line in REQUIREMENTS.read_text().splitlines():
        if line.startswith("apache-flink-libraries=="):
            return line.split()[0]
    raise InstallError(f"{REQUIREMENTS} pins no apache-flink-libraries")


def flink_dist() -> Path:
    return peers_dir() / "flink" / "dist"


def _install_flink_dist(python: str) -> None:
    pin = _flink_pin()
    dist = flink_dist()
    stamp = dist / ".installed"
    if stamp.is_file() and stamp.read_text().strip() == pin and any((dist / "lib").glob("flink-dist-*.jar")):
        return
    version = pin.split("==", 1)[1]
    if version != runtime.versions()["flink"]:
        raise InstallError(f"{REQUIREMENTS} pins {pin} but pom.xml's flink.version is {runtime.versions()['flink']}")
    print(f"[peers] downloading {pin} from PyPI (~230 MB)", flush=True)
    with tempfile.TemporaryDirectory(dir=peers_dir()) as tmp:
        cmd = [python, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--require-hashes",
               "--no-cache-dir", "-r", str(REQUIREMENTS), "-d", tmp, "-q"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise InstallError(f"pip could not download {pin} from PyPI:\n{proc.stderr[-2000:]}")
        (sdist,) = Path(tmp).glob("apache[-_]flink[-_]libraries-*.tar.gz")
        staged = Path(tmp) / "dist"
        with tarfile.open(sdist) as tar:
            for m in tar.getmembers():
                if m.isfile() and _KEEP.match(m.name):
                    m.name = m.name.split("/deps/", 1)[1]
                    tar.extract(m, staged, filter="data")
        if not any((staged / "lib").glob("flink-dist-*.jar")):
            raise InstallError(f"{sdist.name} holds no deps/lib/flink-dist jar")
        shutil.rmtree(dist, ignore_errors=True)
        dist.parent.mkdir(parents=True, exist_ok=True)
        staged.rename(dist)
    stamp.write_text(pin + "\n")


def install_flink(python: str = sys.executable) -> FlinkInstall:
    peers_dir().mkdir(parents=True, exist_ok=True)
    _install_flink_dist(python)
    runtime.resolve(FLINK_PROFILE)
    return FlinkInstall(flink_dist(), runtime.profile_dir(FLINK_PROFILE))


def install_iceberg_sink() -> Path:
    """The plugin folder; its parent is the plugin.path entry for Kafka Connect."""
    return runtime.resolve(SINK_PROFILE)


def main() -> int:
    for name, step in (("Flink", install_flink), ("Iceberg Kafka Connect sink", install_iceberg_sink)):
        t0 = time.monotonic()
        try:
            step()
        except (InstallError, SystemExit) as e:
            print(f"[peers] installing {name} failed: {e}", file=sys.stderr)
            return 1
        print(f"[peers] {name}: ready in {time.monotonic() - t0:.1f}s", flush=True)
    size = sum(f.stat().st_size for f in peers_dir().rglob("*") if f.is_file())
    print(f"[peers] {peers_dir()}: {size / (1 << 20):,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
