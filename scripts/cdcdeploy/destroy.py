"""destroy: stop the job, empty the buckets, delete the pipeline stack and its bootstrap stack.

CloudFormation cannot delete a bucket that still holds objects (or object versions), so every bucket
the stacks output is emptied first. S3 delivers access logs late, so a deletion that fails on a
refilled log bucket is emptied and retried.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from botocore.exceptions import ClientError, WaiterError

from cdcdeploy import arguments
from cdcdeploy.deploy import active_runs, stack_outputs

# Outputs that name buckets, per stack; logged buckets come before the log buckets.
PIPELINE_BUCKETS = ("LakeBucketName", "AthenaResultsBucketName", "AccessLogsBucketName")
BOOTSTRAP_BUCKETS = ("ArtifactsBucketName", "ArtifactsLogBucketName")


def stack_exists(cfn: Any, stack_name: str) -> bool:
    try:
        status = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]["StackStatus"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return False
        raise
    return status != "DELETE_COMPLETE"


def stop_job(glue: Any, job_name: str, timeout_s: float = 900, poll_s: float = 15) -> list[str]:
    """Stop the job's active runs and wait until none is left; returns the run ids stopped."""
    runs = active_runs(glue, job_name)
    if runs:
        glue.batch_stop_job_run(JobName=job_name, JobRunIds=runs)
    deadline = time.monotonic() + timeout_s
    while active_runs(glue, job_name):
        if time.monotonic() > deadline:
            raise TimeoutError(f"Glue job {job_name} still has active runs after {timeout_s:.0f}s")
        time.sleep(poll_s)
    return runs


def empty_bucket(s3: Any, bucket: str) -> int:
    """Delete every object version and delete marker; returns how many. A missing bucket is empty."""
    deleted = 0
    try:
        s3.put_bucket_logging(Bucket=bucket, BucketLoggingStatus={})  # no new logs about this emptying
        paginator = s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=bucket):
            batch = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            for i in range(0, len(batch), 1000):
                resp = s3.delete_objects(Bucket=bucket, Delete={"Objects": batch[i : i + 1000], "Quiet": True})
                if resp.get("Errors"):
                    raise RuntimeError(f"s3://{bucket}: could not delete {resp['Errors'][:3]}")
                deleted += len(batch[i : i + 1000])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return deleted
        raise
    return deleted


def destroy_stack(session: Any, stack_name: str, bucket_outputs: tuple[str, ...], attempts: int = 3) -> bool:
    """Empty the stack's buckets and delete it; returns False when there was no such stack."""
    cfn, s3 = session.client("cloudformation"), session.client("s3")
    if not stack_exists(cfn, stack_name):
        return False
    outputs = stack_outputs(cfn, stack_name)
    buckets = [outputs[k] for k in bucket_outputs if k in outputs]
    for attempt in range(1, attempts + 1):
        for bucket in buckets:
            print(f"[destroy] emptied s3://{bucket}: {empty_bucket(s3, bucket)} object versions", flush=True)
        print(f"[destroy] deleting stack {stack_name} (attempt {attempt})", flush=True)
        cfn.delete_stack(StackName=stack_name)
        try:
            cfn.get_waiter("stack_delete_complete").wait(
                StackName=stack_name, WaiterConfig={"Delay": 15, "MaxAttempts": 240}
            )
            return True
        except WaiterError as exc:
            if attempt == attempts:
                raise RuntimeError(f"stack {stack_name} was not deleted: {exc}") from exc
    return True


def main(argv: list[str] | None = None) -> int:
    parser = arguments.parser("destroy", __doc__)
    parser.add_argument("--keep-bootstrap", action="store_true", help="keep <stack>-bootstrap (artifacts bucket)")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    args = arguments.parse(parser, argv)
    if not args.yes:
        answer = input(f"Delete stack {args.stack_name} and ALL data in its buckets ({args.region})? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("aborted")
            return 1

    session = arguments.session(args)
    cfn = session.client("cloudformation")
    if stack_exists(cfn, args.stack_name):
        job = stack_outputs(cfn, args.stack_name).get("JobName")
        if job:
            stopped = stop_job(session.client("glue"), job)
            print(f"[destroy] Glue job {job}: stopped {len(stopped)} run(s)")
    if not destroy_stack(session, args.stack_name, PIPELINE_BUCKETS):
        print(f"[destroy] no stack {args.stack_name}")
    if not args.keep_bootstrap and not destroy_stack(session, f"{args.stack_name}-bootstrap", BOOTSTRAP_BUCKETS):
        print(f"[destroy] no stack {args.stack_name}-bootstrap")
    print("[destroy] done (the KMS key is scheduled for deletion after its 7-day waiting period)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
