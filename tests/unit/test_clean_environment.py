"""The suite runs in a clean environment whatever the developer's shell exports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from clean_env import behaviour_variables

ROOT = Path(__file__).resolve().parents[2]


def test_behaviour_variables_are_the_cdc_and_aws_ones_except_install_locations() -> None:
    environ = {
        "CDC_STACK_SOURCE": "postgres",
        "CDC_TEST_CRASH_AT": "before-iceberg-commit",
        "AWS_PROFILE": "prod",
        "AWS_ENDPOINT_URL": "http://elsewhere",
        "CDC_LOCAL_DIR": "/opt/cdc",
        "CDC_MAVEN_SETTINGS": "/etc/m2.xml",
        "PATH": "/usr/bin",
        "JAVA_HOME": "/usr/lib/jvm/java-17",
    }

    assert behaviour_variables(environ) == ["AWS_ENDPOINT_URL", "AWS_PROFILE", "CDC_STACK_SOURCE", "CDC_TEST_CRASH_AT"]


def test_a_test_run_does_not_see_a_source_or_profile_exported_in_the_shell() -> None:
    # The probe sits under tests/ so that the project's tests/conftest.py applies, as to every test;
    # its name matches no test pattern, so only this run collects it.
    target = ROOT / "tests" / "unit" / f"_probe_{os.getpid()}.py"
    target.write_text(
        "import os\n"
        "def test_probe():\n"
        "    assert 'CDC_STACK_SOURCE' not in os.environ and 'AWS_PROFILE' not in os.environ\n"
        "    assert os.environ['CDC_LOCAL_DIR'] == '/kept'\n"
    )
    try:
        # A fixture of this worker may have set other AWS_* / CDC_* variables: the probe gets exactly two.
        inherited = {k: v for k, v in os.environ.items() if k not in behaviour_variables(os.environ)}
        env = {**inherited, "CDC_STACK_SOURCE": "postgres", "AWS_PROFILE": "prod", "CDC_LOCAL_DIR": "/kept"}
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", str(target)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        target.unlink()
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "cleared from the environment: AWS_PROFILE, CDC_STACK_SOURCE" in res.stdout
