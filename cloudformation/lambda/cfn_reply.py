"""The reply of a CloudFormation custom resource, shared by the functions under cloudformation/lambda/
(build-artifacts puts this file next to each function's index.py in its zip).

Written here rather than with the cfnresponse module, which exists only for inline code.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

LOG = logging.getLogger()
REASON_LIMIT = 1000  # the whole reply must stay under CloudFormation's 4 KiB


def send(event: dict[str, Any], status: str, physical_id: str, data: dict[str, str], reason: str) -> None:
    """PUT the result to the pre-signed ResponseURL, as CloudFormation expects it."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:REASON_LIMIT],
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "NoEcho": False,
            "Data": data,
        }
    ).encode()
    # The URL is signed for an empty content type; urllib would otherwise add one.
    request = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        LOG.info("reply %s for %s: HTTP %s", status, event["LogicalResourceId"], response.status)
