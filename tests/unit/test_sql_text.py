"""Identifiers and literals spliced into SQL text are quoted one way (cdclake.common.sqltext)."""

from __future__ import annotations

import pytest
from cdclake.common.sqltext import properties_sql, quote, sql_binary, sql_string


@pytest.mark.parametrize(
    ("name", "quoted"),
    [("id", "`id`"), ("first name", "`first name`"), ("a`b", "`a``b`"), ("``", "``````"), ("", "``")],
)
def test_identifiers_are_backquoted_with_backticks_doubled(name, quoted):
    assert quote(name) == quoted


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("plain", "'plain'"),
        ("it's", "'it\\'s'"),
        ("C:\\temp", "'C:\\\\temp'"),
        ("\\'", "'\\\\\\''"),
        ('say "hi"', "'say \"hi\"'"),
        ("", "''"),
    ],
)
def test_string_literals_escape_quotes_and_backslashes(value, literal):
    assert sql_string(value) == literal


def test_binary_literals_are_upper_case_hex():
    assert sql_binary(b"\x00\xab\xff") == "X'00ABFF'"
    assert sql_binary(b"") == "X''"


def test_a_tblproperties_list_quotes_every_key_and_value():
    props = {"cdc.primary-key": "id,email", "cdc.backfill.note": "it's C:\\x"}
    assert properties_sql(props) == "'cdc.primary-key'='id,email', 'cdc.backfill.note'='it\\'s C:\\\\x'"
    assert properties_sql({}) == ""
