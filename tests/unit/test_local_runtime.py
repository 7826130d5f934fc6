"""Which Glue runtime a local run uses (local/session.py): Hudi on Glue 5.0's Spark 3.5 beside the
venv's Glue 6.0 Spark 4.1, any format on 5.0 for the upgrade drill, and a session on the wrong
pyspark refused with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from cdclake.common.settings import TableFormat
from cdclake.local.session import GLUE_VERSION_ENV, check_spark, glue_version, runtime_env


def test_hudi_runs_on_glue_5_and_the_others_on_glue_6_unless_told_otherwise() -> None:
    assert glue_version("hudi", {}) == "5.0"
    assert glue_version("iceberg", {}) == glue_version("delta", {}) == "6.0"
    assert glue_version("iceberg", {GLUE_VERSION_ENV: "5.0"}) == "5.0"
    assert glue_version("hudi", {GLUE_VERSION_ENV: "6.0"}) == "5.0"  # Hudi has no Glue 6.0 runtime here


def test_delta_on_glue_5_or_an_unknown_version_is_refused_with_the_choices() -> None:
    with pytest.raises(RuntimeError, match=r"delta runs on Glue 6\.0 only"):
        glue_version("delta", {GLUE_VERSION_ENV: "5.0"})
    with pytest.raises(RuntimeError, match=r"must be 5\.0 or 6\.0, got '5\.1'"):
        glue_version("iceberg", {GLUE_VERSION_ENV: "5.1"})


def test_a_glue_5_run_puts_glue_5s_pyspark_first_and_keeps_the_path_it_had(tmp_path: Path) -> None:
    (tmp_path / "glue5" / "python" / "pyspark").mkdir(parents=True)
    env = {"CDC_LOCAL_DIR": str(tmp_path), "PYTHONPATH": "/somewhere"}
    assert runtime_env("hudi", env) == {"PYTHONPATH": f"{tmp_path}/glue5/python:/somewhere"}
    assert runtime_env("iceberg", env) == {}
    assert runtime_env("iceberg", env | {GLUE_VERSION_ENV: "5.0"})["PYTHONPATH"].startswith(f"{tmp_path}/glue5")


def test_a_glue_5_run_without_glue_5s_pyspark_says_to_run_make_setup(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"no Glue 5.0 pyspark in .*: run `make setup`"):
        runtime_env("hudi", {"CDC_LOCAL_DIR": str(tmp_path)})


def test_a_session_on_the_other_runtimes_pyspark_is_refused_naming_the_fix() -> None:
    check_spark(TableFormat.HUDI, "3.5.4", {})
    check_spark(TableFormat.ICEBERG, "4.1.1", {})
    with pytest.raises(
        RuntimeError, match=r"hudi runs on Glue 5.0's Spark 3.5, but this process has pyspark 4.1.1: put "
    ):
        check_spark(TableFormat.HUDI, "4.1.1", {})
    with pytest.raises(RuntimeError, match=r"iceberg runs on Glue 6.0's Spark 4.1, but this process has pyspark 3.5.4"):
        check_spark(TableFormat.ICEBERG, "3.5.4", {})
