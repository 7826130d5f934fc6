"""replay: run the deployed streaming job once over JSON-lines files (dead letters, or the raw
zone), then let it stream again.

The streaming job allows one run at a time (its checkpoint admits one writer) and is always running,
so a replay is: stop the streaming run -> start one run of the same job with its arguments overridden
(`--source files --run_once true`, a checkpoint and a dead-letter folder of the replay's own) -> wait
until that run ends -> start the streaming job again, which resumes from its checkpoint. Replaying is
idempotent: a change older than what the lake holds is ignored by the MERGE's position guard.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from cdcdeploy import arguments
from cdcdeploy.deploy import stack_outputs, start_job_if_idle
from cdcdeploy.destroy import stop_job

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "TIMEOUT", "STOPPED", "ERROR")
# Prefixes of the lake bucket the streaming job's role may read (cdc-pipeline.yaml, GlueJobRole).
READABLE_PREFIXES = ("dead-letters/", "raw/")


def replay_arguments(
    lake_root: str, files_path: str, replay_id: str, job_defaults: dict[str, str], namespace: str | None = None
) -> dict[str, str]:
    """The argument overrides of the replay run: the files source, run once, and a checkpoint and a
    dead-letter folder of its own (the stream's checkpoint stays untouched). `lake_root`: s3://<lake
    bucket> on AWS (a local folder in the job tests)."""
    prefix = lake_root.rstrip("/") + "/"
    if not files_path.startswith(prefix) or not files_path[len(prefix) :].startswith(READABLE_PREFIXES):
        raise ValueError(
            f"{files_path}: replay files must be under {', '.join(prefix + p for p in READABLE_PREFIXES)} "
            "(the job's role reads only those prefixes of the lake bucket)"
        )
    args = {
        "--source": "files",
        "--files_path": files_path,
        "--run_once": "true",
        "--checkpoint_location": f"{prefix}checkpoints/replays/{replay_id}/",
        "--dead_letter_path": f"{prefix}dead-letters/replays/{replay_id}/",
    }
    if job_defaults.get("--raw_zone_path"):
        # The records of a replay are archived beside the stream's raw zone, never into the folder read.
        args["--raw_zone_path"] = f"{prefix}raw/replays/{replay_id}/"
    if namespace:
        args["--namespace"] = namespace
    return args


def resume_arguments(lake_root: str, table: str, replay_id: str, job_defaults: dict[str, str]) -> dict[str, str]:
    """The argument overrides of a resume run (docs/OPERATIONS.md, "A table set aside"): run once over the table's
    set-aside folder, which the job reads from the table's mark under the stream's own
    `--dead_letter_path` (kept), with a checkpoint of its own; the job removes the mark when the
    table applies."""
    prefix = lake_root.rstrip("/") + "/"
    args = {
        "--source": "files",
        "--run_once": "true",
        "--resume_table": table,
        "--checkpoint_location": f"{prefix}checkpoints/replays/{replay_id}/",
    }
    if job_defaults.get("--raw_zone_path"):
        args["--raw_zone_path"] = f"{prefix}raw/replays/{replay_id}/"
    return args


def wait_for_run(glue: Any, job_name: str, run_id: str, timeout_s: float, poll_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        run = glue.get_job_run(JobName=job_name, RunId=run_id)["JobRun"]
        if run["JobRunState"] in TERMINAL_STATES:
            return run
        if time.monotonic() > deadline:
            raise TimeoutError(f"replay run {run_id} of {job_name} still {run['JobRunState']} after {timeout_s:.0f}s")
        time.sleep(poll_s)


def replay(
    glue: Any,
    job_name: str,
    lake_bucket: str,
    files_path: str | None,
    replay_id: str,
    namespace: str | None = None,
    restart: bool = True,
    timeout_s: float = 3 * 3600,
    poll_s: float = 30,
    resume: str | None = None,
) -> dict[str, Any]:
    """Stop the stream, run the replay (or, with `resume`, the resume run of that table), start the
    stream again (also when the replay failed, unless restart=False). Returns what happened: stopped
    run ids, the replay run, the restarted run id."""
    defaults = glue.get_job(JobName=job_name)["Job"].get("DefaultArguments", {})
    if resume:
        arguments = resume_arguments(f"s3://{lake_bucket}", resume, replay_id, defaults)
    else:
        arguments = replay_arguments(f"s3://{lake_bucket}", files_path or "", replay_id, defaults, namespace)
    stopped = stop_job(glue, job_name, timeout_s=timeout_s, poll_s=poll_s)
    run_id = glue.start_job_run(JobName=job_name, Arguments=arguments)["JobRunId"]
    try:
        run = wait_for_run(glue, job_name, run_id, timeout_s, poll_s)
    finally:
        restarted = start_job_if_idle(glue, job_name) if restart else None
    return {"stopped": stopped, "replay_run": run, "arguments": arguments, "restarted": restarted}


def main(argv: list[str] | None = None) -> int:
    parser = arguments.parser("replay", __doc__)
    parser.add_argument(
        "files_path", nargs="?", help="s3://<lake bucket>/dead-letters/... or s3://<lake bucket>/raw/... to replay"
    )
    parser.add_argument(
        "--resume", metavar="TABLE", help="resume a lake table that was set aside (its name): replay its changes"
    )
    parser.add_argument("--namespace", help="write into this Glue database instead (a rebuild beside the live tables)")
    parser.add_argument(
        "--replay-id",
        default=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        help="names the replay's checkpoint and dead-letter folders (default: the UTC time)",
    )
    parser.add_argument("--no-restart", action="store_true", help="leave the streaming job stopped afterwards")
    arguments.add_wait(parser, "--timeout-minutes", 180, "give up waiting for the replay run after this long")
    given = parser.parse_args(argv)
    if bool(given.files_path) == bool(given.resume):
        parser.error("give files_path (a folder to replay) or --resume TABLE, one of them")
    args = arguments.parse(parser, argv)
    session = arguments.session(args)
    outputs = stack_outputs(session.client("cloudformation"), args.stack_name)
    job, bucket = outputs["JobName"], outputs["LakeBucketName"]
    try:
        result = replay(
            session.client("glue"), job, bucket, args.files_path, args.replay_id, args.namespace,
            restart=not args.no_restart, timeout_s=args.timeout_minutes * 60, resume=args.resume,
        )  # fmt: skip
    except ValueError as exc:
        print(f"[replay] {exc}", file=sys.stderr)
        return 2
    run = result["replay_run"]
    print(f"[replay] stopped {len(result['stopped'])} streaming run(s); replay run {run['Id']}: {run['JobRunState']}")
    rejects = result["arguments"].get("--dead_letter_path", "the stream's dead-letter path")
    print(f"[replay] its rejects, if any: {rejects}")
    if result["restarted"]:
        print(f"[replay] streaming job {job} started again: run {result['restarted']}")
    elif not args.no_restart:
        print(f"[replay] streaming job {job} already running, left alone")
    if run["JobRunState"] != "SUCCEEDED":
        print(f"[replay] the replay did not succeed: {run.get('ErrorMessage', run['JobRunState'])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
