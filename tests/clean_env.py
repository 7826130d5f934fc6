"""What a test run clears from the environment it inherits (tests/conftest.py does it at import)."""

from __future__ import annotations

from collections.abc import Mapping

# Variables that say where things are installed, ask for an explicit developer action, or tune the
# JVMs' JIT and collector (speed only); every other CDC_* / AWS_* variable changes what the code
# under test does.
KEPT_VARIABLES = frozenset(
    {"CDC_LOCAL_DIR", "CDC_JARS_DIR", "CDC_MAVEN_SETTINGS", "CDC_CAPTURE_FIXTURES", "CDC_JVM_OPTIONS"}
)


def behaviour_variables(environ: Mapping[str, str]) -> list[str]:
    """The variables of `environ` a test run must not inherit from the developer's shell (a
    `CDC_STACK_SOURCE=postgres` or `AWS_PROFILE` left exported would change what tests exercise)."""
    return sorted(k for k in environ if k.startswith(("CDC_", "AWS_")) and k not in KEPT_VARIABLES)
