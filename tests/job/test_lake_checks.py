"""The job tests' lake comparison (Lake.assert_rows, Lake.by_id) sees what a dict keyed by id hides:
a key stored twice with the right values."""

from __future__ import annotations

import pytest
from cdc_events import Events, customer


def test_the_lake_comparison_fails_on_a_key_stored_twice_even_with_the_right_values(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))
    ev.record("c", {"id": 2}, customer(2, "Bob"))
    lake.apply(ev.take())
    lake.assert_rows({1: "Ann", 2: "Bob"})
    # What a broken writer could leave: row 2 a second time, identical. As a dict by id the table
    # still reads {1: "Ann", 2: "Bob"}.
    lake.spark.sql(f"INSERT INTO {lake.table()} SELECT * FROM {lake.table()} WHERE id = 2")
    assert {r["id"]: r["first_name"] for r in lake.rows()} == {1: "Ann", 2: "Bob"}
    with pytest.raises(AssertionError, match="3 rows, 2 distinct keys"):
        lake.assert_rows({1: "Ann", 2: "Bob"})
    with pytest.raises(AssertionError, match=r"ids stored more than once: \[2\]"):
        lake.by_id()


def test_the_lake_comparison_fails_on_a_changed_value_and_on_a_missing_row(lake):
    ev = Events()
    ev.record("c", {"id": 1}, customer(1, "Ann"))
    ev.record("c", {"id": 2}, customer(2, "Bob"))
    lake.apply(ev.take())
    with pytest.raises(AssertionError, match="rows differ"):
        lake.assert_rows({1: "Ann", 2: "Rob"})
    with pytest.raises(AssertionError, match=r"2 rows, 2 distinct keys \(id\); expected 3 rows"):
        lake.assert_rows({1: "Ann", 2: "Bob", 3: "Cy"})
