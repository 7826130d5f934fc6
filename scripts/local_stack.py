"""The local pipeline stack: MariaDB (binlog source) -> Apache Kafka (KRaft, one node) <- Kafka Connect
running the Debezium MySQL connector. Everything runs as plain processes on 127.0.0.1, with state
and logs under $CDC_STACK_DIR (default .local/stack). See docs/LOCAL_STACK.md.
With --source postgres (or CDC_STACK_SOURCE=postgres) the source is PostgreSQL and the Debezium
PostgreSQL connector instead (scripts/local_stack_pg.py).

    scripts/local-stack up [--init-sql FILE ...]   start what is not running, register the connector
    scripts/local-stack down [COMPONENT ...]       stop what `up` started (by recorded pid)
    scripts/local-stack status                     component, pid, port, health
    scripts/local-stack logs [COMPONENT] [-n N] [-f]
    scripts/local-stack sql (FILE | -e SQL) [-D DB]
"""

from __future__ import annotations

import argparse
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
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cli
from connector_config import render

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "cloudformation" / "connector" / "debezium-mysql.json"
COMPONENTS = ("mariadb", "kafka", "connect")  # start order; stopped in reverse
ALL_COMPONENTS = ("mariadb", "postgres", "kafka", "connect")  # with the optional PostgreSQL source
SOURCES = {"mysql": "mariadb", "postgres": "postgres"}  # --source -> its component
DATABASE = "salesdb"
TOPIC_PREFIX = "salesdb"
DEBEZIUM_USER = "debezium"
# Debezium reads the server version to choose its binlog status statement; a real MariaDB version
# (10.x, "MariaDB") makes it issue SHOW BINARY LOG STATUS, which MariaDB lacks. A MySQL 5.7 version
# below 5.7.20 without the word "MariaDB" works (with "MariaDB" in it a restart skips a row).
SERVER_VERSION = "5.7.19-log-mdb10.11"
PORT_ENV = {
    "mariadb": "CDC_STACK_MARIADB_PORT",
    "kafka": "CDC_STACK_KAFKA_PORT",
    "connect": "CDC_STACK_CONNECT_PORT",
    "postgres": "CDC_STACK_POSTGRES_PORT",
}
DEFAULT_PORT = {"mariadb": 3307, "kafka": 19092, "connect": 18083, "postgres": 15432}
DESCRIPTION = {
    "mariadb": "MariaDB (MySQL binlog source)",
    "postgres": "PostgreSQL (logical decoding source)",
    "kafka": "Apache Kafka broker (KRaft, broker + controller)",
    "connect": "Kafka Connect (distributed) + Debezium connector",
}


class StackError(Exception):
    """A failure with a message that tells the user what to do."""


def say(message: str) -> None:
    print(f"[stack] {message}", flush=True)


# ---------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Settings:
    state: Path
    local: Path
    ports: dict[str, int]
    debezium_server_id: int
    connector: str
    timeout: float
    topic_partitions: int
    source: str = "mysql"  # mysql (MariaDB) or postgres
    controller_port: int = 0  # the KRaft controller listener (the broker's own, never used by clients)

    @classmethod
    def from_env(cls, source: str | None = None) -> Settings:
        local = Path(os.environ.get("CDC_LOCAL_DIR", ROOT / ".local")).resolve()
        state = Path(os.environ.get("CDC_STACK_DIR", local / "stack")).resolve()
        # Not given: the source this state directory runs, so that status, sql, down and the tools
        # built on them follow a PostgreSQL stack without repeating --source.
        source = source or os.environ.get("CDC_STACK_SOURCE", "").strip() or _running_source(state) or "mysql"
        if source not in SOURCES:
            raise StackError(f"source {source!r} (--source / CDC_STACK_SOURCE): choose one of {', '.join(SOURCES)}")
        ports = {name: _int_env(var, DEFAULT_PORT[name]) for name, var in PORT_ENV.items()}
        for name, port in ports.items():
            if not 1024 <= port <= 65535:
                raise StackError(f"{PORT_ENV[name]}={port}: choose a port between 1024 and 65535")
        controller_port = _int_env("CDC_STACK_KAFKA_CONTROLLER_PORT", ports["kafka"] + 1)
        if not 1024 <= controller_port <= 65535:
            raise StackError(f"CDC_STACK_KAFKA_CONTROLLER_PORT={controller_port}: choose a port between 1024 and 65535")
        if len(set(ports.values())) != len(ports) or controller_port in ports.values():
            raise StackError(
                f"two components are configured on the same port: {ports}, kafka controller {controller_port} "
                f"({', '.join(PORT_ENV.values())}, CDC_STACK_KAFKA_CONTROLLER_PORT)"
            )
        return cls(
            state=state,
            local=local,
            ports=ports,
            debezium_server_id=_int_env("CDC_STACK_DEBEZIUM_SERVER_ID", 184054),
            # One Connect may run both sources' connectors: distinct names, distinct offsets.
            connector=os.environ.get(
                "CDC_STACK_CONNECTOR", "salesdb-pg-cdc" if source == "postgres" else "salesdb-cdc"
            ),
            timeout=float(_int_env("CDC_STACK_TIMEOUT", 120)),
            topic_partitions=_int_env("CDC_STACK_TOPIC_PARTITIONS", 1),
            source=source,
            controller_port=controller_port,
        )

    @property
    def components(self) -> tuple[str, ...]:
        """This source's components in start order."""
        return (SOURCES[self.source], "kafka", "connect")

    # Paths; everything lives under the state directory.
    def path(self, *parts: str) -> Path:
        return self.state.joinpath(*parts)

    def log(self, component: str) -> Path:
        return self.path("logs", f"{component}.log")

    def record(self, component: str) -> Path:
        return self.path("run", f"{component}.json")

    @property
    def secret_file(self) -> Path:
        return self.path("secrets", "debezium.properties")

    @property
    def socket(self) -> Path:
        return self.path("mariadb", "mariadb.sock")

    @property
    def kafka_data(self) -> Path:
        return self.path("kafka", "data")

    @property
    def connect_plugins(self) -> Path:
        return self.local / "connect" / "plugins"


def _running_source(state: Path) -> str | None:
    """The one source whose server runs under this state directory, if exactly one does."""
    alive = []
    for source, component in SOURCES.items():
        try:
            rec = Record(**json.loads((state / "run" / f"{component}.json").read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if rec.alive():
            alive.append(source)
    return alive[0] if len(alive) == 1 else None


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise StackError(f"{name}={raw!r} is not an integer") from None


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


def load_record(s: Settings, component: str) -> Record | None:
    try:
        data = json.loads(s.record(component).read_text())
        return Record(**data)
    except (OSError, ValueError, TypeError):
        return None


def live_record(s: Settings, component: str) -> Record | None:
    rec = load_record(s, component)
    if rec is not None and not rec.alive():
        s.record(component).unlink(missing_ok=True)  # stale: the process is gone
        return None
    return rec


def launch(s: Settings, component: str, cmd: list[str], port: int, **popen: Any) -> subprocess.Popen:
    """Starts a detached process (own session, output to its log) and records its pid.
    `popen`: more subprocess.Popen arguments (PostgreSQL runs as another OS user when we are root)."""
    logf = s.log(component).open("ab")
    logf.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} scripts/local-stack starts {component}\n".encode())
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


def stop(s: Settings, component: str) -> None:
    rec = live_record(s, component)
    if rec is None:
        say(f"{component}: not running")
        s.record(component).unlink(missing_ok=True)
        return
    t0 = time.monotonic()
    grace = 60.0 if component in ("mariadb", "postgres") else 30.0  # clean shutdowns: InnoDB flush, offset commit
    # PostgreSQL's SIGTERM is a "smart" shutdown that waits for clients (Debezium never leaves);
    # SIGINT is its "fast" one: clients are disconnected, the shutdown checkpoint is written.
    with suppress(ProcessLookupError):
        os.kill(rec.pid, signal.SIGINT if component == "postgres" else signal.SIGTERM)
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


def log_tail(s: Settings, component: str, lines: int = 25) -> str:
    """The end of the component's log since its last start, led by the first errors if they
    scrolled out of that window (a JVM often logs the cause long before it exits)."""
    try:
        text = s.log(component).read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {s.log(component)})"
    starts = [i for i, line in enumerate(text) if line.startswith("===== ")]
    run = text[starts[-1] + 1 :] if starts else text
    tail = run[-lines:]
    errors = [line for line in run[: -lines or None] if " ERROR " in line or "[ERROR]" in line][:3]
    shown = ([*errors, "    ..."] if errors else []) + tail
    return "\n".join(f"    {line}" for line in shown)


def wait_until(
    s: Settings, component: str, check: Callable[[], tuple[bool, str]], proc: subprocess.Popen, what: str
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
    stop(s, component)
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


# ---------------------------------------------------------------------------------------- MariaDB
def mariadb_admin_user() -> str:
    # mariadb-install-db gives root (and, when not run as root, the invoking user) unix_socket auth:
    # the OS user who runs the stack is the database administrator over the socket, no password.
    return pwd.getpwuid(os.geteuid()).pw_name


def write_mariadb_config(s: Settings, port: int) -> None:
    d = s.path("mariadb")
    run_as_root = "user=root\n" if os.geteuid() == 0 else ""
    (d / "my.cnf").write_text(
        f"""# Generated by scripts/local-stack on every start; edit the script, not this file.
[mariadbd]
{run_as_root}datadir={d / "data"}
socket={s.socket}
pid-file={d / "mariadbd.pid"}
bind-address=127.0.0.1
port={port}
skip-name-resolve
# CDC source settings Debezium needs: row-based binlog with full before/after images.
log_bin={d / "data" / "binlog"}
binlog_format=ROW
binlog_row_image=FULL
server_id=1
binlog_expire_logs_seconds=604800
version={SERVER_VERSION}
default_time_zone=+00:00
character_set_server=utf8mb4
collation_server=utf8mb4_general_ci
# Small footprint: this is a laptop-sized demo database.
innodb_buffer_pool_size=64M
performance_schema=OFF
max_connections=50
"""
    )
    (d / "client.cnf").write_text(f"[client]\nsocket={s.socket}\nuser={mariadb_admin_user()}\n")


def mariadb_cmd(s: Settings, *args: str) -> list[str]:
    return ["mariadb", f"--defaults-file={s.path('mariadb', 'client.cnf')}", *args]


def run_sql(s: Settings, sql: str, database: str | None = None, timeout: float = 30) -> str:
    """Runs SQL as the administrator over the socket; the SQL goes through stdin, never argv."""
    if s.source == "postgres":
        import local_stack_pg

        return local_stack_pg.run_sql(s, sql, database, timeout)
    args = ["--batch", "--skip-column-names", "--connect-timeout=5"]
    if database:
        args.append(f"--database={database}")
    try:
        res = subprocess.run(mariadb_cmd(s, *args), input=sql, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StackError(f"MariaDB did not answer within {timeout:.0f}s") from None
    if res.returncode != 0:
        raise StackError(f"MariaDB: {res.stderr.strip()}")
    return res.stdout


def mariadb_health(s: Settings) -> tuple[bool, str]:
    try:
        out = run_sql(s, "SELECT VERSION();", timeout=5).strip()
    except StackError as exc:
        return False, str(exc)
    return True, f"SELECT VERSION() = {out}"


def start_mariadb(s: Settings, port: int) -> bool:
    """Starts mariadbd; initialises the data directory first if there is none. Returns whether new."""
    d = s.path("mariadb")
    d.mkdir(parents=True, exist_ok=True)
    write_mariadb_config(s, port)
    fresh = not (d / "data" / "mysql").is_dir()
    if fresh:
        say(f"mariadb: initialising a new data directory in {d / 'data'}")
        shutil.rmtree(d / "data", ignore_errors=True)  # a half-done earlier attempt
        cmd = [
            "mariadb-install-db",
            f"--defaults-file={d / 'my.cnf'}",
            f"--datadir={d / 'data'}",
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        else:
            cmd.append(f"--auth-root-socket-user={mariadb_admin_user()}")
        with s.log("mariadb").open("ab") as logf:
            res = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT, timeout=s.timeout)
        if res.returncode != 0:
            raise StackError(
                f"mariadb-install-db failed (exit {res.returncode}); last lines:\n{log_tail(s, 'mariadb')}"
            )
    say(f"mariadb: starting on 127.0.0.1:{port}")
    mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    proc = launch(s, "mariadb", [mariadbd, f"--defaults-file={d / 'my.cnf'}"], port)
    secs = wait_until(s, "mariadb", lambda: mariadb_health(s), proc, "a working SQL connection")
    say(f"mariadb: ready in {secs:.1f}s (pid {proc.pid})")
    return fresh


def debezium_password(s: Settings, f: Path | None = None) -> str:
    """Generated at first start; kept in a 0600 properties file that Kafka Connect reads itself."""
    f = f or s.secret_file
    f.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not f.exists():
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            what = "MariaDB" if f == s.secret_file else "PostgreSQL"
            out.write(f"# Password of the {what} user debezium; read by Kafka Connect's FileConfigProvider.\n")
            out.write(f"password={secrets.token_urlsafe(24)}\n")
    os.chmod(f, 0o600)
    for line in f.read_text().splitlines():
        if line.startswith("password="):
            return line.split("=", 1)[1]
    raise StackError(f"{f} has no password= line: delete it and run `up` again")


def bootstrap_mariadb(s: Settings) -> None:
    """Idempotent: the salesdb database and the least-privileged Debezium user."""
    password = debezium_password(s)
    user = f"'{DEBEZIUM_USER}'@'127.0.0.1'"
    run_sql(
        s,
        f"""
        CREATE DATABASE IF NOT EXISTS {DATABASE};
        -- Keep the account statements (and the password) out of the binlog Debezium reads.
        SET SESSION sql_log_bin = 0;
        CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{password}';
        ALTER USER {user} IDENTIFIED BY '{password}';
        GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO {user};
        """,
    )


def cdc_problems(s: Settings, port: int) -> list[str]:
    """What keeps Debezium from reading this server's binlog, as instructions."""
    rows = run_sql(
        s,
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN "
        "('log_bin', 'binlog_format', 'binlog_row_image', 'server_id', 'version');",
    )
    var = dict(line.split("\t", 1) for line in rows.splitlines() if "\t" in line)
    where = f"under [mariadbd] in {s.path('mariadb', 'my.cnf')} (written by scripts/local-stack)"
    problems = []
    if var.get("log_bin") != "ON":
        problems.append(f"log_bin is {var.get('log_bin')}: binary logging must be on; set log_bin {where} and restart")
    if var.get("binlog_format") != "ROW":
        problems.append(
            f"binlog_format is {var.get('binlog_format')}, Debezium needs ROW: set binlog_format=ROW {where}, "
            "or run SET GLOBAL binlog_format='ROW' (new sessions only)"
        )
    if var.get("binlog_row_image") != "FULL":
        problems.append(
            f"binlog_row_image is {var.get('binlog_row_image')}, Debezium needs FULL for complete before/after "
            f"images: set binlog_row_image=FULL {where}, or SET GLOBAL binlog_row_image='FULL'"
        )
    if var.get("server_id") in (None, "0", str(s.debezium_server_id)):
        problems.append(
            f"server_id is {var.get('server_id')}: it must be non-zero and differ from Debezium's "
            f"database.server.id {s.debezium_server_id} (CDC_STACK_DEBEZIUM_SERVER_ID)"
        )
    version = var.get("version", "")
    if "mariadb" in version.lower() or not version.startswith("5."):
        problems.append(
            f"version is {version!r}: Debezium's MySQL connector rejects MariaDB's version string; "
            f"set version={SERVER_VERSION} {where}"
        )
    return [f"MariaDB on port {port}: {p}" for p in problems]


# ---------------------------------------------------------------------------------------- Kafka
def kafka_libs(s: Settings) -> Path:
    return s.local / "kafka" / "libs"


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise StackError("java not found: run scripts/setup-local (it installs OpenJDK 17)")
    return java


def kafka_health(port: int) -> tuple[bool, str]:
    if not tcp_open(port):
        return False, f"nothing listens on 127.0.0.1:{port}"
    from confluent_kafka.admin import AdminClient

    try:
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 2}).list_topics(timeout=5)
    except Exception as exc:  # any client error means "not healthy yet"
        return False, f"metadata request failed: {exc}"
    if not md.brokers:
        return False, "metadata lists no broker yet"
    return True, f"metadata ok, {len(md.topics)} topics"


LOG4J_FILTER = """\
# Drop the "XyzConfig values:" dumps every client, connector and the broker print (most of the log);
# the settings are in the .properties files next to this one.
log4j.appender.out.filter.1=org.apache.log4j.varia.StringMatchFilter
log4j.appender.out.filter.1.StringToMatch=values: \\n
log4j.appender.out.filter.1.AcceptOnMatch=false
"""


def write_log4j(path: Path, extra: str = "") -> Path:
    """A log4j 1 (reload4j, what Kafka 3.7 logs with) config: everything to stdout, which `launch`
    sends to the component's log file."""
    path.write_text(
        "# Generated by scripts/local-stack on every start.\n"
        "log4j.rootLogger=INFO, out\n"
        "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c{1})%n\n" + LOG4J_FILTER + extra
    )
    return path


def write_kafka_config(s: Settings, port: int, controller_port: int) -> Path:
    d = s.path("kafka")
    d.mkdir(parents=True, exist_ok=True)
    props = d / "server.properties"
    props.write_text(
        f"""# Generated by scripts/local-stack on every start; edit the script, not this file.
# One KRaft node that is broker and controller at once.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
# Topics, offsets and the cluster metadata live here: a restart keeps them.
log.dirs={s.kafka_data}
# One broker: every internal topic has one replica.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
default.replication.factor=1
num.partitions=1
# One consumer per group at most here: no reason to wait for more members before a rebalance.
group.initial.rebalance.delay.ms=0
# Retention as MSK's default (7 days); Debezium creates its schema-history topic with infinite retention.
log.retention.hours=168
"""
    )
    write_log4j(
        d / "log4j.properties",
        "log4j.logger.kafka=INFO\n"
        "log4j.logger.org.apache.kafka=INFO\n"
        # Per-segment and per-request chatter.
        "log4j.logger.kafka.log.LogCleaner=WARN\n"
        "log4j.logger.kafka.request.logger=WARN\n"
        "log4j.logger.state.change.logger=WARN\n",
    )
    return props


def kafka_java(s: Settings, heap: str, log4j: Path, *args: str) -> list[str]:
    return [
        java_binary(),
        f"-Xmx{heap}",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j.configuration=file:{log4j}",
        "-cp",
        f"{kafka_libs(s)}/*",
        *args,
    ]


def format_kafka_storage(s: Settings, props: Path) -> None:
    """Formats the KRaft log directory once, with a cluster id generated for this state directory."""
    if (s.kafka_data / "meta.properties").exists():
        return
    log4j = s.path("kafka", "log4j.properties")
    tool = "kafka.tools.StorageTool"
    res = subprocess.run(kafka_java(s, "256m", log4j, tool, "random-uuid"), capture_output=True, text=True)
    cluster_id = res.stdout.strip().splitlines()[-1] if res.returncode == 0 and res.stdout.strip() else ""
    if not cluster_id:
        raise StackError(f"kafka: StorageTool random-uuid failed (exit {res.returncode}): {res.stderr.strip()[-2000:]}")
    say(f"kafka: formatting a new KRaft log directory in {s.kafka_data} (cluster id {cluster_id})")
    res = subprocess.run(
        kafka_java(s, "256m", log4j, tool, "format", "--config", str(props), "--cluster-id", cluster_id),
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise StackError(f"kafka: StorageTool format failed (exit {res.returncode}):\n{res.stdout}{res.stderr}")


def start_kafka(s: Settings, port: int, controller_port: int) -> None:
    if not any(kafka_libs(s).glob("kafka_2.13-*.jar")):
        raise StackError(f"no Kafka broker jars in {kafka_libs(s)}: run scripts/setup-local (resolves pom.xml)")
    props = write_kafka_config(s, port, controller_port)
    format_kafka_storage(s, props)
    say(f"kafka: starting Apache Kafka (KRaft, broker + controller) on 127.0.0.1:{port}")
    cmd = kafka_java(s, "512m", s.path("kafka", "log4j.properties"), "kafka.Kafka", str(props))
    proc = launch(s, "kafka", cmd, port)
    secs = wait_until(s, "kafka", lambda: kafka_health(port), proc, "a metadata response")
    say(f"kafka: ready in {secs:.1f}s (pid {proc.pid})")


# ---------------------------------------------------------------------------------------- Connect
def http(method: str, url: str, body: Any = None, timeout: float = 10) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def connect_health(port: int) -> tuple[bool, str]:
    # Connect 3.7 has no /health; GET /connectors goes through the herder's request queue, so it is
    # answered only once the worker has joined its group and read the config topic.
    status, body = http("GET", f"http://127.0.0.1:{port}/connectors", timeout=5)
    if status == 200:
        return True, f"worker answers, {len(body) if isinstance(body, list) else '?'} connector(s)"
    return False, f"GET /connectors -> {status or 'no answer'} {body}"


def write_connect_config(s: Settings, port: int, kafka_port: int) -> Path:
    d = s.path("connect")
    d.mkdir(parents=True, exist_ok=True)
    props = d / "worker.properties"
    props.write_text(
        f"""# Generated by scripts/local-stack on every start.
bootstrap.servers=127.0.0.1:{kafka_port}
group.id=cdclake-local-connect
config.storage.topic=_connect-configs
offset.storage.topic=_connect-offsets
status.storage.topic=_connect-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
listeners=http://127.0.0.1:{port}
rest.advertised.host.name=127.0.0.1
rest.advertised.port={port}
# Each connector in its own folder, loaded in its own class loader (as MSK Connect loads a plugin).
plugin.path={s.connect_plugins}
# The plugins declare themselves in service manifests: no reflective scan of every jar.
plugin.discovery=service_load
# Commit source offsets every 5 s: after a crash at most 5 s of events are sent again.
offset.flush.interval.ms=5000
# One worker never needs a rebalance grace period.
scheduled.rebalance.max.delay.ms=0
# The connector reads the database password itself: ${{file:<path>:password}} in its config.
config.providers=file
config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
config.providers.file.param.allowed.paths={s.secret_file.parent}
"""
    )
    write_log4j(
        d / "log4j.properties",
        # Quiet plugin listings and the reflections library.
        "log4j.logger.org.apache.kafka.connect.runtime.isolation=WARN\n"
        "log4j.logger.org.reflections=ERROR\n",
    )
    return props


def start_connect(s: Settings, port: int, kafka_port: int) -> None:
    if not any(kafka_libs(s).glob("connect-runtime-*.jar")):
        raise StackError(f"no Kafka Connect jars in {kafka_libs(s)}: run scripts/setup-local (resolves pom.xml)")
    props = write_connect_config(s, port, kafka_port)
    say(f"connect: starting Kafka Connect (distributed mode) with REST on 127.0.0.1:{port}")
    cmd = kafka_java(
        s, "512m", props.parent / "log4j.properties", "org.apache.kafka.connect.cli.ConnectDistributed", str(props)
    )
    proc = launch(s, "connect", cmd, port)
    secs = wait_until(s, "connect", lambda: connect_health(port), proc, "a worker that answers GET /connectors")
    say(f"connect: ready in {secs:.1f}s (pid {proc.pid})")


def connector_config(s: Settings, mariadb_port: int, kafka_port: int) -> dict:
    """The template's settings with local values, plus the local counterpart of what the
    CloudFormation side adds for MSK: Kafka Connect creates the change topics itself (one replica on
    the single local broker, CDC_STACK_TOPIC_PARTITIONS partitions)."""
    config = render(
        TEMPLATE,
        {
            "DB_HOST": "127.0.0.1",
            "DB_PORT": str(mariadb_port),
            "DB_USER": DEBEZIUM_USER,
            # A config-provider reference: the REST payload and Connect's config topic carry only the
            # path; the worker reads the value from the 0600 file when it starts the connector.
            "DB_PASSWORD": f"${{file:{s.secret_file}:password}}",
            "DB_SERVER_ID": str(s.debezium_server_id),
            "DB_INCLUDE_LIST": DATABASE,
            "TOPIC_PREFIX": TOPIC_PREFIX,
            "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{kafka_port}",
        },
    )
    config["topic.creation.default.partitions"] = str(s.topic_partitions)
    config["topic.creation.default.replication.factor"] = "1"
    return config


def register_connector(s: Settings, connect_port: int, config: dict) -> bool:
    """Creates or updates the connector when its config differs. Returns whether it was written."""
    base = f"http://127.0.0.1:{connect_port}/connectors/{s.connector}"
    s.path("connect", "connector.json").write_text(json.dumps(config, indent=2) + "\n")
    t0 = time.monotonic()
    while True:
        status, current = http("GET", f"{base}/config")
        if status == 200 and current == {**config, "name": s.connector}:
            return False
        if status in (200, 404):
            status, body = http("PUT", f"{base}/config", config, timeout=30)
            if status in (200, 201):
                return True
        else:
            body = current
        # 409: the worker is rebalancing; 5xx: not ready yet. Anything else will not fix itself.
        if status not in (0, 409, 500, 503) or time.monotonic() - t0 > s.timeout:
            raise StackError(f"registering connector {s.connector} failed: HTTP {status} {body}")
        time.sleep(1)


def connector_state(s: Settings, connect_port: int) -> tuple[str, str]:
    """('RUNNING'|'FAILED'|'PAUSED'|'UNASSIGNED'|'MISSING'|..., detail)."""
    status, body = http("GET", f"http://127.0.0.1:{connect_port}/connectors/{s.connector}/status")
    if status == 404:
        return "MISSING", "not registered"
    if status != 200 or not isinstance(body, dict):
        return "UNKNOWN", f"HTTP {status} {body}"
    states = [body["connector"]["state"]] + [t["state"] for t in body.get("tasks", [])]
    detail = f"connector {body['connector']['state']}, " + (
        ", ".join(f"task {t['id']} {t['state']}" for t in body.get("tasks", [])) or "no tasks yet"
    )
    traces = [t.get("trace", "") for t in body.get("tasks", []) if t.get("trace")]
    if body["connector"].get("trace"):
        traces.insert(0, body["connector"]["trace"])
    if "FAILED" in states:
        first = "\n".join(traces[0].splitlines()[:6]) if traces else ""
        return "FAILED", f"{detail}\n{first}"
    if states == ["RUNNING"]:  # no task yet
        return "STARTING", detail
    if all(x == "RUNNING" for x in states):
        return "RUNNING", detail
    return states[0] if states[0] != "RUNNING" else "STARTING", detail


def restart_connector(s: Settings, connect_port: int) -> None:
    url = f"http://127.0.0.1:{connect_port}/connectors/{s.connector}/restart?includeTasks=true"
    status, body = http("POST", url, timeout=30)
    if status not in (200, 202, 204):
        raise StackError(f"restarting connector {s.connector} failed: HTTP {status} {body}")


def wait_connector_running(s: Settings, connect_port: int, restarted_at: float | None = None) -> float:
    """Waits for the connector and its task to run; a FAILED task gets one restart."""
    t0 = time.monotonic()
    state, detail = "UNKNOWN", ""
    while time.monotonic() - t0 < s.timeout:
        state, detail = connector_state(s, connect_port)
        if state == "RUNNING":
            return time.monotonic() - t0
        # Right after a restart request the status topic may still show the old task's FAILED.
        settling = restarted_at is not None and time.monotonic() - restarted_at < 5
        if state == "FAILED" and not settling:
            if restarted_at is not None:
                break
            say(f"connector: FAILED, restarting it once: {detail.splitlines()[0]}")
            restart_connector(s, connect_port)
            restarted_at = time.monotonic()
        time.sleep(0.5)
    raise StackError(
        f"connector {s.connector} is not running: {detail}\n"
        f"see scripts/local-stack logs connect (last lines:)\n{log_tail(s, 'connect', 15)}"
    )


# ---------------------------------------------------------------------------------------- commands
def check_prerequisites(s: Settings) -> None:
    if s.source == "postgres":
        import local_stack_pg

        local_stack_pg.check_prerequisites(s)
    else:
        missing = [b for b in ("mariadb", "mariadb-install-db") if shutil.which(b) is None]
        if shutil.which("mariadbd") is None and not Path("/usr/sbin/mariadbd").exists():
            missing.append("mariadbd")
        if missing:
            raise StackError(f"{', '.join(missing)} not found: run scripts/setup-stack (installs mariadb-server)")
    if not any(kafka_libs(s).glob("kafka_2.13-*.jar")):
        raise StackError(f"no Apache Kafka jars in {kafka_libs(s)}: run scripts/setup-local (resolves pom.xml)")
    plugin = "debezium-connector-postgres" if s.source == "postgres" else "debezium-connector-mysql"
    if not (s.connect_plugins / plugin).is_dir():
        raise StackError(f"{s.connect_plugins / plugin} is missing: run scripts/setup-local (resolves pom.xml)")
    if s.source == "mysql" and len(str(s.socket)) > 100:  # unix socket paths are limited to 107 bytes
        raise StackError(f"the MariaDB socket path {s.socket} is too long: use a shorter CDC_STACK_DIR")


@contextmanager
def state_lock(s: Settings) -> Iterator[None]:
    """One `up`/`down` at a time per state directory."""
    import fcntl

    s.state.mkdir(parents=True, exist_ok=True)
    with open(s.state / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another scripts/local-stack command is working on this state directory; waiting")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def cmd_up(s: Settings, init_sql: list[Path]) -> int:
    t_start = time.monotonic()
    check_prerequisites(s)
    for f in init_sql:
        if not f.is_file():
            raise StackError(f"--init-sql {f}: no such file")
    for sub in ("logs", "run", "kafka", "connect", *(("mariadb",) if s.source == "mysql" else ())):
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
                    f"{c}: already running on port {rec.port} (not {s.ports[c]} from {PORT_ENV[c]}); "
                    f"run `scripts/local-stack down {c}` to move it"
                )
            continue
        if not port_free(s.ports[c]):
            taken.append(
                f"port {s.ports[c]} on 127.0.0.1 for {c} is already in use{port_holder(s.ports[c])}; "
                f"stop that process or choose another port with {PORT_ENV[c]}=<port>"
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

    if s.source == "postgres":
        import local_stack_pg as pg

        source_started = pg.up(s, running["postgres"], port["postgres"], init_sql)
    else:
        source_started = _mariadb_up(s, running, port, init_sql)
    return _broker_and_connect_up(s, running, port, source_started, t_start)


def _mariadb_up(s: Settings, running: dict[str, Record | None], port: dict[str, int], init_sql: list[Path]) -> bool:
    """The MariaDB half of `up`. Returns whether MariaDB was (re)started."""
    mariadb_started = fresh_db = False
    if running["mariadb"] is None:
        fresh_db = start_mariadb(s, port["mariadb"])
        mariadb_started = True
    else:
        ok, detail = mariadb_health(s)
        if not ok:
            raise StackError(
                f"mariadb (pid {running['mariadb'].pid}) is running but unhealthy: {detail}\n"
                f"try scripts/local-stack down mariadb && scripts/local-stack up"
            )
        say(f"mariadb: already running (pid {running['mariadb'].pid}, port {port['mariadb']})")
    bootstrap_mariadb(s)
    if fresh_db:
        for f in init_sql:
            say(f"mariadb: running {f}")
            run_sql(s, f.read_text(), database=DATABASE, timeout=s.timeout)
    elif init_sql:
        say("mariadb: existing data directory, --init-sql skipped (it runs only on a new one)")
    problems = cdc_problems(s, port["mariadb"])
    if problems:
        raise StackError("MariaDB is not configured for CDC:\n  " + "\n  ".join(problems))
    return mariadb_started


def _broker_and_connect_up(
    s: Settings, running: dict[str, Record | None], port: dict[str, int], source_started: bool, t_start: float
) -> int:
    # Apache Kafka. Its topics (Connect's configs, offsets and status included) survive a restart,
    # so a Kafka Connect that kept running reconnects by itself.
    if running["kafka"] is None:
        start_kafka(s, port["kafka"], s.controller_port)
    else:
        ok, detail = kafka_health(port["kafka"])
        if not ok:
            raise StackError(
                f"kafka (pid {running['kafka'].pid}) is running but unhealthy: {detail}\n"
                f"last lines of its log:\n{log_tail(s, 'kafka')}"
            )
        say(f"kafka: already running (pid {running['kafka'].pid}, port {port['kafka']})")

    # Kafka Connect
    connect_started = False
    if running["connect"] is None:
        start_connect(s, port["connect"], port["kafka"])
        connect_started = True
    else:
        ok, detail = connect_health(port["connect"])
        if not ok:
            raise StackError(
                f"connect (pid {running['connect'].pid}) is running but unhealthy: {detail}\n"
                f"last lines of its log:\n{log_tail(s, 'connect')}"
            )
        say(f"connect: already running (pid {running['connect'].pid}, port {port['connect']})")

    # Connector
    if s.source == "postgres":
        import local_stack_pg as pg

        config, template, source_name = (
            pg.connector_config(s, port["postgres"], port["kafka"]),
            pg.TEMPLATE,
            "PostgreSQL",
        )
        topics, source_port = f"{TOPIC_PREFIX}.{pg.SCHEMA}.<table>", port["postgres"]
    else:
        config, template, source_name = connector_config(s, port["mariadb"], port["kafka"]), TEMPLATE, "MariaDB"
        topics, source_port = f"{TOPIC_PREFIX}.{DATABASE}.<table>", port["mariadb"]
    written = register_connector(s, port["connect"], config)
    restarted_at = None
    if written:
        say(f"connector: registered {s.connector} from {template.relative_to(ROOT)}")
    elif source_started and not connect_started:
        # The binlog client notices a restarted server only on its next keep-alive round (60 s or
        # more); a task restart reconnects at once, from the committed offset.
        say(f"connector: {source_name} was restarted, restarting the connector task to reconnect now")
        restart_connector(s, port["connect"])
        restarted_at = time.monotonic()
    secs = wait_connector_running(s, port["connect"], restarted_at)
    say(f"connector: {s.connector} running ({secs:.1f}s); topics {topics}")
    if s.source == "postgres":
        pg.warn_about_tables(s)
    say(
        f"stack up in {time.monotonic() - t_start:.1f}s: {source_name} 127.0.0.1:{source_port}, "
        f"Kafka 127.0.0.1:{port['kafka']}, Kafka Connect http://127.0.0.1:{port['connect']}"
    )
    return 0


def cmd_down(s: Settings, components: list[str]) -> int:
    # Every component this state directory may hold, whichever source `up` was given.
    targets = [
        c
        for c in reversed(ALL_COMPONENTS)
        if (c in components if components else c in s.components or live_record(s, c))
    ]
    for c in targets:
        stop(s, c)
    return 0


def cmd_status(s: Settings) -> int:
    healthy = True
    print(f"{'component':<10} {'state':<9} {'pid':>7} {'port':>6}  health")
    port = {}
    other_sources = [c for c in SOURCES.values() if c not in s.components and live_record(s, c)]
    for c in (*s.components, *other_sources):
        rec = live_record(s, c)
        if rec is None:
            healthy = False
            print(f"{c:<10} {'stopped':<9} {'-':>7} {s.ports[c]:>6}  -   ({DESCRIPTION[c]})")
            continue
        port[c] = rec.port
        check = {
            "postgres": lambda: _pg_health(s),
            "mariadb": lambda: mariadb_health(s),
            "kafka": lambda p=rec.port: kafka_health(p),
            "connect": lambda p=rec.port: connect_health(p),
        }[c]
        ok, detail = check()
        healthy &= ok
        print(f"{c:<10} {'running':<9} {rec.pid:>7} {rec.port:>6}  {'ok' if ok else 'UNHEALTHY'}: {detail}")
    if "connect" in port:
        state, detail = connector_state(s, port["connect"])
        healthy &= state == "RUNNING"
        print(f"{'connector':<10} {state:<9} {'':>7} {'':>6}  {s.connector}: {detail}")
    print(f"state and logs: {s.state}")
    return 0 if healthy else 3


def _pg_health(s: Settings) -> tuple[bool, str]:
    import local_stack_pg

    return local_stack_pg.health(s)


def cmd_logs(s: Settings, component: str | None, lines: int, follow: bool) -> int:
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


def cmd_sql(s: Settings, file: str | None, statement: str | None, database: str) -> int:
    if s.source == "postgres":
        import local_stack_pg

        return local_stack_pg.cmd_sql(s, file, statement, database)
    if live_record(s, "mariadb") is None:
        raise StackError("MariaDB is not running: scripts/local-stack up")
    if statement is not None:
        sql = statement
    elif file == "-":
        sql = sys.stdin.read()
    else:
        try:
            sql = Path(file or "").read_text()
        except OSError as exc:
            raise StackError(f"cannot read {file}: {exc.strerror}") from None
    # Output goes straight to the terminal (tab-separated with headers, like the mariadb client).
    res = subprocess.run(mariadb_cmd(s, f"--database={database}"), input=sql, text=True)
    return res.returncode


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(prog="scripts/local-stack", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--source",
        choices=sorted(SOURCES),
        help="the CDC source: mysql (MariaDB, the default) or postgres; default $CDC_STACK_SOURCE or mysql",
    )
    up = sub.add_parser(
        "up", parents=[common], help="start what is not running and register the connector (idempotent)"
    )
    up.add_argument(
        "--init-sql",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="SQL to load into salesdb when the data directory is created (before the snapshot)",
    )
    down = sub.add_parser("down", parents=[common], help="stop the processes `up` started")
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
    args = parser.parse_args(argv)
    try:
        s = Settings.from_env(args.source)
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
        print("[stack] interrupted; components started so far keep running (scripts/local-stack down)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run as the importable module `local_stack`, the one local_stack_pg imports: one set of
    # classes (StackError, Settings) instead of a second copy under __main__.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import local_stack

    sys.exit(local_stack.main())
