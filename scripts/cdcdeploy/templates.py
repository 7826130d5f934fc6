"""Render cloudformation/cdc-pipeline.yaml into the template that is packaged and deployed.

Three things in the source template are filled from files, so that no second copy can drift:
- the connector's ConnectorConfiguration, from cloudformation/connector/debezium-mysql.json (the file
  the local Kafka Connect uses too), as described by the resource's Metadata.Render (its Values fill
  the file's placeholders; its Variables are the !Sub variables those values name);
- the worker configuration's PropertiesFileContent, from cloudformation/connector/msk-worker.properties;
- one AWS::Athena::NamedQuery per sql/athena/*.sql.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CFN_DIR = ROOT / "cloudformation"
SOURCE_TEMPLATE = CFN_DIR / "cdc-pipeline.yaml"
BOOTSTRAP_TEMPLATE = CFN_DIR / "bootstrap.yaml"
ATHENA_SQL_DIR = ROOT / "sql" / "athena"
# The settings a wire format replaces (scripts/cdctools/connector_config.py, CONVERTER_PREFIXES).
CONVERTER_PREFIXES = ("key.converter", "value.converter")
# Placeholders of the connector source file are upper case (${DB_HOST}); CloudFormation's are not.
PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")

Template = dict[str, Any]


class RenderError(ValueError):
    """The source template and the files it is rendered from disagree."""


# ---------------------------------------------------------------- YAML with CloudFormation tags
class _CfnLoader(yaml.SafeLoader):
    """SafeLoader that turns short-form intrinsics (!Ref, !Sub, !GetAtt ...) into their long form."""


def _intrinsic(loader: _CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


def load_template(path: Path) -> Template:
    with path.open(encoding="utf-8") as f:
        return yaml.load(f, Loader=_CfnLoader)  # a SafeLoader subclass


def dump_template(template: Template) -> str:
    return yaml.safe_dump(template, sort_keys=False, default_flow_style=False, width=1000, allow_unicode=True)


# ---------------------------------------------------------------- connector configuration
def _render_fallback(template_path: Path, values: dict[str, str]) -> dict[str, str]:
    """Same contract as scripts/cdctools/connector_config.py's render(): `_` keys dropped, ${NAME} filled."""
    raw = json.loads(Path(template_path).read_text(encoding="utf-8"))
    settings = {k: str(v) for k, v in raw.items() if not k.startswith("_")}
    missing = sorted({m for v in settings.values() for m in PLACEHOLDER.findall(v)} - set(values))
    if missing:
        raise RenderError(f"{template_path}: no value for {', '.join(missing)}")
    return {key: PLACEHOLDER.sub(lambda m: values[m.group(1)], value) for key, value in settings.items()}


def render_connector(template_path: Path, values: dict[str, str]) -> dict[str, str]:
    """Render the connector source file, with the shared scripts/cdctools/connector_config.py when it exists."""
    try:
        from cdctools.connector_config import render  # the tools' module (the installed package)
    except ImportError:
        render = _render_fallback
    rendered = {k: str(v) for k, v in render(template_path, values).items() if not k.startswith("_")}
    leftover = {k: v for k, v in rendered.items() if PLACEHOLDER.search(v)}
    if leftover:
        raise RenderError(f"unfilled placeholders in {template_path}: {leftover}")
    return rendered


def source_keys(template_path: Path) -> list[str]:
    """Every setting of the connector source file (comment keys excluded)."""
    raw = json.loads(Path(template_path).read_text(encoding="utf-8"))
    return [k for k in raw if not k.startswith("_")]


def _cfn_string(value: str, variables: dict[str, Any] | None = None) -> str | dict[str, Any]:
    """A !Sub for a value with ${...}; the spec's Variables it names become the Sub's variable map."""
    if "${" not in value:
        return value
    used = {k: copy.deepcopy(v) for k, v in (variables or {}).items() if "${" + k + "}" in value}
    return {"Fn::Sub": [value, used] if used else value}


def render_connector_configuration(resource: dict[str, Any], cfn_dir: Path) -> dict[str, Any]:
    spec = resource.get("Metadata", {}).get("Render")
    if not spec or "Source" not in spec:
        raise RenderError("the AWS::KafkaConnect::Connector resource needs Metadata.Render.Source")
    source = cfn_dir / spec["Source"]
    config = render_connector(source, {k: str(v) for k, v in spec.get("Values", {}).items()})
    overlay = {k: str(v) for k, v in spec.get("MskOnly", {}).items()}
    clash = sorted(set(overlay) & set(config))
    if clash:
        raise RenderError(f"MskOnly must not override {source.name}: {clash}")
    config.update(overlay)
    variables = spec.get("Variables", {})
    rendered = {key: _cfn_string(value, variables) for key, value in config.items()}
    if "WireFormat" in spec:
        rendered = _with_wire_format(rendered, spec["WireFormat"], cfn_dir)
    # The spec holds !Sub syntax outside a Sub: keep only where the values came from.
    resource["Metadata"]["Render"] = {"RenderedFrom": spec["Source"]}
    return rendered


def _with_wire_format(rendered: dict[str, Any], spec: dict[str, Any], cfn_dir: Path) -> dict[str, Any]:
    """The settings under the condition `spec["Condition"]` (the template's WireFormat avro): the converter
    settings of `spec["Source"]` replace the connector's (scripts/connector_config.with_wire_format, as
    the local stack does), each setting an Fn::If between the two formats' values."""
    condition = spec["Condition"]
    avro = render_connector(cfn_dir / spec["Source"], {k: str(v) for k, v in spec.get("Values", {}).items()})
    if not all(k.startswith(CONVERTER_PREFIXES) or k.endswith("adjustment.mode") for k in avro):
        raise RenderError(f"{spec['Source']} may set only converter and name-adjustment settings")
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*rendered, *avro]):
        # fresh objects each: a shared one would be dumped as a YAML alias, which CloudFormation rejects
        json_value = rendered.get(key, {"Ref": "AWS::NoValue"})
        if key in avro:
            avro_value = _cfn_string(avro[key], spec.get("Variables", {}))
        else:  # a JSON converter's own setting goes with it; every other setting stays
            avro_value = {"Ref": "AWS::NoValue"} if key.startswith(CONVERTER_PREFIXES) else json_value
        out[key] = json_value if avro_value == json_value else {"Fn::If": [condition, avro_value, json_value]}
    return out


# ---------------------------------------------------------------- worker configuration
def render_worker_configuration(resource: dict[str, Any], cfn_dir: Path) -> None:
    spec = resource.get("Metadata", {}).get("Render", {})
    if "PropertiesFile" not in spec:
        raise RenderError("the AWS::KafkaConnect::WorkerConfiguration needs Metadata.Render.PropertiesFile")
    content = worker_properties((cfn_dir / spec["PropertiesFile"]).read_bytes())
    props = resource["Properties"]
    props["PropertiesFileContent"] = base64.b64encode(content).decode("ascii")
    name = props["Name"]
    base = name["Fn::Sub"] if isinstance(name, dict) else name
    props["Name"] = {"Fn::Sub": f"{base}-{worker_hash(content)}"}
    resource["Metadata"]["Render"] = {"RenderedFrom": spec["PropertiesFile"]}


def worker_properties(content: bytes) -> bytes:
    """The worker properties MSK Connect gets: the file without its comments and blank lines, each
    line trimmed, in order. A comment edit changes neither the content nor its hash, so it replaces
    neither the worker configuration nor the connector that uses it."""
    lines = [line.strip() for line in content.decode("utf-8").splitlines()]
    return "".join(f"{line}\n" for line in lines if line and not line.startswith(("#", "!"))).encode("utf-8")


def worker_hash(properties: bytes) -> str:
    """The 12 hex digits that end the worker configuration's name: of `worker_properties` output."""
    return hashlib.sha256(properties).hexdigest()[:12]


def worker_hash_of_file(path: Path = CFN_DIR / "connector" / "msk-worker.properties") -> str:
    return worker_hash(worker_properties(path.read_bytes()))


# ---------------------------------------------------------------- Athena named queries
def _logical_id(stem: str) -> str:
    words = re.split(r"[^0-9A-Za-z]+", re.sub(r"^\d+[_-]*", "", stem))
    return "AthenaQuery" + "".join(w[:1].upper() + w[1:] for w in words if w)


# Names a saved query may use beyond the template's parameters and resources: the first part of a lake
# table's name, <database>_<table> for MySQL and <schema>_<table> for PostgreSQL (the job's
# --table_name_template {db}_{table}, where Debezium's PostgreSQL `db` is the schema).
QUERY_VARIABLES: dict[str, Any] = {
    "SourceTablePrefix": {"Fn::If": ["IsPostgres", {"Ref": "PgSchema"}, {"Ref": "SourceDatabase"}]},
}


def _query_sub(text: str) -> dict[str, Any]:
    # Copies: a node shared by several queries would be dumped as a YAML alias, which CloudFormation rejects.
    used = {k: copy.deepcopy(v) for k, v in QUERY_VARIABLES.items() if "${" + k + "}" in text}
    return {"Fn::Sub": [text, used] if used else text}


def named_queries(sql_dir: Path) -> dict[str, dict[str, Any]]:
    """One NamedQuery per .sql file; leading `--` lines are its description, ${...} are !Sub names
    (template parameters, or QUERY_VARIABLES)."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(sql_dir.glob("*.sql")):
        text = path.read_text(encoding="utf-8").strip() + "\n"
        description = " ".join(
            line[2:].strip() for line in text.splitlines() if line.startswith("--") and line[2:].strip()
        )
        logical_id = _logical_id(path.stem)
        if logical_id in out:
            raise RenderError(f"{path.name}: two SQL files map to {logical_id}")
        out[logical_id] = {
            "Type": "AWS::Athena::NamedQuery",
            "Properties": {
                "Name": re.sub(r"^\d+[_-]*", "", path.stem).replace("_", " "),
                "Description": description[:1024] or path.name,
                "Database": {"Ref": "GlueDatabase"},
                "WorkGroup": {"Ref": "AthenaWorkGroup"},
                "QueryString": _query_sub(text),
            },
        }
    return out


# ---------------------------------------------------------------- the whole template
def render_template(source: Path = SOURCE_TEMPLATE, athena_sql_dir: Path = ATHENA_SQL_DIR) -> Template:
    template = load_template(source)
    cfn_dir = source.parent
    resources: dict[str, Any] = template["Resources"]
    for resource in resources.values():
        if resource["Type"] == "AWS::KafkaConnect::Connector":
            resource["Properties"]["ConnectorConfiguration"] = render_connector_configuration(resource, cfn_dir)
        elif resource["Type"] == "AWS::KafkaConnect::WorkerConfiguration":
            render_worker_configuration(resource, cfn_dir)
    queries = named_queries(athena_sql_dir)
    clash = sorted(set(queries) & set(resources))
    if clash:
        raise RenderError(f"named queries clash with resources: {clash}")
    resources.update(queries)
    return template


def write_templates(out_dir: Path) -> dict[str, Path]:
    """Rendered pipeline template and the (unchanged) bootstrap template, in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pipeline = out_dir / SOURCE_TEMPLATE.name
    pipeline.write_text(dump_template(render_template()), encoding="utf-8")
    bootstrap = out_dir / BOOTSTRAP_TEMPLATE.name
    bootstrap.write_text(BOOTSTRAP_TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    return {"pipeline": pipeline, "bootstrap": bootstrap}
