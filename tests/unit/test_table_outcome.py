"""One table's batch as values (lake/table_writer.py, lake/execution.py, lake/lake_tables.Routed): what
running a plan returns, the report built once from it and the batch's count, and the order the
batch's tables are applied in. No Spark session."""

from __future__ import annotations

from cdclake.common.lake_contract import SetAsideMark
from cdclake.lake.execution import Rejected, TableRun
from cdclake.lake.lake_tables import Routed
from cdclake.lake.table_plan import TableDDL, TablePlan
from cdclake.lake.table_writer import TableOutcome, WriteCounts, table_report


def test_source_defaults_found_before_a_write_are_merged_and_used_up_by_it() -> None:
    run = TableRun().filling({"a": "1", "b": "2"}).filling({"b": "3"})
    assert dict(run.fills) == {"a": "1", "b": "3"}
    # A write takes them (its Written carries them); the next write starts without.
    assert run.writing(object()).fills == ()  # type: ignore[arg-type]
    assert len(run.writing(object()).written) == 1  # type: ignore[arg-type]


def test_a_tables_report_adds_the_undecodable_events_to_the_rejected_ones_by_reason() -> None:
    plan = TablePlan(schema=["added note string"], truncated=True)
    run = TableRun().rejecting(Rejected("no key", 2, None)).rejecting(Rejected("lossy", 1, None))  # type: ignore[arg-type]
    outcome = TableOutcome("cat.ns.t", 10, plan, run, 1.5)
    counts = WriteCounts(inserts=4, updates=2, deletes=1, undecodable=(("no key", 1), ("bad date", 2)))
    tr = table_report(outcome, counts)
    assert (tr.table, tr.events, tr.inserts, tr.updates, tr.deletes) == ("cat.ns.t", 10, 4, 2, 1)
    assert tr.dead_reasons == {"no key": 3, "lossy": 1, "bad date": 2} and tr.dead == 6
    assert (tr.schema, tr.truncated, tr.seconds) == ("added note string", True, 1.5)
    assert outcome.took_effect


def test_a_table_set_aside_reports_every_event_dead_with_its_mark_and_folder() -> None:
    mark = SetAsideMark("cat.ns.t", "column type refused", 7, "s3://dl/_set_aside/ns.t/since-7", "2026-11-30T00:00:00Z")
    outcome = TableOutcome("cat.ns.t", 5, set_aside=mark)
    tr = table_report(outcome, WriteCounts(), mark.folder)
    assert tr.dead == tr.events == 5
    assert tr.dead_reasons == {"table set aside since batch 7: column type refused": 5}
    assert (tr.set_aside, tr.set_aside_since, tr.set_aside_folder) == ("column type refused", 7, mark.folder)
    assert outcome.took_effect and TableOutcome("cat.ns.t", 0, set_aside=mark).took_effect


def test_a_table_whose_statements_the_lake_holds_already_takes_no_effect() -> None:
    assert not TableOutcome("cat.ns.t", 0, TablePlan()).took_effect
    assert TableOutcome("cat.ns.t", 0, TablePlan(source_dropped="kept, marked")).took_effect


def test_tables_with_only_a_truncate_or_statements_follow_those_with_events_in_one_pass() -> None:
    routed = Routed(
        tables={("db", "b"): [], ("db", "a"): []},
        truncated={("db", "c"): 9, ("db", "a"): 3},
        statements={("db", "d"): TableDDL(), ("db", "b"): TableDDL()},
        moved=[],
    )
    assert [t for t, _ in routed.items()] == [("db", "a"), ("db", "b"), ("db", "c"), ("db", "d")]
