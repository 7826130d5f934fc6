"""deploy: build, upload, package and deploy the CDC lake; running it twice changes nothing.

Steps: with ExistingVpcId, preflight checks of your network, secret and security group (exit 2 with
the fix) -> build artifacts (offline) -> bootstrap stack <stack>-bootstrap (artifacts bucket) -> upload
artifacts under content-hash keys (skipped when already there) -> `aws cloudformation package`
(Lambda zip, content-hash key) -> `aws cloudformation deploy --no-fail-on-empty-changeset`, waiting on
with its own bound (--wait-minutes) when the CLI stops waiting, and first for a stack a previous run
left in progress -> start the Glue streaming job unless a run is already active.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from cdcdeploy import arguments, artifacts, build, connector_jvm, preflight, stacks, templates

ACTIVE_RUN_STATES = ("STARTING", "RUNNING", "STOPPING", "WAITING")
BUILD_DIR = build.BUILD_DIR


def aws_cli() -> str:
    """The `aws` of this venv (requirements-deploy.txt pins awscli), else the one on PATH."""
    venv_aws = Path(sys.executable).with_name("aws")
    if venv_aws.is_file():
        return str(venv_aws)
    found = shutil.which("aws")
    if not found:
        raise FileNotFoundError("aws CLI not found: run scripts/setup-deploy (make setup-deploy)")
    return found


def run_aws(args: list[str], region: str, profile: str | None = None, env: dict[str, str] | None = None) -> None:
    cmd = [aws_cli(), *args, "--region", region]
    if profile:
        cmd += ["--profile", profile]
    print("[deploy] $ aws " + " ".join(args), flush=True)
    subprocess.run(cmd, check=True, env={**os.environ, **(env or {})})


# ---------------------------------------------------------------- boto3 helpers (tested with moto)
def upload_artifacts(s3: Any, bucket: str, items: list[dict[str, str]]) -> list[str]:
    """Upload each artifact unless its key already holds the same content; returns the keys uploaded."""
    uploaded = []
    for item in items:
        try:
            head = s3.head_object(Bucket=bucket, Key=item["key"])
            if head.get("Metadata", {}).get("sha256") == item["sha256"]:
                continue
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
        s3.upload_file(item["path"], bucket, item["key"], ExtraArgs={"Metadata": {"sha256": item["sha256"]}})
        uploaded.append(item["key"])
    return uploaded


def stack_outputs(cfn: Any, stack_name: str) -> dict[str, str]:
    stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def active_runs(glue: Any, job_name: str) -> list[str]:
    runs = glue.get_job_runs(JobName=job_name, MaxResults=50).get("JobRuns", [])
    return [r["Id"] for r in runs if r.get("JobRunState") in ACTIVE_RUN_STATES]


def start_job_if_idle(glue: Any, job_name: str) -> str | None:
    """Start the streaming job unless a run is active (MaxConcurrentRuns is 1); returns the new run id."""
    if active_runs(glue, job_name):
        return None
    return glue.start_job_run(JobName=job_name)["JobRunId"]


def parameter_overrides(artifact_params: dict[str, str], bucket: str, extra: list[str]) -> list[str]:
    """Key=Value list for `cloudformation deploy`; --parameter values override the built ones."""
    params = {"ArtifactsBucket": bucket, **artifact_params}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--parameter needs Key=Value, got {item!r}")
        params[key] = value
    return [f"{k}={v}" for k, v in params.items()]


# ---------------------------------------------------------------- aws CLI steps
def package(
    template: Path, bucket: str, out: Path, region: str, profile: str | None = None, env: dict[str, str] | None = None
) -> Path:
    run_aws(
        [
            "cloudformation",
            "package",
            "--template-file",
            str(template),
            "--s3-bucket",
            bucket,
            "--s3-prefix",
            "cfn",
            "--output-template-file",
            str(out),
        ],
        region,
        profile,
        env,
    )
    return out


def deploy_stack(
    template: Path,
    stack_name: str,
    region: str,
    profile: str | None,
    overrides: list[str] | None = None,
    bucket: str | None = None,
) -> None:
    args = [
        "cloudformation",
        "deploy",
        "--template-file",
        str(template),
        "--stack-name",
        stack_name,
        "--no-fail-on-empty-changeset",
        "--capabilities",
        "CAPABILITY_IAM",
        "--tags",
        "project=cdc-lake",
        f"cdc-lake:stack={stack_name}",
    ]
    if bucket:  # the pipeline template exceeds the 51,200-byte inline limit
        args += ["--s3-bucket", bucket, "--s3-prefix", "cfn"]
    if overrides:
        args += ["--parameter-overrides", *overrides]
    run_aws(args, region, profile)


def source_engine(parameters: list[str]) -> str:
    """The SourceEngine of the --parameter overrides (the last one wins, as in the overrides), else mysql."""
    engine = "mysql"
    for item in parameters:
        key, sep, value = item.partition("=")
        if sep and key == "SourceEngine":
            engine = value
    if engine not in artifacts.PLUGINS:
        raise SystemExit(f"[deploy] SourceEngine={engine}: choose one of {', '.join(sorted(artifacts.PLUGINS))}")
    return engine


_REGEX_META = set(".^$*+?{}[]()|")


def literal_prefix(pattern: str) -> str:
    """The text every topic a regex matches must start with, as far as the pattern spells it out
    literally (e.g. r"prod\\.shop\\..*" -> "prod.shop.")."""
    depth, escaped = 0, False
    for c in pattern:  # a top-level alternative may start anywhere: nothing is known then
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "|" and depth == 0:
            return ""
    out: list[str] = []
    i = 1 if pattern.startswith("^") else 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if not nxt or nxt.isalnum():  # \d, \w, \Q ...: a class or an escape sequence, not a literal
                break
            c, step = nxt, 2
        elif c in _REGEX_META:
            break
        else:
            step = 1
        if pattern[i + step : i + step + 1] in ("?", "*", "{"):  # this character is optional
            break
        out.append(c)
        i += step
    return "".join(out)


def parameter_values(parameters: list[str]) -> dict[str, str]:
    """The template's parameter defaults with the --parameter overrides applied (the last one wins)."""
    values = {
        k: str(v.get("Default", ""))
        for k, v in templates.load_template(templates.SOURCE_TEMPLATE)["Parameters"].items()
    }
    for item in parameters:
        key, sep, value = item.partition("=")
        if sep:
            values[key] = value
    return values


def check_topic_pattern(parameters: list[str]) -> None:
    """Refuse a KafkaTopicPattern override that cannot match the connector's change topics for the
    names being deployed (<TopicPrefix>.<SourceDatabase or PgSchema>.<table>): the job would read nothing."""
    values = parameter_values(parameters)
    pattern = values.get("KafkaTopicPattern", "")
    if not pattern:
        return  # derived by the template from the names
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SystemExit(f"[deploy] KafkaTopicPattern={pattern!r} is not a valid regular expression: {exc}") from None
    second = values["PgSchema"] if values.get("SourceEngine") == "postgres" else values["SourceDatabase"]
    topics = f"{values['TopicPrefix']}.{second}."
    literal = literal_prefix(pattern)
    if not (literal.startswith(topics) or topics.startswith(literal)):
        raise SystemExit(
            f"[deploy] KafkaTopicPattern={pattern!r} cannot match the change topics {topics}<table> of "
            f"SourceEngine={values.get('SourceEngine', 'mysql')}: the job would read nothing. Leave it out "
            "(the stack derives it from TopicPrefix and SourceDatabase or PgSchema) or make it match them."
        )


# ---------------------------------------------------------------- the connector's name
@dataclass(frozen=True)
class DeployedConnector:
    """What names the deployed connector and what replacing it depends on."""

    plugin_hash: str  # DebeziumPluginHash, or DebeziumJava11PluginHash with DebeziumBuild=java11
    worker_hash: str  # the 12 hex digits ending the worker configuration's name
    suffix: str  # ConnectorNameSuffix
    slot: str  # PgSlotName
    engine: str  # SourceEngine
    build: str = "java17"  # DebeziumBuild


def plugin_hash_of(build: str, plugin_hash: str, java11_hash: str) -> str:
    """The hash of the plugin zip DebeziumBuild selects (the template's DebeziumPlugin)."""
    return java11_hash if build == "java11" else plugin_hash


def deployed_connector(cfn: Any, stack_name: str) -> DeployedConnector | None:
    """The deployed stack's connector facts, or None when there is no deployed stack yet."""
    try:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise
    if stack["StackStatus"] == "REVIEW_IN_PROGRESS":  # a change set was made, nothing deployed
        return None
    params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters", [])}
    body = cfn.get_template(StackName=stack_name, TemplateStage="Original")["TemplateBody"]
    found = re.search(r"-worker-([0-9a-f]{12})", body if isinstance(body, str) else json.dumps(body))
    build = params.get("DebeziumBuild", "java17")  # a stack from before the parameter runs Debezium 3.x
    return DeployedConnector(
        plugin_hash=plugin_hash_of(
            build, params.get("DebeziumPluginHash", ""), params.get("DebeziumJava11PluginHash", "")
        ),
        worker_hash=found.group(1) if found else "",
        suffix=params.get("ConnectorNameSuffix", ""),
        slot=params.get("PgSlotName", ""),
        engine=params.get("SourceEngine", "mysql"),
        build=build,
    )


def connector_name_overrides(
    deployed: DeployedConnector | None, plugin_hash: str, worker_hash: str, parameters: list[str]
) -> list[str]:
    """The ConnectorNameSuffix to deploy with. A new plugin or worker configuration makes MSK Connect
    replace the connector, which CloudFormation cannot do under the same name (the update rolls back):
    the connector then gets a new name, derived from the old suffix and the new hashes (so never one
    used before, whose stored offsets would be stale). PostgreSQL's new connector needs a new slot too
    (the old connector holds its slot until it is deleted): without one given, refused with the fix."""
    explicit = {k for k, sep, _ in (p.partition("=") for p in parameters) if sep}
    values = parameter_values(parameters)
    if deployed is None or (deployed.plugin_hash, deployed.worker_hash) == (plugin_hash, worker_hash):
        return []  # the aws CLI keeps the deployed values of parameters not given
    what = [
        f"{name} {old or '?'} -> {new}"
        for name, old, new in (
            ("plugin", deployed.plugin_hash, plugin_hash),
            ("worker", deployed.worker_hash, worker_hash),
        )
        if old != new
    ]
    if "ConnectorNameSuffix" not in explicit:
        digest = hashlib.sha256(f"{deployed.suffix}:{plugin_hash}:{worker_hash}".encode()).hexdigest()
        suffix = f"-{digest[:8]}"
    elif (suffix := values["ConnectorNameSuffix"]) == deployed.suffix:
        raise SystemExit(
            f"[deploy] the connector's {', '.join(what)} changed: MSK Connect replaces it, which needs a new "
            f"name, and ConnectorNameSuffix={suffix!r} is the deployed one. Leave the parameter out (deploy "
            "derives a new suffix) or give a new one."
        )
    engine = values.get("SourceEngine", "mysql")
    if engine == "postgres" and values.get("PgSlotName") == deployed.slot:
        raise SystemExit(
            f"[deploy] the connector's {', '.join(what)} changed: MSK Connect replaces it, and the new PostgreSQL "
            f"connector needs a slot of its own while the old one still holds {deployed.slot}. Deploy again with "
            f"--parameter PgSlotName={deployed.slot[:54]}_{suffix[1:]} (then drop the old slot: SELECT "
            f"pg_drop_replication_slot('{deployed.slot}'); docs/DEPLOY.md, \"Upgrades\")."
        )
    print(
        f"[deploy] the connector's {', '.join(what)} changed: it is replaced under the new name suffix {suffix} "
        'and takes a new snapshot (docs/DEPLOY.md, "Upgrades")'
    )
    return [f"ConnectorNameSuffix={suffix}"]


def connector_naming(
    cfn: Any,
    stack_name: str,
    plugin_hash: str,
    parameters: list[str],
    worker_file: Path | None = None,
    java11_hash: str = "",
) -> list[str]:
    """The deployed connector compared with the one about to be deployed (the built plugin DebeziumBuild
    selects, the worker properties file): the name overrides a replacement needs, or SystemExit with the
    fix. DebeziumBuild not given keeps the deployed one (the aws CLI keeps a parameter not given)."""
    worker = templates.worker_hash_of_file(worker_file) if worker_file else templates.worker_hash_of_file()
    deployed = deployed_connector(cfn, stack_name)
    explicit = dict(p.partition("=")[::2] for p in parameters if "=" in p)
    build = explicit.get("DebeziumBuild") or (deployed.build if deployed else "java17")
    return connector_name_overrides(deployed, plugin_hash_of(build, plugin_hash, java11_hash), worker, parameters)


def report_connector_jvm(seen: connector_jvm.JavaSeen, engine: str) -> None:
    fix = connector_jvm.fix_for(seen, engine)
    if fix:
        print(f"[deploy] the connector cannot run: {fix}", file=sys.stderr, flush=True)
    else:
        print(f"[deploy] connector workers run Java {seen.version}", flush=True)


def watch_connector_jvm(logs: Any, stack_name: str, engine: str, every_s: float = 30.0) -> connector_jvm.Watch:
    """While the stack deploys, the connector's log group is read for its workers' Java (a first deploy
    that fails on it rolls back and deletes the group): the fix is printed as soon as it is seen."""
    group = connector_jvm.log_group(stack_name, engine)
    since = int(time.time() * 1000) - 3600_000  # a deploy resumed after the CLI stopped waiting
    return connector_jvm.Watch(logs, group, since, lambda seen: report_connector_jvm(seen, engine), every_s)


# Names the stack builds from its own name, with the service's length limit: a longer stack name fails
# the first deploy at that resource. Lambda: FunctionName at most 64 characters; MSK: ClusterName 64.
NAME_LIMITS = {("AWS::Lambda::Function", "FunctionName"): 64, ("AWS::MSK::ServerlessCluster", "ClusterName"): 64}


def longest_stack_name(template: dict[str, Any]) -> tuple[int, str]:
    """The longest stack name every name of NAME_LIMITS fits with, and the resource that sets it."""
    best = (128, "CloudFormation's own limit")  # a stack name has at most 128 characters
    for logical_id, resource in template["Resources"].items():
        for (kind, prop), limit in NAME_LIMITS.items():
            name = resource.get("Properties", {}).get(prop) if resource.get("Type") == kind else None
            text = name.get("Fn::Sub") if isinstance(name, dict) else None
            if isinstance(text, str) and "${AWS::StackName}" in text:
                room = limit - len(re.sub(r"\$\{[^}]+\}", "", text))
                best = min(best, (room, f"{logical_id} ({prop} {text}, at most {limit} characters)"))
    return best


def check_stack_name(stack_name: str, template: dict[str, Any] | None = None) -> None:
    """Refuse a stack name too long for a name the stack derives from it, before anything is built."""
    longest, where = longest_stack_name(template or templates.render_template())
    if len(stack_name) > longest:
        raise SystemExit(
            f"[deploy] --stack-name {stack_name!r} has {len(stack_name)} characters; the stack names {where} "
            f"after it, so it may have at most {longest}: choose a shorter stack name."
        )


def run_preflight(session: Any, parameters: list[str], region: str, assume_egress: bool = False) -> bool:
    """Your own network's checks (nothing in demo mode); prints each problem with its fix."""
    if assume_egress:
        print("[deploy] --assume-egress: the subnets' routes to AWS are not checked", file=sys.stderr)
    problems = preflight.run(session, parameter_values(parameters), region, assume_egress)
    for problem in problems:
        print(f"[deploy] preflight: {problem.line()}", file=sys.stderr)
    if problems:
        print(f"[deploy] {len(problems)} preflight check(s) failed: nothing was created or changed", file=sys.stderr)
    return not problems


def deploy_and_wait(cfn: Any, stack_name: str, wait_s: float, deploy: Any, poll_s: float = 30.0) -> str:
    """Deploy with the aws CLI; when it gives up waiting (60 min) or fails while the stack is still in
    progress, wait on with our own bound. Returns the stack's usable status, raises StackNotReady."""
    before = stacks.status(cfn, stack_name)
    if stacks.in_progress(before):
        print(f"[deploy] stack {stack_name} is {before} (a previous deploy stopped waiting): waiting for it first")
        stacks.wait(cfn, stack_name, wait_s, poll_s)
    elif before == "ROLLBACK_COMPLETE":
        raise stacks.StackNotReady(
            f"stack {stack_name} is ROLLBACK_COMPLETE; first failure: {stacks.first_failure(cfn, stack_name)}. "
            + stacks.fix_for(before, stack_name)
        )
    try:
        deploy()
    except subprocess.CalledProcessError:
        state = stacks.status(cfn, stack_name)
        if state in (None, "REVIEW_IN_PROGRESS"):
            raise stacks.StackNotReady(
                f"aws cloudformation deploy failed before CloudFormation started on stack {stack_name}: its "
                "message above says why (a template rule names the parameter to set)"
            ) from None
        if not stacks.in_progress(state):
            return stacks.wait(cfn, stack_name, 0, poll_s)  # raises with the first failure unless usable
        print(
            f"[deploy] the aws CLI stopped waiting; stack {stack_name} is {state}: waiting up to {wait_s / 60:.0f} min"
        )
    return stacks.wait(cfn, stack_name, wait_s, poll_s)


def _parser() -> argparse.ArgumentParser:
    parser = arguments.parser("deploy", __doc__)
    parser.add_argument("--artifacts-bucket", help="use this existing bucket instead of the <stack>-bootstrap stack's")
    parser.add_argument(
        "--parameter",
        action="append",
        default=[],
        metavar="Key=Value",
        help="template parameter override, repeatable (e.g. GlueNumberOfWorkers=3)",
    )
    parser.add_argument("--plugin-zip", type=Path, help="connector plugin zip to ship instead of building one")
    parser.add_argument("--no-start-job", action="store_true", help="do not start the Glue streaming job")
    parser.add_argument(
        "--assume-egress",
        action="store_true",
        help="ExistingVpcId: the subnets reach AWS in a way preflight cannot judge (a proxy, routes it does not "
        "know); skip its route and endpoint checks",
    )
    arguments.add_wait(
        parser, "--wait-minutes", 180, "how long to wait for the pipeline stack after the aws CLI stops waiting"
    )
    return parser


def _start_job_and_report(session: Any, outputs: dict[str, str], args: argparse.Namespace) -> None:
    if not args.no_start_job:
        run_id = start_job_if_idle(session.client("glue"), outputs["JobName"])
        print(
            f"[deploy] Glue job {outputs['JobName']}: "
            + (f"started run {run_id}" if run_id else "already running, left alone")
        )
    for key, value in sorted(outputs.items()):
        print(f"  {key:26} {value}")
    print(f"[deploy] check the running pipeline end to end: doctor {args.stack_name} --region {args.region}")


def main(argv: list[str] | None = None) -> int:
    args = arguments.parse(_parser(), argv)

    check_stack_name(args.stack_name)
    check_topic_pattern(args.parameter)
    session = arguments.session(args)
    if not run_preflight(session, args.parameter, args.region, args.assume_egress):
        return 2
    built = build.build_templates(BUILD_DIR / "cloudformation")
    manifest = build.build_artifacts(BUILD_DIR, plugin_zip=args.plugin_zip, source_engine=source_engine(args.parameter))
    if not manifest["seed_sql_files"]:
        print("[deploy] WARNING: no sql/*.sql: the database gets no seed data", file=sys.stderr)

    cfn = session.client("cloudformation")
    built_params: dict[str, str] = manifest["parameters"]  # type: ignore[assignment]
    naming = connector_naming(
        cfn,
        args.stack_name,
        built_params["DebeziumPluginHash"],
        args.parameter,
        java11_hash=built_params["DebeziumJava11PluginHash"],
    )
    bucket = args.artifacts_bucket
    if not bucket:
        bootstrap = f"{args.stack_name}-bootstrap"
        deploy_stack(built["bootstrap"], bootstrap, args.region, args.profile)
        bucket = stack_outputs(cfn, bootstrap)["ArtifactsBucketName"]

    uploaded = upload_artifacts(session.client("s3"), bucket, manifest["artifacts"])  # type: ignore[arg-type]
    print(
        f"[deploy] artifacts in s3://{bucket}: {len(uploaded)} uploaded, "
        f"{len(manifest['artifacts']) - len(uploaded)} unchanged"
    )  # type: ignore[arg-type]

    packaged = package(
        built["pipeline"], bucket, BUILD_DIR / "cloudformation" / "packaged.yaml", args.region, args.profile
    )
    overrides = parameter_overrides(manifest["parameters"], bucket, args.parameter) + naming  # type: ignore[arg-type]
    engine = source_engine(args.parameter)
    try:
        with watch_connector_jvm(session.client("logs"), args.stack_name, engine):
            deploy_and_wait(
                cfn,
                args.stack_name,
                args.wait_minutes * 60,
                lambda: deploy_stack(packaged, args.stack_name, args.region, args.profile, overrides, bucket),
            )
    except stacks.StackNotReady as exc:
        print(f"[deploy] {exc}", file=sys.stderr)
        return 1

    _start_job_and_report(session, stack_outputs(cfn, args.stack_name), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
