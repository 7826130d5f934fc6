"""`make demo`: the seed walkthrough, automated, on the real local pipeline.

MariaDB -> Debezium on Kafka Connect -> Apache Kafka (KRaft) -> the Glue job script (streaming,
locally, Spark's Kafka source) -> Iceberg tables, read back through DuckDB in Athena's role, then reconciled with the
source row by row. Exits non-zero if the lake differs from the source.
With --table-format delta or hudi the job writes Delta Lake or Apache Hudi (copy-on-write) tables
instead, read back the same way (scripts/cdctools/lake_reader.py: DuckDB's Delta extension; hudi-rs for Hudi).

State goes to $CDC_STACK_DIR (default .local/demo), started fresh each run; the stack is stopped
at the end unless --keep is given. With --source postgres the source is PostgreSQL 15 (logical
decoding, Debezium's PostgreSQL connector) and the scenario is sql/postgres/. The connector writes
Avro with the AWS Glue Schema Registry (moto's Glue API plays the registry) and the job decodes it
(--wire_format avro), as the template deploys by default; --format json writes Kafka Connect JSON.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdctools import cli

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("CDC_STACK_DIR", str(ROOT / ".local" / "demo"))

from cdclake.common.lake_contract import READ_POINT_TABLE, is_metadata_column  # noqa: E402
from cdclake.lake.formats import DEFAULT, format_of  # noqa: E402
from cdclake.lake.formats.capabilities import Capability  # noqa: E402
from cdcstack import commands, connect, plumbing, sources  # noqa: E402

from cdctools import change_feed, local_job, reconcile, status  # noqa: E402
from cdctools import lake_reader as lake  # noqa: E402

STEPS = 7
QUERY_SQL = "query_capture.sql"  # the modification column of query capture (CAPTURE=query), per engine
QUERY_LIMITS = (
    "  query capture: the lake holds each row as the last poll read it (intermediate states, such as "
    "step 4's row changed twice, are not captured); hard deletes reach it through the job's key "
    "reconciliation (--jdbc_reconcile_every_polls 5); reconcile compares the final states"
)


def step(n: int, text: str) -> None:
    print(f"\n\033[1m[demo {n}/{STEPS}] {text}\033[0m", flush=True)


def check(results: list[reconcile.TableResult]) -> bool:
    for r in results:
        print(f"  {r.report()}")
    return all(r.ok for r in results)


def apply(s: plumbing.StackConfig, file: Path, table_format: str, wait: float = 120) -> bool:
    t0 = time.monotonic()
    s.engine.run_sql(s, file.read_text(), plumbing.DATABASE)
    print(f"  ran {file.relative_to(ROOT)}; waiting for the lake to catch up ...", flush=True)
    ok = check(reconcile.reconcile_until(s, None, plumbing.DATABASE, wait, table_format))
    print(f"  source and lake equal {time.monotonic() - t0:.1f}s after the SQL was sent" if ok else "  NOT equal")
    return ok


def show_table(con, location: Path, columns: str, order: str, limit: int = 8) -> None:
    q = f"SELECT {columns} FROM {lake.scan(con, location)} ORDER BY {order} LIMIT {limit}"
    cur = con.execute(q)
    names = [d[0] for d in cur.description]
    data = [[("NULL" if v is None else str(v)) for v in row] for row in cur.fetchall()]
    widths = [max(len(n), *(len(r[i]) for r in data)) for i, n in enumerate(names)]
    print("  " + "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)))
    for r in data:
        print("  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))


def show_read_point(s: plumbing.StackConfig, con: Any, warehouse: Path, table_format: str) -> None:
    """With source transactions kept: the read point, each table's version that holds whole transactions."""
    if s.transactions != "keep" or not format_of(table_format).supports(Capability.READ_POINT):
        return
    point = lake.table_location(warehouse, local_job.NAMESPACE, READ_POINT_TABLE, table_format)
    # A batch publishes its point after its last commit: a moment after the lake equals the source.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        named = {r["table_name"] for r in lake.rows(con, point)}
        if named >= set(lake.list_tables(warehouse, local_job.NAMESPACE, table_format)):
            break
        time.sleep(1)
    print(f"  the read point ({READ_POINT_TABLE}): the version of each table that holds whole transactions")
    show_table(con, point, "table_name, version, batch_id, source_ts", "table_name")


@dataclass(frozen=True)
class Reader:
    """A downstream reader of the customer table: the rows it held and its mark at one point."""

    rows: list[dict[str, Any]]
    mark: Any

    @classmethod
    def now(cls, con: Any, table: Path) -> Reader:
        return cls(lake.rows(con, table), change_feed.high_water(con, table))


def show_changes(con: Any, table: Path, reader: Reader) -> bool:
    """What changed in the customer table since before step 4 (the rows and the delete markers applied
    since: every table format), and whether the reader's rows, with them applied, are the table now."""
    changes = change_feed.changes_since(con, table, reader.mark)
    kinds = Counter(c.kind for c in changes)
    print(
        f"  what changed in {table.name} since before step 4 (sql/spark/changes_since.sql): {', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}"
    )
    for c in changes[:6]:
        print(f"    {c.kind:<8} cust_id {c.row.get('cust_id', '-')}  source position {c.seq}")
    if len(changes) > 6:
        print(f"    ... {len(changes) - 6} more")
    replayed = change_feed.replay(reader.rows, changes, lambda r: r["cust_id"])
    now = {r["cust_id"]: r for r in lake.rows(con, table)}
    # The reader's columns: a column added since reaches it through the table's schema, not as changes.
    cols = [c for c in (reader.rows[0] if reader.rows else {}) if not is_metadata_column(c)]
    same = replayed.keys() == now.keys() and all(
        [replayed[k].get(c) for c in cols] == [now[k].get(c) for c in cols] for k in now
    )
    print(
        f"  the rows held before step 4 with these changes applied {'equal' if same else 'DIFFER from'} the table now"
    )
    return same


def latency_probe(s: plumbing.StackConfig, con, location: Path, changes: int = 20, every: float = 0.5) -> list[float]:
    """Source commit -> visible in the lake, measured from outside: each probe UPDATE sets a unique
    `updated_at`; a reader polls the lake table (DuckDB) until it sees that value."""
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    done = threading.Event()

    def poll() -> None:
        reader = lake.connect()
        while not done.is_set() or len(seen) < len(sent):
            try:
                # Six fraction digits, as the markers are written: CAST(... AS VARCHAR) drops trailing
                # zeros (.000010 -> .00001), and a marker never seen holds the probe 60 s. A Hudi
                # DATETIME is a UTC timestamp (TIMESTAMPTZ here, session in UTC): its wall-clock time.
                cur = reader.execute(
                    "SELECT strftime(CAST(updated_at AS TIMESTAMP), '%Y-%m-%d %H:%M:%S.%f') "
                    f"FROM {lake.scan(reader, location)}"
                )
                now = time.time()
                for (v,) in cur.fetchall():
                    if v in sent and v not in seen:
                        seen[v] = now
            except Exception:  # a metadata or data file being replaced mid-read: read again
                pass
            if done.is_set() and time.time() - max(sent.values(), default=0) > 60:
                return
            time.sleep(0.2)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    base = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    ids = [
        int(x) for x in s.engine.run_sql(s, "SELECT cust_id FROM customer ORDER BY cust_id;", plumbing.DATABASE).split()
    ]
    for i in range(changes):
        marker = base.replace(year=2030).isoformat(sep=" ") + f".{i + 1:06d}"
        cust_id = ids[i % len(ids)]
        s.engine.run_sql(
            s, f"UPDATE customer SET updated_at = '{marker}' WHERE cust_id = {cust_id};", plumbing.DATABASE
        )
        sent[marker] = time.time()  # the UPDATE has committed when the client returns
        time.sleep(every)
    done.set()
    t.join(90)
    return sorted(seen[m] - sent[m] for m in sent if m in seen)


def percentile(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1] if len(values) > 1 else values[0]


def show_history(location: Path, name: str, table_format: str) -> None:
    """The table's commits and schemas, as its format's metadata records them."""
    print(f"  {format_of(table_format).label} commits of {name}:")
    commits = lake.commits(location)
    width = max((len(c["operation"] or "") for c in commits), default=0)
    for c in commits:
        when = datetime.fromtimestamp(c["timestamp_ms"] / 1000, UTC).strftime("%H:%M:%S")
        print(f"    {when}  {c['operation'] or '':<{width}}  {c['summary']}".rstrip())
    print("  schema history:")
    for sid, cols in lake.schema_history(location):
        print(f"    schema {sid}: {', '.join(c for c in cols if not is_metadata_column(c))}")


def final_checks(s: plumbing.StackConfig, con, customer: Path, name: str, table_format: str) -> bool:
    """Step 7: the lake through DuckDB (history, schema, latency), the final reconciliation, the job's figures."""
    ok = True
    step(7, "the lake through a second SQL engine (DuckDB plays Athena): history, schema, latency, verdict")
    show_history(customer, name, table_format)
    lat = latency_probe(s, con, customer)
    if lat:
        print(
            f"  end-to-end latency (source commit -> visible to a lake reader), {len(lat)} changes, "
            f"job trigger {os.environ.get('CDC_JOB_TRIGGER_SECONDS', '1')} s: "
            f"p50 {percentile(lat, 50):.1f} s, p95 {percentile(lat, 95):.1f} s, max {max(lat):.1f} s"
        )
    else:
        ok = False
        print("  latency probe: no change became visible")
    print("  final reconciliation (row count + per-row checksum over all columns):")
    ok &= check(reconcile.reconcile_until(s, None, plumbing.DATABASE, 120, table_format))
    print("  the job's figures per table (status: the EMF lines the CloudWatch dashboard shows on AWS):")
    print("    " + status.snapshot(s.log(local_job.COMPONENT))[0].replace("\n", "\n    "))
    return ok


def leave(s: plumbing.StackConfig, keep: bool, paths: local_job.LakePaths, table_format: str) -> None:
    """Leaves the pipeline running (--keep) with what to explore, else stops it; the lake stays."""
    if keep:
        print(
            f"[demo] still running. Explore: CDC_STACK_DIR={s.state} local-stack status | "
            "local-job logs | status | reconcile | apply-sql FILE"
            + ("" if table_format == DEFAULT else f" | local-job stop, start --table-format {table_format}")
        )
    else:
        plumbing.stop(s, local_job.COMPONENT)
        with plumbing.state_lock(s):
            commands.cmd_down(s, [])
        print(f"[demo] stopped; the lake stays in {paths.warehouse} (make demo KEEP=1 leaves it running)")


def job_arguments(write_mode: str | None) -> list[str]:
    """The local job's arguments beyond the stack's: `--write_mode` when the demo was given one."""
    return ["--write_mode", write_mode] if write_mode else []


def fresh_stack(s: plumbing.StackConfig, sql_dir: Path, capture: str = "log") -> None:
    """The stack started from nothing, the source table of the scenario's first file created; with
    query capture only the database, the table given its modification column (query_capture.sql)."""
    with plumbing.state_lock(s):
        commands.cmd_down(s, [])
    shutil.rmtree(s.state, ignore_errors=True)
    if capture == "query":
        for sub in ("logs", "run"):
            s.path(sub).mkdir(parents=True, exist_ok=True)
        with plumbing.state_lock(s):
            s.engine.up(s, None, s.ports[s.engine.COMPONENT], [sql_dir / "01_create_customer.sql", sql_dir / QUERY_SQL])
        print(f"  {s.engine.NAME} only: no broker, no Kafka Connect; the job polls {', '.join(local_job.QUERY_TABLES)}")
        return
    with plumbing.state_lock(s):
        commands.cmd_up(s, [sql_dir / "01_create_customer.sql"])
    connector_class = s.engine.connector_config(s, 1, 1)["connector.class"]
    print(f"  {connector_class} {connect.plugin_version(s, connector_class)} (Debezium build {s.debezium_build})")


def start_pipeline(s: plumbing.StackConfig, sql_dir: Path, table_format: str, extra: list[str], capture: str) -> None:
    """Steps 1 and 2: a fresh stack (with query capture the database alone), then the job."""
    pipeline = (
        f"{s.engine.DESCRIPTION}, polled by the job (query capture, --source jdbc)"
        if capture == "query"
        else f"{s.engine.DESCRIPTION} -> Kafka Connect + Debezium -> Apache Kafka, wire format {s.wire_format}"
    )
    step(
        1,
        f"fresh local stack in {s.state}: {pipeline}, table format {table_format}, source transactions {s.transactions}",
    )
    fresh_stack(s, sql_dir, capture)

    step(2, "the Glue job script, streaming locally (same script and batch function as on Glue)")
    print("  " + " ".join(local_job.job_command(s, extra, table_format, capture)), flush=True)
    local_job.start(s, extra, table_format, capture)
    if capture == "query":
        print(QUERY_LIMITS)


def second_table(s: plumbing.StackConfig, sql_dir: Path, table_format: str, capture: str) -> bool:
    """Step 6's SQL; with query capture the new table's modification column right after its creation."""
    if capture != "query":
        return apply(s, sql_dir / "04_second_table.sql", table_format)
    s.engine.run_sql(s, (sql_dir / "04_second_table.sql").read_text(), plumbing.DATABASE)
    print(f"  ran {(sql_dir / '04_second_table.sql').relative_to(ROOT)}, then its modification column:")
    return apply(s, sql_dir / "query_capture_orders.sql", table_format)


def run(
    keep: bool,
    source: str | None = None,
    wire_format: str | None = None,
    table_format: str = DEFAULT,
    extra: tuple[str, ...] | list[str] = (),
    capture: str = "log",
) -> int:
    s = sources.stack_config(source, wire_format or "avro")
    paths = local_job.LakePaths.of(s)
    t_start = time.monotonic()
    ok = True
    # Each engine has its scenario files in its dialect; lake tables are named <namespace>_<table>.
    sql_dir, prefix = s.engine.SCENARIO, s.engine.TOPIC_NAMESPACE
    try:
        start_pipeline(s, sql_dir, table_format, list(extra), capture)

        step(
            3,
            f"snapshot: {s.engine.SOURCE_NAMESPACE}.customer's 30 rows reach the {format_of(table_format).label} table",
        )
        ok &= check(reconcile.reconcile_until(s, None, plumbing.DATABASE, 120, table_format))

        con = lake.connect()
        customer = lake.table_location(paths.warehouse, local_job.NAMESPACE, f"{prefix}_customer", table_format)
        before = Reader.now(con, customer)

        step(4, "inserts, updates (one row twice in a transaction) and deletes: sql/02_changes.sql")
        ok &= apply(s, sql_dir / "02_changes.sql", table_format)

        step(5, "ALTER TABLE customer ADD COLUMN status ... DEFAULT 'Green', then more changes: sql/03")
        ok &= apply(s, sql_dir / "03_add_status_column.sql", table_format)
        show_table(con, customer, "cust_id, name, acct_balance, updated_at, status", "cust_id")

        step(6, "a second table with a composite key, created while the pipeline runs: sql/04")
        ok &= second_table(s, sql_dir, table_format, capture)
        orders = lake.table_location(paths.warehouse, local_job.NAMESPACE, f"{prefix}_orders", table_format)
        show_table(
            con, orders, "order_id, line_no, sku, unit_price, state, tracking_no, ordered_at", "order_id, line_no"
        )
        # Read after step 6: a batch commits its delete markers after its rows (docs/OPERATIONS.md).
        ok &= show_changes(con, customer, before)
        show_read_point(s, con, paths.warehouse, table_format)

        ok &= final_checks(s, con, customer, f"{local_job.NAMESPACE}.{prefix}_customer", table_format)
        print(
            f"\n[demo] {'PASS' if ok else 'FAIL'}: source and lake {'match' if ok else 'DIFFER'} "
            f"({time.monotonic() - t_start:.0f} s)"
        )
    finally:
        leave(s, keep, paths, table_format)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = cli.Parser(prog="demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave the stack and the job running")
    parser.add_argument(
        "--source",
        choices=sorted(sources.ENGINES),
        help="mysql (MariaDB, default) or postgres; default $CDC_STACK_SOURCE",
    )
    parser.add_argument(
        "--format",
        choices=("avro", "json"),
        default="avro",
        help="the change topics' wire format: avro (default; AWS Glue Schema Registry, a local stand-in) or json",
    )
    parser.add_argument(
        "--table-format",
        choices=local_job.TABLE_FORMATS,
        default=DEFAULT.value,
        help="the lake tables' format: "
        + ", ".join(f"{name} ({format_of(name).title})" for name in local_job.TABLE_FORMATS)
        + f"; default {DEFAULT}",
    )
    parser.add_argument(
        "--write-mode",
        choices=("merge-on-read", "copy-on-write"),
        help="the job's --write_mode: Iceberg's row-level write mode, or with --table-format hudi merge-on-read "
        "for Hudi `mor` tables (copy-on-write by default there)",
    )
    parser.add_argument(
        "--debezium",
        choices=plumbing.DEBEZIUM_BUILDS,
        help="the Debezium build Kafka Connect loads: java17 (Debezium 3.x, default) or java11 (Debezium 2.7, "
        "the template's DebeziumBuild=java11); default $CDC_STACK_DEBEZIUM",
    )
    parser.add_argument(
        "--capture",
        choices=local_job.CAPTURES,
        default="log",
        help="log (default): Debezium reads the binlog/WAL into Kafka; query: no Kafka or Connect, the job "
        "polls the tables' modification column (--source jdbc, sql/query_capture.sql)",
    )
    parser.add_argument(
        "--transactions",
        choices=plumbing.TRANSACTION_MODES,
        help="keep: the connector emits the source's transaction boundaries and the job applies each source "
        "transaction whole (the template's SourceTransactions); ignore (default): each change as it arrives; "
        "default $CDC_STACK_TRANSACTIONS",
    )
    args = parser.parse_args(argv)
    if args.debezium:
        os.environ["CDC_STACK_DEBEZIUM"] = args.debezium
    if args.transactions:
        os.environ["CDC_STACK_TRANSACTIONS"] = args.transactions
    try:
        return run(args.keep, args.source, args.format, args.table_format, job_arguments(args.write_mode), args.capture)
    except plumbing.StackError as exc:
        print(f"[demo] ERROR: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
