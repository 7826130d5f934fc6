"""glue-container: run a job script in AWS's Glue 5.0 container image (aws-glue-libs).

AWS publishes no Glue 6.0 image ("Develop and test AWS Glue jobs locally using a Docker image" lists
images up to 5.0), so this runs the job on Glue 5.0: the runtime of TableFormat=hudi, and of iceberg or
delta only as far as Spark 3.5 runs the same code (the stack's default is 6.0).

    glue-container [--dry-run] [--profile P] [--job streaming|maintenance] -- --source files ...

The job arguments are those of a local run (docs/CONFIGURATION.md); the container runs the job the Glue way
(`--JOB_NAME`/`--JOB_RUN_ID` added, so the script takes its awsglue branch) with what a deployment
ships: the manifest's glue-extra-jars with --jars, cdclake zipped as deploy zips it with
--py-files, and the job script copied beside that zip (so cdclake is imported from the zip, as on Glue).

Mounts (as AWS documents for the image): ~/.aws -> /home/hadoop/.aws (read-only), the repository ->
/home/hadoop/workspace, which is also the working directory, so relative paths of a local run work.
An absolute path must lie inside the repository; it is rewritten to its place in the container.
--dry-run prints the docker command instead of running it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from cdctools import cli

from cdcdeploy import artifacts

ROOT = artifacts.ROOT
IMAGE = "public.ecr.aws/glue/aws-glue-libs:5"  # AWS Glue 5.0 (Spark 3.5.4, Iceberg 1.7.1, Python 3.11): no 6.0 image
WORKSPACE = "/home/hadoop/workspace"
AWS_DIR = "/home/hadoop/.aws"
BUILD = ROOT / "build" / "glue-container"
JOBS = {
    "streaming": ROOT / "glue_scripts" / "cdc_lake_job.py",
    "maintenance": ROOT / "glue_scripts" / "cdc_maintenance_job.py",
}


class UsageError(Exception):
    """Wrong arguments: exit 2 with this message."""


def in_container(path: Path) -> str:
    """The container path of a file in the repository."""
    return f"{WORKSPACE}/{path.resolve().relative_to(ROOT).as_posix()}"


def job_arguments(job: str, argv: list[str]) -> list[str]:
    """The job's `--name value` arguments, checked the way the job checks them, absolute paths mapped."""
    from cdclake.common.settings import (  # type: ignore[import-not-found]
        ARGS,
        MAINTENANCE_JOB_ARGS,
        ArgumentError,
        build_settings,
        parse_job_argv,
    )

    try:
        raw = parse_job_argv(argv, ARGS if job == "streaming" else MAINTENANCE_JOB_ARGS)
        if job == "streaming":
            build_settings(raw)
    except ArgumentError as e:
        raise UsageError(str(e)) from None
    for glue_arg in ("JOB_NAME", "JOB_RUN_ID"):
        if glue_arg in raw:
            raise UsageError(f"--{glue_arg} is set by glue-container")
    out: list[str] = []
    for name, value in raw.items():
        if value.startswith("/"):
            path = Path(value).resolve()
            if not path.is_relative_to(ROOT):
                raise UsageError(
                    f"--{name} {value}: outside the repository, so not in the container; use a path under "
                    f"{ROOT} (or relative to it) or an s3:// location"
                )
            value = in_container(path)
        out += [f"--{name}", value]
    return out


def prepare(job: str, build_dir: Path = BUILD) -> dict[str, object]:
    """The job script and cdclake.zip in build_dir, and the manifest's extra jars."""
    build_dir.mkdir(parents=True, exist_ok=True)
    script = build_dir / JOBS[job].name
    shutil.copyfile(JOBS[job], script)
    cdclake = artifacts.build_cdclake_zip(build_dir / "cdclake.zip").path
    jars = artifacts.glue_extra_jars("5.0")  # the image is Glue 5.0's
    return {"script": script, "cdclake": cdclake, "jars": jars}


def docker_command(
    job: str, job_args: list[str], files: dict[str, object], profile: str | None, image: str = IMAGE
) -> list[str]:
    jars = ",".join(in_container(Path(j)) for j in files["jars"])  # type: ignore[attr-defined]
    cmd = ["docker", "run", "--rm", "--network", "host", "--name", f"glue5-cdc-{job}"]
    cmd += ["-v", f"{Path.home() / '.aws'}:{AWS_DIR}:ro", "-v", f"{ROOT}:{WORKSPACE}", "-w", WORKSPACE]
    if profile:
        cmd += ["-e", f"AWS_PROFILE={profile}"]
    cmd += [image, "spark-submit", "--jars", jars, "--py-files", in_container(files["cdclake"])]  # type: ignore[arg-type]
    cmd += [in_container(files["script"]), "--JOB_NAME", f"cdc-{job}-container", "--JOB_RUN_ID", "glue-container"]  # type: ignore[arg-type]
    return cmd + job_args


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(
        prog="glue-container",
        description=__doc__.split("\n")[0],
        usage="%(prog)s [--dry-run] [--profile P] [--job streaming|maintenance] [--image I] -- JOB_ARGUMENTS...",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the docker command, run nothing")
    parser.add_argument("--profile", default=os.environ.get("AWS_PROFILE"), help="AWS_PROFILE inside the container")
    parser.add_argument("--job", choices=sorted(JOBS), default="streaming", help="which job script (default streaming)")
    parser.add_argument("--image", default=IMAGE, help=f"container image (default {IMAGE})")
    args, rest = parser.parse_known_args(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    try:
        if not rest:
            raise UsageError("no job arguments: give those of a local run after --, e.g. -- --source files ...")
        job_args = job_arguments(args.job, rest)
    except UsageError as e:
        parser.error(str(e))
    cmd = docker_command(args.job, job_args, prepare(args.job), args.profile, args.image)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    if shutil.which("docker") is None:
        print("glue-container: no docker client on PATH", file=sys.stderr)
        return 1
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
