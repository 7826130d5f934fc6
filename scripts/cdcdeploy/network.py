"""What the Glue job's subnet needs when it has no NAT gateway: the one list that the template's
ExistingSubnetIds description, docs/DEPLOY.md and deploy's preflight checks all use.

The job reads and writes the lake in S3 (a gateway endpoint on the subnet's route table), the Data
Catalog (glue), writes its logs (logs) and metrics (monitoring, --enable-metrics); STS and KMS serve
credentials and the stack key's data keys.
"""

from __future__ import annotations

GATEWAY_ENDPOINTS = ("s3",)
INTERFACE_ENDPOINTS = ("glue", "logs", "monitoring", "sts", "kms")


def service_name(region: str, service: str) -> str:
    return f"com.amazonaws.{region}.{service}"
