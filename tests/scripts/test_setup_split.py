"""Deploying needs only scripts/setup-deploy (it installs the deploy commands): the aws CLI and the linters, no database server, no
sudo; the local stack's set-up (make setup) includes all of it and adds the rest."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pins(path: Path) -> set[str]:
    return {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.\[\]-]+)==", path.read_text(), re.M)}


def test_the_deploy_requirements_hold_the_deploy_tools_and_nothing_of_the_local_stack() -> None:
    deploy = pins(ROOT / "requirements-deploy.txt")
    assert {"awscli", "boto3", "cfn-lint", "checkov", "ruff"} <= deploy
    assert not deploy & {"pyspark", "confluent-kafka", "pymysql", "psycopg", "duckdb", "moto[server]"}


def test_the_development_requirements_include_the_deploy_ones_without_a_second_pin() -> None:
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert re.search(r"^-r requirements-deploy\.txt$", dev, re.M)
    assert not pins(ROOT / "requirements-dev.txt") & pins(ROOT / "requirements-deploy.txt")


def test_setup_deploy_installs_no_system_package_and_no_database() -> None:
    code = "\n".join(
        line
        for line in (ROOT / "scripts" / "setup-deploy").read_text().splitlines()
        if not line.lstrip().startswith("#")
    )
    for forbidden in ("sudo ", "apt-get install", "mariadb", "setup-stack", "setup-local"):
        assert not re.search(rf"^[^\"']*{re.escape(forbidden)}", code, re.M), forbidden
    assert (
        "requirements-deploy.txt" in code
        and 'pinned_jars.py" resolve glue-extra-jars debezium-mysql debezium-postgres' in code
    )


def test_setup_deploy_installs_the_aws_commands_and_make_has_both_targets() -> None:
    code = (ROOT / "scripts" / "setup-deploy").read_text()
    assert '"$ROOT/scripts/setup-package" "$VENV"' in code
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for name in ("deploy", "destroy", "doctor", "replay", "glue-container", "build-artifacts"):
        assert declared[name].startswith("cdcdeploy."), name
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^setup-deploy:.*\n\t@scripts/setup-deploy$", makefile, re.M)
    assert re.search(r"^lint-cfn: setup-deploy ", makefile, re.M)


def test_the_local_stack_takes_the_distributions_postgresql_major_version() -> None:
    text = (ROOT / "scripts" / "setup-stack").read_text()
    assert "postgresql-15" not in text and "/postgresql/15/" not in text
    assert '"postgresql-$PG_MAJOR"' in text
