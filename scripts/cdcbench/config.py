"""Benchmark sizes: full mode (documented in docs/BENCHMARKS.md) and --quick."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Config:
    quick: bool
    work: Path
    # a. apply throughput
    table_rows: int
    batch_sizes: tuple[int, ...]
    batches_per_size: int  # measured batches per size and method (after one warm-up batch)
    # b. growth and maintenance
    growth_sizes: tuple[int, ...]
    growth_batch: int
    growth_batches_per_size: int
    growth_warmup: bool  # one unmeasured batch per size first (its file layout is what steady state sees)
    maintenance_rows: int
    maintenance_batches: int
    maintenance_batch: int
    # c. end to end on the local stack
    e2e: bool
    e2e_rates: tuple[int, ...]
    e2e_seconds: int
    e2e_burst: int
    e2e_rows: int
    # c. the topics' wire formats, one end-to-end run each (json: JsonConverter; avro: the AWS Glue
    # Schema Registry converter against the local registry, the job with --wire_format avro)
    e2e_wire_formats: tuple[str, ...] = ("json",)
    # c. the job's --transactions (keep: the connector's transaction metadata on, the transaction topic read)
    e2e_transactions: str = "ignore"
    # a. fixed cost of a small batch (fixedcost.py): table rows, unmeasured and measured batches
    fixed_rows: int = 20_000
    fixed_warmup: int = 3
    fixed_batches: int = 5
    # t. many tables (manytables.py): tables per batch, measured batches per count, warm-up batches
    table_counts: tuple[int, ...] = (1, 10, 50, 200)
    tables_batches: int = 1
    tables_warmup: int = 3
    shuffle_partitions: int = 8
    methods: tuple[str, ...] = ("mor", "cow", "baseline", "append", "job-append", "fixed")
    # --compare REV: that revision's cdclake, importable as `compare_package`, measured in section a
    compare_rev: str | None = None
    compare_package: str | None = None


def make_config(quick: bool, work: Path, e2e: bool) -> Config:
    if quick:
        # Under 2 minutes on an idle 2-core machine (sections a and b: 111.6 s); c adds ~2.5.
        return Config(
            quick=True,
            work=work,
            table_rows=20_000,
            batch_sizes=(10_000,),
            batches_per_size=1,
            growth_sizes=(20_000, 40_000),
            growth_batch=2_000,
            growth_batches_per_size=1,
            growth_warmup=False,
            maintenance_rows=20_000,
            maintenance_batches=2,
            maintenance_batch=1_000,
            e2e=e2e,
            e2e_rates=(200, 1_000),
            e2e_seconds=20,
            e2e_burst=20_000,
            e2e_rows=10_000,
        )
    return Config(
        quick=False,
        work=work,
        table_rows=1_000_000,
        batch_sizes=(10_000, 100_000),
        batches_per_size=3,
        growth_sizes=(1_000_000, 2_000_000, 5_000_000, 10_000_000),
        growth_batch=10_000,
        growth_batches_per_size=3,
        growth_warmup=True,
        maintenance_rows=1_000_000,
        maintenance_batches=50,
        maintenance_batch=10_000,
        e2e=e2e,
        e2e_rates=(200, 1_000),
        e2e_seconds=60,
        e2e_burst=50_000,
        e2e_rows=100_000,
        fixed_rows=100_000,
        fixed_warmup=5,
        fixed_batches=10,
        tables_batches=2,
    )
