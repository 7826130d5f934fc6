"""AWS Glue batch job: maintenance of the CDC lake's tables, on a schedule, beside the
streaming job (Iceberg: compaction, delete files, manifests, snapshot expiry, orphan files; Delta:
OPTIMIZE and VACUUM; Hudi: clustering, cleaning, timeline archival, with the streaming job stopped).

Runs unchanged on Glue and locally, with the same `--name value` arguments (docs/MAINTENANCE.md,
or `--help`). The work is in `cdclake.jobs.maintenance_job`; `cdclake.jobs.glue_entry` is the
only place that touches `awsglue`.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cdclake.jobs.glue_entry import run
from cdclake.jobs.maintenance_job import JOB_ARGS, main

SUMMARY = (
    "Maintains the lake's tables: Iceberg's compaction, delete files, manifests, snapshot expiry, orphans; "
    "Delta's OPTIMIZE and VACUUM; Hudi's clustering, cleaning and archival."
)

if __name__ == "__main__":
    sys.exit(run(sys.argv, main, JOB_ARGS, "cdc-maintenance", SUMMARY))
