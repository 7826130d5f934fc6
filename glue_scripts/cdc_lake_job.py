"""AWS Glue streaming job: Debezium CDC from Kafka (MSK) into Iceberg, Delta Lake or Hudi tables.

Runs unchanged on Glue and locally, with the same `--name value` arguments (see docs/CONFIGURATION.md, or
`--help`). Everything is in the `cdclake` package (shipped to Glue with --extra-py-files, found
next to this script locally); `cdclake.jobs.glue_entry` is the only place that touches `awsglue`.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cdclake.common.metrics import LOCAL_STREAMING_JOB
from cdclake.common.settings import ARGS
from cdclake.jobs.glue_entry import run
from cdclake.jobs.job import main

SUMMARY = "Streams Debezium change events (Kafka or JSON-lines files) into Iceberg, Delta Lake or Hudi tables."

if __name__ == "__main__":
    sys.exit(run(sys.argv, main, ARGS, LOCAL_STREAMING_JOB, SUMMARY))
