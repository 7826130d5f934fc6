"""The pipeline's monthly cost per component (scripts/cdcbench/pipeline_cost.py), priced from the
benchmark's measured figures: MSK Serverless traffic scales with the bytes a change takes on the
topic, Glue with the measured CPU, and the figures used for a rate come from the batch the
template's trigger would gather at that rate."""

from __future__ import annotations

import pytest
from cdcbench import pipeline_cost as pc


def _measured(wire: str, bytes_per_change: float, cpu: tuple[float, float] = (500.0, 150.0)) -> list[pc.Measured]:
    return [
        pc.Measured(wire, 10_000, cpu[0], bytes_per_change, 8.0),
        pc.Measured(wire, 100_000, cpu[1], bytes_per_change, 9.0),
    ]


def test_msk_traffic_at_200_changes_per_second_of_4501_bytes_is_written_read_and_stored_as_priced():
    lines = pc.msk_lines(pc.Workload(200), 4_501)
    by = {x.component: x.dollars for x in lines}
    written_gb = 200 * 730 * 3600 * 4_501 / 1e9  # 2,366 GB a month
    assert by["MSK Serverless bytes in"] == pytest.approx(written_gb * 0.10)
    assert by["MSK Serverless bytes out"] == pytest.approx(written_gb * 0.05)
    assert by["MSK Serverless storage"] == pytest.approx(200 * 7 * 86_400 * 4_501 / 1e9 * 0.10)
    assert by["MSK Serverless cluster"] == pytest.approx(547.5)
    assert by["MSK Serverless partitions"] == pytest.approx((2 + 34) * 730 * 0.0015)


def test_avro_bytes_cut_the_msk_traffic_in_proportion_and_leave_the_fixed_hours_alone():
    json_lines = pc.msk_lines(pc.Workload(1_000), 4_501)
    avro_lines = pc.msk_lines(pc.Workload(1_000), 318)
    traffic = ("MSK Serverless bytes", "MSK Serverless storage")
    assert pc.total(avro_lines, traffic[0]) / pc.total(json_lines, traffic[0]) == pytest.approx(318 / 4_501)
    assert pc.total(avro_lines, "MSK Serverless cluster") == pc.total(json_lines, "MSK Serverless cluster")


def test_a_second_reader_of_the_topics_doubles_the_bytes_out_only():
    one = {x.component: x.dollars for x in pc.msk_lines(pc.Workload(200), 1_000)}
    two = {x.component: x.dollars for x in pc.msk_lines(pc.Workload(200, readers=2), 1_000)}
    assert two["MSK Serverless bytes out"] == pytest.approx(2 * one["MSK Serverless bytes out"])
    assert two["MSK Serverless bytes in"] == one["MSK Serverless bytes in"]


@pytest.mark.parametrize(
    ("vcpus", "size", "dpus"),
    [(0.1, "2 x G.025X", 0.5), (4.0, "2 x G.025X", 0.5), (4.1, "2 x G.1X", 2.0), (13.0, "4 x G.1X", 4.0)],
)
def test_the_glue_job_is_billed_the_smallest_streaming_size_that_covers_the_busy_vcpus(vcpus, size, dpus):
    assert pc.glue_capacity(vcpus) == (size, dpus)


def test_a_rate_is_priced_with_the_cpu_of_the_largest_measured_batch_not_above_its_trigger_batch():
    measured = _measured("json", 4_501)
    assert pc.nearest(measured, "json", 200 * 60).batch == 10_000
    assert pc.nearest(measured, "json", 5_000 * 60).batch == 100_000
    assert pc.nearest(measured, "json", 50).batch == 10_000  # below every measured size: the smallest


def test_the_job_pipeline_costs_the_sum_of_its_components_and_per_million_divides_by_the_months_changes():
    w = pc.Workload(5_000)
    m = pc.nearest(_measured("avro", 318, cpu=(900.0, 900.0)), "avro", 300_000)
    lines = pc.job_pipeline(w, m)
    glue = next(x for x in lines if x.component.startswith("Glue"))
    assert glue.detail == "4.50 vCPU busy -> 2 x G.1X"
    assert glue.dollars == pytest.approx(2 * 730 * 0.308)
    assert pc.total(lines) == pytest.approx(sum(x.dollars for x in lines))
    assert pc.per_million(w, lines) == pytest.approx(pc.total(lines) / (5_000 * 730 * 3600 / 1e6))


def test_the_table_has_a_row_per_wire_format_and_rate_and_avro_costs_less_where_traffic_dominates():
    t = pc.table(_measured("json", 4_501) + _measured("avro", 318))
    assert [(r[0], r[1]) for r in t.rows] == [(wire, f"{r:,}") for wire in ("avro", "json") for r in pc.RATES]
    totals = {(r[0], r[1]): float(r[7].strip("$").replace(",", "")) for r in t.rows}
    assert totals[("avro", "5,000")] < totals[("json", "5,000")]


def test_flink_needs_no_kafka_and_bills_an_orchestration_kpu_beside_its_busy_ones():
    lines = pc.flink_pipeline(pc.Workload(1_000), 2_700)  # 2.7 vCPU busy
    assert [x.component for x in lines] == ["Managed Flink"]
    assert lines[0].dollars == pytest.approx((3 + 1) * 730 * 0.11)
