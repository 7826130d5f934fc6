"""README.md and docs/ describe the product as it is (what it does, how to use it, what is verified,
its limits), never how it was built: no issue numbers, work sessions, sources it was modelled on,
earlier attempts, dated optimisation logs or changelogs. That history belongs in the commit log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

HISTORY = [
    (r"\bissue\s*#?\d+", "an issue number"),
    (r"\b(?:the|this|that) issue(?:'s)?\b", "the issue"),
    (r"\b(?:this|other|another|earlier|previous|each) sessions?\b", "a work session"),
    (r"\bseed walkthrough\b|\bseed's\b|\bseed (?:project|repository|blog|post|article)\b", "a seed it was modelled on"),
    (r"\bblog post\b", "a blog post"),
    (r"\b(?:earlier|previous|first|second) attempts?\b", "an earlier attempt"),
    (r"\boptimi[sz]ations? of \d{4}-\d{2}-\d{2}", "a dated optimisation log"),
    (r"\bchangelog\b|\bwhat changed since\b", "a changelog"),
    (r"\bbefore this (?:argument|option|parameter|change) existed\b", "how it was before"),
    (r"\bsince removed\b|\bno longer (?:uses|has|needs|runs)\b", "how it was before"),
    (r"\bsuperseded\b", "a superseded result"),
]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_docs_say_nothing_about_how_the_project_was_built(doc: Path) -> None:
    found = []
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for pattern, what in HISTORY:
            if m := re.search(pattern, line, re.I):
                found.append(f"{doc.name}:{number}: {what}: ...{m.group(0)}...")
    assert not found, "\n".join(found)


def test_the_history_patterns_catch_what_they_are_for() -> None:
    samples = {
        "Targets of issue 5: where we stand": "an issue number",
        "This session's optimisations made it 24% faster": "a work session",
        "it then plays the seed walkthrough": "a seed it was modelled on",
        "Two earlier attempts at the same sizes were stopped": "an earlier attempt",
        "## Optimizations of 2026-11-23: before and after": "a dated optimisation log",
        "the behaviour before this argument existed": "how it was before",
    }
    for text, what in samples.items():
        assert [w for p, w in HISTORY if re.search(p, text, re.I)] == [what], text
    # Product words that look alike are not history.
    for text in (
        "seed data loaded at first boot (SeedSqlFiles)",
        "aws ssm start-session --target",
        "the connector issues it on 8.4",
    ):
        assert not [w for p, w in HISTORY if re.search(p, text, re.I)], text
