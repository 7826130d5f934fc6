"""deploy through a first create that outlasts the aws CLI's 60-minute waiter: it waits on with
its own bound, resumes a stack a previous run left in progress, and names the first failure.

moto creates a stack at once, so the states in between (CREATE_IN_PROGRESS for an hour) are answered
by a botocore Stubber; a real moto stack gives the completed case.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cdcdeploy import deploy, stacks

REGION = "eu-west-1"
NAME = "cdc-lake"


def described(state: str) -> dict[str, Any]:
    now = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    return {"Stacks": [{"StackName": NAME, "StackStatus": state, "CreationTime": now}]}


def event(resource: str, kind: str, state: str, reason: str = "") -> dict[str, Any]:
    e = {"StackId": "id", "EventId": resource + state, "StackName": NAME, "LogicalResourceId": resource,
         "ResourceType": kind, "ResourceStatus": state, "Timestamp": dt.datetime(2026, 11, 25, tzinfo=dt.UTC)}  # fmt: skip
    return e | ({"ResourceStatusReason": reason} if reason else {})


class Clock:
    """Time that moves only when the code sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def stubbed(states: list[str], events: list[dict[str, Any]] | None = None) -> tuple[Any, Stubber]:
    cfn = boto3.client("cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(cfn)
    for state in states:
        if state == "MISSING":
            stub.add_client_error("describe_stacks", "ValidationError", f"Stack with id {NAME} does not exist")
        else:
            stub.add_response("describe_stacks", described(state), {"StackName": NAME})
    if events is not None:
        stub.add_response("describe_stack_events", {"StackEvents": events}, {"StackName": NAME})
    stub.activate()
    return cfn, stub


def test_a_create_that_outlasts_the_cli_is_waited_for_until_it_completes() -> None:
    cfn, stub = stubbed(["CREATE_IN_PROGRESS"] * 3 + ["CREATE_COMPLETE"])
    clock = Clock()
    assert stacks.wait(cfn, NAME, 3 * 3600, poll_s=1800, sleep=clock.sleep, clock=clock) == "CREATE_COMPLETE"
    assert clock.now == 3 * 1800
    stub.assert_no_pending_responses()


def test_waiting_past_the_bound_says_that_deploying_again_resumes() -> None:
    cfn, _ = stubbed(["CREATE_IN_PROGRESS"] * 5)
    clock = Clock()
    with pytest.raises(
        stacks.StackNotReady, match=r"still CREATE_IN_PROGRESS after 60 min; .*deploy --stack-name cdc-lake"
    ):
        stacks.wait(cfn, NAME, 3600, poll_s=1200, sleep=clock.sleep, clock=clock)


def test_a_rolled_back_first_create_names_the_first_failed_resource_and_the_way_out() -> None:
    events = [  # newest first, as CloudFormation lists them
        event(NAME, "AWS::CloudFormation::Stack", "ROLLBACK_COMPLETE"),
        event("MskCluster", "AWS::MSK::ServerlessCluster", "CREATE_FAILED", "Resource creation cancelled"),
        event("BootstrapBrokersFunction", "AWS::Lambda::Function", "CREATE_FAILED",
              "Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution below its minimum value of [10]."),
        event(NAME, "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS", "User Initiated"),
        event("Old", "AWS::S3::Bucket", "CREATE_FAILED", "an earlier operation"),
    ]  # fmt: skip
    cfn, _ = stubbed(["ROLLBACK_COMPLETE"], events)
    with pytest.raises(stacks.StackNotReady) as err:
        stacks.wait(cfn, NAME, 60, sleep=lambda _: None)
    message = str(err.value)
    assert (
        "first failure: BootstrapBrokersFunction (AWS::Lambda::Function): Specified ReservedConcurrentExecutions"
        in message
    )
    assert "destroy --stack-name cdc-lake" in message


def failing_cli() -> None:
    raise subprocess.CalledProcessError(255, ["aws", "cloudformation", "deploy"])  # the waiter gave up


def test_deploy_waits_on_when_the_cli_gives_up_on_a_first_create() -> None:
    # No stack before; the CLI fails while the stack is in progress; we wait until it completes.
    cfn, stub = stubbed(["MISSING", "CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS", "CREATE_COMPLETE"])
    assert deploy.deploy_and_wait(cfn, NAME, 600, failing_cli, poll_s=0) == "CREATE_COMPLETE"
    stub.assert_no_pending_responses()


def test_a_change_set_that_fails_before_the_create_starts_is_not_waited_for() -> None:
    # A template rule refused the parameters: the new stack stays in REVIEW_IN_PROGRESS for good.
    cfn, stub = stubbed(["MISSING", "REVIEW_IN_PROGRESS"])
    with pytest.raises(stacks.StackNotReady, match="failed before CloudFormation started on stack cdc-lake"):
        deploy.deploy_and_wait(cfn, NAME, 600, failing_cli, poll_s=0)
    stub.assert_no_pending_responses()


def test_deploy_resumes_waiting_for_a_stack_a_previous_run_left_in_progress() -> None:
    calls = []
    cfn, stub = stubbed(["CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS", "CREATE_COMPLETE", "UPDATE_COMPLETE"])
    assert deploy.deploy_and_wait(cfn, NAME, 600, lambda: calls.append("deploy"), poll_s=0) == "UPDATE_COMPLETE"
    assert calls == ["deploy"]  # deployed once the earlier create had completed
    stub.assert_no_pending_responses()


def test_deploy_refuses_a_rolled_back_stack_before_calling_the_cli() -> None:
    events = [event("Database", "AWS::RDS::DBInstance", "CREATE_FAILED", "DBInstanceClass not offered"),
              event(NAME, "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS", "User Initiated")]  # fmt: skip
    cfn, _ = stubbed(["ROLLBACK_COMPLETE"], events)
    with pytest.raises(stacks.StackNotReady, match=r"Database \(AWS::RDS::DBInstance\): DBInstanceClass not offered"):
        deploy.deploy_and_wait(cfn, NAME, 600, lambda: pytest.fail("deployed onto a rolled-back stack"), poll_s=0)


def test_a_real_completed_stack_is_returned_at_once(aws: str) -> None:
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(StackName=NAME, TemplateBody=json.dumps({"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}))
    assert stacks.wait(cfn, NAME, 60, sleep=lambda _: pytest.fail("waited")) == "CREATE_COMPLETE"
    assert stacks.status(cfn, "no-such-stack") is None


def test_the_first_failure_is_found_behind_a_page_of_rollback_events() -> None:
    cfn = boto3.client("cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(cfn)
    rollback = [event(f"Resource{i}", "AWS::IAM::Role", "DELETE_COMPLETE") for i in range(100)]
    stub.add_response("describe_stack_events", {"StackEvents": rollback, "NextToken": "page2"}, {"StackName": NAME})
    older = [event("ClientInstance", "AWS::EC2::Instance", "CREATE_FAILED", "Failed to receive 1 resource signal(s)"),
             event(NAME, "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS", "User Initiated")]  # fmt: skip
    stub.add_response("describe_stack_events", {"StackEvents": older}, {"StackName": NAME, "NextToken": "page2"})
    stub.activate()
    assert stacks.first_failure(cfn, NAME) == (
        "ClientInstance (AWS::EC2::Instance): Failed to receive 1 resource signal(s)"
    )
    stub.assert_no_pending_responses()
