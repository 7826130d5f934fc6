"""`bench [--quick] [--sections a,b,c,j,t] [--markdown FILE]`: run the benchmarks, print the
tables and write them as Markdown (see docs/BENCHMARKS.md)."""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from cdctools import cli

from .compare import load_package
from .config import Config, make_config
from .measure import RssSampler, mib
from .report import Table

ROOT = Path(__file__).resolve().parents[2]
log = logging.getLogger("cdcbench")


def _environment(cfg: Config, spark_conf: dict[str, str]) -> Table:
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    from cdctools.pinned_jars import versions  # the pins of pom.xml

    pins = versions()
    jvm = (
        f"Iceberg {pins['iceberg']}, spark-sql-kafka {pins['spark-sql-kafka']}, "
        f"Apache Kafka {pins['kafka']} (broker and Connect), Debezium {pins['debezium-mysql']} MySQL / {pins['debezium-postgres']} PostgreSQL (pom.xml)"
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    mem = int(Path("/proc/meminfo").read_text().split()[1]) // (1 << 20)
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        rev = "?"
    t = Table("Environment", ["what", "value"])
    t.add("date (UTC)", datetime.now(UTC).strftime("%Y-%m-%d %H:%M"))
    t.add("mode", "quick" if cfg.quick else "full")
    t.add("machine", f"{os.cpu_count()} cores ({cpu}), {mem} GiB RAM, {platform.platform()}")
    t.add("load average at start", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    t.add(
        "versions",
        f"Python {platform.python_version()}, PySpark {pyspark.__version__}, {java[0] if java else 'java ?'}, {jvm}",
    )
    t.add("Spark", ", ".join(f"{k}={v}" for k, v in spark_conf.items()))
    t.add("git commit", rev)
    t.add("cdclake measured", str(Path(sys.modules["cdclake"].__file__).parent))
    return t


def _add_scope_arguments(ap: cli.Parser) -> None:
    ap.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, under 2 minutes for sections a and b on an idle 2-core machine (end to end only if asked)",
    )
    ap.add_argument(
        "--sections",
        help="comma-separated subset of a (apply), b (growth), c (end to end), j (JIT flags of short-lived "
        "JVMs), t (many tables per batch); default a,b,c, with --quick a,b",
    )
    ap.add_argument(
        "--markdown", type=Path, help="where to write the Markdown copy (default: .local/bench/results-<mode>.md)"
    )
    ap.add_argument(
        "--work", type=Path, default=ROOT / ".local" / "bench" / "work", help="scratch folder (emptied first)"
    )
    ap.add_argument(
        "--glue-scripts",
        type=Path,
        default=ROOT / "glue_scripts",
        help="the cdclake package to measure (before/after: `git archive REV glue_scripts | tar -x -C DIR`, then DIR/glue_scripts)",
    )


def _add_end_to_end_arguments(ap: cli.Parser) -> None:
    """Section c's: the stack's wire formats and the job's --transactions."""
    ap.add_argument(
        "--wire-formats",
        metavar="FORMATS",
        default="json",
        help="section c's wire formats, a run each: json, avro or json,avro (avro: the AWS Glue Schema Registry "
        "converter against the local registry, the job with --wire_format avro)",
    )
    ap.add_argument(
        "--transactions",
        choices=("ignore", "keep"),
        default="ignore",
        help="section c's job --transactions (keep: the connector emits transaction metadata and the job applies "
        "whole source transactions; run once with each to compare latency)",
    )


def _add_section_arguments(ap: cli.Parser) -> None:
    ap.add_argument(
        "--methods",
        default="mor,cow,baseline,append,job-append,fixed",
        help="section a's methods (e.g. `mor` alone for a before/after comparison of the job); `avro` (not by "
        "default): the job (merge-on-read) on the same changes in the wire format avro, its schema versions in a "
        "moto server; "
        "`fixed`: the fixed cost of 100-change batches against the pinned baseline commit (cdcbench/fixedcost.py); "
        "`formats` (not by default): the job with --table_format iceberg, delta and hudi on the same batches, each "
        "format in a child process of its own (cdcbench/formats.py); `runtimes` (not by default): the job "
        "(Iceberg, merge-on-read) on Glue 5.0's runtime and on Glue 6.0's, alternated, a child process each "
        "(cdcbench/runtimes.py); `v3` (not by default): the job with --iceberg_format_version 2 and 3 side by side, "
        "delete files per batch and a full read before and after maintenance (cdcbench/formatversions.py)",
    )
    ap.add_argument(
        "--batch-sizes",
        metavar="N,N,...",
        help="section a's events per batch (default 10000,100000; --quick 10000): `--sections a --methods mor "
        "--batch-sizes 100000 --compare REV` measures the 100,000-event batches alone, within the heavy lock's 15 minutes",
    )
    ap.add_argument(
        "--batches-per-size",
        type=int,
        metavar="N",
        help="section a's measured batches per size and method, after the warm-up batch (default 3; --quick 1): "
        "`--batch-sizes 100000 --batches-per-size 1` keeps a loaded machine's run within the heavy lock's 15 minutes",
    )
    ap.add_argument(
        "--table-counts",
        metavar="N,N,...",
        help="section t's numbers of tables per batch (default 1,10,50,200); a run per count keeps each under "
        "the heavy lock's 15 minutes: `--sections t --table-counts 1,10,50`, then `--table-counts 1,200`",
    )
    ap.add_argument(
        "--compare",
        metavar="REV",
        help="also measure the job at git revision REV in sections a and t, in the same process on the same batches "
        "(before/after of an optimisation: `--quick --sections a --methods mor --compare HEAD~1`)",
    )
    ap.add_argument(
        "--peers",
        nargs="?",
        const="job,flink,sink,sample",
        metavar="SYSTEMS",
        help="the peers' comparison (docs/BENCHMARKS.md): this project's job, Flink CDC -> Iceberg, the Iceberg "
        "Kafka Connect sink and the AWS sample's approach on the same changes (installs Flink and the sink into "
        ".local/peers on first use); alone unless --sections is given too; SYSTEMS: a comma-separated subset",
    )


class Sizes(NamedTuple):
    """The sizes the arguments ask for (None: the mode's default)."""

    table_counts: tuple[int, ...] | None
    batch_sizes: tuple[int, ...] | None
    wire_formats: tuple[str, ...]


def _validated(ap: cli.Parser, args: argparse.Namespace) -> tuple[set[str], tuple[str, ...], Sizes]:
    """The sections, the peers and the sizes the arguments ask for; a wrong one stops here."""
    known = (
        "mor",
        "cow",
        "baseline",
        "append",
        "job-append",
        "avro",
        "vectorized",
        "fixed",
        "formats",
        "runtimes",
        "v3",
    )
    if unknown := set(args.methods.split(",")) - set(known):
        ap.error(f"unknown --methods {sorted(unknown)}: choose from {', '.join(known)}")
    chosen = args.sections or ("" if args.peers else "a,b" if args.quick else "a,b,c")
    sections = {s.strip() for s in chosen.split(",") if s.strip()}
    peers: tuple[str, ...] = tuple(p.strip() for p in args.peers.split(",")) if args.peers else ()
    from .peers.runner import SYSTEMS

    if unknown := set(peers) - set(SYSTEMS):
        ap.error(f"--peers {args.peers!r}: choose a comma-separated subset of {', '.join(SYSTEMS)}")
    if (not sections and not peers) or sections - {"a", "b", "c", "j", "t"}:
        ap.error(f"--sections {chosen!r}: choose a comma-separated subset of a, b, c, j, t")
    try:
        counts = tuple(int(n) for n in args.table_counts.split(",")) if args.table_counts else None
    except ValueError:
        ap.error(f"--table-counts {args.table_counts!r}: comma-separated whole numbers, e.g. 1,10,50")
    wire_formats = tuple(f.strip() for f in args.wire_formats.split(",") if f.strip())
    if not wire_formats or set(wire_formats) - {"json", "avro"}:
        ap.error(f"--wire-formats {args.wire_formats!r}: choose json, avro or json,avro")
    if counts is not None and (not counts or min(counts) < 1):
        ap.error(f"--table-counts {args.table_counts!r}: every count must be at least 1")
    try:
        sizes = tuple(int(n) for n in args.batch_sizes.split(",")) if args.batch_sizes else None
    except ValueError:
        ap.error(f"--batch-sizes {args.batch_sizes!r}: comma-separated whole numbers, e.g. 100000")
    if sizes is not None and (not sizes or min(sizes) < 1):
        ap.error(f"--batch-sizes {args.batch_sizes!r}: every size must be at least 1")
    return sections, peers, Sizes(counts, sizes, wire_formats)


def _config(ap: cli.Parser, args: argparse.Namespace, e2e: bool, sized: Sizes) -> Config:
    """The work folder emptied, and the run's configuration (with --compare's revision extracted)."""
    counts, sizes, wire_formats = sized
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    cfg = replace(make_config(args.quick, args.work, e2e=e2e), methods=tuple(args.methods.split(",")))
    if counts is not None:
        cfg = replace(cfg, table_counts=counts)
    if sizes is not None:
        cfg = replace(cfg, batch_sizes=sizes)
    if args.batches_per_size is not None:
        if args.batches_per_size < 1:
            ap.error(f"--batches-per-size {args.batches_per_size}: at least 1")
        cfg = replace(cfg, batches_per_size=args.batches_per_size)
    cfg = replace(cfg, e2e_wire_formats=wire_formats, e2e_transactions=args.transactions)
    if args.compare:
        from .compare import CompareError, extract

        try:
            rev, package = extract(args.compare, args.work / "compare")
        except CompareError as e:
            ap.error(str(e))
        cfg = replace(cfg, compare_rev=rev, compare_package=package)
    return cfg


def _run_sections(
    spark: Any, cfg: Config, sections: set[str], args: argparse.Namespace, rss: RssSampler, emit: Any
) -> None:
    """Sections a, t, b and c, in that order, each table printed as it is done."""
    if "a" in sections:
        from . import apply

        if set(cfg.methods) - {"fixed", "formats", "runtimes", "v3"}:
            emit(apply.run(spark, cfg, rss))
        if "formats" in cfg.methods:
            from . import formats

            emit(formats.run(spark, cfg, args.glue_scripts.resolve()))
        if "runtimes" in cfg.methods:
            from . import runtimes

            emit(runtimes.run(spark, cfg, args.glue_scripts.resolve()))
        if "v3" in cfg.methods:
            from . import formatversions

            emit(formatversions.run(spark, cfg))
        if "fixed" in cfg.methods:
            from . import fixedcost

            emit(fixedcost.run(spark, cfg))
    if "t" in sections:
        from . import manytables

        emit(manytables.run(spark, cfg))
    if "b" in sections:
        from . import growth

        emit(growth.run(spark, cfg, rss))
    if cfg.e2e:
        from . import endtoend

        for wire_format in cfg.e2e_wire_formats:
            emit(endtoend.run(spark, cfg, wire_format))


def _session(cfg: Config) -> tuple[Any, dict[str, str]]:
    """The benchmark's Spark session (the job's local session), and its settings for the report."""
    os.environ.setdefault("CDC_SPARK_DRIVER_MEMORY", "4g")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell")
    from cdclake.local.session import local_session

    from .tables import job_settings

    settings = job_settings(cfg.work / "warehouse", "bench", cfg.work, shuffle_partitions=str(cfg.shuffle_partitions))
    spark = local_session(settings, app_name="cdc-bench")
    spark_conf = {
        "master": spark.sparkContext.master,
        "driver memory": os.environ["CDC_SPARK_DRIVER_MEMORY"],
        "shuffle partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "UI": spark.conf.get("spark.ui.enabled", "false"),
    }
    return spark, spark_conf


def _write_markdown(
    markdown: Path | None, argv: list[str] | None, quick: bool, peers: bool, tables: list[Table], footer: str
) -> None:
    out = (
        markdown or ROOT / ".local" / "bench" / f"results-{'peers-' if peers else ''}{'quick' if quick else 'full'}.md"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "bench " + " ".join(argv if argv is not None else sys.argv[1:])
    out.write_text(f"### `{command.strip()}`\n\n" + "\n".join(t.markdown() for t in tables) + f"\n{footer}\n")
    print(f"Markdown copy: {out}")


def main(argv: list[str] | None = None) -> int:
    ap = cli.Parser(prog="bench", description=__doc__)
    _add_scope_arguments(ap)
    _add_section_arguments(ap)
    _add_end_to_end_arguments(ap)
    args = ap.parse_args(argv)
    sections, peers, sized = _validated(ap, args)
    load_package("cdclake", args.glue_scripts.resolve() / "cdclake")  # the package --glue-scripts names
    os.environ.setdefault("CDC_JARS_DIR", str(ROOT / ".local" / "jars"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("cdclake").setLevel(logging.WARNING)  # one line per batch is too much here
    logging.getLogger("py4j").setLevel(logging.WARNING)
    cfg = _config(ap, args, "c" in sections, sized)
    started = time.monotonic()

    jvm_tables: list[Table] = []
    if "j" in sections:  # before the benchmark's own JVM starts: its workers start theirs
        from . import jvmflags

        jvm_tables = jvmflags.run(cfg)
    rss = RssSampler()
    spark, spark_conf = _session(cfg)
    tables: list[Table] = [_environment(cfg, spark_conf)]

    def emit(new: list[Table]) -> None:
        for t in new:
            print("\n" + t.text(), flush=True)
        tables.extend(new)

    print("\n" + tables[0].text(), flush=True)
    emit(jvm_tables)
    _run_sections(spark, cfg, sections, args, rss, emit)
    missing: list[str] = []  # the peers' rows missing from their table (runner.missing_rows)
    if peers:
        from .peers import runner

        peer_tables, missing = runner.run(spark, cfg.quick, cfg.work / "peers", cfg.work / "warehouse", peers)
        emit(peer_tables)
    spark.stop()
    rss.stop()
    elapsed = time.monotonic() - started
    footer = f"Whole run: {elapsed / 60:.1f} min, peak RSS of the benchmark's process tree {mib(rss.peak())}."
    print("\n" + footer)
    _write_markdown(args.markdown, argv, cfg.quick, bool(peers), tables, footer)
    if missing:  # after the tables and their copy: what was measured stays readable
        print("peers: FAILED, rows missing from the table:\n  " + "\n  ".join(missing), file=sys.stderr)
        return 1
    return 0
