"""Job arguments: parsed the Glue way (`--name value`), validated once, then passed around immutable.

This table is the single definition of every argument; docs/CONFIGURATION.md documents the same list and a
test checks that the two agree.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from .lake_contract import SOURCE_DROPPED_PROPERTY, DropPolicy, KeylessTablePolicy, SchemaChangePolicy, WriteMode
from .maintenance_policy import MIN_ORPHAN_AGE_HOURS, MaintenancePolicy
from .names import lake_table_name
from .query_tables import engine_of, parse_capture_tables, parse_soft_delete


class Source(StrEnum):
    """--source: where events come from."""

    KAFKA = "kafka"
    FILES = "files"
    JDBC = "jdbc"  # query-based capture: polls the source's tables (events/query_capture.py)


class KafkaAuth(StrEnum):
    """--kafka_auth."""

    IAM = "iam"  # MSK IAM over SASL_SSL
    NONE = "none"  # PLAINTEXT


class WireFormat(StrEnum):
    """--wire_format: how the connector writes keys and values (its converters)."""

    JSON = "json"  # Kafka Connect JSON with schemas
    AVRO = "avro"  # Avro with the AWS Glue Schema Registry (JSON records on the same topics too)


class TableFormat(StrEnum):
    """--table_format: the lake tables' format (lake/formats/)."""

    ICEBERG = "iceberg"
    DELTA = "delta"
    HUDI = "hudi"


# Delta Lake's and Hudi's catalogs can only be Spark's session catalog (Glue 5.0's `--datalake-formats
# delta` and `hudi` layout).
DELTA_CATALOG = "spark_catalog"
SESSION_CATALOG_FORMATS = frozenset({TableFormat.DELTA, TableFormat.HUDI})


# --iceberg_format_version: Iceberg's table format versions the job writes (lake/formats/).
ICEBERG_FORMAT_VERSIONS = ("2", "3")


class Transactions(StrEnum):
    """--transactions: whether a source transaction reaches the lake whole."""

    KEEP = "keep"  # a transaction's changes are applied only once all of them are read (events/transactions.py)
    IGNORE = "ignore"  # every change is applied in the batch that reads it


class CatalogType(StrEnum):
    """--catalog_type."""

    GLUE = "glue"  # Glue Data Catalog + S3FileIO
    HADOOP = "hadoop"  # a warehouse folder


class ArgumentError(ValueError):
    """A job argument is missing or invalid. The message says which one and what is allowed."""


# A value parser: (argument name, raw text) -> the typed value; raises ArgumentError naming the argument.
Parse = Callable[[str, str], Any]

_BOOLS = {"true": True, "false": False}


def text(name: str, value: str) -> str:
    return value


def parse_bool(name: str, value: str) -> bool:
    b = _BOOLS.get(value.lower())
    if b is None:
        raise ArgumentError(f"--{name} must be true or false, got {value!r}")
    return b


def integer(minimum: int) -> Parse:
    def parse(name: str, value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise ArgumentError(f"--{name} must be an integer, got {value!r}") from None
        if n < minimum:
            raise ArgumentError(f"--{name} must be >= {minimum}, got {n}")
        return n

    return parse


def choice(allowed: tuple[str, ...]) -> Parse:
    def parse(name: str, value: str) -> str:
        if value not in allowed:
            raise ArgumentError(f"--{name} must be one of {', '.join(allowed)}; got {value!r}")
        return value

    return parse


def one_of(policy: type[StrEnum]) -> Parse:
    """An argument of a few named values: parsed once into its enum member, so the code compares
    members, not text."""

    def parse(name: str, value: str) -> StrEnum:
        try:
            return policy(value)
        except ValueError:
            allowed = ", ".join(p.value for p in policy)
            raise ArgumentError(f"--{name} must be one of {allowed}; got {value!r}") from None

    return parse


def topics(name: str, value: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in value.split(",") if t.strip())


def table_names(name: str, value: str) -> tuple[str, ...]:
    names = topics(name, value)
    for t in names:
        if not t.replace("_", "").isalnum():
            raise ArgumentError(f"--{name} takes plain table names of the namespace, got {t!r}")
    return names


def identifier(name: str, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ArgumentError(f"--{name} must be a plain identifier, got {value!r}")
    return value


def name_template(name: str, value: str) -> str:
    try:
        value.format(db="d", table="t")
    except (KeyError, IndexError, ValueError) as e:
        raise ArgumentError(f"--{name} may use only {{db}} and {{table}}: {value!r} ({e})") from None
    return value


@dataclass(frozen=True)
class Arg:
    name: str
    default: str | None
    help: str
    parse: Parse = text

    def value(self, raw: dict[str, str]) -> Any:
        """This argument's typed value: the one given in `raw`, else the default."""
        return self.parse(self.name, raw.get(self.name, self.default or ""))


# name, default as the command line gives it ("" for a required path: build_settings checks), help, parser
ARGS: tuple[Arg, ...] = (
    Arg(
        "source",
        "kafka",
        "Where events come from: `kafka` (MSK / any Kafka), `files` (JSON lines) or `jdbc` (query-based capture: "
        "polls the `--jdbc_tables` rows whose modification column moved past the lake's high-water mark).",
        parse=one_of(Source),
    ),
    Arg("kafka_bootstrap_servers", "", "Kafka bootstrap servers (host:port,...). Required for `kafka`."),
    Arg("kafka_topics", "", "Comma-separated topics to read. Use this or `kafka_topic_pattern`.", parse=topics),
    Arg("kafka_topic_pattern", "", "Java regex of topics to read, e.g. `salesdb\\.salesdb\\..*`."),
    Arg(
        "kafka_auth",
        "iam",
        "`iam` (MSK IAM, SASL_SSL) or `none` (PLAINTEXT, local broker).",
        parse=one_of(KafkaAuth),
    ),
    Arg(
        "wire_format",
        "json",
        "`json` (Kafka Connect JSON with schemas) or `avro` (Avro with the AWS Glue Schema Registry; JSON records "
        "on the same topics are read too). With `json`, Avro records become dead letters saying so.",
        parse=one_of(WireFormat),
    ),
    Arg(
        "starting_offsets",
        "earliest",
        "`earliest` or `latest`; used only when no checkpoint exists.",
        parse=choice(("earliest", "latest")),
    ),
    Arg("max_offsets_per_trigger", "100000", "Upper bound of Kafka records per micro-batch.", parse=integer(1)),
    Arg("files_path", "", "Directory or S3 prefix of JSON-lines files. Required for `files`."),
    Arg("max_files_per_trigger", "100", "Upper bound of new files per micro-batch (`files`).", parse=integer(1)),
    Arg(
        "jdbc_url",
        "",
        "`jdbc`: the source's JDBC URL, `jdbc:mysql://host:3306/` (MySQL, MariaDB) or "
        "`jdbc:postgresql://host:5432/db`. Required for `jdbc`.",
    ),
    Arg("jdbc_user", "", "`jdbc`: the database user (it needs SELECT on the tables and information_schema)."),
    Arg(
        "jdbc_password",
        "",
        "`jdbc`: where the password is: `secretsmanager:<secret id>` (its SecretString, or its `password` key), "
        "`env:<variable>`, or `file:<path>` (a `password=` line, or the whole file).",
    ),
    Arg(
        "jdbc_tables",
        "",
        "`jdbc`: comma-separated `<db>.<table>:<modification column>` (PostgreSQL: `<schema>.<table>:<column>`); "
        "the column is a NOT NULL timestamp every insert and update sets (sql/query_capture.sql, "
        "sql/postgres/query_capture.sql) and the table needs a primary key. Required for `jdbc`.",
        parse=text,
    ),
    Arg(
        "jdbc_soft_delete",
        "",
        "`jdbc`: `<column>=<value>`: a row whose column holds the value becomes a delete in the lake (tables "
        "without the column: none). Rows deleted at the source are found only by `--jdbc_reconcile_every_polls`.",
    ),
    Arg(
        "jdbc_lag_seconds",
        "5",
        "`jdbc`: a poll reads only rows whose modification value is older than this (source clock): longer than "
        "the source's longest writing transaction, whose rows carry its start time but appear at its commit.",
        parse=integer(0),
    ),
    Arg("jdbc_max_rows_per_poll", "100000", "`jdbc`: upper bound of rows read per table and poll.", parse=integer(1)),
    Arg(
        "jdbc_reconcile_every_polls",
        "0",
        "`jdbc`: every N polls, compare each table's keys with the lake's and delete the lake rows whose key "
        "is missing at the source (hard deletes; reads every key of both, docs/ARCHITECTURE.md); `0`: never.",
        parse=integer(0),
    ),
    Arg(
        "table_format",
        "iceberg",
        "`iceberg` (Apache Iceberg 1.11.0), `delta` (Delta Lake 4.2.0) or `hudi` (Apache Hudi 0.15.0 on Glue 5.0, copy-on-write unless --write_mode merge-on-read; "
        "tables without a primary key go to the dead letters): the format of the lake tables the job writes. The Glue "
        "job needs `--datalake-formats delta` or `hudi` for those.",
        parse=one_of(TableFormat),
    ),
    Arg(
        "catalog_name",
        "glue_catalog",
        "Spark catalog name the job's SQL uses (same on Glue and locally). With `--table_format delta` or `hudi` "
        f"it is `{DELTA_CATALOG}` (their catalog is Spark's session catalog).",
    ),
    Arg(
        "catalog_type",
        "glue",
        "`glue` (Glue Data Catalog + S3FileIO) or `hadoop` (local warehouse).",
        parse=one_of(CatalogType),
    ),
    Arg("warehouse", "", "Warehouse root, e.g. s3://bucket/warehouse or a local path. Required."),
    Arg("namespace", "cdc", "Catalog namespace (Glue database) of the target tables.", parse=identifier),
    Arg(
        "table_name_template",
        "{db}_{table}",
        "Target table name from the source `{db}` and `{table}`.",
        parse=name_template,
    ),
    Arg(
        "write_mode",
        "merge-on-read",
        "Row-level write mode of new tables: merge-on-read or copy-on-write (with `--table_format hudi`: "
        "copy-on-write is the default there; merge-on-read makes Hudi `mor` tables, compacted by the maintenance).",
        parse=one_of(WriteMode),
    ),
    Arg(
        "iceberg_format_version",
        "2",
        "Iceberg table format version of new tables (`--table_format iceberg`): `2` (merge-on-read deletes as "
        "position-delete files; Athena reads these tables) or `3` (deletion vectors, one Puffin blob per data file; "
        "Glue 6.0 only, and Athena cannot query v3 tables). Existing tables keep theirs (docs/TABLE_FORMATS.md: "
        "Iceberg format version 3).",
        parse=choice(ICEBERG_FORMAT_VERSIONS),
    ),
    Arg(
        "schema_change_policy",
        "evolve",
        "A column type change Iceberg cannot promote in place: `evolve` rewrites the table to the new type in "
        "one commit when every stored value converts exactly, else dead letters; `fail`: such a lossy change "
        "fails the batch; `dead_letter`: every such change goes to the dead letters.",
        parse=one_of(SchemaChangePolicy),
    ),
    Arg(
        "dropped_table_policy",
        "keep",
        "A table dropped at the source (MySQL DDL, PostgreSQL's with its DDL capture): `keep` keeps the lake "
        f"table as it was and marks it with the table property `{SOURCE_DROPPED_PROPERTY}`; `drop` drops the lake table.",
        parse=one_of(DropPolicy),
    ),
    Arg(
        "dropped_column_policy",
        "keep",
        "A column dropped at the source (MySQL DDL, PostgreSQL's with its DDL capture): `keep` keeps the lake "
        "column (null for later changes); `drop` drops it from the lake table.",
        parse=one_of(DropPolicy),
    ),
    Arg(
        "keyless_table_policy",
        "multiset",
        "A table without a primary key: `multiset` keeps exactly the source's rows, duplicates included (the "
        "whole row is its identity); `dead_letter` sends its changes to the dead letters (with `--table_format "
        "hudi`: `dead_letter`, the default there).",
        parse=one_of(KeylessTablePolicy),
    ),
    Arg(
        "unavailable_value_placeholder",
        "__debezium_unavailable_value",
        "The connector's `unavailable.value.placeholder`: a text or binary column holding it (a PostgreSQL "
        "TOASTed value an update left unchanged) keeps its lake value. Empty: off.",
    ),
    Arg("checkpoint_location", "", "Durable streaming checkpoint (S3 on Glue). Required."),
    Arg("dead_letter_path", "", "Where rejected records go as JSON lines with a reason. Required."),
    Arg(
        "raw_zone_path",
        "",
        "If set, every raw record is archived there in the `files` format before it is applied "
        "(rebuild or backfill a table from it with `--source files`).",
    ),
    Arg(
        "transactions",
        "ignore",
        "`keep`: the changes of a source transaction are applied in one batch, never part of them (needs the "
        "connector's `provide.transaction.metadata` and its transaction topic among the topics read; a transaction "
        "whose end is not read yet is held for the next batch); `ignore`: each change is applied in the batch that reads it.",
        parse=one_of(Transactions),
    ),
    Arg(
        "transaction_hold_seconds",
        "600",
        "With `--transactions keep`: a transaction held longer than this is applied as far as it was read, "
        "with a WARNING naming it (a transaction whose end never comes must not stop the lake).",
        parse=integer(1),
    ),
    Arg("trigger_interval_seconds", "10", "Micro-batch trigger interval in seconds.", parse=integer(0)),
    Arg(
        "run_once",
        "false",
        "`true`: process what is available now, commit, exit 0 (3 when a table was set aside, docs/OPERATIONS.md: A table set aside).",
        parse=parse_bool,
    ),
    Arg(
        "resume_table",
        "",
        "Resume a lake table that was set aside (its name, e.g. `salesdb_customer`; with `--source files` and "
        "`--run_once true`): replay its set-aside changes (from `--files_path`, by default the folder its mark "
        "names), then remove its mark unless it fails again.",
    ),
    Arg("shuffle_partitions", "8", "spark.sql.shuffle.partitions for the batch work.", parse=integer(1)),
    Arg(
        "table_concurrency",
        "0",
        "Tables of a batch written at once, each its own commit; `0`: Spark's default parallelism (the "
        "executors' cores), at most 8; `1`: one after the other.",
        parse=integer(0),
    ),
    Arg(
        "maintenance_every_batches",
        "0",
        "Table maintenance (docs/MAINTENANCE.md) after every N micro-batches, between batches; `0`: not by count.",
        parse=integer(0),
    ),
    Arg(
        "maintenance_interval_minutes",
        "60",
        "Table maintenance at most every N minutes, between batches; `0`: not by time (both `0`: never in the job).",
        parse=integer(0),
    ),
)

# Limits and settings of table maintenance: the streaming job's and the maintenance job's (same
# names and defaults in both, except `maintenance_remove_orphans`, see maintenance_job.py).
_MAINTENANCE_DEFAULTS = MaintenancePolicy()


def policy_arg(name: str, help: str, parse: Parse) -> Arg:
    """A `--maintenance_*` argument, its default the one MaintenancePolicy states."""
    value = getattr(_MAINTENANCE_DEFAULTS, name.removeprefix("maintenance_"))
    return Arg(name, str(value).lower() if isinstance(value, bool) else str(value), help, parse)


POLICY_ARGS: tuple[Arg, ...] = (
    policy_arg(
        "maintenance_target_file_size_mb",
        "Target size of compacted data files (`rewrite_data_files`).",
        parse=integer(1),
    ),
    policy_arg(
        "maintenance_min_input_files",
        "A file group is rewritten only if it has at least this many files.",
        parse=integer(2),
    ),
    policy_arg(
        "maintenance_max_small_files",
        "Compaction is due when a table has more data files smaller than 75% of the target size.",
        parse=integer(1),
    ),
    policy_arg(
        "maintenance_max_delete_files",
        "Compaction and a delete-file rewrite are due when a table has more live delete files than this.",
        parse=integer(1),
    ),
    policy_arg(
        "maintenance_delete_file_threshold",
        "Compaction also rewrites any data file with at least this many delete files (applying them).",
        parse=integer(1),
    ),
    policy_arg(
        "maintenance_max_snapshots",
        "Snapshot expiry is due when a table has more snapshots than this.",
        parse=integer(2),
    ),
    policy_arg(
        "maintenance_snapshot_retention_minutes",
        "Expiry keeps snapshots younger than this (time travel, queries in flight); also due when the oldest "
        "snapshot is twice as old.",
        parse=integer(0),
    ),
    policy_arg(
        "maintenance_retain_last_snapshots",
        "Expiry always keeps at least this many newest snapshots.",
        parse=integer(1),
    ),
    policy_arg(
        "maintenance_max_manifests",
        "A manifest rewrite is due when the current snapshot has more manifests than this.",
        parse=integer(2),
    ),
    policy_arg(
        "maintenance_remove_orphans",
        "`true`: also delete files that no snapshot references (lists the table's whole location).",
        parse=parse_bool,
    ),
    policy_arg(
        "maintenance_orphan_min_age_hours",
        "Only orphan files older than this are deleted; at least 24 (a younger file may be part of a commit in flight).",
        parse=integer(MIN_ORPHAN_AGE_HOURS),
    ),
    policy_arg(
        "maintenance_conflict_retries",
        "Re-runs, with exponential backoff, of a maintenance procedure that lost a commit race to a concurrent writer.",
        parse=integer(0),
    ),
    policy_arg(
        "maintenance_delete_retention_days",
        "Delete markers (docs/ARCHITECTURE.md: Ordering guarantee) of deletes applied longer ago than this are removed; a replay "
        "of older changes must come within this time of the deletes it must lose to. `0`: kept for ever.",
        parse=integer(0),
    ),
)
ARGS = ARGS + POLICY_ARGS
POLICY_NAMES = frozenset(a.name for a in POLICY_ARGS)

# The scheduled maintenance job's arguments (glue_scripts/cdc_maintenance_job.py,
# docs/MAINTENANCE.md): the streaming job's catalog arguments, its own two, and the shared limits.
MAINTENANCE_CATALOG_ARGS = ("table_format", "catalog_name", "catalog_type", "warehouse", "namespace")
MAINTENANCE_JOB_ARGS: tuple[Arg, ...] = (
    *(a for a in ARGS if a.name in MAINTENANCE_CATALOG_ARGS),
    Arg(
        "tables",
        "",
        "Comma-separated table names in the namespace to maintain; empty: every table in it.",
        parse=table_names,
    ),
    Arg("force", "false", "`true`: run every action whatever the table's health (a run by hand).", parse=parse_bool),
    # Orphan files are what a scheduled job is for: listing a table's whole location is too slow
    # to do between micro-batches, so there it is on by default.
    *(replace(a, default="true") if a.name == "maintenance_remove_orphans" else a for a in POLICY_ARGS),
)

# Glue passes its own arguments to the script with the job's (docs/CONFIGURATION.md: Job arguments): `--JOB_ID`,
# `--JOB_RUN_ID`, `--JOB_NAME`, `--TempDir`, and the hyphenated special parameters
# (`--job-bookmark-option`, `--enable-*`, `--extra-*`, ...). The job's own names are lower-case
# snake_case, so a name with a hyphen or a capital letter is Glue's; these few are Glue's too.
GLUE_PLAIN_NAMES = frozenset({"conf", "class", "security_configuration"})


def _default(name: str) -> Any:
    """A Settings field's default: its argument's default, parsed (stated once, in ARGS)."""
    (arg,) = (a for a in ARGS if a.name == name)
    return arg.value({})


@dataclass(frozen=True)
class Settings:
    source: Source = _default("source")
    kafka_bootstrap_servers: str = _default("kafka_bootstrap_servers")
    kafka_topics: tuple[str, ...] = _default("kafka_topics")
    kafka_topic_pattern: str = _default("kafka_topic_pattern")
    kafka_auth: KafkaAuth = _default("kafka_auth")
    wire_format: WireFormat = _default("wire_format")
    starting_offsets: str = _default("starting_offsets")
    max_offsets_per_trigger: int = _default("max_offsets_per_trigger")
    files_path: str = _default("files_path")
    max_files_per_trigger: int = _default("max_files_per_trigger")
    jdbc_url: str = _default("jdbc_url")
    jdbc_user: str = _default("jdbc_user")
    jdbc_password: str = _default("jdbc_password")
    jdbc_tables: str = _default("jdbc_tables")
    jdbc_soft_delete: str = _default("jdbc_soft_delete")
    jdbc_lag_seconds: int = _default("jdbc_lag_seconds")
    jdbc_max_rows_per_poll: int = _default("jdbc_max_rows_per_poll")
    jdbc_reconcile_every_polls: int = _default("jdbc_reconcile_every_polls")
    table_format: TableFormat = _default("table_format")
    catalog_name: str = _default("catalog_name")
    catalog_type: CatalogType = _default("catalog_type")
    warehouse: str = _default("warehouse")
    namespace: str = _default("namespace")
    table_name_template: str = _default("table_name_template")
    write_mode: WriteMode = _default("write_mode")
    iceberg_format_version: str = _default("iceberg_format_version")
    schema_change_policy: SchemaChangePolicy = _default("schema_change_policy")
    dropped_table_policy: DropPolicy = _default("dropped_table_policy")
    dropped_column_policy: DropPolicy = _default("dropped_column_policy")
    keyless_table_policy: KeylessTablePolicy = _default("keyless_table_policy")
    unavailable_value_placeholder: str = _default("unavailable_value_placeholder")
    checkpoint_location: str = _default("checkpoint_location")
    dead_letter_path: str = _default("dead_letter_path")
    raw_zone_path: str = _default("raw_zone_path")
    transactions: Transactions = _default("transactions")
    transaction_hold_seconds: int = _default("transaction_hold_seconds")
    trigger_interval_seconds: int = _default("trigger_interval_seconds")
    run_once: bool = _default("run_once")
    resume_table: str = _default("resume_table")
    shuffle_partitions: int = _default("shuffle_partitions")
    table_concurrency: int = _default("table_concurrency")
    maintenance_every_batches: int = _default("maintenance_every_batches")
    maintenance_interval_minutes: int = _default("maintenance_interval_minutes")
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    extra: dict[str, str] = field(default_factory=dict)

    def lake_table(self, name: str) -> str:
        """A lake table's identifier from its name (`--resume_table`)."""
        return f"{self.catalog_name}.{self.namespace}.{name.rsplit('.', 1)[-1].lower()}"

    def table_identifier(self, db: str, table: str) -> str:
        """Fully qualified target table for a source table, e.g. glue_catalog.cdc.salesdb_customer."""
        name = lake_table_name(self.table_name_template.format(db=db, table=table))
        return f"{self.catalog_name}.{self.namespace}.{name}"


def parse_argv(argv: list[str]) -> dict[str, str]:
    """Parse `--name value` pairs the way Glue passes job arguments (also accepts `--name=value`).

    Unknown arguments (Glue adds its own, e.g. --JOB_ID, --TempDir) are kept, not rejected.
    """
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("--"):
            raise ArgumentError(f"unexpected argument {tok!r}: arguments are `--name value` pairs")
        name = tok[2:]
        if "=" in name:
            name, value = name.split("=", 1)
            i += 1
        else:
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                raise ArgumentError(f"argument --{name} has no value")
            value = argv[i + 1]
            i += 2
        out[name] = value
    return out


def is_glue_argument(name: str) -> bool:
    return "-" in name or name != name.lower() or name in GLUE_PLAIN_NAMES


def check_known(raw: dict[str, str], args: tuple[Arg, ...]) -> None:
    """A name that is neither the job's nor Glue's is a typo: name it and the closest valid one."""
    names = [a.name for a in args]
    for name in raw:
        if name in names or is_glue_argument(name):
            continue
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean --{close[0]}?" if close else "see --help for the arguments"
        raise ArgumentError(f"unknown argument --{name}: {hint}")


def parse_job_argv(argv: list[str], args: tuple[Arg, ...]) -> dict[str, str]:
    """A local run's command line: `--name value` pairs, each the job's (`args`) or Glue's."""
    raw = parse_argv(argv)
    check_known(raw, args)
    return raw


def wants_help(argv: list[str]) -> bool:
    return any(tok in ("-h", "--help") for tok in argv)


def help_text(prog: str, summary: str, args: tuple[Arg, ...]) -> str:
    """`--help`: every argument with its default and meaning, one per line."""
    width = max(len(a.name) for a in args) + 2
    lines = [f"usage: {prog} --name value ...", "", summary, "", "arguments (default in brackets):"]
    for a in args:
        default = f" [{a.default}]" if a.default else ""
        lines.append(f"  --{a.name:<{width}}{a.help}{default}")
    lines.append("")
    lines.append(
        "Glue's own arguments (--JOB_NAME, --TempDir, --enable-*, ...) are accepted. docs/CONFIGURATION.md has the details."
    )
    return "\n".join(lines)


def build_settings(raw: dict[str, str]) -> Settings:
    """Validate raw arguments (from parse_argv or awsglue's getResolvedOptions) into Settings."""
    known = {a.name for a in ARGS}
    v = {a.name: a.value(raw) for a in ARGS if a.name not in POLICY_NAMES}
    _check_source(v)
    check_catalog(v, raw)
    _check_hudi(v, raw)
    _check_format_version(v, raw)
    for name in ("warehouse", "checkpoint_location", "dead_letter_path"):
        if not v[name]:
            raise ArgumentError(f"--{name} is required")
    if (
        v["raw_zone_path"]
        and v["source"] == Source.FILES
        and v["raw_zone_path"].rstrip("/") == v["files_path"].rstrip("/")
    ):
        raise ArgumentError(
            "--raw_zone_path must differ from --files_path (a rebuild would archive into its own input)"
        )
    extra = {k: val for k, val in raw.items() if k not in known}
    return Settings(**v, maintenance=build_policy(raw), extra=extra)


def check_catalog(v: dict[str, Any], raw: dict[str, str]) -> None:
    """Delta's and Hudi's catalog is the session catalog: `--catalog_name` defaults to it, another is refused."""
    fmt = v["table_format"]
    if fmt not in SESSION_CATALOG_FORMATS:
        return
    if "catalog_name" not in raw:
        v["catalog_name"] = DELTA_CATALOG
    elif v["catalog_name"] != DELTA_CATALOG:
        raise ArgumentError(
            f"--catalog_name must be {DELTA_CATALOG} with --table_format {fmt} (its catalog is Spark's "
            f"session catalog), got {v['catalog_name']!r}: leave --catalog_name out"
        )


def _check_hudi(v: dict[str, Any], raw: dict[str, str]) -> None:
    """Hudi tables need a record key, and are copy-on-write unless `--write_mode merge-on-read` is given:
    `--write_mode` and `--keyless_table_policy` default to what Hudi takes, and the values it cannot
    take are refused naming why."""
    if v["table_format"] != TableFormat.HUDI:
        return
    if "write_mode" not in raw:
        v["write_mode"] = WriteMode.COPY_ON_WRITE
    if raw.get("keyless_table_policy", KeylessTablePolicy.DEAD_LETTER) != KeylessTablePolicy.DEAD_LETTER:
        raise ArgumentError(
            "--keyless_table_policy multiset is not offered with --table_format hudi: Hudi 0.15's MERGE into a "
            "table without a record key applies a matched DELETE as an update; leave --keyless_table_policy out "
            "(dead_letter: such tables' changes go to the dead letters)"
        )
    v["keyless_table_policy"] = KeylessTablePolicy.DEAD_LETTER


def _check_format_version(v: dict[str, Any], raw: dict[str, str]) -> None:
    """`--iceberg_format_version` is Iceberg's: given with another format it is refused, not ignored."""
    if "iceberg_format_version" in raw and v["table_format"] != TableFormat.ICEBERG:
        raise ArgumentError(
            f"--iceberg_format_version applies to --table_format iceberg only, got --table_format {v['table_format']}: "
            "leave it out"
        )


def _check_source(v: dict[str, Any]) -> None:
    """What the chosen --source needs."""
    if v["source"] == Source.KAFKA:
        if not v["kafka_bootstrap_servers"]:
            raise ArgumentError("--kafka_bootstrap_servers is required with --source kafka")
        if bool(v["kafka_topics"]) == bool(v["kafka_topic_pattern"]):
            raise ArgumentError("give exactly one of --kafka_topics or --kafka_topic_pattern")
        if v["kafka_topic_pattern"]:
            try:
                re.compile(v["kafka_topic_pattern"])
            except re.error as e:
                raise ArgumentError(f"--kafka_topic_pattern is not a valid regex: {e}") from None
    if v["resume_table"] and (v["source"] != Source.FILES or not v["run_once"]):
        raise ArgumentError(
            "--resume_table replays the table's set-aside changes once: give --source files --run_once true"
        )
    if v["source"] == Source.FILES and not v["files_path"] and not v["resume_table"]:
        raise ArgumentError("--files_path is required with --source files")
    if v["source"] == Source.JDBC:
        _check_jdbc(v)


def _check_jdbc(v: dict[str, Any]) -> None:
    """What --source jdbc needs: a URL of a known engine, the tables with their modification column."""
    for name in ("jdbc_url", "jdbc_tables"):
        if not v[name]:
            raise ArgumentError(f"--{name} is required with --source jdbc")
    if v["transactions"] == Transactions.KEEP:
        raise ArgumentError("--transactions keep needs the log's transaction metadata: leave it out with --source jdbc")
    try:
        engine_of(v["jdbc_url"])
        parse_capture_tables(v["jdbc_tables"])
        parse_soft_delete(v["jdbc_soft_delete"])
    except ValueError as e:
        raise ArgumentError(str(e)) from None


def build_policy(raw: dict[str, str], args: tuple[Arg, ...] = POLICY_ARGS) -> MaintenancePolicy:
    """Validate the `maintenance_*` limits (given, else the defaults of `args`) into a policy."""
    policy = MaintenancePolicy(**{a.name.removeprefix("maintenance_"): a.value(raw) for a in args})
    if policy.retain_last_snapshots >= policy.max_snapshots:
        raise ArgumentError(
            "--maintenance_retain_last_snapshots must be below --maintenance_max_snapshots "
            f"({policy.retain_last_snapshots} >= {policy.max_snapshots}): expiry could never get under the limit"
        )
    return policy


def settings_field_names() -> list[str]:
    return [f.name for f in fields(Settings) if f.name != "extra"]
