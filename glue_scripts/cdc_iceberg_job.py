"""AWS Glue 5.0 streaming job: Debezium CDC from Kafka (MSK) into Iceberg tables.

Runs unchanged on Glue and locally, with the same `--name value` arguments (see README.md).
This file is the only place that touches `awsglue`; everything else lives in the `cdclake`
package (shipped to Glue with --extra-py-files, found next to this script locally).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cdclake.job import main
from cdclake.session import catalog_conf
from cdclake.settings import ARGS, Settings


def _on_glue(argv: list[str]) -> bool:
    """Glue starts every job run with --JOB_ID and --JOB_RUN_ID; a local run never passes them."""
    return "--JOB_RUN_ID" in argv


def _glue_args(argv: list[str]) -> dict[str, str]:
    """Glue-style argument resolution; only the names actually passed are requested, so every
    argument keeps its documented default."""
    from awsglue.utils import getResolvedOptions

    names = [a.name for a in ARGS if f"--{a.name}" in argv]
    return getResolvedOptions(argv, ["JOB_NAME", *names])


def _glue_session(settings: Settings):  # -> SparkSession
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from pyspark import SparkConf, SparkContext

    conf = SparkConf()
    for k, v in catalog_conf(settings).items():
        conf.set(k, v)
    glue = GlueContext(SparkContext.getOrCreate(conf))
    job = Job(glue)
    job.init(settings.extra.get("JOB_NAME", "cdc-iceberg"), {"JOB_NAME": settings.extra.get("JOB_NAME", "")})
    return glue.spark_session


if __name__ == "__main__":
    if _on_glue(sys.argv):
        sys.exit(main(sys.argv, session_factory=_glue_session, raw_args=_glue_args(sys.argv)))
    sys.exit(main(sys.argv[1:]))
