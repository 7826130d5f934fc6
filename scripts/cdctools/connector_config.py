"""Renders the Debezium connector template (cloudformation/connector/debezium-mysql.json).

The template is the single source of truth for the connector settings; each environment (the local
Kafka Connect, MSK Connect) only supplies values for its ``${NAME}`` placeholders.

    from cdctools.connector_config import render
    config = render("cloudformation/connector/debezium-mysql.json", {"DB_HOST": "127.0.0.1", ...})

Command line (prints the rendered JSON; values come from NAME=VALUE arguments, or from the
environment with --env, which keeps secrets off the command line):

    python scripts/cdctools/connector_config.py TEMPLATE [NAME=VALUE ...] [--env]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Upper-case names only: Kafka config-provider references such as ${file:/path:key} contain a
# colon and pass through untouched, so a value may itself be such a reference.
PLACEHOLDER = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")


class UnfilledPlaceholderError(ValueError):
    """The template uses placeholders that the given values do not fill."""


def placeholders(template: Mapping[str, Any]) -> set[str]:
    """Names of all ``${NAME}`` placeholders used by the template's (non-comment) values."""
    return {
        name
        for key, value in template.items()
        if not key.startswith("_") and isinstance(value, str)
        for name in PLACEHOLDER.findall(value)
    }


def render_dict(template: Mapping[str, Any], values: Mapping[str, Any], source: str = "template") -> dict:
    """Fills the placeholders of an already loaded template; keys starting with ``_`` are dropped."""
    missing: dict[str, list[str]] = {}
    rendered: dict[str, Any] = {}
    for key, value in template.items():
        if key.startswith("_"):  # comments and other annotations
            continue
        if isinstance(value, str):
            for name in PLACEHOLDER.findall(value):
                if values.get(name) is None or str(values[name]) == "":
                    missing.setdefault(name, []).append(key)
            # A single pass: substituted text is never scanned again.
            value = PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), value)
        rendered[key] = value
    if missing:
        details = "; ".join(f"${{{name}}} (used by {', '.join(keys)})" for name, keys in sorted(missing.items()))
        raise UnfilledPlaceholderError(f"{source}: no value given for {details}")
    return rendered


def render(template_path: str | os.PathLike[str], values: Mapping[str, Any]) -> dict:
    """Loads the JSON template and returns the connector config with every placeholder filled.

    Raises UnfilledPlaceholderError naming each placeholder without a (non-empty) value.
    """
    path = Path(template_path)
    try:
        template = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(template, dict):
        raise ValueError(f"{path}: expected a JSON object of connector settings")
    return render_dict(template, values, source=str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render a Debezium connector template to JSON.")
    parser.add_argument("template", type=Path)
    parser.add_argument("assignments", nargs="*", metavar="NAME=VALUE")
    parser.add_argument("--env", action="store_true", help="take placeholder values from the environment")
    args = parser.parse_intermixed_args(argv)
    values: dict[str, str] = dict(os.environ) if args.env else {}
    for item in args.assignments:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"expected NAME=VALUE, got {item!r}")
        values[name] = value
    try:
        print(json.dumps(render(args.template, values), indent=2))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------------------------------- wire format
WIRE_FORMATS = ("json", "avro")
# The settings that differ with the wire format avro (cloudformation/connector/wire-format-avro.json):
# with it they replace the connector template's converter settings; json is the template as it is.
AVRO_TEMPLATE = Path(__file__).resolve().parents[2] / "cloudformation" / "connector" / "wire-format-avro.json"
CONVERTER_PREFIXES = ("key.converter", "value.converter")


def is_converter_setting(key: str) -> bool:
    return key.startswith(CONVERTER_PREFIXES)


def with_wire_format(config: Mapping[str, Any], wire_format: str, values: Mapping[str, Any]) -> dict:
    """The connector settings for a wire format: `json` leaves them as they are; `avro` replaces
    their converter settings with the avro file's, rendered with `values`."""
    if wire_format not in WIRE_FORMATS:
        raise ValueError(f"wire format {wire_format!r}: choose one of {', '.join(WIRE_FORMATS)}")
    if wire_format == "json":
        return dict(config)
    return {**{k: v for k, v in config.items() if not is_converter_setting(k)}, **render(AVRO_TEMPLATE, values)}
