"""The AWS sample's approach as a streaming job: `python aws_sample_job.py --kafka HOST:PORT
--warehouse DIR --namespace NS --checkpoints DIR TOPIC...`. Each topic's table is created from the
first change the topic holds (the sample's manual DDL step), then fed by cdcbench.baseline."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from cdclake.local.session import local_session
from pyspark.sql import functions as F

from cdcbench import tables
from cdcbench.baseline import BaselineProcessor, infer_json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka", required=True)
    ap.add_argument("--warehouse", type=Path, required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--checkpoints", type=Path, required=True)
    ap.add_argument("topics", nargs="+")
    a = ap.parse_args()
    os.environ.setdefault("CDC_SPARK_DRIVER_MEMORY", "2g")
    spark = local_session(tables.job_settings(a.warehouse, a.namespace, a.checkpoints), app_name="aws-sample")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS glue_catalog.{a.namespace}")
    props = ", ".join(f"'{k}'='{v}'" for k, v in tables.MOR.items())
    queries = []
    for topic in a.topics:
        table = f"glue_catalog.{a.namespace}.{topic.split('.', 1)[1].replace('.', '_')}"
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", a.kafka).option("subscribe", topic)
        while True:  # the sample's manual step: a table whose columns match the first changes' JSON
            sample = (
                reader.option("startingOffsets", "earliest")
                .load()
                .limit(100)
                .selectExpr("CAST(value AS STRING) AS value")
            )
            after = infer_json(spark, sample.where(F.col("value").isNotNull())).select("payload.after.*")
            if after.columns:
                break
            time.sleep(1)
        cols = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in after.schema.fields)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({cols}) USING iceberg TBLPROPERTIES ({props})")
        proc = BaselineProcessor(spark, table)
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", a.kafka)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(value AS STRING) AS value")
        )
        q = (
            stream.writeStream.foreachBatch(proc.process)
            .option("checkpointLocation", str(a.checkpoints / topic))
            .trigger(processingTime="1 second")
            .start()
        )
        queries.append(q)
    spark.streams.awaitAnyTermination()


if __name__ == "__main__":
    main()
