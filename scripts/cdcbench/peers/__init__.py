"""The systems `bench --peers` runs side by side on the same source changes: this project's
job, Flink SQL mysql-cdc -> Iceberg (upsert, v2), the Apache Iceberg Kafka Connect sink (+ a dedup
view) and the AWS sample's approach. Each is a `System` (base.py); runner.py drives them."""
