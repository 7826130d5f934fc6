"""glue-container: the docker command that runs a job in AWS's Glue 5.0 image (tested with
--dry-run: no Docker engine runs on these machines)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

from cdcdeploy import glue_container
from cdctools import pinned_jars as runtime

ROOT = glue_container.ROOT
SCRIPT = Path(sys.executable).parent / "glue-container"  # installed by make setup
LOCAL_RUN = [
    "--source", "files", "--files_path", "./events", "--run_once", "true", "--catalog_type", "hadoop",
    "--warehouse", str(ROOT / ".local" / "warehouse"), "--checkpoint_location", ".local/checkpoints/c",
    "--dead_letter_path", ".local/dead-letters",
]  # fmt: skip


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)


def test_dry_run_prints_the_documented_glue_5_docker_command_with_the_manifests_jars() -> None:
    proc = run("--dry-run", "--profile", "dev", "--", *LOCAL_RUN)
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout.strip())
    assert cmd[:3] == ["docker", "run", "--rm"]
    image = cmd.index("public.ecr.aws/glue/aws-glue-libs:5")
    mounts = [cmd[i + 1] for i, a in enumerate(cmd[:image]) if a == "-v"]
    assert f"{Path.home() / '.aws'}:/home/hadoop/.aws:ro" in mounts
    assert f"{ROOT}:/home/hadoop/workspace" in mounts
    assert cmd[cmd.index("-w") + 1] == "/home/hadoop/workspace"
    assert "AWS_PROFILE=dev" in cmd[:image]
    submit = cmd[image + 1 :]
    assert submit[0] == "spark-submit"
    jars = submit[submit.index("--jars") + 1].split(",")
    # What the Glue job gets with --extra-jars on the image's Glue 5.0: the MSK IAM client, then Spark 3.5's
    # spark-avro (wire format avro).
    shipped = runtime.jars("glue-extra-jars") + runtime.jars("glue5-avro-jars")
    assert jars == [f"/home/hadoop/workspace/{j.relative_to(ROOT)}" for j in shipped]
    assert jars[0].endswith(f"aws-msk-iam-auth-{runtime.versions()['aws-msk-iam-auth']}.jar")
    py_files = submit[submit.index("--py-files") + 1]
    assert py_files == "/home/hadoop/workspace/build/glue-container/cdclake.zip"
    with zipfile.ZipFile(ROOT / "build" / "glue-container" / "cdclake.zip") as zf:
        assert "cdclake/common/settings.py" in zf.namelist()
    script = submit[submit.index("--py-files") + 2]
    assert script == "/home/hadoop/workspace/build/glue-container/cdc_lake_job.py"
    assert (ROOT / "build" / "glue-container" / "cdc_lake_job.py").read_bytes() == (
        ROOT / "glue_scripts" / "cdc_lake_job.py"
    ).read_bytes()
    job_args = submit[submit.index(script) + 1 :]
    # The Glue branch of the script (it looks for --JOB_RUN_ID), then the local run's arguments, the one
    # absolute path mapped into the workspace.
    assert job_args[:4] == ["--JOB_NAME", "cdc-streaming-container", "--JOB_RUN_ID", "glue-container"]
    expected = [a.replace(str(ROOT), "/home/hadoop/workspace") for a in LOCAL_RUN]
    assert job_args[4:] == expected


def test_dry_run_of_the_maintenance_job_runs_its_script() -> None:
    proc = run("--dry-run", "--job", "maintenance", "--", "--catalog_type", "hadoop", "--warehouse", ".local/wh")
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout)
    assert "/home/hadoop/workspace/build/glue-container/cdc_maintenance_job.py" in cmd
    assert cmd[-4:] == ["--catalog_type", "hadoop", "--warehouse", ".local/wh"]


def test_wrong_arguments_exit_2_with_the_reason() -> None:
    cases = {
        (): "no job arguments",
        ("--", "--source", "files", "--warehouse", "w", "--checkpoint_location", "c", "--dead_letter_path", "d"): (
            "--files_path is required with --source files"
        ),
        ("--", *LOCAL_RUN, "--warehouse", "/elsewhere/wh"): "--warehouse /elsewhere/wh: outside the repository",
        ("--", *LOCAL_RUN, "--JOB_RUN_ID", "x"): "--JOB_RUN_ID is set by glue-container",
        ("--job", "maintenance", "--", "--kafka_topics", "t"): "unknown argument --kafka_topics",
        ("--", "source", "files"): "arguments are `--name value` pairs",
    }
    for args, message in cases.items():
        proc = run("--dry-run", *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert proc.stdout == "", args  # no command printed
