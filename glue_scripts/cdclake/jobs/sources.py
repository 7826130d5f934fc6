"""Streaming sources. Each returns the raw batch contract (records.RAW_SCHEMA):
topic, partition, offset, timestamp, key, value — key and value as JsonConverter's JSON text, or an
Avro record of the Glue Schema Registry as text (events/schema_registry.py)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..common.records import LINE_SCHEMA, RAW_COLUMNS
from ..common.settings import KafkaAuth, Settings, Source
from ..events.schema_registry import HEADER_VERSION, MARKER

# MSK IAM auth. The classes come from aws-msk-iam-auth, which the Glue job gets with --extra-jars
# (pom.xml profile glue-extra-jars; locally .local/jars/glue-extra, on the class path of local_session).
MSK_IAM_OPTIONS = {
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "AWS_MSK_IAM",
    "kafka.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
    "kafka.sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
}


def kafka_options(s: Settings) -> dict[str, str]:
    """Options of Spark's Kafka source for these settings."""
    opts = {
        "kafka.bootstrap.servers": s.kafka_bootstrap_servers,
        "startingOffsets": s.starting_offsets,
        "maxOffsetsPerTrigger": str(s.max_offsets_per_trigger),
        # Fail loudly when retention deleted records we have not read: silently skipping is data loss.
        "failOnDataLoss": "true",
        # How soon a topic created after the start (a new table) matches subscribePattern: the
        # source's consumer re-reads the cluster's topic list at this age (Kafka's default: 5 min).
        "kafka.metadata.max.age.ms": "10000",
    }
    if s.kafka_topics:
        opts["subscribe"] = ",".join(s.kafka_topics)
    else:
        opts["subscribePattern"] = s.kafka_topic_pattern
    if s.kafka_auth == KafkaAuth.IAM:
        opts.update(MSK_IAM_OPTIONS)
    return opts


# Phrases of Spark's Kafka source when failOnDataLoss stops a query (Spark 3.5: missed; Spark 4.1: lost).
_DATA_LOSS_PHRASES = ("some data may have been missed", "some data may have been lost")


def data_loss_advice(error_text: str) -> str | None:
    """What to do when the query stopped because Kafka no longer holds offsets the checkpoint
    expects (a topic deleted and created again, retention, a lost broker log); None for any other
    error. Spark's own message suggests failOnDataLoss=false, which would skip the lost records."""
    if not any(p in error_text.lower() for p in _DATA_LOSS_PHRASES):
        return None
    return (
        "Kafka no longer holds records this checkpoint has not read (a topic deleted and created "
        "again, retention, or a lost broker log); nothing after the last committed batch was "
        "applied. Do not set failOnDataLoss=false (that skips them): run the job with a new "
        "--checkpoint_location and --starting_offsets earliest (the re-read is idempotent), and "
        "backfill what Kafka lost from the raw zone or a new Debezium snapshot (docs/OPERATIONS.md)."
    )


# Spark 4.1.1 (Glue 6.0): when a restarted query re-runs the batch its offset log planned but its
# commit log lacks, the Kafka source reports that batch's progress before it has asked Kafka for the
# latest offsets, and KafkaMicroBatchStream.metrics fails on Some(null) (SPARK-57438, fixed after
# 4.1.1). The batch's data is applied and committed by then; a new start of the query plans the next
# batch normally.
KAFKA_METRICS_NPE = ("NullPointerException", "scala.Option.get()")


def restart_after(error_text: str, batch: int | None, restarted_at: int | None) -> bool:
    """Whether the query may be started again after it stopped with `error_text`, `batch` being the
    last batch it ran and `restarted_at` the batch of the previous such restart: only for Spark
    4.1.1's Kafka metrics failure, and not twice after the same batch (that would loop)."""
    if batch is None or batch == restarted_at:
        return False
    return all(part in error_text for part in KAFKA_METRICS_NPE) and "KafkaMicroBatchStream" in error_text


def record_text(data: Column) -> Column:
    """A Kafka key or value as the raw batch's text: JsonConverter's JSON as it is; an Avro record of
    the Glue Schema Registry (its first byte is the header's version, 3, which no JSON text starts
    with) as its marker and base64, which no cast to a string could carry unchanged."""
    framed = F.substring(data, 1, 1) == F.lit(bytearray([HEADER_VERSION]))
    # Spark 3.5's base64 breaks lines every 76 characters (MIME): one line, as a dead letter shows it
    text = F.regexp_replace(F.base64(data), "[\\r\\n]", "")
    return F.when(framed, F.concat(F.lit(MARKER), text)).otherwise(data.cast("string"))


def kafka_stream(spark: SparkSession, s: Settings) -> DataFrame:
    df = spark.readStream.format("kafka").options(**kafka_options(s)).load()
    return df.select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        record_text(F.col("key")).alias("key"),
        record_text(F.col("value")).alias("value"),
    )


def parse_lines(lines: DataFrame) -> DataFrame:
    """JSON lines `{"topic","partition","offset","timestamp","key","value"}` -> raw batch.

    A line that is not such a record keeps its text in `value` with a null topic, so it is
    dead-lettered rather than dropped."""
    rec = F.from_json(F.col("value"), LINE_SCHEMA)
    ok = rec["topic"].isNotNull() & rec["offset"].isNotNull()
    ts = rec["timestamp"]
    timestamp = F.when(ts.rlike(r"^\d+$"), F.timestamp_millis(ts.cast("long"))).otherwise(ts.cast("timestamp"))
    return lines.select(
        F.when(ok, rec["topic"]).alias("topic"),
        F.when(ok, rec["partition"]).alias("partition"),
        F.when(ok, rec["offset"]).alias("offset"),
        F.when(ok, timestamp).alias("timestamp"),
        F.when(ok, rec["key"]).alias("key"),
        F.when(ok, rec["value"]).otherwise(F.col("value")).alias("value"),
    )


def files_stream(spark: SparkSession, s: Settings) -> DataFrame:
    lines = (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", s.max_files_per_trigger)
        # The raw zone and the dead letters keep one folder per batch under the given path.
        .option("recursiveFileLookup", "true")
        .load(s.files_path)
    )
    return parse_lines(lines).select(*RAW_COLUMNS)


def open_stream(spark: SparkSession, s: Settings) -> DataFrame:
    return kafka_stream(spark, s) if s.source == Source.KAFKA else files_stream(spark, s)
