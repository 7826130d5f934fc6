"""The Glue-catalog tier: moto as a server standing in for S3 and the Glue Data Catalog, and the
Glue jobs' arguments as the rendered CloudFormation template gives them.

Every AWS client (the job's Iceberg GlueCatalog and S3FileIO in the JVM, boto3 and pyiceberg in the
test) talks HTTP to one moto server on a free loopback port, with fake credentials (in the job's
environment, explicit everywhere else), so nothing can reach a real account.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

REGION = "eu-west-1"
ACCOUNT_ID = "123456789012"  # moto's default account
STACK_NAME = "cdc-moto"
# Deploy-time values of the template parameters that have no default (deploy passes the
# bootstrap stack's bucket and the content-hash keys of build-artifacts).
DEPLOY_PARAMETERS = {
    "ArtifactsBucket": f"{STACK_NAME}-artifacts",
    "GlueScriptKey": "glue/000000000000/cdc_lake_job.py",
    "CdclakeZipKey": "glue/000000000000/cdclake.zip",
    "GlueExtraJarKey": "glue/000000000000/aws-msk-iam-auth.jar",
    "GlueAvroJarKey": "glue/000000000000/spark-avro_2.13-4.1.1.jar",
    "GlueAvro5JarKey": "glue/000000000000/spark-avro_2.12-3.5.4.jar",
    "MaintenanceScriptKey": "glue/000000000000/cdc_maintenance_job.py",
    "DebeziumPluginKey": "plugins/debezium-mysql-000000000000.zip",
    "DebeziumPluginHash": "000000000000",
    "DebeziumJava11PluginKey": "plugins/debezium-mysql-java11-000000000000.zip",
    "DebeziumJava11PluginHash": "000000000000",
    "SeedSqlPrefix": "sql/000000000000",
}


# ---------------------------------------------------------------- moto, as a server
@pytest.fixture(scope="session")
def aws_credentials() -> dict[str, str]:
    """Fake credentials and the region. Handed explicitly to every client (boto3, pyiceberg) and in
    the environment of the job's process only (the AWS SDK's default provider chain reads these
    names), so this test process's own environment is left as it is."""
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
    }


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """One moto server (S3, Glue and the rest of moto's services) on a free loopback port, in a process
    of its own so that no other tier's moto in the same worker shares or resets its state."""
    from moto_process import moto_server_process

    with moto_server_process() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def aws(moto_endpoint: str, aws_credentials: dict[str, str]):
    """boto3 clients of the moto server."""
    import boto3

    session = boto3.session.Session(
        aws_access_key_id=aws_credentials["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=aws_credentials["AWS_SECRET_ACCESS_KEY"],
        region_name=aws_credentials["AWS_REGION"],
    )

    class Clients:
        s3 = session.client("s3", endpoint_url=moto_endpoint)
        glue = session.client("glue", endpoint_url=moto_endpoint)

    return Clients


# ---------------------------------------------------------------- the template's Glue job
class Unresolvable(ValueError):
    """A value that exists only once the stack is deployed (e.g. an attribute of a custom resource)."""


@dataclass
class Stack:
    """The rendered template with its parameter values: resolves the intrinsics of a resource's
    properties the way CloudFormation would, for the resources this tier stands in for."""

    template: dict[str, Any]
    parameters: dict[str, str]

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def ref(self, name: str) -> str:
        pseudo = {"AWS::StackName": STACK_NAME, "AWS::AccountId": ACCOUNT_ID, "AWS::Region": REGION}
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        resource = self.resources.get(name)
        if resource is None:
            raise KeyError(f"!Ref {name}: neither a parameter nor a resource of the template")
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::S3::Bucket":
            # No BucketName: CloudFormation generates `<stack>-<logical id>-<suffix>`, lower case.
            return self.resolve(props["BucketName"]) if "BucketName" in props else f"{STACK_NAME}-{name}-moto".lower()
        if resource["Type"] == "AWS::Glue::Database":
            return self.resolve(props["DatabaseInput"]["Name"])
        if resource["Type"] == "AWS::Logs::LogGroup":
            return self.resolve(props["LogGroupName"])
        raise Unresolvable(f"!Ref {name} ({resource['Type']}) has no stand-in in this tier")

    def resolve(self, node: Any) -> Any:
        if isinstance(node, str | int | float | bool):
            return str(node).lower() if isinstance(node, bool) else str(node)
        if isinstance(node, list):
            return [self.resolve(v) for v in node]
        if isinstance(node, dict) and len(node) == 1:
            ((fn, arg),) = node.items()
            if fn == "Ref":
                return self.ref(arg)
            if fn == "Fn::GetAtt":
                raise Unresolvable(f"!GetAtt {'.'.join(arg)} exists only in a deployed stack")
            if fn == "Fn::Sub":
                text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])

                def sub(m: re.Match[str]) -> str:
                    name = m.group(1)
                    if name.startswith("!"):
                        return "${" + name[1:] + "}"
                    if name in local:
                        return self.resolve(local[name])
                    if "." in name:
                        raise Unresolvable(f"${{{name}}} exists only in a deployed stack")
                    return self.ref(name)

                return re.sub(r"\$\{([^}]+)\}", sub, text)
        if isinstance(node, dict):
            return {k: self.resolve(v) for k, v in node.items()}
        raise TypeError(f"cannot resolve {node!r}")


@pytest.fixture(scope="session")
def rendered_template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The pipeline template rendered by the project's own renderer (build-artifacts
    --templates-only)."""
    from cdcdeploy import build, templates

    out = tmp_path_factory.mktemp("build") / "cloudformation"
    return templates.load_template(build.build_templates(out)["pipeline"])


def stack_variant(rendered: dict[str, Any], **parameters: str) -> Stack:
    """The stack as deployed with these parameter values (the template's defaults otherwise)."""
    from cfn_helpers import resolve_variant

    template = resolve_variant(rendered, **parameters)
    values = {name: str(p["Default"]) for name, p in template["Parameters"].items() if "Default" in p}
    values.update(DEPLOY_PARAMETERS, **parameters)
    missing = sorted(set(template["Parameters"]) - set(values))
    assert not missing, f"template parameters without a default and without a deploy value here: {missing}"
    return Stack(template, values)


@pytest.fixture(scope="session")
def stack(rendered_template: dict[str, Any]) -> Stack:
    """The stack as deployed with its defaults (SourceEngine=mysql, TableFormat=iceberg)."""
    return stack_variant(rendered_template)


@dataclass(frozen=True)
class GlueJob:
    logical_id: str
    resource: dict[str, Any]
    # --name -> value, as Glue passes them to the script; None: only known in a deployed stack
    arguments: dict[str, str | None]


def glue_job(stack: Stack, command: str) -> GlueJob:
    """The template's one Glue job of this command (gluestreaming, glueetl), its DefaultArguments resolved."""
    jobs = {
        k: r
        for k, r in stack.resources.items()
        if r["Type"] == "AWS::Glue::Job" and r["Properties"]["Command"]["Name"] == command
    }
    assert len(jobs) == 1, f"expected one {command} Glue job in the template, found {sorted(jobs)}"
    ((logical_id, resource),) = jobs.items()
    arguments: dict[str, str | None] = {}
    for name, value in resource["Properties"]["DefaultArguments"].items():
        try:
            arguments[name] = stack.resolve(value)
        except Unresolvable:
            arguments[name] = None
    return GlueJob(logical_id, resource, arguments)


@pytest.fixture(scope="session")
def streaming_job(stack: Stack) -> GlueJob:
    return glue_job(stack, "gluestreaming")


@pytest.fixture(scope="session")
def session_catalog_jobs(rendered_template: dict[str, Any]) -> dict[str, GlueJob]:
    """The streaming job of the stack deployed with TableFormat=delta, and with hudi."""
    return {f: glue_job(stack_variant(rendered_template, TableFormat=f), "gluestreaming") for f in ("delta", "hudi")}


@pytest.fixture(scope="session")
def maintenance_job(stack: Stack) -> GlueJob:
    return glue_job(stack, "glueetl")


@pytest.fixture(scope="session")
def glue_stack_resources(stack: Stack, streaming_job: GlueJob, aws) -> dict[str, str]:
    """What the stack creates before the job runs and the job relies on, created in moto from the
    template's own definitions: the lake bucket the job's S3 locations name, and the Glue database."""
    buckets = {
        stack.ref(k): k
        for k, r in stack.resources.items()
        if r["Type"] == "AWS::S3::Bucket" and stack.ref(k) in (streaming_job.arguments.get("--warehouse") or "")
    }
    assert len(buckets) == 1, f"--warehouse names no single bucket of the template: {buckets}"
    ((bucket, _),) = buckets.items()
    aws.s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    (database,) = [r for r in stack.resources.values() if r["Type"] == "AWS::Glue::Database"]
    database_input = stack.resolve(database["Properties"]["DatabaseInput"])
    aws.glue.create_database(DatabaseInput=database_input)
    return {"bucket": bucket, "database": database_input["Name"], "database_location": database_input["LocationUri"]}


@pytest.fixture(scope="session")
def job_env(moto_endpoint: str, aws_credentials: dict[str, str]) -> dict[str, str]:
    """The environment of the job's process: fake credentials and region, and the moto endpoints."""
    from cdclake.local.session import CATALOG_PROPERTIES_ENV

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(aws_credentials)
    env[CATALOG_PROPERTIES_ENV] = json.dumps(moto_catalog_properties(moto_endpoint))
    env["CDC_SPARK_MASTER"] = "local[2]"
    return env


def moto_catalog_properties(endpoint: str) -> dict[str, str]:
    """The only Iceberg catalog properties the local run adds to what the Glue job gets: where
    Glue and S3 are (moto), in path style (moto on an IP address has no bucket host names), and
    the region. Credentials come from the environment, as on Glue they come from the job's role."""
    return {
        "glue.endpoint": endpoint,
        "s3.endpoint": endpoint,
        "s3.path-style-access": "true",
        "client.region": REGION,
    }
