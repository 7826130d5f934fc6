"""The local pipeline stack: MariaDB (binlog source) -> Apache Kafka (KRaft, one node) <- Kafka Connect
running the Debezium MySQL connector. Everything runs as plain processes on 127.0.0.1, with state
and logs under $CDC_STACK_DIR (default .local/stack). See docs/LOCAL_STACK.md.
With --source postgres (or CDC_STACK_SOURCE=postgres) the source is PostgreSQL and the Debezium
PostgreSQL connector instead.

    local-stack up [--init-sql FILE ...]   start what is not running, register the connector
    local-stack down [COMPONENT ...]       stop what `up` started (by recorded pid)
    local-stack status                     component, pid, port, health
    local-stack logs [COMPONENT] [-n N] [-f]
    local-stack sql (FILE | -e SQL) [-D DB]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdctools import cli
from cdctools.connector_config import with_wire_format

from cdcstack import connect, kafka, registry
from cdcstack.plumbing import (
    DATABASE,
    JOB,
    ROOT,
    STOP,
    TOPIC_PREFIX,
    Record,
    StackConfig,
    StackError,
    live_record,
    log_tail,
    port_free,
    port_holder,
    read_sql,
    say,
    state_lock,
    stop,
    warn,
)
from cdcstack.sources import ENGINES, of_component, stack_config

# Every component a state directory may hold, whichever source `up` was given, in start order.
ALL_COMPONENTS = (*(e.COMPONENT for e in ENGINES.values()), "kafka", registry.COMPONENT, "connect")
DESCRIPTION = {
    **{e.COMPONENT: e.DESCRIPTION for e in ENGINES.values()},
    "kafka": "Apache Kafka broker (KRaft, broker + controller)",
    registry.COMPONENT: "AWS Glue Schema Registry stand-in (moto), wire format avro",
    "connect": "Kafka Connect (distributed) + Debezium connector",
}


def check_prerequisites(s: StackConfig) -> None:
    s.engine.check_prerequisites(s)
    if not any(kafka.libs(s).glob("kafka_2.13-*.jar")):
        raise StackError(f"no Apache Kafka jars in {kafka.libs(s)}: run scripts/setup-local (resolves pom.xml)")
    plugin = s.connect_plugins / s.engine.PLUGIN
    if not plugin.is_dir():
        raise StackError(f"{plugin} is missing: run scripts/setup-local (resolves pom.xml)")
    if not any(s.converter_jars.glob("*.jar")):
        raise StackError(
            f"no Glue Schema Registry converter in {s.converter_jars}: run scripts/setup-local (resolves pom.xml)"
        )


def cmd_up(s: StackConfig, init_sql: list[Path]) -> int:
    t_start = time.monotonic()
    check_prerequisites(s)
    for f in init_sql:
        if not f.is_file():
            raise StackError(f"--init-sql {f}: no such file")
    for sub in ("logs", "run", "kafka", "connect"):
        s.path(sub).mkdir(parents=True, exist_ok=True)

    components = s.components
    running = {c: live_record(s, c) for c in components}
    # Check every port we are about to bind before starting anything: no half-started stack.
    taken = []
    for c in components:
        rec = running[c]
        if rec is not None:
            if rec.port != s.ports[c]:
                say(
                    f"{c}: already running on port {rec.port} (not {s.ports[c]} from {s.port_env[c]}); "
                    f"run `local-stack down {c}` to move it"
                )
            continue
        if not port_free(s.ports[c]):
            taken.append(
                f"port {s.ports[c]} on 127.0.0.1 for {c} is already in use{port_holder(s.ports[c])}; "
                f"stop that process or choose another port with {s.port_env[c]}=<port>"
            )
        if c == "kafka" and not port_free(s.controller_port):
            taken.append(
                f"port {s.controller_port} on 127.0.0.1 for the kafka controller is already in use"
                f"{port_holder(s.controller_port)}; stop that process or choose another port with "
                "CDC_STACK_KAFKA_CONTROLLER_PORT=<port>"
            )
    if taken:
        raise StackError("\n".join(taken))
    port = {c: running[c].port if running[c] else s.ports[c] for c in components}  # type: ignore[union-attr]

    source = s.engine.COMPONENT
    source_started = s.engine.up(s, running[source], port[source], init_sql)
    return _broker_and_connect_up(s, running, port, source_started, t_start)


def _start_or_check(
    s: StackConfig,
    name: str,
    record: Record | None,
    port: int,
    start: Callable[[], object],
    health: Callable[[int], tuple[bool, str]],
) -> bool:
    """Starts the component when it is not running (True), else checks that it is healthy (False)."""
    if record is None:
        start()
        return True
    ok, detail = health(port)
    if not ok:
        raise StackError(
            f"{name} (pid {record.pid}) is running but unhealthy: {detail}\nlast lines of its log:\n{log_tail(s, name)}"
        )
    say(f"{name}: already running (pid {record.pid}, port {port})")
    return False


def _broker_and_connect_up(
    s: StackConfig, running: dict[str, Record | None], port: dict[str, int], source_started: bool, t_start: float
) -> int:
    # Apache Kafka. Its topics (Connect's configs, offsets and status included) survive a restart,
    # so a Kafka Connect that kept running reconnects by itself.
    _start_or_check(
        s,
        "kafka",
        running["kafka"],
        port["kafka"],
        lambda: kafka.start(s, port["kafka"], s.controller_port),
        kafka.health,
    )
    if s.wire_format == "avro":
        _registry_up(s, running.get(registry.COMPONENT), port[registry.COMPONENT])
    connect_started = _start_or_check(
        s,
        "connect",
        running["connect"],
        port["connect"],
        lambda: connect.start(s, port["connect"], port["kafka"]),
        connect.health,
    )

    # Connector
    engine = s.engine
    source_port = port[engine.COMPONENT]
    config = connector_config(s, source_port, port["kafka"])
    history_topic = config.get("schema.history.internal.kafka.topic")
    if history_topic:  # the MySQL connector's; made before the connector starts, as on AWS
        say(f"kafka: schema history: {kafka.ensure_history_topic(port['kafka'], history_topic)}")
    written = connect.register_connector(s, port["connect"], config)
    restarted_at = None
    if written:
        say(f"connector: registered {s.connector} from {engine.TEMPLATE.relative_to(ROOT)}")
    elif source_started and not connect_started:
        # The source client notices a restarted server only on its next keep-alive round (60 s or
        # more); a task restart reconnects at once, from the committed offset.
        say(f"connector: {engine.NAME} was restarted, restarting the connector task to reconnect now")
        connect.restart_connector(s, port["connect"])
        restarted_at = time.monotonic()
    secs = connect.wait_connector_running(s, port["connect"], restarted_at)
    say(
        f"connector: {s.connector} running ({secs:.1f}s, {s.wire_format}); "
        f"topics {TOPIC_PREFIX}.{engine.TOPIC_NAMESPACE}.<table>"
    )
    for problem in engine.table_problems(s):
        warn(problem)
    say(
        f"stack up in {time.monotonic() - t_start:.1f}s: {engine.NAME} 127.0.0.1:{source_port}, "
        f"Kafka 127.0.0.1:{port['kafka']}, Kafka Connect http://127.0.0.1:{port['connect']}"
    )
    return 0


def _registry_up(s: StackConfig, running: Record | None, port: int) -> None:
    """The schema registry of the wire format avro, with the connector's registry in it."""
    if running is None:
        registry.start(s, port)
    else:
        ok, detail = registry.health(port)
        if not ok:
            raise StackError(
                f"registry (pid {running.pid}) is running but unhealthy: {detail}\n{log_tail(s, 'registry')}"
            )
        say(f"registry: already running (pid {running.pid}, port {port})")
    say(f"registry: {registry.ensure_registry(s)}")


def connector_config(s: StackConfig, source_port: int, kafka_port: int) -> dict[str, Any]:
    """The engine's connector settings in the stack's wire format: with avro, the converters of
    cloudformation/connector/wire-format-avro.json against the local registry."""
    config = s.engine.connector_config(s, source_port, kafka_port)
    if s.wire_format == "avro":
        config = {
            **with_wire_format(config, "avro", registry.converter_values(s)),
            **registry.local_converter_settings(s),
        }
    return config


def cmd_down(s: StackConfig, components: list[str]) -> int:
    # Every component this state directory may hold, whichever source `up` was given; the whole
    # stack includes the local job (local-job), stopped first, after its current batch.
    targets = [
        c
        for c in reversed(ALL_COMPONENTS)
        if (c in components if components else c in s.components or live_record(s, c))
    ]
    if not components and live_record(s, JOB):
        targets.insert(0, JOB)
    for c in targets:
        engine = of_component(c)
        stop(s, c, engine.SHUTDOWN if engine else STOP)
    return 0


def cmd_status(s: StackConfig) -> int:
    healthy = True
    print(f"{'component':<10} {'state':<9} {'pid':>7} {'port':>6}  health")
    port = {}
    other_sources = [e.COMPONENT for e in ENGINES.values() if e is not s.engine and live_record(s, e.COMPONENT)]
    for c in (*s.components, *other_sources):
        rec = live_record(s, c)
        if rec is None:
            healthy = False
            print(f"{c:<10} {'stopped':<9} {'-':>7} {s.ports[c]:>6}  -   ({DESCRIPTION[c]})")
            continue
        port[c] = rec.port
        engine = of_component(c)
        if engine is not None:
            ok, detail = engine.health(s)
        elif c == registry.COMPONENT:
            ok, detail = registry.health(rec.port)
        else:
            ok, detail = kafka.health(rec.port) if c == "kafka" else connect.health(rec.port)
        healthy &= ok
        print(f"{c:<10} {'running':<9} {rec.pid:>7} {rec.port:>6}  {'ok' if ok else 'UNHEALTHY'}: {detail}")
    if "connect" in port:
        state, detail = connect.connector_state(s, port["connect"])
        healthy &= state == "RUNNING"
        print(f"{'connector':<10} {state:<9} {'':>7} {'':>6}  {s.connector}: {detail}")
    print(f"state and logs: {s.state}")
    return 0 if healthy else 3


def cmd_logs(s: StackConfig, component: str | None, lines: int, follow: bool) -> int:
    comps = [component] if component else list(ALL_COMPONENTS)
    files = [s.log(c) for c in comps if s.log(c).exists()]
    if not files:
        raise StackError(f"no logs yet in {s.path('logs')}")
    if follow:
        os.execvp("tail", ["tail", "-n", str(lines), "-F", *map(str, files)])
    for f in files:
        if len(files) > 1:
            print(f"==> {f} <==")
        print("\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
    return 0


def cmd_sql(s: StackConfig, file: str | None, statement: str | None, database: str) -> int:
    if live_record(s, s.engine.COMPONENT) is None:
        raise StackError(f"{s.engine.NAME} is not running: {s.engine.UP_COMMAND}")
    code = s.engine.sql_session(s, read_sql(file, statement), database)
    if code == 0:
        for problem in s.engine.table_problems(s):
            warn(problem)
    return code


def _parser() -> cli.Parser:
    parser = cli.Parser(prog="local-stack", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--source",
        choices=sorted(ENGINES),
        help="the CDC source: mysql (MariaDB, the default) or postgres; default $CDC_STACK_SOURCE or mysql",
    )
    up = sub.add_parser(
        "up", parents=[common], help="start what is not running and register the connector (idempotent)"
    )
    up.add_argument(
        "--format",
        choices=("json", "avro"),
        help="the wire format of the change topics: json (Kafka Connect JSON with schemas) or avro (AWS Glue "
        "Schema Registry, a local stand-in); default $CDC_STACK_FORMAT, else what this stack runs, else json",
    )
    up.add_argument(
        "--init-sql",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="SQL to load into salesdb when the data directory is created (before the snapshot)",
    )
    down = sub.add_parser(
        "down", parents=[common], help="stop the processes `up` started, and the local job (all by default)"
    )
    down.add_argument(
        "components", nargs="*", metavar="COMPONENT", help=f"any of {', '.join(ALL_COMPONENTS)} (default: all)"
    )
    sub.add_parser("status", parents=[common], help="component, pid, port and health")
    logs = sub.add_parser("logs", parents=[common], help="show a component's log")
    logs.add_argument("component", nargs="?", choices=ALL_COMPONENTS)
    logs.add_argument("-n", "--lines", type=int, default=40)
    logs.add_argument("-f", "--follow", action="store_true")
    sql = sub.add_parser(
        "sql", parents=[common], help="run a SQL file (or -e statement) against the local MariaDB or PostgreSQL"
    )
    sql.add_argument("file", nargs="?", help="SQL file, or - for stdin")
    sql.add_argument("-e", "--execute", dest="statement")
    sql.add_argument("-D", "--database", default=DATABASE)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        s = stack_config(args.source, getattr(args, "format", None))
        if args.command == "up":
            with state_lock(s):
                return cmd_up(s, args.init_sql)
        if args.command == "down":
            unknown = set(args.components) - set(ALL_COMPONENTS)
            if unknown:
                parser.error(
                    f"unknown component(s) {', '.join(sorted(unknown))}; choose from {', '.join(ALL_COMPONENTS)}"
                )
            with state_lock(s):
                return cmd_down(s, args.components)
        if args.command == "status":
            return cmd_status(s)
        if args.command == "logs":
            return cmd_logs(s, args.component, args.lines, args.follow)
        if (args.file is None) == (args.statement is None):
            parser.error("sql needs exactly one of FILE or -e SQL")
        return cmd_sql(s, args.file, args.statement, args.database)
    except StackError as exc:
        print(f"[stack] ERROR: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("[stack] interrupted; components started so far keep running (local-stack down)", file=sys.stderr)
        return 130
