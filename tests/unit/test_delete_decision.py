"""The decision of the delete memory (cdclake.deletes.survives_sql): which change a remembered
delete overrules, evaluated as SQL by a real engine (DuckDB: the predicate is plain SQL)."""

from __future__ import annotations

import duckdb
import pytest
from cdclake.deletes import survives_sql

MARKER = (500, 7)  # the remembered delete's (_cdc_seq, _cdc_offset)


def survives(op: str, seq: int, offset: int, marker: tuple[int, int] | None) -> bool:
    m_seq, m_off = marker or (None, None)
    con = duckdb.connect()
    con.execute("CREATE TABLE c (_cdc_op VARCHAR, _cdc_seq DECIMAL(38,0), _cdc_offset BIGINT)")
    con.execute("CREATE TABLE m (_cdc_seq DECIMAL(38,0), _cdc_offset BIGINT)")
    con.execute("INSERT INTO c VALUES (?, ?, ?)", [op, seq, offset])
    con.execute("INSERT INTO m VALUES (?, ?)", [m_seq, m_off])
    return bool(con.execute(f"SELECT {survives_sql('c', 'm')} FROM c, m").fetchone()[0])


@pytest.mark.parametrize("op", ["c", "r", "u"])
def test_an_insert_or_update_older_than_the_remembered_delete_is_overruled(op):
    assert not survives(op, 400, 99, MARKER)
    assert not survives(op, 500, 6, MARKER)  # same position, earlier Kafka offset


@pytest.mark.parametrize("op", ["c", "r", "u"])
def test_the_delete_itself_read_again_overrules_its_older_twin(op):
    assert not survives(op, 500, 7, MARKER)  # a change at the delete's own position is not newer


@pytest.mark.parametrize("op", ["c", "r", "u"])
def test_a_change_newer_than_the_delete_or_of_a_key_never_deleted_goes_on(op):
    assert survives(op, 600, 1, MARKER)
    assert survives(op, 500, 8, MARKER)
    assert survives(op, 1, 0, None)


def test_a_delete_always_goes_on_and_the_merge_guard_decides():
    assert survives("d", 100, 0, MARKER)
    assert survives("d", 900, 0, MARKER)
