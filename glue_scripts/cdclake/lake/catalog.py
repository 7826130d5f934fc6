"""The Spark configuration of the job's catalog, the same on Glue and locally: the table format's
catalog (formats/: Iceberg's `--catalog_name` over the Glue Data Catalog or a Hadoop warehouse,
Delta's session catalog) and the session settings every format shares."""

from __future__ import annotations

from ..common.settings import Settings
from .formats import table_format


def catalog_conf(s: Settings) -> dict[str, str]:
    """Spark settings of the catalog `s.catalog_name` in the table format `s.table_format`."""
    return {
        **table_format(s).session_conf(s),
        # DATETIME columns are decoded time-zone independently; this keeps displays and casts UTC.
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(s.shuffle_partitions),
        "spark.sql.adaptive.enabled": "true",
        # Spark 4 (Glue 6.0) turns ANSI mode on by default: an out-of-range index or a value a cast
        # cannot convert then fails the whole batch instead of giving the NULL the decoder turns into
        # a dead letter. AWS's Glue 6.0 migration page gives this setting to keep Spark 3.5's semantics.
        "spark.sql.ansi.enabled": "false",
        # PySpark 4 records the Python call site of every DataFrame and Column function for error
        # messages: several Py4J round trips and a JVM class lookup per call, thousands per batch
        # (docs/BENCHMARKS.md, "A small batch's fixed cost"). Read once per process, so set here.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
    }
