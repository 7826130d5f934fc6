"""What the whole pipeline costs on AWS per month and per million changes, priced per component from
figures measured by the benchmark: the job's CPU seconds per change and the bytes a change takes on
the topic (per wire format), and the objects a batch writes to the lake.

Pure: no Spark, no I/O. Section a measures the inputs (apply.py) and prints `table`; the peers' run
prices every system's pipeline with the same components (`peers_table`, peers/runner.py).

List prices, us-east-1, one month = 730 hours (docs/DEPLOY.md "Cost" cites the pages):
- MSK Serverless: $0.75 per cluster-hour, $0.0015 per partition-hour, $0.10 per GB written,
  $0.05 per GB read, $0.10 per GB-month stored; topics keep 7 days by default (MSK Serverless's
  retention.ms default).
- MSK Connect: $0.11 per MCU-hour (1 MCU = 1 vCPU, 4 GiB).
- AWS Glue: $0.44 per DPU-hour before 6.0; Glue 6.0 30% less (AWS's launch post), ~$0.308.
  Streaming jobs bill at least 2 workers; G.025X = 2 vCPU, 0.25 DPU; G.1X = 4 vCPU, 1 DPU.
- Managed Service for Apache Flink: $0.11 per KPU-hour (1 KPU = 1 vCPU, 4 GB) plus one KPU per
  application for orchestration.
- S3: $0.005 per 1,000 PUT requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .report import Table

HOURS_PER_MONTH = 730
GB = 1e9

MSK_CLUSTER_HOUR = 0.75
MSK_PARTITION_HOUR = 0.0015
MSK_GB_IN = 0.10
MSK_GB_OUT = 0.05
MSK_GB_MONTH = 0.10
MSK_RETENTION_DAYS = 7
CONNECT_MCU_HOUR = 0.11
GLUE_DPU_HOUR = {"5.0": 0.44, "6.0": round(0.44 * 0.7, 3)}
FLINK_KPU_HOUR = 0.11
S3_PUT = 0.005 / 1000

# The template's defaults (cloudformation/cdc-pipeline.yaml): one MSK Connect worker of 1 MCU per
# connector, a 60-second trigger, one partition per change topic. Partitions on the cluster: one per
# captured table's topic, the schema-change, schema-history and heartbeat topics, and Kafka Connect's
# own topics at Apache Kafka's defaults (offsets 25, status 5, configs 1).
CONNECT_MCUS = 1
TRIGGER_SECONDS = 60
INTERNAL_PARTITIONS = 3 + 25 + 5 + 1
RATES = (200, 1_000, 5_000)
MSK, CONNECT = "MSK Serverless", "MSK Connect"  # the components' families, as the lines name them


@dataclass(frozen=True)
class Measured:
    """One wire format's figures at one batch size: the job's CPU-s per million changes, the bytes of
    a change on the topic (key and value), the lake objects one batch of one table writes."""

    wire: str
    batch: int
    cpu_per_million: float
    bytes_per_change: float
    objects_per_batch: float


@dataclass(frozen=True)
class Workload:
    rate: float  # changes per second, steady
    tables: int = 2  # tables changing in every batch
    readers: int = 1  # consumers reading every change topic (the job; +1 with a second reader)


@dataclass(frozen=True)
class Line:
    component: str
    detail: str
    dollars: float  # per month


def glue_capacity(vcpus: float) -> tuple[str, float]:
    """The smallest streaming-job size whose workers' vCPUs cover `vcpus` at full use: 2 G.025X
    (4 vCPU, 0.5 DPU), else n >= 2 G.1X (4 vCPU and 1 DPU each). (workers, DPUs)."""
    if vcpus <= 4:
        return "2 x G.025X", 0.5
    n = max(2, math.ceil(vcpus / 4))
    return f"{n} x G.1X", float(n)


def msk_lines(w: Workload, bytes_per_change: float) -> list[Line]:
    month_s = HOURS_PER_MONTH * 3600
    written = w.rate * month_s * bytes_per_change / GB
    stored = w.rate * MSK_RETENTION_DAYS * 86_400 * bytes_per_change / GB
    read = written * w.readers
    partitions = w.tables + INTERNAL_PARTITIONS
    return [
        Line("MSK Serverless cluster", f"{HOURS_PER_MONTH} cluster-hours", HOURS_PER_MONTH * MSK_CLUSTER_HOUR),
        Line(
            "MSK Serverless partitions", f"{partitions} partitions", partitions * HOURS_PER_MONTH * MSK_PARTITION_HOUR
        ),
        Line("MSK Serverless bytes in", f"{written:,.0f} GB", written * MSK_GB_IN),
        Line("MSK Serverless bytes out", f"{read:,.0f} GB, {w.readers} reader(s)", read * MSK_GB_OUT),
        Line("MSK Serverless storage", f"{stored:,.0f} GB ({MSK_RETENTION_DAYS} days)", stored * MSK_GB_MONTH),
    ]


def connect_line(label: str, mcus: int = CONNECT_MCUS) -> Line:
    return Line(label, f"{mcus} MCU", mcus * HOURS_PER_MONTH * CONNECT_MCU_HOUR)


def glue_line(w: Workload, cpu_per_million: float, glue: str = "6.0") -> Line:
    vcpus = w.rate * cpu_per_million / 1e6
    size, dpus = glue_capacity(vcpus)
    return Line(
        f"Glue {glue} streaming job",
        f"{vcpus:.2f} vCPU busy -> {size}",
        dpus * HOURS_PER_MONTH * GLUE_DPU_HOUR[glue],
    )


def s3_line(w: Workload, objects_per_batch: float) -> Line:
    batches = HOURS_PER_MONTH * 3600 / TRIGGER_SECONDS
    puts = batches * w.tables * objects_per_batch
    return Line("S3 PUTs (lake commits)", f"{puts / 1e6:.2f} M", puts * S3_PUT)


def job_pipeline(w: Workload, m: Measured, glue: str = "6.0") -> list[Line]:
    """This project's pipeline: Debezium on MSK Connect -> MSK Serverless -> the Glue job -> S3."""
    return [
        *msk_lines(w, m.bytes_per_change),
        connect_line("MSK Connect, Debezium"),
        glue_line(w, m.cpu_per_million, glue),
        s3_line(w, m.objects_per_batch),
    ]


def flink_pipeline(w: Workload, cpu_per_million: float) -> list[Line]:
    """Flink CDC on Managed Flink: it reads the binlog itself, no Kafka and no Connect."""
    kpus = max(1, math.ceil(w.rate * cpu_per_million / 1e6)) + 1
    return [Line("Managed Flink", f"{kpus} KPU (1 for orchestration)", kpus * HOURS_PER_MONTH * FLINK_KPU_HOUR)]


def sink_pipeline(w: Workload, bytes_per_change: float, cpu_per_million: float) -> list[Line]:
    """The Iceberg Kafka Connect sink: the same Debezium and MSK, and the sink on MSK Connect."""
    mcus = max(1, math.ceil(w.rate * cpu_per_million / 1e6))
    return [*msk_lines(w, bytes_per_change), connect_line("MSK Connect, Debezium"), connect_line("MSK Connect, Iceberg sink", mcus)]  # fmt: skip


def total(lines: list[Line], family: str = "") -> float:
    """The monthly dollars of the lines whose component starts with `family` (all by default)."""
    return sum(x.dollars for x in lines if x.component.startswith(family))


def per_million(w: Workload, lines: list[Line]) -> float:
    return total(lines) / (w.rate * HOURS_PER_MONTH * 3600 / 1e6)


def nearest(measured: list[Measured], wire: str, batch: float) -> Measured:
    """The figures measured at the largest batch size not above `batch` (CPU per change falls as
    batches grow, so a smaller measured batch overstates the cost), else the smallest measured."""
    mine = sorted((m for m in measured if m.wire == wire), key=lambda m: m.batch)
    fits = [m for m in mine if m.batch <= batch]
    return fits[-1] if fits else mine[0]


COLUMNS = ["wire format", "changes/s", "job CPU from", "MSK Serverless", "MSK Connect", "Glue", "S3 PUTs",
           "total per month", "per million changes"]  # fmt: skip


def table(measured: list[Measured], rates: tuple[int, ...] = RATES, glue: str = "6.0") -> Table:
    """Section a's pipeline cost: per wire format and rate, each component's monthly dollars."""
    t = Table(
        "a. The pipeline on AWS per month, priced from this run's measurements",
        COLUMNS,
    )
    for wire in sorted({m.wire for m in measured}):
        for r in rates:
            w = Workload(r)
            m = nearest(measured, wire, r * TRIGGER_SECONDS)
            lines = job_pipeline(w, m, glue)
            by = {x.component: x for x in lines}
            t.add(
                wire, f"{r:,}", f"{m.batch:,}-event batches: {m.cpu_per_million:,.0f} CPU-s/M",
                f"${total(lines, MSK):,.0f}", f"${total(lines, CONNECT):,.0f}",
                f"${by[f'Glue {glue} streaming job'].dollars:,.0f} ({by[f'Glue {glue} streaming job'].detail})",
                f"${by['S3 PUTs (lake commits)'].dollars:,.2f}", f"${total(lines):,.0f}", f"${per_million(w, lines):.3f}",
            )  # fmt: skip
    t.notes.append(
        "Measured here: the job's CPU-s per million changes (section a, the batch size nearest below the rate "
        f"x the template's {TRIGGER_SECONDS}-s trigger), the bytes per change on the topic, the objects a batch "
        "writes to the lake (each a PUT on S3). Priced: list prices us-east-1 (scripts/cdcbench/pipeline_cost.py), "
        "Glue at full use of the workers it bills (at least 2), 2 tables changing per batch, one reader of the "
        "topics, 7 days of retention. Not counted: S3 GETs and storage, the Glue Data Catalog's requests, "
        "Spark's checkpoint files, NAT and data transfer, the maintenance job, CloudWatch."
    )
    return t


@dataclass(frozen=True)
class Peer:
    label: str
    kind: str  # glue (the job, the AWS sample's approach), sink, flink
    cpu_per_million: float  # measured, at the workload named in the table's note


def peer_lines(p: Peer, w: Workload, bytes_per_change: float) -> list[Line]:
    """Each system as a user would deploy it on AWS (S3 left out: not measured for the peers)."""
    if p.kind == "flink":
        return flink_pipeline(w, p.cpu_per_million)
    if p.kind == "sink":
        return sink_pipeline(w, bytes_per_change, p.cpu_per_million)
    return [*msk_lines(w, bytes_per_change), connect_line("MSK Connect, Debezium"), glue_line(w, p.cpu_per_million)]


def peers_table(peers: list[Peer], bytes_per_change: float, workload: str, rates: tuple[int, ...] = RATES) -> Table:
    """The peers' pipelines per month at each rate, from their CPU measured at one workload."""
    t = Table(
        "peers. Each pipeline on AWS per month (MSK and Connect where it uses them), from the CPU measured",
        ["system", "changes/s", "MSK Serverless", "MSK Connect", "compute", "total per month", "per million changes"],
    )
    for p in peers:
        for r in rates:
            w = Workload(r)
            lines = peer_lines(p, w, bytes_per_change)
            compute = [x for x in lines if not x.component.startswith((MSK, CONNECT))]
            t.add(
                p.label, f"{r:,}", f"${total(lines, MSK):,.0f}", f"${total(lines, CONNECT):,.0f}",
                "; ".join(f"{x.component}: {x.detail}, ${x.dollars:,.0f}" for x in compute) or "-",
                f"${total(lines):,.0f}", f"${per_million(w, lines):.3f}",
            )  # fmt: skip
    t.notes.append(
        f"CPU per change measured at '{workload}' for every rate (batching systems spend less per change at higher "
        f"rates, so the higher rates are upper bounds); {bytes_per_change:,.0f} bytes per change measured on the "
        "job's change topic (JSON). The sink's MCUs cover its measured CPU; Flink reads the binlog itself (no MSK, "
        "no Connect). Prices and assumptions: scripts/cdcbench/pipeline_cost.py; S3 is left out for all."
    )
    return t
