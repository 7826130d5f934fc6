"""The Java that runs the connector's workers, read from the connector's log delivery while deploy
waits on the stack.

AWS does not document which Java MSK Connect's workers for Kafka Connect 3.7.x run. The shipped
Debezium 3.x needs Java 17 (its class files are version 61); on Java 11 the connector fails and a
first deploy rolls back everything, deleting the log group with it. So deploy reads the log group
while the stack is still being created: Kafka Connect logs its JVM at start (`jvm.spec = <vendor>,
<VM>, <version>, ...`), and a JVM too old for a class says so (`UnsupportedClassVersionError ... class
file version 61.0 ... only recognizes class file versions up to 55.0`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

REQUIRED_JAVA = 17  # Debezium 3.x: class file version 61
BUILD_PARAMETER = "DebeziumBuild"  # the template's parameter that selects the Java 11 plugin
JAVA11_DEBEZIUM = "2.7.4.Final"  # the newest Debezium 2.7 on Maven Central; its class files are Java 11's (55)
_JVM_SPEC = re.compile(r"jvm\.spec\s*=\s*[^,\n]*,[^,\n]*,\s*(?:1\.)?(\d+)")
_CLASS_VERSION = re.compile(r"class file versions? up to (\d+)\.\d+")
FILTER = '?"jvm.spec" ?"UnsupportedClassVersionError"'


@dataclass(frozen=True)
class JavaSeen:
    version: int  # the worker JVM's major version
    evidence: str  # the log line it was read from


def java_of(messages: Iterable[str]) -> JavaSeen | None:
    """The worker's Java major version from its log lines, if one of them names it."""
    for message in messages:
        spec = _JVM_SPEC.search(message)
        if spec:
            return JavaSeen(int(spec.group(1)), message.strip()[:300])
        refused = _CLASS_VERSION.search(message)
        if refused:  # class file major version N is Java N - 44
            return JavaSeen(int(refused.group(1)) - 44, message.strip()[:300])
    return None


def log_group(stack: str, engine: str) -> str:
    """The connector's log group (ConnectLogGroup in the template)."""
    return f"/msk-connect/{stack}/debezium-{engine}"


def fix_for(seen: JavaSeen, engine: str) -> str | None:
    """What to do when the workers' Java is older than the plugin needs; None when it is new enough."""
    if seen.version >= REQUIRED_JAVA:
        return None
    return (
        f"MSK Connect runs this connector's workers on Java {seen.version}; the shipped Debezium 3.x needs Java "
        f"{REQUIRED_JAVA} (log: {seen.evidence}). Deploy the Java 11 build instead: deploy again with "
        f"--parameter {BUILD_PARAMETER}=java11 (Debezium {JAVA11_DEBEZIUM}, the last line that runs on Java 11; "
        f"build-artifacts builds its plugin beside the other, and deploy renames the connector it replaces) "
        f'(docs/DEPLOY.md, "The connector\'s Java"; engine {engine})'
    )


def read(logs: Any, group: str, since_ms: int) -> JavaSeen | None:
    """The Java the group's worker logs name since since_ms; None while the group or the line is missing."""
    try:
        pages = logs.get_paginator("filter_log_events").paginate(
            logGroupName=group, startTime=since_ms, filterPattern=FILTER
        )
        return java_of(e["message"] for p in pages for e in p.get("events", []))
    except ClientError as exc:
        if "ResourceNotFound" in str(exc):
            return None
        raise


class Watch:
    """Reads the group every `every_s` seconds in a thread until stopped or a JVM is seen; `report` is
    called once with what was seen. A read that fails is tried again at the next round."""

    def __init__(
        self, logs: Any, group: str, since_ms: int, report: Callable[[JavaSeen], None], every_s: float = 30.0
    ) -> None:
        self.seen: JavaSeen | None = None
        self._stop = threading.Event()
        self._args = (logs, group, since_ms, report, every_s)
        self._thread = threading.Thread(target=self._run, name="connector-jvm", daemon=True)

    def _run(self) -> None:
        logs, group, since_ms, report, every_s = self._args
        while True:
            try:
                self.seen = read(logs, group, since_ms)
            except (ClientError, BotoCoreError):
                self.seen = None
            if self.seen is not None:
                report(self.seen)
                return
            if self._stop.wait(every_s):
                return

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
