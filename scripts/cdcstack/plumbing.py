"""What every part of the local stack shares: its configuration (`StackConfig`: state directory,
ports), the records of the processes `up` started, launching them, waiting until they are healthy
and stopping them; and the SourceEngine interface that cdcstack/mariadb.py and cdcstack/postgres.py
both provide."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "salesdb"
TOPIC_PREFIX = "salesdb"
# The ports of the components every source shares; each source engine names its own (SourceEngine.PORT_ENV).
BROKER_PORTS = {
    "kafka": ("CDC_STACK_KAFKA_PORT", 19092),
    "connect": ("CDC_STACK_CONNECT_PORT", 18083),
    # the Glue Schema Registry stand-in (cdcstack/registry.py), with the wire format avro only
    "registry": ("CDC_STACK_REGISTRY_PORT", 18085),
}
# How the connector writes keys and values: Kafka Connect JSON with schemas, or Avro with the AWS Glue
# Schema Registry (scripts/cdctools/connector_config.py, WIRE_FORMATS).
WIRE_FORMATS = ("json", "avro")
# The Debezium build Kafka Connect loads (CDC_STACK_DEBEZIUM), as the template's DebeziumBuild: java17
# the manifest's Debezium 3.x, java11 Debezium 2.7 (profiles debezium-*-java11; docs/DEPLOY.md).
DEBEZIUM_BUILDS = ("java17", "java11")
# Source transactions (CDC_STACK_TRANSACTIONS), as the template's SourceTransactions and the job's
# --transactions: keep makes the connector emit transaction metadata; ignore (the default) does not.
TRANSACTION_MODES = ("keep", "ignore")
REGISTRY = "registry"


class StackError(Exception):
    """A failure with a message that tells the user what to do."""


def say(message: str) -> None:
    print(f"[stack] {message}", flush=True)


def warn(message: str) -> None:
    print(f"[stack] WARNING: {message}", file=sys.stderr, flush=True)


# The local Glue job (local-job) keeps its pid record beside the components'.
JOB = "job"


@dataclass(frozen=True)
class Shutdown:
    """How a component stops cleanly: the signal that asks it to, and how long that may take
    before it gets SIGKILL."""

    signal: signal.Signals = signal.SIGTERM
    grace: float = 30.0


STOP = Shutdown()  # Kafka, Connect and the job: SIGTERM, 30 s


class SourceEngine(Protocol):
    """A source database as the stack runs it: one module per engine (cdcstack/mariadb.py,
    cdcstack/postgres.py) defines each of these names; cdcstack/sources.py maps the --source
    name to its module. Functions take the stack's StackConfig first."""

    NAME: str  # in messages: "MariaDB"
    COMPONENT: str  # its process: run/<component>.json, logs/<component>.log, `down <component>`
    DESCRIPTION: str  # `status` of a stopped server
    PORT_ENV: str
    DEFAULT_PORT: int
    CONNECTOR: str  # the connector's default name (CDC_STACK_CONNECTOR overrides it)
    PLUGIN: str  # the Debezium plugin folder under .local/connect/plugins
    TEMPLATE: Path  # the connector configuration shared with the AWS deployment
    TOPIC_NAMESPACE: str  # change topics are <prefix>.<namespace>.<table>; lake tables <namespace>_<table>
    SOURCE_NAMESPACE: str  # a table's qualified name at the source is <this>.<table>
    SCENARIO: Path  # the demo's SQL files, in this engine's dialect
    JOB_TOPIC_PATTERN: str  # what the job reads of this source's topics (--kafka_topic_pattern)
    UP_COMMAND: str  # how the user starts a stack with this source
    SHUTDOWN: Shutdown

    def check_prerequisites(self, s: StackConfig) -> None:
        """Raises StackError naming what to install when the server's tools are missing."""

    def up(self, s: StackConfig, running: Record | None, port: int, init_sql: list[Path]) -> bool:
        """The source half of `up`: the server running, bootstrapped and fit for CDC. Returns
        whether it was (re)started, so that a running connector task reconnects now."""

    def health(self, s: StackConfig) -> tuple[bool, str]: ...

    def run_sql(self, s: StackConfig, sql: str, database: str | None = None, timeout: float = 30) -> str:
        """Runs SQL as the administrator; tab-separated rows without a header."""

    def sql_session(self, s: StackConfig, sql: str, database: str) -> int:
        """Runs SQL with its output on the terminal (`local-stack sql`); returns the client's exit code."""

    def connector_config(self, s: StackConfig, source_port: int, kafka_port: int) -> dict[str, Any]: ...

    def table_problems(self, s: StackConfig) -> list[str]:
        """Warnings about the captured tables, each with what to do."""


# ------------------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class StackConfig:
    state: Path
    local: Path
    ports: dict[str, int]  # every component's, also the other sources' (one state directory may hold both)
    port_env: dict[str, str]  # the variable that sets each port
    debezium_server_id: int
    connector: str
    timeout: float
    topic_partitions: int
    source: str  # the --source name of `engine`
    engine: SourceEngine
    controller_port: int  # the KRaft controller listener (the broker's own, never used by clients)
    wire_format: str = "json"
    debezium_build: str = "java17"
    transactions: str = "ignore"  # keep: the connector emits transaction metadata (TRANSACTION_MODES)

    @classmethod
    def from_env(
        cls, engines: Mapping[str, SourceEngine], source: str | None = None, wire_format: str | None = None
    ) -> StackConfig:
        local = Path(os.environ.get("CDC_LOCAL_DIR", ROOT / ".local")).resolve()
        state = Path(os.environ.get("CDC_STACK_DIR", local / "stack")).resolve()
        # Not given: the source this state directory runs, so that status, sql, down and the tools
        # built on them follow a PostgreSQL stack without repeating --source.
        source = source or os.environ.get("CDC_STACK_SOURCE", "").strip() or _running_source(state, engines) or "mysql"
        if source not in engines:
            raise StackError(f"source {source!r} (--source / CDC_STACK_SOURCE): choose one of {', '.join(engines)}")
        port_env = {e.COMPONENT: e.PORT_ENV for e in engines.values()}
        defaults = {e.COMPONENT: e.DEFAULT_PORT for e in engines.values()}
        for component, (var, default) in BROKER_PORTS.items():
            port_env[component], defaults[component] = var, default
        ports = {name: _int_env(var, defaults[name]) for name, var in port_env.items()}
        for name, port in ports.items():
            if not 1024 <= port <= 65535:
                raise StackError(f"{port_env[name]}={port}: choose a port between 1024 and 65535")
        controller_port = _int_env("CDC_STACK_KAFKA_CONTROLLER_PORT", ports["kafka"] + 1)
        if not 1024 <= controller_port <= 65535:
            raise StackError(f"CDC_STACK_KAFKA_CONTROLLER_PORT={controller_port}: choose a port between 1024 and 65535")
        if len(set(ports.values())) != len(ports) or controller_port in ports.values():
            raise StackError(
                f"two components are configured on the same port: {ports}, kafka controller {controller_port} "
                f"({', '.join(port_env.values())}, CDC_STACK_KAFKA_CONTROLLER_PORT)"
            )
        engine = engines[source]
        # Not given: avro when this state directory's schema registry runs (`up --format avro` started it).
        wire_format = wire_format or os.environ.get("CDC_STACK_FORMAT", "").strip() or _running_format(state)
        if wire_format not in WIRE_FORMATS:
            raise StackError(
                f"wire format {wire_format!r} (--format / CDC_STACK_FORMAT): choose one of {', '.join(WIRE_FORMATS)}"
            )
        debezium_build = os.environ.get("CDC_STACK_DEBEZIUM", "").strip() or DEBEZIUM_BUILDS[0]
        if debezium_build not in DEBEZIUM_BUILDS:
            raise StackError(
                f"CDC_STACK_DEBEZIUM={debezium_build!r} (demo --debezium): choose one of {', '.join(DEBEZIUM_BUILDS)}"
            )
        return cls(
            state=state,
            local=local,
            ports=ports,
            port_env=port_env,
            debezium_server_id=_int_env("CDC_STACK_DEBEZIUM_SERVER_ID", 184054),
            # One Connect may run both sources' connectors: distinct names, distinct offsets.
            connector=os.environ.get("CDC_STACK_CONNECTOR", engine.CONNECTOR),
            timeout=float(_int_env("CDC_STACK_TIMEOUT", 120)),
            topic_partitions=_int_env("CDC_STACK_TOPIC_PARTITIONS", 1),
            source=source,
            engine=engine,
            controller_port=controller_port,
            wire_format=wire_format,
            debezium_build=debezium_build,
            transactions=_transactions(),
        )

    @property
    def components(self) -> tuple[str, ...]:
        """This source's components in start order."""
        registry = (REGISTRY,) if self.wire_format == "avro" else ()
        return (self.engine.COMPONENT, "kafka", *registry, "connect")

    # Paths; everything lives under the state directory.
    def path(self, *parts: str) -> Path:
        return self.state.joinpath(*parts)

    def log(self, component: str) -> Path:
        return self.path("logs", f"{component}.log")

    def record(self, component: str) -> Path:
        return record_path(self.state, component)

    @property
    def secrets_dir(self) -> Path:
        """The Debezium passwords (dir 0700, files 0600); the only files Connect's FileConfigProvider reads."""
        return self.path("secrets")

    @property
    def kafka_data(self) -> Path:
        return self.path("kafka", "data")

    @property
    def connect_plugins(self) -> Path:
        """The connectors' folders of the Debezium build (pinned_jars.PROFILE_DIRS)."""
        return self.local / "connect" / ("plugins" if self.debezium_build == "java17" else "plugins-java11")

    @property
    def converter_jars(self) -> Path:
        """The Glue Schema Registry's Avro converter (pom.xml profile glue-schema-registry)."""
        return self.local / "connect" / "converters" / "glue-schema-registry"


def _transactions() -> str:
    """CDC_STACK_TRANSACTIONS, checked; ignore when unset."""
    mode = os.environ.get("CDC_STACK_TRANSACTIONS", "").strip() or "ignore"
    if mode not in TRANSACTION_MODES:
        raise StackError(
            f"CDC_STACK_TRANSACTIONS={mode!r} (demo --transactions): choose one of {', '.join(TRANSACTION_MODES)}"
        )
    return mode


def _running_source(state: Path, engines: Mapping[str, SourceEngine]) -> str | None:
    """The one source whose server runs under this state directory, if exactly one does."""
    alive = []
    for source, engine in engines.items():
        try:
            rec = Record(**json.loads((state / "run" / f"{engine.COMPONENT}.json").read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if rec.alive():
            alive.append(source)
    return alive[0] if len(alive) == 1 else None


def _running_format(state: Path) -> str:
    try:
        rec = Record(**json.loads((state / "run" / f"{REGISTRY}.json").read_text()))
    except (OSError, ValueError, TypeError):
        return "json"
    return "avro" if rec.alive() else "json"


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise StackError(f"{name}={raw!r} is not an integer") from None


def os_user() -> str:
    """The OS user running the stack: each database's administrator over its Unix socket (MariaDB's
    unix_socket, PostgreSQL's peer authentication), without a password."""
    return pwd.getpwuid(os.geteuid()).pw_name


def debezium_password(f: Path, engine_name: str) -> str:
    """Generated at first start; kept in a 0600 properties file that Kafka Connect reads itself."""
    f.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not f.exists():
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"# Password of the {engine_name} user debezium; read by Kafka Connect's FileConfigProvider.\n")
            out.write(f"password={secrets.token_urlsafe(24)}\n")
    os.chmod(f, 0o600)
    for line in f.read_text().splitlines():
        if line.startswith("password="):
            return line.split("=", 1)[1]
    raise StackError(f"{f} has no password= line: delete it and run `up` again")


@contextmanager
def state_lock(s: StackConfig) -> Iterator[None]:
    """One `up`/`down` at a time per state directory."""
    s.state.mkdir(parents=True, exist_ok=True)
    with open(s.state / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another local-stack command is working on this state directory; waiting")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


# ---------------------------------------------------------------------------------------- processes
@dataclass
class Record:
    """What `up` remembers about a process it started: enough to find exactly that process again."""

    component: str
    pid: int
    starttime: str  # /proc/<pid>/stat field 22: tells a recycled pid from ours
    port: int
    started_at: float = field(default_factory=time.time)

    def alive(self) -> bool:
        return _proc_starttime(self.pid) == self.starttime


def _proc_starttime(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by its new parent
        return None
    return fields[19]


def record_path(state: Path, component: str) -> Path:
    """Where a stack in `state` keeps the run record of its `component`."""
    return state / "run" / f"{component}.json"


def read_record(path: Path) -> Record | None:
    try:
        data = json.loads(path.read_text())
        return Record(**data)
    except (OSError, ValueError, TypeError):
        return None


def load_record(s: StackConfig, component: str) -> Record | None:
    return read_record(s.record(component))


def live_record(s: StackConfig, component: str) -> Record | None:
    rec = load_record(s, component)
    if rec is not None and not rec.alive():
        s.record(component).unlink(missing_ok=True)  # stale: the process is gone
        return None
    return rec


def launch(s: StackConfig, component: str, cmd: list[str], port: int, **popen: Any) -> subprocess.Popen:
    """Starts a detached process (own session, output to its log) and records its pid.
    `popen`: more subprocess.Popen arguments (PostgreSQL runs as another OS user when we are root)."""
    logf = s.log(component).open("ab")
    logf.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} local-stack starts {component}\n".encode())
    logf.flush()
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=logf,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a Ctrl-C in the calling terminal must not kill the stack
        cwd=s.state,
        **popen,
    )
    logf.close()
    starttime = None
    for _ in range(50):  # /proc entry appears at once; retry only to be safe
        starttime = _proc_starttime(proc.pid)
        if starttime:
            break
        time.sleep(0.01)
    rec = Record(component=component, pid=proc.pid, starttime=starttime or "?", port=port)
    s.record(component).write_text(json.dumps(rec.__dict__))
    return proc


def stop(s: StackConfig, component: str, shutdown: Shutdown = STOP) -> None:
    rec = live_record(s, component)
    if rec is None:
        say(f"{component}: not running")
        s.record(component).unlink(missing_ok=True)
        return
    t0 = time.monotonic()
    grace = shutdown.grace
    with suppress(ProcessLookupError):
        os.kill(rec.pid, shutdown.signal)
    while rec.alive() and time.monotonic() - t0 < grace:
        time.sleep(0.1)
    if rec.alive():
        say(f"{component}: pid {rec.pid} still running after {grace:.0f}s, sending SIGKILL")
        with suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGKILL)
        while rec.alive() and time.monotonic() - t0 < grace + 10:
            time.sleep(0.1)
    s.record(component).unlink(missing_ok=True)
    say(f"{component}: stopped pid {rec.pid} in {time.monotonic() - t0:.1f}s")


def log_tail(s: StackConfig, component: str, lines: int = 25) -> str:
    """The end of the component's log since its last start, led by the first errors if they
    scrolled out of that window (a JVM often logs the cause long before it exits)."""
    try:
        text = s.log(component).read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {s.log(component)})"
    starts = [i for i, line in enumerate(text) if line.startswith("===== ")]
    run = text[starts[-1] + 1 :] if starts else text
    tail = run[-lines:]
    head = run[: -lines or None]
    first = next((i for i, line in enumerate(head) if " ERROR " in line or "[ERROR]" in line), None)
    # With the lines before it: a process often says why only in the notes that precede its first
    # error (MariaDB's "[ERROR] Aborting" follows the reason).
    errors = head[max(0, first - 8) : first + 3] if first is not None else []
    shown = ([*errors, "    ..."] if errors else []) + tail
    return "\n".join(f"    {line}" for line in shown)


def wait_until(
    s: StackConfig,
    component: str,
    check: Callable[[], tuple[bool, str]],
    proc: subprocess.Popen,
    what: str,
    shutdown: Shutdown = STOP,
) -> float:
    """Polls check() -> (ok, detail) until ok; fails early if the process dies. Returns seconds.

    A process that dies or never gets healthy is not left behind: the next `up` starts clean.
    """
    t0 = time.monotonic()
    detail = ""
    while time.monotonic() - t0 < s.timeout:
        if proc.poll() is not None:
            s.record(component).unlink(missing_ok=True)
            raise StackError(
                f"{component} exited with code {proc.returncode} during start-up; last lines of "
                f"{s.log(component)}:\n{log_tail(s, component)}"
            )
        ok, detail = check()
        if ok:
            return time.monotonic() - t0
        time.sleep(0.3)
    tail = log_tail(s, component)
    stop(s, component, shutdown)
    raise StackError(
        f"{component}: {what} not reached within {s.timeout:.0f}s (CDC_STACK_TIMEOUT), so it was stopped; "
        f"last check: {detail}\nlast lines of {s.log(component)}:\n{tail}"
    )


# ---------------------------------------------------------------------------------------- ports
def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Servers set SO_REUSEADDR too, so only a listening socket (not TIME_WAIT) counts as taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on now, picked by the OS (a race with another process stays
    possible): for servers the benchmarks and tests start beside the stack. Never one this process
    was given before: the OS may pick a just-closed port again, and a stack's ports must differ."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def port_holder(port: int) -> str:
    """Best effort: which process listens on the port (needs `ss` from iproute2)."""
    if not shutil.which("ss"):
        return ""
    try:
        out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if 'users:(("' in out:
        users = out.split('users:(("', 1)[1]
        name, _, rest = users.partition('"')
        pid = rest.split("pid=", 1)[1].split(",", 1)[0] if "pid=" in rest else "?"
        return f" by {name} (pid {pid})"
    return ""


def tcp_open(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def read_sql(file: str | None, statement: str | None) -> str:
    """The SQL of `sql FILE`, `sql -` (stdin) or `sql -e STATEMENT`."""
    if statement is not None:
        return statement
    if file == "-":
        return sys.stdin.read()
    try:
        return Path(file or "").read_text()
    except OSError as exc:
        raise StackError(f"cannot read {file}: {exc.strerror}") from None
