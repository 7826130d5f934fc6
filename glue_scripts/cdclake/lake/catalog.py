"""The Spark configuration of the job's catalog, the same on Glue and locally: the table format's
catalog (formats.py: Iceberg's `--catalog_name` over the Glue Data Catalog or a Hadoop warehouse,
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
    }
