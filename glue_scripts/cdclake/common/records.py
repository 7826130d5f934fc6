"""The raw-record contract: one Kafka record as every part of the job sees it.

Both sources produce it (sources.py), the batch function takes it (envelope.classify), the dead
letters and the raw zone write it back out (deadletter.py) in the `files` format that the files
source reads again (replay). `key` and `value` are JsonConverter's JSON text, unparsed.
"""

from __future__ import annotations

from pyspark.sql import types as T

RAW_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("key", T.StringType()),
        T.StructField("value", T.StringType()),
    ]
)
RAW_COLUMNS: tuple[str, ...] = tuple(RAW_SCHEMA.names)

# One line of the `files` format (JSON lines, as the dead letters and the raw zone are written).
# The timestamp is read as text (ISO or epoch milliseconds, sources.parse_lines converts it); key
# and value string-typed, so an embedded JSON object is kept as its JSON text, a JSON string as-is.
LINE_SCHEMA = T.StructType(
    [T.StructField(f.name, T.StringType() if f.name == "timestamp" else f.dataType) for f in RAW_SCHEMA.fields]
)
