"""The Iceberg tables: catalog configuration, each table's state, one table's batch planned without
Spark (table_plan) and executed (executor: its DDL and the one guarded MERGE per table per batch),
schema evolution, delete memory, keyless tables, dead letters and maintenance.
Imports `common` and `events`."""
