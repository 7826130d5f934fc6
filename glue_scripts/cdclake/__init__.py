"""cdclake: Debezium change events -> ordered, de-duplicated, schema-evolving MERGE into Iceberg.

Modules, in the order a micro-batch flows through them:
  records       the raw-record contract (topic, partition, offset, timestamp, key, value)
  lake_contract the lake table's contract: _cdc_* columns, cdc.* properties, TableState, policies
  sources       Kafka / JSON-lines files -> raw batch (topic, partition, offset, timestamp, key, value)
  envelope      classify records, read the Debezium envelope (op, source position, table)
  ordering      position in the source log -> _cdc_seq; newest change per key
  connect_types Connect/Debezium schema -> Spark types and converters
  decode        typed row images per schema group
  evolution     plan and apply ADD COLUMN / type widening before the MERGE
  merge         table creation and the single guarded MERGE per table
  deadletter    rejected records with their reason
  batch         the micro-batch function tying these together
  maintenance   table health, the maintenance decision, Iceberg's compaction/expiry procedures
  sqltext       quoting of identifiers and literals in the SQL statements the job builds
  conflicts     re-running a MERGE or procedure that lost a commit race to a concurrent writer
  job, session, settings   life cycle, Spark/catalog config, job arguments
"""
