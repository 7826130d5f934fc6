"""cdclake: Debezium change events -> ordered, de-duplicated, schema-evolving MERGE into Iceberg.

Five layers, each a folder that imports only itself and the ones listed before it:
  common  the lake table's contract, the raw-record contract, job arguments, the batch report,
          SQL quoting, commit-conflict retries, the log format
  events  Debezium envelope, source-log positions, Connect types, decoding per schema group, the
          batch's group aggregate, the source's DDL statements
  lake    Iceberg tables: catalog configuration, table state and DDL, one table's write (schema plan,
          newest per key, the guarded MERGE), delete memory, keyless tables, dead letters, maintenance
  local   outside Glue only: the local SparkSession, the tests' fault injection
  jobs    the streaming and maintenance jobs, the micro-batch function, sources, the `awsglue` edge
"""
