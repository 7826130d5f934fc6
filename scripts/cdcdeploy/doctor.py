"""doctor STACK: check a deployed CDC lake end to end, one line per check, OK or the fix.

In order: the stack's status, the connector's state and its last error, the streaming job's latest
run, its last batch line (lag, dead letters), the lake tables in the Glue database, whether Lake
Formation governs that database (and the stack grants the jobs what they need), the dead-letter
prefix, the stack's alarms, and an Athena count of each lake table. Exit 1 when any check fails.
Read-only: it starts, stops and changes nothing (the Athena counts write query results only).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cdcdeploy import arguments, stacks

RUNNING = ("STARTING", "RUNNING", "WAITING")
BATCH_LINE = re.compile(r"batch \d+: \d+ records \(")
# How far back to look for the last batch line, nearest first: a quiet source logs no batch for a
# while (Spark runs no empty micro-batch), and one search over weeks of logs would be slow.
LOG_WINDOWS_S = (3600, 6 * 3600, 24 * 3600, 7 * 24 * 3600)
MAX_ATHENA_TABLES = 20


@dataclass(frozen=True)
class Result:
    check: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        head = f"{'OK  ' if self.ok else 'FAIL'} {self.check:12} {self.detail}"
        return head if self.ok or not self.fix else f"{head}\n     fix: {self.fix}"


def check_stack(cfn: Any, stack: str) -> tuple[Result, dict[str, str]]:
    described = stacks.describe(cfn, stack)
    if described is None:
        return Result("stack", False, f"no stack {stack} in this account and region",
                      "check --region and --profile, or deploy it: deploy --stack-name " + stack), {}  # fmt: skip
    state = described["StackStatus"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    if state in stacks.USABLE:
        return Result("stack", True, state), outputs
    failure = None if stacks.in_progress(state) else stacks.first_failure(cfn, stack)
    detail = state + (f": {failure}" if failure else "")
    return Result("stack", False, detail, stacks.fix_for(state, stack)), outputs


def check_connector(kafkaconnect: Any, arn: str, log_group: str) -> Result:
    try:
        c = kafkaconnect.describe_connector(connectorArn=arn)
    except (ClientError, BotoCoreError) as exc:
        return Result("connector", False, f"cannot describe {arn}: {exc}", "kafkaconnect:DescribeConnector on it")
    state = c.get("connectorState", "?")
    if state == "RUNNING":
        return Result("connector", True, f"{c.get('connectorName', arn)} RUNNING")
    why = c.get("stateDescription") or {}
    error = f"{why.get('code', '')} {why.get('message', '')}".strip()
    return Result(
        "connector",
        False,
        f"{c.get('connectorName', arn)} {state}" + (f": {error}" if error else ""),
        f"its worker log, log group {log_group}; docs/DEPLOY_WALKTHROUGH.md, Troubleshooting on AWS, 'connector FAILED'"
        if state == "FAILED"
        else "wait for RUNNING (creating or updating takes minutes), then run doctor again",
    )


def check_job(glue: Any, job: str, error_group: str) -> tuple[Result, int | None]:
    """The latest run's state, and when it started (ms) if it is running."""
    runs = glue.get_job_runs(JobName=job, MaxResults=10).get("JobRuns", [])
    if not runs:
        return Result("job", False, f"{job} has never run", f"aws glue start-job-run --job-name {job}"), None
    latest = max(runs, key=lambda r: r["StartedOn"])
    state = latest["JobRunState"]
    if state in RUNNING:
        detail = f"{job} run {latest['Id'][:12]}… {state} since {latest['StartedOn']:%Y-%m-%d %H:%M}"
        return Result("job", True, detail), int(latest["StartedOn"].timestamp() * 1000)
    message = latest.get("ErrorMessage") or f"no error message; the run's driver log is in {error_group}"
    fix = (
        f"fix the cause ({error_group}), then aws glue start-job-run --job-name {job} (it resumes from its checkpoint)"
    )
    return Result("job", False, f"{job} latest run {latest['Id'][:12]}… {state}: {message}", fix), None


def log_prefix(glue: Any, job: str) -> str:
    """The job's --custom-logGroup-prefix: where Glue 5.0 writes its /output and /error groups."""
    args = glue.get_job(JobName=job)["Job"].get("DefaultArguments", {})
    return args.get("--custom-logGroup-prefix", f"/aws-glue/{job}")


def last_batch_line(logs: Any, group: str, now_ms: int, since_ms: int) -> tuple[int, str] | None:
    """The newest batch line (timestamp, text) logged since since_ms, looking back window by window."""
    for window in LOG_WINDOWS_S:
        start = max(now_ms - window * 1000, since_ms)
        kwargs = {"logGroupName": group, "startTime": start, "endTime": now_ms, "filterPattern": "batch"}
        newest: tuple[int, str] | None = None
        for page in logs.get_paginator("filter_log_events").paginate(**kwargs):
            for e in page.get("events", []):
                if BATCH_LINE.search(e["message"]) and (newest is None or e["timestamp"] >= newest[0]):
                    newest = (e["timestamp"], e["message"].strip())
        if newest or start == since_ms:
            return newest
    return None


def check_batch_line(logs: Any, group: str, error_group: str, now_ms: int, since_ms: int) -> Result:
    """The running job's last batch line: its dead letters, a table that stopped following, its lag."""
    try:
        found = last_batch_line(logs, group, now_ms, since_ms)
    except ClientError as exc:
        if "ResourceNotFound" not in str(exc):
            raise
        found = None
    if found is None:
        minutes = (now_ms - since_ms) / 60000
        return Result(
            "batches",
            False,
            f"no batch line in {group} since the run started {minutes:.0f} min ago",
            "the first batch (the snapshot) ends a few minutes after the start; later, read "
            f"{error_group} (a stall, or a failure before the first batch)",
        )
    when, line = found
    text = line[BATCH_LINE.search(line).start() :]  # type: ignore[union-attr]  # only matching lines are kept
    dead = re.search(r"(\d+) dead letters\)", text)
    behind = re.search(r"behind source ([0-9.]+) s", text)
    summary = text if len(text) <= 160 else text[:157] + "..."
    if "STOPPED-FOLLOWING" in text:
        return Result(
            "batches", False, summary, "a table stopped following its source: the job's ERROR line names it and the fix"
        )
    if dead and int(dead.group(1)):
        return Result("batches", False, summary, "dead letters in the last batch: see the dead-letters check below")
    lag = f", behind source {behind.group(1)} s" if behind else ""
    return Result("batches", True, f"{(now_ms - when) / 60000:.0f} min ago: {text.split(' |')[0]}{lag}")


def check_tables(glue: Any, database: str) -> tuple[Result, list[str]]:
    try:
        pages = glue.get_paginator("get_tables").paginate(DatabaseName=database)
        tables = sorted(t["Name"] for p in pages for t in p["TableList"])
    except ClientError as exc:
        if "EntityNotFound" not in str(exc):
            raise
        return Result("tables", False, f"no Glue database {database}", "the stack creates it: check the stack"), []
    if not tables:
        return Result("tables", False, f"no lake table in {database} yet",
                      "a table appears with the first batch that carries its changes: check the connector, the job "
                      "and the stack output KafkaTopicPattern (StartingOffsets=latest skips the snapshot)"), []  # fmt: skip
    shown = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
    return Result("tables", True, f"{len(tables)} in {database}: {shown}"), tables


IAM_ONLY = "IAM_ALLOWED_PRINCIPALS"


def lake_formation_governs(glue: Any, database: str) -> bool:
    """Whether Lake Formation, not IAM alone, decides who may use the database's new tables: their
    default permissions (set from the account's Lake Formation settings when the database was made)
    do not give IAMAllowedPrincipals ALL."""
    defaults = glue.get_database(Name=database)["Database"].get("CreateTableDefaultPermissions", [])
    return not any(
        p.get("Principal", {}).get("DataLakePrincipalIdentifier") == IAM_ONLY and "ALL" in p.get("Permissions", [])
        for p in defaults
    )


def check_lake_formation(glue: Any, database: str, grants: str, stack: str) -> Result:
    try:
        governed = lake_formation_governs(glue, database)
    except ClientError as exc:
        if "EntityNotFound" not in str(exc):
            raise
        return Result("lakeformation", False, f"no Glue database {database}", "the stack creates it: check the stack")
    if not governed:
        return Result("lakeformation", True, f"{database}: IAM permissions alone (IAMAllowedPrincipals)")
    if grants == "true":
        return Result("lakeformation", True, f"Lake Formation governs {database}; the stack grants both job roles")
    return Result(
        "lakeformation",
        False,
        f"Lake Formation governs {database} and the stack grants the jobs nothing: their catalog calls fail",
        f"deploy --stack-name {stack} --parameter LakeFormationGrants=true (as a Lake Formation "
        "administrator); your Athena users need SELECT and DESCRIBE too (docs/DEPLOY_WALKTHROUGH.md, Troubleshooting on AWS)",
    )


def check_dead_letters(s3: Any, path: str, region: str) -> Result:
    bucket, _, prefix = path.removeprefix("s3://").partition("/")
    keys = [
        o["Key"]
        for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in p.get("Contents", [])
    ]
    if not keys:
        return Result("dead-letters", True, f"none under {path}")
    batches = sorted({k[len(prefix) :].split("/", 1)[0] for k in keys if "/" in k[len(prefix) :]})
    newest = batches[-1] if batches else ""
    return Result(
        "dead-letters",
        False,
        f"{len(keys)} file(s) in {len(batches)} batch folder(s) under {path}, newest {newest}",
        f"each file names its reason; fix the cause, then replay {path}{newest}/ --region {region}",
    )


def check_alarms(cloudwatch: Any, stack: str) -> Result:
    alarms = [
        a
        for p in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNamePrefix=f"{stack}-")
        for a in p["MetricAlarms"]
    ]
    if not alarms:
        return Result("alarms", False, f"no alarm named {stack}-*", "the stack creates them: check the stack")
    firing = [a for a in alarms if a["StateValue"] == "ALARM"]
    if not firing:
        return Result("alarms", True, f"{len(alarms)} alarms, none in ALARM")
    first = firing[0]
    return Result(
        "alarms",
        False,
        f"in ALARM: {', '.join(a['AlarmName'] for a in firing)}",
        f"{first['AlarmName']}: {' '.join((first.get('AlarmDescription') or first.get('StateReason', '')).split())}",
    )


def athena_count(
    athena: Any, workgroup: str, database: str, table: str, timeout_s: float, sleep: Callable[[float], None]
) -> int | str:
    """The table's row count, or the reason the query did not succeed."""
    qid = athena.start_query_execution(
        QueryString=f'SELECT count(*) FROM "{database}"."{table}"', WorkGroup=workgroup,
        QueryExecutionContext={"Database": database},
    )["QueryExecutionId"]  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while True:
        status = athena.get_query_execution(QueryExecutionId=qid)["QueryExecution"]["Status"]
        if status["State"] not in ("QUEUED", "RUNNING"):
            break
        if time.monotonic() > deadline:
            return f"still {status['State']} after {timeout_s:.0f} s"
        sleep(1.0)
    if status["State"] != "SUCCEEDED":
        return f"{status['State']}: {status.get('StateChangeReason', '')}"
    rows = athena.get_query_results(QueryExecutionId=qid)["ResultSet"]["Rows"]
    values = [d.get("VarCharValue") for d in rows[-1]["Data"]] if len(rows) > 1 else []
    return int(values[0]) if values and str(values[0]).isdigit() else f"no count in the result ({rows})"


def check_athena(
    athena: Any, workgroup: str, database: str, tables: list[str], sleep: Callable[[float], None] = time.sleep
) -> Result:
    if not tables:
        return Result("athena", False, "no table to count", "see the tables check")
    counts = {t: athena_count(athena, workgroup, database, t, 120, sleep) for t in tables[:MAX_ATHENA_TABLES]}
    failed = {t: c for t, c in counts.items() if not isinstance(c, int)}
    shown = ", ".join(f"{t} {c}" for t, c in counts.items() if isinstance(c, int))
    if failed:
        t, why = next(iter(failed.items()))
        return Result("athena", False, f"{len(failed)} table(s) not counted; {t}: {why}",
                      "docs/DEPLOY_WALKTHROUGH.md, Troubleshooting on AWS: Lake Formation grants, kms:Decrypt on PipelineKeyArn, S3 read")  # fmt: skip
    return Result("athena", True, f"rows: {shown}" + (" …" if len(tables) > MAX_ATHENA_TABLES else ""))


def run(
    session: Any, stack: str, region: str, now_ms: int | None = None, sleep: Callable[[float], None] = time.sleep
) -> list[Result]:
    """Every check, in order; a check that needs what an earlier one found missing is left out."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    result, outputs = check_stack(session.client("cloudformation"), stack)
    results = [result]
    if not outputs:
        return results
    glue = session.client("glue")
    job = outputs["JobName"]
    prefix = log_prefix(glue, job)
    # The connector's name, in its ARN, names its engine (<stack>-debezium-<engine><suffix>).
    engine = "postgres" if "-debezium-postgres" in outputs.get("ConnectorArn", "") else "mysql"
    results.append(
        check_connector(
            session.client("kafkaconnect"), outputs["ConnectorArn"], f"/msk-connect/{stack}/debezium-{engine}"
        )
    )
    job_result, run_started_ms = check_job(glue, job, f"{prefix}/error")
    results.append(job_result)
    if run_started_ms is not None:  # a stopped job's last line says nothing about now
        logs = session.client("logs")
        results.append(check_batch_line(logs, f"{prefix}/output", f"{prefix}/error", now_ms, run_started_ms))
    tables_result, tables = check_tables(glue, outputs["GlueDatabaseName"])
    results.append(tables_result)
    grants = outputs.get("LakeFormationGrants", "false")
    results.append(check_lake_formation(glue, outputs["GlueDatabaseName"], grants, stack))
    results.append(check_dead_letters(session.client("s3"), outputs["DeadLetterPath"], region))
    results.append(check_alarms(session.client("cloudwatch"), stack))
    results.append(
        check_athena(
            session.client("athena"), outputs["AthenaWorkGroupName"], outputs["GlueDatabaseName"], tables, sleep
        )
    )
    return results


def main(argv: list[str] | None = None) -> int:
    args = arguments.parse(arguments.parser("doctor", __doc__, stack_positional=True), argv)
    results = run(arguments.session(args), args.stack_name, args.region)
    for r in results:
        print(r.line(), flush=True)
    failed = [r.check for r in results if not r.ok]
    print(
        f"[doctor] {len(results) - len(failed)}/{len(results)} checks OK"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
