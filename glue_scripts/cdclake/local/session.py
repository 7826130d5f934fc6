"""Local runs only (tests, the local stack, benchmarks): a SparkSession equivalent to the Glue job's,
with the jars `make setup` resolved into .local/jars. Glue builds its own session (glue_entry)."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from ..common.settings import Settings, TableFormat
from ..lake.catalog import catalog_conf
from ..lake.formats import DEFAULT, format_of, names

# Local runs only: a JSON object of Iceberg catalog properties added to the catalog, e.g. the
# endpoints of an S3 and Glue stand-in (tests/glue_catalog/ points the Glue catalog at moto with
# `glue.endpoint`, `s3.endpoint`, `s3.path-style-access`, `client.region`). The Glue entry scripts
# never read it.
CATALOG_PROPERTIES_ENV = "CDC_CATALOG_PROPERTIES"

# Local runs only: extra flags for the local Spark driver JVM (and the local stack's Kafka JVMs).
# The test suite sets C1-only JIT and the serial collector: its JVMs live for seconds to minutes,
# and on two cores C2 compilation of code that runs once costs more CPU than it saves.
JVM_OPTIONS_ENV = "CDC_JVM_OPTIONS"

# Local runs only: a folder for a persistent session catalog (Delta and Hudi). On Glue,
# `--enable-glue-datacatalog` puts Spark's Hive metastore client, with Glue's client under it, behind
# the session catalog, so the tables outlive the job's process. Glue's client is not on Maven Central;
# locally, Spark's own Hive metastore client over an embedded Derby metastore in this folder is the
# same layer (Spark's HiveExternalCatalog writes the same Hive table entries, which Glue's client
# stores as Glue tables). Without it the session catalog is Spark's in-memory one.
SESSION_METASTORE_ENV = "CDC_SESSION_METASTORE"


def local_catalog_overrides(s: Settings, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Spark settings for the extra catalog properties of `CATALOG_PROPERTIES_ENV` (none when unset).

    They can only add: a property that `catalog_conf` already sets is refused, so a local run
    keeps exactly the catalog the Glue job gets, plus where to reach it."""
    text = env.get(CATALOG_PROPERTIES_ENV, "").strip()
    if not text:
        return {}
    try:
        props = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{CATALOG_PROPERTIES_ENV} is not a JSON object: {e}") from None
    if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
        raise ValueError(f"{CATALOG_PROPERTIES_ENV} must be a JSON object of strings, got {text!r}")
    prefix = f"spark.sql.catalog.{s.catalog_name}"
    out = {f"{prefix}.{k}": v for k, v in props.items()}
    clash = sorted(k for k in out if k in catalog_conf(s))
    if clash:
        raise ValueError(f"{CATALOG_PROPERTIES_ENV} may only add catalog properties; it would change {clash}")
    return out


# A format's jars beyond Iceberg's are its `Format.jars`, and the Glue versions it runs on its
# `Format.glue_versions` (formats/). Locally, Glue 5.0's runtime is its pyspark in .local/glue5/python
# (requirements-glue5.txt) ahead of the venv's on PYTHONPATH, and its jars in .local/jars/glue5.

# Local runs only: "5.0" runs an Iceberg job on Glue 5.0's runtime (Spark 3.5.4, Iceberg 1.7.1), as a
# stack deployed before Glue 6.0 did: the upgrade test starts a lake there and continues it on 6.0.
GLUE_VERSION_ENV = "CDC_GLUE_VERSION"


def glue_version(table_format: TableFormat | str, env: Mapping[str, str] = os.environ) -> str:
    """The Glue version whose runtime a local run of `table_format` uses."""
    fmt = format_of(table_format)
    wanted = env.get(GLUE_VERSION_ENV, "").strip()
    if "6.0" not in fmt.glue_versions or wanted == "5.0":
        if "5.0" not in fmt.glue_versions:
            on_5 = " or ".join(name for name in names() if "5.0" in format_of(name).glue_versions)
            raise RuntimeError(
                f"{GLUE_VERSION_ENV}=5.0 runs {on_5} locally; {TableFormat(table_format)} runs on Glue 6.0 only"
            )
        return "5.0"
    if wanted not in ("", "6.0"):
        raise RuntimeError(f"{GLUE_VERSION_ENV} must be 5.0 or 6.0, got {wanted!r}")
    return "6.0"


def _local_root(env: Mapping[str, str] = os.environ) -> Path:
    return Path(env.get("CDC_LOCAL_DIR") or Path(__file__).resolve().parents[3] / ".local")


def runtime_env(table_format: TableFormat | str, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What a local process that runs the job in `table_format` needs in its environment beyond
    `env`: on Glue 5.0's runtime, its pyspark first on PYTHONPATH; nothing on Glue 6.0's."""
    if glue_version(table_format, env) != "5.0":
        return {}
    folder = _local_root(env) / "glue5" / "python"
    if not (folder / "pyspark").is_dir():
        raise RuntimeError(f"no Glue 5.0 pyspark in {folder} (table format {table_format}): run `make setup`")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH", "")) if p)}


def check_spark(table_format: TableFormat, version: str, env: Mapping[str, str] = os.environ) -> None:
    """Refuse a session whose pyspark is not the Spark of the format's Glue version (the jars would
    not load, or fail later with a linkage error), naming how to start it."""
    glue5 = glue_version(table_format, env) == "5.0"
    if version.split(".")[0] != ("3" if glue5 else "4"):
        fix = (
            f"put {_local_root(env) / 'glue5' / 'python'} first on PYTHONPATH (runtime_env; local-job does)"
            if glue5
            else "run it with the venv's own pyspark (nothing on PYTHONPATH ahead of it)"
        )
        raise RuntimeError(
            f"table format {table_format.value} runs on Glue {'5.0' if glue5 else '6.0'}'s Spark "
            f"{'3.5' if glue5 else '4.1'}, but this process has pyspark {version}: {fix}"
        )


def local_jars(table_format: TableFormat = DEFAULT) -> list[str]:
    """The jars the format's Glue version provides or the job ships, as scripts/setup-local resolved
    them from pom.xml. Glue 6.0: Iceberg 1.11.0 + its AWS bundle and Spark's Kafka source
    (.local/jars/spark), Spark's Avro functions (glue-avro) and, for delta, Delta Lake 4.2.0 (delta).
    Glue 5.0 (hudi): the same roles at Spark 3.5 (.local/jars/glue5) and Hudi 0.15.0 (hudi). Both: the
    MSK IAM client (glue-extra)."""
    default = _local_root() / "jars"
    root = Path(os.environ.get("CDC_JARS_DIR", default))
    base = root / "glue5" if glue_version(table_format) == "5.0" else root
    extra = format_of(table_format).jars
    folders = [base / "spark", root / "glue-extra", base / "glue-avro"] + ([root / extra[0]] if extra else [])
    jars = [j for d in folders for j in sorted(glob.glob(str(d / "*.jar")))]
    jars += jdbc_driver_jars()
    if not any("iceberg-spark-runtime" in j for j in jars):
        raise RuntimeError(
            f"no iceberg-spark-runtime jar in {base}/spark: run `make setup` (scripts/setup-local) first"
        )
    if extra and not any(extra[1] in j for j in jars):
        raise RuntimeError(f"no {extra[1]} jar in {root}/{extra[0]}: run `make setup` (scripts/setup-local) first")
    return jars


# `--source jdbc`: the MySQL and PostgreSQL JDBC drivers Glue provides, locally those that
# scripts/setup-local put beside the Debezium connectors (the same pinned versions).
JDBC_DRIVERS = (
    ("debezium-connector-mysql", "mysql-connector-j-*.jar"),
    ("debezium-connector-postgres", "postgresql-*.jar"),
)


def jdbc_driver_jars() -> list[str]:
    plugins = _local_root() / "connect" / "plugins"
    return [j for folder, pattern in JDBC_DRIVERS for j in sorted(glob.glob(str(plugins / folder / pattern)))[-1:]]


def session_metastore_conf(s: Settings, env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Spark settings of the persistent local session catalog of `SESSION_METASTORE_ENV` (none when
    unset, or for a format whose catalog is `--catalog_name`'s own, not the session catalog)."""
    folder = env.get(SESSION_METASTORE_ENV, "").strip()
    if not folder or not format_of(s.table_format).session_catalog:
        return {}
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        # Hive's own metastore refuses an ALTER TABLE whose column types differ by position from the
        # stored ones (Hudi's schema evolution writes such entries: an added column failed the job);
        # the Glue Data Catalog makes no such check, so the local stand-in must not either.
        "spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes": "false",
    }


def driver_java_options(s: Settings, env: Mapping[str, str] = os.environ) -> str:
    """The local driver JVM's extra flags: `JVM_OPTIONS_ENV`'s, and Derby's log beside the session
    metastore (not in the working directory)."""
    flags = env.get(JVM_OPTIONS_ENV, "").strip()
    if session_metastore_conf(s, env):
        flags = f"{flags} -Dderby.system.home={env[SESSION_METASTORE_ENV].strip()}".strip()
    return flags


def local_session(s: Settings, app_name: str = "cdc-lake-local", master: str | None = None) -> SparkSession:
    """A local SparkSession equivalent to the Glue job's (same catalog name and settings)."""
    check_spark(s.table_format, pyspark.__version__)
    b = SparkSession.builder.appName(app_name).master(master or os.environ.get("CDC_SPARK_MASTER", "local[2]"))
    b = b.config("spark.jars", ",".join(local_jars(s.table_format)))
    b = b.config("spark.ui.enabled", os.environ.get("CDC_SPARK_UI", "false"))
    b = b.config("spark.ui.showConsoleProgress", "false")  # progress bars would drown the batch log lines
    # Local services listen on loopback only (by default Spark binds the host's address).
    b = b.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    b = b.config("spark.driver.memory", os.environ.get("CDC_SPARK_DRIVER_MEMORY", "2g"))
    if driver_java_options(s):
        b = b.config("spark.driver.extraJavaOptions", driver_java_options(s))
    for k, v in {**catalog_conf(s), **local_catalog_overrides(s), **session_metastore_conf(s)}.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
