"""The decision of the delete memory (cdclake.lake.deletes.overrules_sql): which change a remembered
delete overrules, evaluated as SQL by a real engine (DuckDB: the predicate is plain SQL), in the
anti-join the MERGE's source uses (a key may have several markers, or none)."""

from __future__ import annotations

import duckdb
import pytest
from cdclake.lake.deletes import overrules_sql

MARKER = (500, 7)  # the remembered delete's (_cdc_seq, _cdc_offset)


def survives(op: str, seq: int, offset: int, *markers: tuple[int, int]) -> bool:
    con = duckdb.connect()
    con.execute("CREATE TABLE c (_cdc_op VARCHAR, _cdc_seq DECIMAL(38,0), _cdc_offset BIGINT)")
    con.execute("CREATE TABLE m (_cdc_seq DECIMAL(38,0), _cdc_offset BIGINT)")
    con.execute("INSERT INTO c VALUES (?, ?, ?)", [op, seq, offset])
    for m in markers:
        con.execute("INSERT INTO m VALUES (?, ?)", list(m))
    return bool(
        con.execute(f"SELECT NOT EXISTS (SELECT 1 FROM m WHERE {overrules_sql('m', 'c')}) FROM c").fetchone()[0]
    )


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
    assert survives(op, 1, 0)  # no marker


def test_the_newest_of_several_deletes_of_a_key_decides():
    assert not survives("c", 550, 0, MARKER, (600, 0))
    assert survives("c", 650, 0, MARKER, (600, 0))


def test_a_delete_always_goes_on_and_the_merge_guard_decides():
    assert survives("d", 100, 0, MARKER)
    assert survives("d", 900, 0, MARKER)
