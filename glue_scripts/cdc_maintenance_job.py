"""AWS Glue 5.0 batch job: maintenance of the CDC lake's Iceberg tables, on a schedule, beside the
streaming job (compaction, delete files, manifests, snapshot expiry, orphan files).

Runs unchanged on Glue and locally, with the same `--name value` arguments (README.md, "Maintenance").
This file is the only place that touches `awsglue`; the work is in `cdclake.maintenance_job`.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cdclake.maintenance_job import JOB_ARGS, main
from cdclake.session import catalog_conf
from cdclake.settings import Settings


def _on_glue(argv: list[str]) -> bool:
    """Glue starts every job run with --JOB_ID and --JOB_RUN_ID; a local run never passes them."""
    return "--JOB_RUN_ID" in argv


def _glue_args(argv: list[str]) -> dict[str, str]:
    """Only the names actually passed are requested, so every argument keeps its documented default."""
    from awsglue.utils import getResolvedOptions

    names = [a.name for a in JOB_ARGS if f"--{a.name}" in argv]
    return getResolvedOptions(argv, ["JOB_NAME", *names])


def _glue_session(settings: Settings):  # -> SparkSession
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from pyspark import SparkConf, SparkContext

    conf = SparkConf()
    for k, v in catalog_conf(settings).items():
        conf.set(k, v)
    glue = GlueContext(SparkContext.getOrCreate(conf))
    Job(glue).init("cdc-maintenance", {})
    return glue.spark_session


if __name__ == "__main__":
    if _on_glue(sys.argv):
        sys.exit(main(sys.argv, session_factory=_glue_session, raw_args=_glue_args(sys.argv)))
    sys.exit(main(sys.argv[1:]))
