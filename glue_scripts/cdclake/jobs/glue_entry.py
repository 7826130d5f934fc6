"""The edge both Glue entry scripts share: on Glue, `awsglue` resolves the arguments and makes the
session; locally the job parses its own arguments and makes a local session.

`awsglue` is imported only inside these functions: its JVM classes exist only on Glue.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..common.settings import Arg, Settings, help_text, wants_help

JobMain = Callable[..., int]


def on_glue(argv: list[str]) -> bool:
    """Glue starts every job run with --JOB_ID and --JOB_RUN_ID; a local run never passes them."""
    return "--JOB_RUN_ID" in argv


def glue_args(argv: list[str], args: tuple[Arg, ...]) -> dict[str, str]:
    """Glue-style argument resolution; only the names actually passed are requested, so every
    argument keeps its documented default."""
    from awsglue.utils import getResolvedOptions

    names = [a.name for a in args if f"--{a.name}" in argv]
    return getResolvedOptions(argv, ["JOB_NAME", *names])


def glue_session(settings: Settings, job_name: str) -> Any:  # -> SparkSession
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from pyspark import SparkConf, SparkContext

    from ..lake.catalog import catalog_conf

    conf = SparkConf()
    for k, v in catalog_conf(settings).items():
        conf.set(k, v)
    glue = GlueContext(SparkContext.getOrCreate(conf))
    Job(glue).init(job_name, {"JOB_NAME": job_name})
    return glue.spark_session


def run(argv: list[str], main: JobMain, args: tuple[Arg, ...], default_job_name: str, summary: str) -> int:
    """An entry script's whole body: `argv` is sys.argv; returns the process exit code."""
    if wants_help(argv[1:]):
        print(help_text(argv[0], summary, args))
        return 0
    if on_glue(argv):
        raw = glue_args(argv, args)
        factory = functools.partial(glue_session, job_name=raw.get("JOB_NAME") or default_job_name)
        return main(argv, session_factory=factory, raw_args=raw)
    return main(argv[1:])
