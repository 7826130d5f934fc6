"""The AWS sample's approach (cdcbench/baseline.py: inferred JSON schema, dedup by the envelope's
ts_ms, MERGE upserts then MERGE deletes) run as a streaming job of its own: Spark's Kafka source,
trigger 1 s, one query per table, on tables created up front as the sample's manual step does
(columns as its schema inference sees them: decimals as base64 strings, DATETIME as epoch micros)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .base import DATABASE, TOPIC_PREFIX, Context, System

ROOT = Path(__file__).resolve().parents[3]


class AwsSample(System):
    name = "sample"
    label = "AWS sample's approach (Spark, Kafka source)"

    def start(self, ctx: Context, tables: list[str]) -> None:
        args = [
            str(ROOT / ".local" / "venv" / "bin" / "python"),
            str(Path(__file__).with_name("aws_sample_job.py")),
            "--kafka", ctx.kafka, "--warehouse", str(ctx.warehouse), "--namespace", self.name,
            "--checkpoints", str(ctx.work / "checkpoint"),
            *[f"{TOPIC_PREFIX}.{DATABASE}.{t}" for t in tables],
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "CDC_SPARK_DRIVER_MEMORY")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "scripts"), str(ROOT / "glue_scripts"), *sys.path[:0]])
        self.launch(args, ctx.work / "sample.log", env)

    def description(self) -> str:
        return "cdcbench/baseline.py per micro-batch, Spark Kafka source, trigger 1 s, merge-on-read v2 tables"
