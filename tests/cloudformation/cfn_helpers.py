"""Small helpers shared by the CloudFormation tests."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any


def resources_of(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def walk(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) pair of a nested template."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, (*path, i))


def sub_parts(node: Any) -> tuple[str, dict[str, Any]]:
    """The text and the variable map of a Fn::Sub (short form: no variables)."""
    sub = node["Fn::Sub"]
    return (sub, {}) if isinstance(sub, str) else (sub[0], sub[1])


_NO_VALUE = object()

# Parameters of a complete own-network deployment (ExistingVpcId mode), for variants that need one:
# another SourceDatabase than the demo's seeded salesdb, for instance.
EXISTING_NETWORK = {
    "ExistingVpcId": "vpc-0123456789abcdef0",
    "ExistingSubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "ExistingSubnetAz": "eu-west-1a",
    "ExistingDbHost": "orders.example.eu-west-1.rds.amazonaws.com",
    "ExistingDbSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:debezium-AbCdEf",
    "ExistingDbSecurityGroupId": "sg-0123456789abcdef0",
}


def parameter_values(template: dict[str, Any], **parameters: str) -> dict[str, str]:
    """Every template parameter's value: the given one, the default otherwise."""
    values = {name: str(parameters.get(name, p.get("Default"))) for name, p in template.get("Parameters", {}).items()}
    unknown = set(parameters) - set(values)
    assert not unknown, f"not template parameters: {unknown}"
    return values


def condition_holds(
    template: dict[str, Any], node: Any, values: dict[str, str], cache: dict[str, bool] | None = None
) -> bool:
    """A condition (a Conditions name, or a Fn::Equals/Not/And/Or/Condition expression, as in a
    Condition or a Rule's RuleCondition/Assert) evaluated as CloudFormation would for `values`."""
    cache = {} if cache is None else cache

    def value(node: Any) -> str:
        if isinstance(node, dict) and "Fn::Join" in node:  # [delimiter, a list parameter's Ref]
            delimiter, items = node["Fn::Join"]
            return delimiter.join(values[items["Ref"]].split(","))
        return values[node["Ref"]] if isinstance(node, dict) and "Ref" in node else str(node)

    def cond(node: Any) -> bool:
        if isinstance(node, str):
            if node not in cache:
                cache[node] = cond(template["Conditions"][node])
            return cache[node]
        ((fn, args),) = node.items()
        if fn == "Condition":
            return cond(args)
        if fn == "Fn::Equals":
            return value(args[0]) == value(args[1])
        if fn == "Fn::Not":
            return not cond(args[0])
        if fn == "Fn::And":
            return all(cond(a) for a in args)
        if fn == "Fn::Or":
            return any(cond(a) for a in args)
        if fn == "Fn::Contains":  # Rules only: [list, string]; a CommaDelimitedList parameter is split
            items = args[0]
            if isinstance(items, dict) and "Ref" in items:
                items = values[items["Ref"]].split(",")
            return value(args[1]) in [value(i) for i in items]
        raise AssertionError(f"condition function {fn} not supported")

    return cond(node)


def resolve_variant(template: dict[str, Any], **parameters: str) -> dict[str, Any]:
    """The template as CloudFormation deploys it with these parameter values (defaults otherwise):
    resources and outputs whose Condition is false dropped, every Fn::If replaced by its chosen
    branch, AWS::NoValue removed. Lets a test look at one variant (e.g. SourceEngine=postgres)."""
    t = copy.deepcopy(template)
    values = parameter_values(t, **parameters)
    cache: dict[str, bool] = {}

    def cond(node: Any) -> bool:
        return condition_holds(t, node, values, cache)

    def choose(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Fn::If"}:
                name, when_true, when_false = node["Fn::If"]
                return choose(when_true if cond(name) else when_false)
            if node == {"Ref": "AWS::NoValue"}:
                return _NO_VALUE
            return {k: c for k, v in node.items() if (c := choose(v)) is not _NO_VALUE}
        if isinstance(node, list):
            return [c for v in node if (c := choose(v)) is not _NO_VALUE]
        return node

    for section in ("Resources", "Outputs"):
        t[section] = {
            name: choose(body)
            for name, body in t.get(section, {}).items()
            if "Condition" not in body or cond(body["Condition"])
        }
    return t


def failed_assertions(template: dict[str, Any], **parameters: str) -> list[str]:
    """The AssertDescription of every Rule assertion that fails for these parameter values (defaults
    otherwise), as CloudFormation checks them before it creates or changes anything."""
    values = parameter_values(template, **parameters)
    failed = []
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not condition_holds(template, rule["RuleCondition"], values):
            continue
        failed += [
            a["AssertDescription"] for a in rule["Assertions"] if not condition_holds(template, a["Assert"], values)
        ]
    return failed


def sub_value(node: Any, values: dict[str, str]) -> str:
    """A literal, a parameter Ref or a Fn::Sub over parameters only, with these values."""
    if isinstance(node, dict) and "Ref" in node:
        return values[node["Ref"]]
    if isinstance(node, dict) and "Fn::Sub" in node:
        text, variables = sub_parts(node)
        scope = values | {k: sub_value(v, values) for k, v in variables.items()}
        return re.sub(r"\$\{([^}!]+)\}", lambda m: scope[m.group(1)], text)
    return str(node)


class Replies(BaseHTTPRequestHandler):
    """CloudFormation's pre-signed ResponseURL, played by a local HTTP server (fixture response_url):
    records each custom-resource reply."""

    received: list[dict[str, Any]] = []  # noqa: RUF012 - shared with the test through the class

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Replies.received.append({"body": json.loads(body), "content_type": self.headers.get("Content-Type")})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


# What the stack computes for a connector's settings (!Sub values), as deployed: a host, numbers,
# SourceTransactions keep. Only for validating the configuration with the plugin, offline.
DEPLOYED_STAND_INS = {"database.hostname": "127.0.0.1", "provide.transaction.metadata": "true"}


def as_deployed(connector: dict[str, Any]) -> dict[str, str]:
    """An AWS::KafkaConnect::Connector's configuration with a stand-in for each computed value; the
    database port is 1, where nothing listens, so that the plugin's validate() stops at the connection."""
    config = {
        k: (v if isinstance(v, str) else DEPLOYED_STAND_INS.get(k, "1"))
        for k, v in connector["Properties"]["ConnectorConfiguration"].items()
    }
    return {**config, "database.port": "1"}
