"""The Iceberg catalog's Spark configuration, the same on Glue and locally: one catalog name, the
Glue Data Catalog with S3FileIO on AWS, a Hadoop catalog locally."""

from __future__ import annotations

from ..common.settings import CatalogType, Settings


def catalog_conf(s: Settings) -> dict[str, str]:
    """Iceberg catalog `s.catalog_name`: Glue Data Catalog + S3FileIO on AWS, Hadoop locally."""
    prefix = f"spark.sql.catalog.{s.catalog_name}"
    conf = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": s.warehouse,
        # A cached table object can be stale after our own MERGE (seen with a second reader).
        f"{prefix}.cache-enabled": "false",
        # DATETIME columns are decoded time-zone independently; this keeps displays and casts UTC.
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(s.shuffle_partitions),
        "spark.sql.adaptive.enabled": "true",
        # Row-based reads: Iceberg 1.7.1's vectorized (Arrow) Parquet reader, on this Spark 3.5.4 and
        # JDK 17, writes the second 5,000-row batch of a data file (read.parquet.vectorization.batch-size)
        # into an Arrow buffer of capacity 0 (an IndexOutOfBoundsException with Arrow's bounds checks,
        # -Darrow.enable_unsafe_memory_access=false; Iceberg turns them off, and then the write lands in
        # memory it does not own: SIGSEGV at varying VM sites). Any file over 5,000 rows, so any table.
        "spark.sql.iceberg.vectorization.enabled": "false",
    }
    if s.catalog_type == CatalogType.GLUE:
        conf[f"{prefix}.catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
        conf[f"{prefix}.glue.skip-name-validation"] = "false"
    else:
        conf[f"{prefix}.type"] = "hadoop"
    return conf
