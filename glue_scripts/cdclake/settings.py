"""Job arguments: parsed the Glue way (`--name value`), validated once, then passed around immutable.

This table is the single definition of every argument; README.md documents the same list and a
test checks that the two agree.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, fields

from .maintenance import MIN_ORPHAN_AGE_HOURS, MaintenancePolicy

SOURCES = ("kafka", "files")
WRITE_MODES = ("merge-on-read", "copy-on-write")
SCHEMA_CHANGE_POLICIES = ("evolve", "fail", "dead_letter")
DROP_POLICIES = ("keep", "drop")
KEYLESS_POLICIES = ("multiset", "dead_letter")
CATALOG_TYPES = ("glue", "hadoop")


class ArgumentError(ValueError):
    """A job argument is missing or invalid. The message says which one and what is allowed."""


@dataclass(frozen=True)
class Arg:
    name: str
    default: str | None
    help: str


# name, default (None = required in some mode, checked in validate()), help
ARGS: tuple[Arg, ...] = (
    Arg("source", "kafka", "Where events come from: `kafka` (MSK / any Kafka) or `files` (JSON lines)."),
    Arg("kafka_bootstrap_servers", "", "Kafka bootstrap servers (host:port,...). Required for `kafka`."),
    Arg("kafka_topics", "", "Comma-separated topics to read. Use this or `kafka_topic_pattern`."),
    Arg("kafka_topic_pattern", "", "Java regex of topics to read, e.g. `salesdb\\.salesdb\\..*`."),
    Arg("kafka_auth", "iam", "`iam` (MSK IAM, SASL_SSL) or `none` (PLAINTEXT, local broker)."),
    Arg("starting_offsets", "earliest", "`earliest` or `latest`; used only when no checkpoint exists."),
    Arg("max_offsets_per_trigger", "100000", "Upper bound of Kafka records per micro-batch."),
    Arg("files_path", "", "Directory or S3 prefix of JSON-lines files. Required for `files`."),
    Arg("max_files_per_trigger", "100", "Upper bound of new files per micro-batch (`files`)."),
    Arg("catalog_name", "glue_catalog", "Spark catalog name the job's SQL uses (same on Glue and locally)."),
    Arg("catalog_type", "glue", "`glue` (Glue Data Catalog + S3FileIO) or `hadoop` (local warehouse)."),
    Arg("warehouse", "", "Warehouse root, e.g. s3://bucket/warehouse or a local path. Required."),
    Arg("namespace", "cdc", "Catalog namespace (Glue database) of the target tables."),
    Arg("table_name_template", "{db}_{table}", "Target table name from the source `{db}` and `{table}`."),
    Arg("write_mode", "merge-on-read", "Row-level write mode of new tables: merge-on-read or copy-on-write."),
    Arg(
        "schema_change_policy",
        "evolve",
        "A column type change Iceberg cannot promote in place: `evolve` rewrites the table to the new type in "
        "one commit when every stored value converts exactly, else dead letters; `fail`: such a lossy change "
        "fails the batch; `dead_letter`: every such change goes to the dead letters.",
    ),
    Arg(
        "dropped_table_policy",
        "keep",
        "A table dropped at the source (MySQL DDL): `keep` keeps the lake table as it was and marks it with the "
        "table property `cdc.source-dropped`; `drop` drops the lake table.",
    ),
    Arg(
        "dropped_column_policy",
        "keep",
        "A column dropped at the source (MySQL DDL): `keep` keeps the lake column (null for later changes); "
        "`drop` drops it from the lake table.",
    ),
    Arg(
        "keyless_table_policy",
        "multiset",
        "A table without a primary key: `multiset` keeps exactly the source's rows, duplicates included (the "
        "whole row is its identity); `dead_letter` sends its changes to the dead letters.",
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
    Arg("trigger_interval_seconds", "10", "Micro-batch trigger interval in seconds."),
    Arg("run_once", "false", "`true`: process what is available now, commit, exit 0."),
    Arg("shuffle_partitions", "8", "spark.sql.shuffle.partitions for the batch work."),
    Arg(
        "maintenance_every_batches",
        "0",
        "Table maintenance (README: Maintenance) after every N micro-batches, between batches; `0`: not by count.",
    ),
    Arg(
        "maintenance_interval_minutes",
        "60",
        "Table maintenance at most every N minutes, between batches; `0`: not by time (both `0`: never in the job).",
    ),
)

# Limits and settings of table maintenance: the streaming job's and the maintenance job's (same
# names and defaults in both, except `maintenance_remove_orphans`, see maintenance_job.py).
POLICY_ARGS: tuple[Arg, ...] = (
    Arg("maintenance_target_file_size_mb", "128", "Target size of compacted data files (`rewrite_data_files`)."),
    Arg("maintenance_min_input_files", "5", "A file group is rewritten only if it has at least this many files."),
    Arg(
        "maintenance_max_small_files",
        "50",
        "Compaction is due when a table has more data files smaller than 75% of the target size.",
    ),
    Arg(
        "maintenance_max_delete_files",
        "20",
        "Compaction and a delete-file rewrite are due when a table has more live delete files than this.",
    ),
    Arg(
        "maintenance_delete_file_threshold",
        "5",
        "Compaction also rewrites any data file with at least this many delete files (applying them).",
    ),
    Arg("maintenance_max_snapshots", "200", "Snapshot expiry is due when a table has more snapshots than this."),
    Arg(
        "maintenance_snapshot_retention_minutes",
        "120",
        "Expiry keeps snapshots younger than this (time travel, queries in flight); also due when the oldest "
        "snapshot is twice as old.",
    ),
    Arg("maintenance_retain_last_snapshots", "10", "Expiry always keeps at least this many newest snapshots."),
    Arg(
        "maintenance_max_manifests",
        "100",
        "A manifest rewrite is due when the current snapshot has more manifests than this.",
    ),
    Arg(
        "maintenance_remove_orphans",
        "false",
        "`true`: also delete files that no snapshot references (lists the table's whole location).",
    ),
    Arg(
        "maintenance_orphan_min_age_hours",
        "72",
        "Only orphan files older than this are deleted; at least 24 (a younger file may be part of a commit in flight).",
    ),
    Arg(
        "maintenance_conflict_retries",
        "5",
        "Re-runs, with exponential backoff, of a maintenance procedure that lost a commit race to a concurrent writer.",
    ),
)
ARGS = ARGS + POLICY_ARGS

# The scheduled maintenance job's arguments (glue_scripts/cdc_maintenance_job.py, README:
# Maintenance): the streaming job's catalog arguments, its own two, and the shared limits.
MAINTENANCE_CATALOG_ARGS = ("catalog_name", "catalog_type", "warehouse", "namespace")
MAINTENANCE_JOB_ARGS: tuple[Arg, ...] = (
    *(a for a in ARGS if a.name in MAINTENANCE_CATALOG_ARGS),
    Arg("tables", "", "Comma-separated table names in the namespace to maintain; empty: every table in it."),
    Arg("force", "false", "`true`: run every action whatever the table's health (a run by hand)."),
    # Orphan files are what a scheduled job is for: listing a table's whole location is too slow
    # to do between micro-batches, so there it is on by default.
    *(Arg(a.name, "true", a.help) if a.name == "maintenance_remove_orphans" else a for a in POLICY_ARGS),
)

_BOOLS = {"true": True, "false": False}

# Glue passes its own arguments to the script with the job's (README: Deploying): `--JOB_ID`,
# `--JOB_RUN_ID`, `--JOB_NAME`, `--TempDir`, and the hyphenated special parameters
# (`--job-bookmark-option`, `--enable-*`, `--extra-*`, ...). The job's own names are lower-case
# snake_case, so a name with a hyphen or a capital letter is Glue's; these few are Glue's too.
GLUE_PLAIN_NAMES = frozenset({"conf", "class", "security_configuration"})


@dataclass(frozen=True)
class Settings:
    source: str = "kafka"
    kafka_bootstrap_servers: str = ""
    kafka_topics: tuple[str, ...] = ()
    kafka_topic_pattern: str = ""
    kafka_auth: str = "iam"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int = 100_000
    files_path: str = ""
    max_files_per_trigger: int = 100
    catalog_name: str = "glue_catalog"
    catalog_type: str = "glue"
    warehouse: str = ""
    namespace: str = "cdc"
    table_name_template: str = "{db}_{table}"
    write_mode: str = "merge-on-read"
    schema_change_policy: str = "evolve"
    dropped_table_policy: str = "keep"
    dropped_column_policy: str = "keep"
    keyless_table_policy: str = "multiset"
    unavailable_value_placeholder: str = "__debezium_unavailable_value"
    checkpoint_location: str = ""
    dead_letter_path: str = ""
    raw_zone_path: str = ""
    trigger_interval_seconds: int = 10
    run_once: bool = False
    shuffle_partitions: int = 8
    maintenance_every_batches: int = 0
    maintenance_interval_minutes: int = 60
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    extra: dict[str, str] = field(default_factory=dict)

    def table_identifier(self, db: str, table: str) -> str:
        """Fully qualified target table for a source table, e.g. glue_catalog.cdc.salesdb_customer."""
        name = self.table_name_template.format(db=db, table=table)
        name = re.sub(r"[^0-9A-Za-z_]", "_", name).lower()
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
        "Glue's own arguments (--JOB_NAME, --TempDir, --enable-*, ...) are accepted. README.md has the details."
    )
    return "\n".join(lines)


def parse_bool(name: str, value: str) -> bool:
    b = _BOOLS.get(value.lower())
    if b is None:
        raise ArgumentError(f"--{name} must be true or false, got {value!r}")
    return b


def _int(name: str, value: str, minimum: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ArgumentError(f"--{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise ArgumentError(f"--{name} must be >= {minimum}, got {n}")
    return n


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ArgumentError(f"--{name} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def build_settings(raw: dict[str, str]) -> Settings:
    """Validate raw arguments (from parse_argv or awsglue's getResolvedOptions) into Settings."""
    known = {a.name for a in ARGS}
    v = {a.name: raw.get(a.name, a.default or "") for a in ARGS}
    extra = {k: val for k, val in raw.items() if k not in known}

    source = _choice("source", v["source"], SOURCES)
    topics = tuple(t.strip() for t in v["kafka_topics"].split(",") if t.strip())
    if source == "kafka":
        if not v["kafka_bootstrap_servers"]:
            raise ArgumentError("--kafka_bootstrap_servers is required with --source kafka")
        if bool(topics) == bool(v["kafka_topic_pattern"]):
            raise ArgumentError("give exactly one of --kafka_topics or --kafka_topic_pattern")
        if v["kafka_topic_pattern"]:
            try:
                re.compile(v["kafka_topic_pattern"])
            except re.error as e:
                raise ArgumentError(f"--kafka_topic_pattern is not a valid regex: {e}") from None
    if source == "files" and not v["files_path"]:
        raise ArgumentError("--files_path is required with --source files")
    for name in ("warehouse", "checkpoint_location", "dead_letter_path"):
        if not v[name]:
            raise ArgumentError(f"--{name} is required")
    if v["raw_zone_path"] and source == "files" and v["raw_zone_path"].rstrip("/") == v["files_path"].rstrip("/"):
        raise ArgumentError(
            "--raw_zone_path must differ from --files_path (a rebuild would archive into its own input)"
        )
    run_once = parse_bool("run_once", v["run_once"])
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v["namespace"]):
        raise ArgumentError(f"--namespace must be a plain identifier, got {v['namespace']!r}")
    try:
        v["table_name_template"].format(db="d", table="t")
    except (KeyError, IndexError, ValueError) as e:
        raise ArgumentError(
            f"--table_name_template may use only {{db}} and {{table}}: {v['table_name_template']!r} ({e})"
        ) from None
    return Settings(
        source=source,
        kafka_bootstrap_servers=v["kafka_bootstrap_servers"],
        kafka_topics=topics,
        kafka_topic_pattern=v["kafka_topic_pattern"],
        kafka_auth=_choice("kafka_auth", v["kafka_auth"], ("iam", "none")),
        starting_offsets=_choice("starting_offsets", v["starting_offsets"], ("earliest", "latest")),
        max_offsets_per_trigger=_int("max_offsets_per_trigger", v["max_offsets_per_trigger"], 1),
        files_path=v["files_path"],
        max_files_per_trigger=_int("max_files_per_trigger", v["max_files_per_trigger"], 1),
        catalog_name=v["catalog_name"],
        catalog_type=_choice("catalog_type", v["catalog_type"], CATALOG_TYPES),
        warehouse=v["warehouse"],
        namespace=v["namespace"],
        table_name_template=v["table_name_template"],
        write_mode=_choice("write_mode", v["write_mode"], WRITE_MODES),
        schema_change_policy=_choice("schema_change_policy", v["schema_change_policy"], SCHEMA_CHANGE_POLICIES),
        dropped_table_policy=_choice("dropped_table_policy", v["dropped_table_policy"], DROP_POLICIES),
        dropped_column_policy=_choice("dropped_column_policy", v["dropped_column_policy"], DROP_POLICIES),
        keyless_table_policy=_choice("keyless_table_policy", v["keyless_table_policy"], KEYLESS_POLICIES),
        unavailable_value_placeholder=v["unavailable_value_placeholder"],
        checkpoint_location=v["checkpoint_location"],
        dead_letter_path=v["dead_letter_path"],
        raw_zone_path=v["raw_zone_path"],
        trigger_interval_seconds=_int("trigger_interval_seconds", v["trigger_interval_seconds"], 0),
        run_once=run_once,
        shuffle_partitions=_int("shuffle_partitions", v["shuffle_partitions"], 1),
        maintenance_every_batches=_int("maintenance_every_batches", v["maintenance_every_batches"], 0),
        maintenance_interval_minutes=_int("maintenance_interval_minutes", v["maintenance_interval_minutes"], 0),
        maintenance=build_policy(v),
        extra=extra,
    )


def build_policy(v: dict[str, str]) -> MaintenancePolicy:
    """Validate the `maintenance_*` limits (raw values, defaults filled in) into a policy."""

    def n(name: str, minimum: int) -> int:
        return _int(f"maintenance_{name}", v[f"maintenance_{name}"], minimum)

    remove_orphans = parse_bool("maintenance_remove_orphans", v["maintenance_remove_orphans"])
    policy = MaintenancePolicy(
        target_file_size_mb=n("target_file_size_mb", 1),
        min_input_files=n("min_input_files", 2),
        max_small_files=n("max_small_files", 1),
        max_delete_files=n("max_delete_files", 1),
        delete_file_threshold=n("delete_file_threshold", 1),
        max_snapshots=n("max_snapshots", 2),
        snapshot_retention_minutes=n("snapshot_retention_minutes", 0),
        retain_last_snapshots=n("retain_last_snapshots", 1),
        max_manifests=n("max_manifests", 2),
        remove_orphans=remove_orphans,
        orphan_min_age_hours=n("orphan_min_age_hours", MIN_ORPHAN_AGE_HOURS),
        conflict_retries=n("conflict_retries", 0),
    )
    if policy.retain_last_snapshots >= policy.max_snapshots:
        raise ArgumentError(
            "--maintenance_retain_last_snapshots must be below --maintenance_max_snapshots "
            f"({policy.retain_last_snapshots} >= {policy.max_snapshots}): expiry could never get under the limit"
        )
    return policy


def settings_field_names() -> list[str]:
    return [f.name for f in fields(Settings) if f.name != "extra"]
