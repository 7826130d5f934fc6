"""This project's job, exactly as docs/LOCAL_STACK.md runs it: the Glue entry point with Spark's Kafka
source (as on Glue), trigger 1 s, writing its own namespace."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .base import DATABASE, TOPIC_PREFIX, Context, System, fresh

ROOT = Path(__file__).resolve().parents[3]


class ProjectJob(System):
    name = "job"
    label = "this project's job (Spark, Kafka source)"

    def start(self, ctx: Context, tables: list[str]) -> None:
        self.dir = ctx.work
        args = [
            str(ROOT / ".local" / "venv" / "bin" / "python"),
            str(ROOT / "glue_scripts" / "cdc_lake_job.py"),
            "--source", "kafka", "--kafka_auth", "none",
            "--kafka_bootstrap_servers", ctx.kafka,
            # its tables' change topics and the connector's schema-change topic (renames come from there)
            "--kafka_topic_pattern", rf"{TOPIC_PREFIX}(\.{DATABASE}\.{self.name}_.*)?",
            "--catalog_type", "hadoop", "--warehouse", str(ctx.warehouse), "--namespace", self.name,
            "--checkpoint_location", str(ctx.work / "checkpoint"), "--dead_letter_path", str(ctx.work / "dead"),
            "--trigger_interval_seconds", "1",
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "CDC_SPARK_DRIVER_MEMORY")}
        self.launch(args, ctx.work / "job.log", env)

    def description(self) -> str:
        return "glue_scripts/cdc_lake_job.py --source kafka --trigger_interval_seconds 1 (MERGE, merge-on-read)"

    def check(self) -> None:
        super().check()
        dead = [line for f in (self.dir / "dead").glob("*/*.json") for line in f.read_text().splitlines()]
        if dead:
            raise RuntimeError(f"the job dead-lettered {len(dead)} record(s), e.g. {json.loads(dead[0])['reason']}")

    def current(self, spark, table: str):
        from cdclake.common.lake_contract import is_metadata_column  # on the path once main has chosen --glue-scripts

        t = fresh(spark, self.lake_table(table))
        return t.drop(*[c for c in t.columns if is_metadata_column(c)])
