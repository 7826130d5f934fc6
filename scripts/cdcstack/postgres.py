"""PostgreSQL 15 as the local stack's CDC source: `local-stack up --source postgres`.

A plain `postgres` process on 127.0.0.1 with its own data directory under $CDC_STACK_DIR/postgres,
logical decoding on (wal_level=logical), and the Debezium PostgreSQL connector (pgoutput) registered
on the stack's Kafka Connect from cloudformation/connector/debezium-postgres.json. See
docs/LOCAL_STACK.md, "PostgreSQL".

Roles in database salesdb:
  <OS user>      superuser, over the Unix socket only (peer authentication, no password)
  salesdb_owner  NOLOGIN; owns the captured tables and the publication
  debezium       LOGIN REPLICATION, member of salesdb_owner, over TCP with a SCRAM password kept in
                 $CDC_STACK_DIR/secrets/debezium-postgres.properties (0600)
The connector's filtered publication is why debezium must share the tables' owner: PostgreSQL lets
only a table's owner add it to a publication, and the connector sets the table list at every start.
The SourceEngine functions (cdcstack/plumbing.py) are the ones `up`, `status` and `sql` call.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from cdctools.connector_config import render

from cdcstack import connect, plumbing
from cdcstack.plumbing import (
    DATABASE,
    ROOT,
    TOPIC_PREFIX,
    Record,
    Shutdown,
    StackConfig,
    StackError,
    launch,
    live_record,
    log_tail,
    wait_until,
)

NAME = "PostgreSQL"
COMPONENT = "postgres"
DESCRIPTION = "PostgreSQL (logical decoding source)"
PORT_ENV = "CDC_STACK_POSTGRES_PORT"
DEFAULT_PORT = 15432
CONNECTOR = "salesdb-pg-cdc"
PLUGIN = "debezium-connector-postgres"
TEMPLATE = ROOT / "cloudformation" / "connector" / "debezium-postgres.json"
SCHEMA = "public"  # what the connector captures (schema.include.list); topics <prefix>.public.<table>
TOPIC_NAMESPACE = SCHEMA
SOURCE_NAMESPACE = f"{DATABASE}.{SCHEMA}"
SCENARIO = ROOT / "sql" / "postgres"
# The change topics only: no DDL in its events, and its heartbeat topic stays outside.
JOB_TOPIC_PATTERN = rf"{TOPIC_PREFIX}\.({SCHEMA}\..*|transaction)"
UP_COMMAND = "local-stack up --source postgres"
# SIGTERM is PostgreSQL's "smart" shutdown, which waits for clients (Debezium never leaves); SIGINT
# is its "fast" one: clients are disconnected, the shutdown checkpoint is written.
SHUTDOWN = Shutdown(signal.SIGINT, grace=60.0)
OWNER_ROLE = f"{DATABASE}_owner"  # as on AWS: <database>_owner (sql/postgres/ files SET ROLE to it)
PUBLICATION = "dbz_publication"
SLOT = "salesdb_cdc"
# DDL capture (docs/ARCHITECTURE.md, "Source DDL"): an event trigger writes each DDL command on a table
# to a table of the captured schema, which the connector streams with the data changes.
DDL_CAPTURE = ROOT / "sql" / "postgres" / "ddl_capture.sql"
# The heartbeat table the connector's heartbeat.action.query writes (sql/postgres/heartbeat.sql).
HEARTBEAT = ROOT / "sql" / "postgres" / "heartbeat.sql"
SERVER_OS_USER = "postgres"  # PostgreSQL refuses to run as root; the Debian package creates this user


# ---------------------------------------------------------------------------------------- binaries
def bindir() -> Path:
    """PostgreSQL's server binaries: $CDC_STACK_PG_BINDIR, else /usr/lib/postgresql/<v>/bin of the
    distribution's package (15 first, where the stack was measured, else the newest)."""
    env = os.environ.get("CDC_STACK_PG_BINDIR")
    candidates = [Path(env)] if env else []
    root = Path("/usr/lib/postgresql")
    versions = sorted((p for p in root.glob("*") if p.name.isdigit()), key=lambda p: int(p.name), reverse=True)
    candidates += [root / "15" / "bin", *(v / "bin" for v in versions)]
    for c in candidates:
        if (c / "postgres").exists() and (c / "initdb").exists():
            return c
    raise StackError(
        "PostgreSQL server binaries (postgres, initdb) not found: run scripts/setup-stack "
        "(installs the distribution's postgresql-<major>), or point CDC_STACK_PG_BINDIR at their directory"
    )


def psql() -> str:
    found = shutil.which("psql") or str(bindir() / "psql")
    if not Path(found).exists():
        raise StackError("psql not found: run scripts/setup-stack (installs postgresql-client-<major>)")
    return found


def check_prerequisites(s: StackConfig) -> None:
    bindir()
    psql()
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_OS_USER)
        except KeyError:
            raise StackError(
                f"PostgreSQL refuses to run as root and there is no OS user {SERVER_OS_USER!r} to run it as: "
                "install the postgresql server package (scripts/setup-stack does; it creates that user) "
                "or run the stack as an ordinary user"
            ) from None
    if len(str(socket_path(s, s.ports[COMPONENT]))) > 100:  # unix socket paths are limited to 107 bytes
        raise StackError(
            f"the PostgreSQL socket path {socket_path(s, s.ports[COMPONENT])} is too long: use a shorter CDC_STACK_DIR"
        )


# ---------------------------------------------------------------------------------------- layout
def pg_dir(s: StackConfig) -> Path:
    return s.path("postgres")


def data_dir(s: StackConfig) -> Path:
    return pg_dir(s) / "data"


def socket_path(s: StackConfig, port: int) -> Path:
    return pg_dir(s) / f".s.PGSQL.{port}"


def secret_file(s: StackConfig) -> Path:
    return s.secrets_dir / "debezium-postgres.properties"


def admin_role() -> str:
    # The OS user running the stack is the superuser, over the socket only (peer authentication).
    return plumbing.os_user()


def server_user() -> pwd.struct_passwd | None:
    """Who runs the server: `postgres` when the stack runs as root, otherwise the stack's own user."""
    return pwd.getpwnam(SERVER_OS_USER) if os.geteuid() == 0 else None


def current_port(s: StackConfig) -> int:
    rec = live_record(s, COMPONENT)
    return rec.port if rec else s.ports[COMPONENT]


def _as_server_user() -> dict:
    user = server_user()
    return {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _prepare_dir(s: StackConfig) -> None:
    """The server's directory belongs to the server's OS user, and that user must reach it."""
    d = pg_dir(s)
    d.mkdir(parents=True, exist_ok=True)
    user = server_user()
    if user is None:
        return
    for p in [d, *d.rglob("*")]:
        if p.stat().st_uid != user.pw_uid:
            os.chown(p, user.pw_uid, user.pw_gid, follow_symlinks=False)
    probe = subprocess.run(["test", "-w", str(d)], **_as_server_user())
    if probe.returncode != 0:
        raise StackError(
            f"PostgreSQL runs as OS user {user.pw_name} (it refuses root) and cannot reach {d}: "
            f"let it traverse every parent directory (chmod o+x), or use a CDC_STACK_DIR under such a path"
        )


def write_config(s: StackConfig, port: int) -> Path:
    """postgresql.conf, pg_hba.conf next to the data directory; rewritten on every start."""
    d = pg_dir(s)
    conf = d / "postgresql.conf"
    conf.write_text(
        f"""# Generated by local-stack on every start; edit the script, not this file.
# ALTER SYSTEM settings in data/postgresql.auto.conf still override these.
hba_file = '{d / "pg_hba.conf"}'
ident_file = '{d / "pg_ident.conf"}'
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{d}'
unix_socket_permissions = 0700
# What Debezium's pgoutput connector needs: logical decoding, a WAL sender and a slot.
wal_level = logical
max_wal_senders = 4
max_replication_slots = 4
# A slot nobody reads (a connector deleted without its slot) may hold at most this much WAL.
max_slot_wal_keep_size = 1GB
password_encryption = scram-sha-256
timezone = 'UTC'
log_timezone = 'UTC'
datestyle = 'iso, ymd'
lc_messages = 'C'
log_line_prefix = '%m [%p] %q%u@%d '
# Small footprint: this is a laptop-sized demo database.
shared_buffers = 32MB
max_connections = 30
dynamic_shared_memory_type = posix
"""
    )
    (d / "pg_hba.conf").write_text(
        f"""# Generated by local-stack. The administrator over the socket only; Debezium over TCP
# with its password. A logical replication connection matches the database name (salesdb), not
# the `replication` keyword, so one line covers its SQL and its replication connection.
local   all      {admin_role():<14} peer
host    {DATABASE:<8} debezium       127.0.0.1/32  scram-sha-256
"""
    )
    (d / "pg_ident.conf").write_text("# Generated by local-stack; no mappings.\n")
    return conf


# ---------------------------------------------------------------------------------------- SQL
def psql_cmd(s: StackConfig, database: str, *args: str) -> list[str]:
    port = current_port(s)
    return [psql(), "-X", "-h", str(pg_dir(s)), "-p", str(port), "-U", admin_role(), "-d", database, *args]


def run_sql(s: StackConfig, sql: str, database: str | None = None, timeout: float = 30) -> str:
    """Runs SQL as the administrator over the socket; the SQL goes through stdin, never argv.
    Output like the mariadb client's batch mode: tab-separated rows, no header."""
    cmd = psql_cmd(s, database or DATABASE, "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-f", "-")
    env = {**os.environ, "PGCONNECT_TIMEOUT": "5"}
    try:
        res = subprocess.run(cmd, input=sql, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise StackError(f"PostgreSQL did not answer within {timeout:.0f}s") from None
    if res.returncode != 0:
        raise StackError(f"PostgreSQL: {res.stderr.strip()}")
    return res.stdout


def health(s: StackConfig) -> tuple[bool, str]:
    try:
        out = run_sql(s, "SELECT current_setting('server_version');", database="postgres", timeout=5).strip()
    except StackError as exc:
        return False, str(exc)
    return True, f"server_version = {out}"


# ---------------------------------------------------------------------------------------- start
def start(s: StackConfig, port: int) -> bool:
    """Starts postgres; initialises the data directory first if there is none. Returns whether new."""
    _prepare_dir(s)
    conf = write_config(s, port)
    data = data_dir(s)
    fresh = not (data / "PG_VERSION").exists()
    if fresh:
        say(f"initialising a new data directory in {data}")
        shutil.rmtree(data, ignore_errors=True)  # a half-done earlier attempt
        cmd = [
            str(bindir() / "initdb"),
            f"--pgdata={data}",
            f"--username={admin_role()}",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--auth=peer",
            "--no-instructions",
        ]
        with s.log(COMPONENT).open("ab") as logf:
            res = subprocess.run(cmd, stdout=logf, stderr=subprocess.STDOUT, timeout=s.timeout, **_as_server_user())
        if res.returncode != 0:
            raise StackError(f"initdb failed (exit {res.returncode}); last lines:\n{log_tail(s, COMPONENT)}")
    problems = auto_conf_problems(s)
    if problems:
        # PostgreSQL itself refuses to start with a logical slot and wal_level below logical.
        raise StackError("PostgreSQL is not configured for CDC:\n  " + "\n  ".join(problems))
    say(f"starting PostgreSQL on 127.0.0.1:{port}")
    cmd = [str(bindir() / "postgres"), "-D", str(data), "-c", f"config_file={conf}"]
    proc = launch(s, COMPONENT, cmd, port, **_as_server_user())
    secs = wait_until(s, COMPONENT, lambda: health(s), proc, "a working SQL connection", SHUTDOWN)
    say(f"ready in {secs:.1f}s (pid {proc.pid})")
    return fresh


def say(message: str) -> None:
    plumbing.say(f"{COMPONENT}: {message}")


def debezium_password(s: StackConfig) -> str:
    return plumbing.debezium_password(secret_file(s), NAME)


def scram_verifier(password: str, salt: bytes | None = None, iterations: int = 4096) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores (RFC 5802/7677): sent instead of the password,
    so the clear text reaches neither the server nor its log, even if the statement fails."""
    salt = salt if salt is not None else os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = base64.b64encode
    stored = hashlib.sha256(client_key).digest()
    return f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}${b64(stored).decode()}:{b64(server_key).decode()}"


def bootstrap(s: StackConfig) -> None:
    """Idempotent: database salesdb, the owner role, the Debezium user and the (empty) publication."""
    if not run_sql(s, f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}';", database="postgres").strip():
        run_sql(s, f"CREATE DATABASE {DATABASE};", database="postgres")
    verifier = scram_verifier(debezium_password(s))
    run_sql(
        s,
        f"""
        DO $$ BEGIN
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OWNER_ROLE}') THEN
            CREATE ROLE {OWNER_ROLE} NOLOGIN;
          END IF;
          IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'debezium') THEN
            CREATE ROLE debezium LOGIN REPLICATION;
          END IF;
        END $$;
        ALTER ROLE debezium WITH LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '{verifier}';
        GRANT {OWNER_ROLE} TO debezium;
        -- PostgreSQL 15 no longer lets everyone create in schema public; the owner role may.
        GRANT USAGE, CREATE ON SCHEMA {SCHEMA} TO {OWNER_ROLE};
        -- A publication is created in a database by a role with CREATE on it.
        GRANT CREATE ON DATABASE {DATABASE} TO {OWNER_ROLE};
        DO $$ BEGIN
          IF NOT EXISTS (SELECT FROM pg_publication WHERE pubname = '{PUBLICATION}') THEN
            CREATE PUBLICATION {PUBLICATION};
            ALTER PUBLICATION {PUBLICATION} OWNER TO {OWNER_ROLE};
          END IF;
        END $$;
        -- A partitioned table's changes under its own name, not each partition's (docs/ARCHITECTURE.md,
        -- "Partitioned tables (PostgreSQL)"); also for a publication an older stack created.
        ALTER PUBLICATION {PUBLICATION} SET (publish_via_partition_root = true);
        """,
        database=DATABASE,
    )
    install_shipped_sql(s, HEARTBEAT)
    install_shipped_sql(s, DDL_CAPTURE)


def install_shipped_sql(s: StackConfig, script: Path) -> None:
    """A shipped script of sql/postgres/ (the heartbeat table, the DDL capture), as on RDS
    (docs/DEPLOY.md): run by the superuser, idempotent."""
    names = f"\\set schema {SCHEMA}\n\\set owner {OWNER_ROLE}\n\\set publication {PUBLICATION}\n"
    run_sql(s, names + script.read_text(), database=DATABASE)


def auto_conf_problems(s: StackConfig) -> list[str]:
    """ALTER SYSTEM settings (data/postgresql.auto.conf, which wins over our postgresql.conf) that
    break CDC, found before the server starts: with a slot, a wrong wal_level stops it starting."""
    f = data_dir(s) / "postgresql.auto.conf"
    try:
        lines = f.read_text().splitlines()
    except OSError:
        return []
    settings = {}
    for line in lines:
        name, sep, value = line.partition("=")
        if sep and not name.strip().startswith("#"):
            settings[name.strip()] = value.strip().strip("'")
    fix = (
        f"delete that line from {f} (ALTER SYSTEM wrote it; on a running server ALTER SYSTEM RESET {{name}} "
        "does the same), then local-stack up --source postgres"
    )
    problems = []
    if settings.get("wal_level", "logical") != "logical":
        problems.append(
            f"wal_level = {settings['wal_level']} is set by ALTER SYSTEM; Debezium's pgoutput decoding needs "
            f"wal_level = logical: {fix.format(name='wal_level')}"
        )
    for name in ("max_replication_slots", "max_wal_senders"):
        if settings.get(name, "1") == "0":
            problems.append(
                f"{name} = 0 is set by ALTER SYSTEM; the connector needs at least 1: {fix.format(name=name)}"
            )
    return problems


def cdc_problems(s: StackConfig, port: int) -> list[str]:
    """What keeps Debezium from decoding this server's WAL, as instructions."""
    rows = run_sql(
        s,
        "SELECT name, setting, COALESCE(sourcefile, '') FROM pg_settings "
        "WHERE name IN ('wal_level', 'max_replication_slots', 'max_wal_senders');",
        database="postgres",
    )
    var = {}
    for line in rows.splitlines():
        name, setting, source = [*line.split("\t"), "", ""][:3]
        var[name] = (setting, source)
    restart = "then restart it: local-stack down postgres && local-stack up --source postgres"
    problems = []

    def where(name: str) -> str:
        source = var.get(name, ("", ""))[1]
        if source.endswith("postgresql.auto.conf"):
            return f"it comes from ALTER SYSTEM ({source}): run ALTER SYSTEM RESET {name}, {restart}"
        return f"set {name} in {pg_dir(s) / 'postgresql.conf'} (written by local-stack), {restart}"

    level = var.get("wal_level", ("?", ""))[0]
    if level != "logical":
        problems.append(f"wal_level is {level}, Debezium's pgoutput decoding needs logical: {where('wal_level')}")
    for name in ("max_replication_slots", "max_wal_senders"):
        value = var.get(name, ("0", ""))[0]
        if not value.isdigit() or int(value) < 1:
            problems.append(f"{name} is {value}: the connector needs at least 1: {where(name)}")
    return [f"PostgreSQL on port {port}: {p}" for p in problems]


# ---------------------------------------------------------------------------------------- tables
def table_problems(s: StackConfig) -> list[str]:
    """Warnings about the captured schema's tables, each with what to do.

    REPLICA IDENTITY FULL: without it PostgreSQL logs no before image; the lake still applies updates
    (from `after`) and deletes (by the Kafka key), but before images are empty and an unchanged
    TOASTed value is missing from an update's `after`."""
    rows = run_sql(
        s,
        f"""
        SELECT c.relname, c.relreplident,
               EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary),
               pg_get_userbyid(c.relowner),
               -- a partition is published with its partitioned table
               EXISTS (SELECT 1 FROM (SELECT c.oid AS relid UNION SELECT relid FROM pg_partition_ancestors(c.oid)) a
                         JOIN pg_class ac ON ac.oid = a.relid
                         JOIN pg_namespace an ON an.oid = ac.relnamespace
                         JOIN pg_publication_tables p ON p.schemaname = an.nspname AND p.tablename = ac.relname
                        WHERE p.pubname = '{PUBLICATION}')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = '{SCHEMA}' AND c.relkind IN ('r', 'p')
        ORDER BY c.relname;
        """,
    )
    out = []
    for line in rows.splitlines():
        name, ident, has_pk, owner, published = line.split("\t")
        t = f"{SCHEMA}.{name}"
        if ident != "f":
            kind = {"d": "DEFAULT", "n": "NOTHING", "i": "USING INDEX"}.get(ident, ident)
            out.append(
                f"{t} has REPLICA IDENTITY {kind}: updates arrive with before=null and deletes with only the key "
                f"(the job still applies both), and an unchanged TOASTed column is missing from an update; "
                f"run ALTER TABLE {t} REPLICA IDENTITY FULL;"
            )
        if has_pk != "t" and ident != "f":
            out.append(
                f"{t} has no primary key: the job identifies its rows by their whole image, which updates and "
                f"deletes carry only with REPLICA IDENTITY FULL; run ALTER TABLE {t} REPLICA IDENTITY FULL;"
            )
        if owner != OWNER_ROLE:
            out.append(
                f"{t} is owned by {owner}, not {OWNER_ROLE}: the connector cannot put it in its publication and "
                f"its next start fails; run ALTER TABLE {t} OWNER TO {OWNER_ROLE};"
            )
        elif published != "t":
            out.append(
                f"{t} is not in publication {PUBLICATION}: its changes are not streamed until it is; run "
                f"ALTER PUBLICATION {PUBLICATION} ADD TABLE {t}; (the connector adds it at its next start, "
                "without the changes made meanwhile)"
            )
    return out


# ---------------------------------------------------------------------------------------- connector
def connector_config(s: StackConfig, source_port: int, kafka_port: int) -> dict[str, Any]:
    """The template's settings with local values, plus Kafka Connect's topic creation."""
    config = render(
        TEMPLATE,
        {
            "DB_HOST": "127.0.0.1",
            "DB_PORT": str(source_port),
            "DB_USER": "debezium",
            # A config-provider reference: the worker reads the password from the 0600 file itself.
            "DB_PASSWORD": f"${{file:{secret_file(s)}:password}}",
            "DB_NAME": DATABASE,
            "SCHEMA_INCLUDE_LIST": SCHEMA,
            "TOPIC_PREFIX": TOPIC_PREFIX,
            "TRANSACTION_METADATA": str(s.transactions == "keep").lower(),
            "SLOT_NAME": SLOT,
            "PUBLICATION_NAME": PUBLICATION,
        },
    )
    return {**config, **connect.topic_creation(s)}


def up(s: StackConfig, running: Record | None, port: int, init_sql: list[Path]) -> bool:
    """The source half of `up`: PostgreSQL running, bootstrapped and fit for CDC. Returns whether
    it was (re)started, so that a running connector task reconnects now."""
    fresh = started = False
    if running is None:
        fresh = start(s, port)
        started = True
    else:
        ok, detail = health(s)
        if not ok:
            raise StackError(
                f"postgres (pid {running.pid}) is running but unhealthy: {detail}\n"
                "try local-stack down postgres && local-stack up --source postgres"
            )
        say(f"already running (pid {running.pid}, port {port})")
    bootstrap(s)
    if fresh:
        for f in init_sql:
            say(f"running {f}")
            run_sql(s, f.read_text(), database=DATABASE, timeout=s.timeout)
    elif init_sql:
        say("existing data directory, --init-sql skipped (it runs only on a new one)")
    problems = cdc_problems(s, port)
    if problems:
        raise StackError("PostgreSQL is not configured for CDC:\n  " + "\n  ".join(problems))
    return started


def sql_session(s: StackConfig, sql: str, database: str) -> int:
    # Output goes straight to the terminal; like the mariadb client, tab-separated with a header line
    # when it is not a terminal. An error stops the run.
    fmt = [] if sys.stdout.isatty() else ["-A", "-F", "\t", "-P", "footer=off"]
    return subprocess.run(
        psql_cmd(s, database, *fmt, "-v", "ON_ERROR_STOP=1", "-f", "-"), input=sql, text=True
    ).returncode
