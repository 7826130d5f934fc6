"""The streaming job restarted on its checkpoint (run once), then what its session catalog and lake
hold, as JSON: the last step of test_session_catalog_formats.py, in the same process as the restart
(one Spark start fewer than a separate reader).

    python session_catalog_worker.py OUT.json <the job's arguments ...>

The session catalog is the persistent local one (CDC_SESSION_METASTORE, cdclake.local.session):
Spark's Hive metastore client, the layer under which `--enable-glue-datacatalog` puts Glue's client.
For each table the raw Hive table entry is read as the metastore client got it (parameters, storage
descriptor, SerDe, columns): what Glue's client stores as the Glue table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def hive_entry(spark: Any, database: str, table: str) -> dict[str, Any]:
    """The metastore's table entry (Hive's thrift Table), as a metastore client receives it."""
    client = spark._jsparkSession.sharedState().externalCatalog().unwrapped().client()
    t = client.getRawHiveTable(database, table).rawTable().getTTable()
    sd = t.getSd()
    return {
        "table_type": t.getTableType(),
        "parameters": dict(t.getParameters()),
        "location": sd.getLocation(),
        "input_format": sd.getInputFormat(),
        "output_format": sd.getOutputFormat(),
        "serde": sd.getSerdeInfo().getSerializationLib(),
        "serde_parameters": dict(sd.getSerdeInfo().getParameters()),
        "columns": [[c.getName(), c.getType()] for c in sd.getCols()],
    }


def main(out: Path, argv: list[str]) -> None:
    from cdclake.common.logs import configure_logging
    from cdclake.common.settings import ARGS, build_settings, parse_job_argv
    from cdclake.jobs.job import run_stream
    from cdclake.local.session import local_session

    configure_logging()
    settings = build_settings(parse_job_argv(argv, ARGS))
    spark = local_session(settings)
    run_stream(spark, settings)
    ns = settings.namespace
    names = sorted(r["tableName"] for r in spark.sql(f"SHOW TABLES IN spark_catalog.{ns}").collect())
    tables = {}
    for name in names:
        df = spark.table(f"spark_catalog.{ns}.{name}")
        tables[name] = {
            "entry": hive_entry(spark, ns, name),
            "rows": [json.loads(j) for j in df.select("id", "first_name", "_cdc_ingested_at").toJSON().collect()]
            if "first_name" in df.columns
            else [],
        }
    # The session's Spark settings: Glue's `--conf` (given to spark-submit) must be among them.
    conf = dict(spark.sparkContext.getConf().getAll())
    out.write_text(json.dumps({"tables": tables, "conf": conf}, default=str))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
