"""The tools' own modules; pyproject.toml's [project.scripts] names the commands they back.

- cli: the commands' argument parser (a wrong argument is one line naming it and the fix).
- pinned_jars: resolves and lists the jars pinned in pom.xml (the runtime manifest), with Maven.
- connector_config: renders the Debezium connector settings for the local stack and for MSK Connect.
- lake_reader: reads the lake's Iceberg, Delta and Hudi tables with DuckDB (another engine than Spark).
- reconcile: compares each source table with its lake table (reconcile, apply-sql).
- status: the job's per-table figures from its log (status).
- local_job: runs the Glue job script on the local stack (local-job).
- demo: the seed walkthrough on the local pipeline (demo, make demo).
"""
