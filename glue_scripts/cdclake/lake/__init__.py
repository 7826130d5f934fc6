"""The Iceberg tables: catalog configuration, each table's state and DDL, schema evolution, the one
guarded MERGE per table per batch, delete memory, keyless tables, dead letters and maintenance.
Imports `common` and `events`."""
