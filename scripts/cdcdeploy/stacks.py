"""A CloudFormation stack's state, the reason it failed, and waiting for it with our own bound.

`aws cloudformation deploy` gives up waiting after 60 minutes and exits non-zero, though the stack
goes on being created: a demo stack (VPC, RDS, the client's first boot, MSK Connect) may need longer.
deploy then waits here instead, and a later run resumes waiting for a stack still in progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

USABLE = ("CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE")


class StackNotReady(RuntimeError):
    """The stack failed, rolled back, or is still in progress after the bound."""


def describe(cfn: Any, name: str) -> dict[str, Any] | None:
    """The stack's description (status, outputs), None when there is no such stack."""
    try:
        return cfn.describe_stacks(StackName=name)["Stacks"][0]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise


def status(cfn: Any, name: str) -> str | None:
    """The stack's status, None when there is no such stack."""
    stack = describe(cfn, name)
    return None if stack is None else stack["StackStatus"]


def in_progress(state: str | None) -> bool:
    """CloudFormation is working on the stack. Not REVIEW_IN_PROGRESS: a stack whose first change set
    failed or was never executed stays there, and nothing moves it on."""
    return bool(state) and str(state).endswith("_IN_PROGRESS") and state != "REVIEW_IN_PROGRESS"


def first_failure(cfn: Any, name: str) -> str | None:
    """The first resource that failed in the stack's latest operation, with CloudFormation's reason
    (the later failures are mostly cancellations it caused)."""
    latest: list[dict] = []
    # Newest first, 100 per page: a rolled-back stack of this size logs more than a page after its
    # first failure, so read back page by page to where the operation began.
    for page in cfn.get_paginator("describe_stack_events").paginate(StackName=name):
        for e in page["StackEvents"]:
            latest.append(e)
            if e["LogicalResourceId"] == name and e.get("ResourceStatusReason") == "User Initiated":
                break
        else:
            continue
        break
    for e in reversed(latest):
        reason = e.get("ResourceStatusReason") or ""
        if e["ResourceStatus"].endswith("_FAILED") and e["LogicalResourceId"] != name and "cancelled" not in reason:
            return f"{e['LogicalResourceId']} ({e['ResourceType']}): {reason}"
    return None


def fix_for(state: str, name: str) -> str:
    """What to do with a stack in this state."""
    if state == "ROLLBACK_COMPLETE":
        return (
            f"its first creation failed and cannot be updated: fix the cause, `destroy --stack-name {name}`, "
            "then deploy again"
        )
    if state == "UPDATE_ROLLBACK_COMPLETE":
        return "the last update failed and was rolled back (the previous version runs): fix the cause and deploy again"
    if in_progress(state):
        return f"it is still in progress: `deploy --stack-name {name} ...` again waits for it and then starts the job"
    return "read the stack's Events (CloudFormation console), fix the cause, then deploy again"


def wait(
    cfn: Any,
    name: str,
    timeout_s: float,
    poll_s: float = 30.0,
    report_s: float = 300.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Wait until the stack is no longer in progress; returns a usable status, raises StackNotReady
    with the first failure and the fix otherwise (also when timeout_s passes first)."""
    start = last_report = clock()
    while True:
        state = status(cfn, name)
        if state is None:
            raise StackNotReady(f"stack {name} does not exist (deleted while waiting?)")
        if not in_progress(state):
            break
        now = clock()
        if now - start >= timeout_s:
            raise StackNotReady(f"stack {name} is still {state} after {timeout_s / 60:.0f} min; {fix_for(state, name)}")
        if now - last_report >= report_s:
            print(f"[deploy] stack {name}: {state} ({(now - start) / 60:.0f} min)", flush=True)
            last_report = now
        sleep(poll_s)
    if state in USABLE:
        return state
    failure = first_failure(cfn, name)
    raise StackNotReady(
        f"stack {name} is {state}" + (f"; first failure: {failure}" if failure else "") + f". {fix_for(state, name)}"
    )
