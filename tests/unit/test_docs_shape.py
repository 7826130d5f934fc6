"""The README stays an overview that fits on a few screens, every docs page is listed in the docs
index, no line is too long to read in a diff or an editor, and every relative link leads to a file
and heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS_DIR = ROOT / "docs"
DOCS = [README, *sorted(DOCS_DIR.glob("*.md"))]
README_MAX_LINES = 350
LINE_MAX_CHARS = 400

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def without_code_blocks(text: str) -> str:
    """The text with fenced code blocks blanked (line numbers kept): what is in them is not markup."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            line = ""
        lines.append("" if fenced else line)
    return "\n".join(lines)


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    found: set[str] = set()
    for line in without_code_blocks(doc.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            base = anchor(m.group(1))
            name, n = base, 0
            while name in found:  # a repeated heading gets -1, -2, ...
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def links(doc: Path) -> list[tuple[int, str]]:
    """(line, target) of each link outside code; link text may run over a line break."""
    text = without_code_blocks(doc.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(text)]


def broken_links(doc: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for number, target in links(doc):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        where = f"{doc.relative_to(root)}:{number}: {target}"
        if not file.exists():
            broken.append(f"{where}: no file {path}")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{where}: no heading #{fragment} in {file.relative_to(root)}")
    return broken


def test_readme_fits_on_a_few_screens() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move reference material to docs/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_line_of_the_docs_is_over_400_characters(doc: Path) -> None:
    long = [
        f"{doc.relative_to(ROOT)}:{n}: {len(line)} characters"
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > LINE_MAX_CHARS
    ]
    assert not long, "a table cell holding a paragraph becomes a list under the table:\n" + "\n".join(long)


def test_the_docs_index_lists_every_docs_page() -> None:
    index = DOCS_DIR / "README.md"
    listed = {Path(target.partition("#")[0]).name for _, target in links(index)}
    pages = {p.name for p in DOCS_DIR.glob("*.md")} - {"README.md"}
    assert not pages - listed, f"docs/README.md does not list {sorted(pages - listed)}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_existing_files_and_headings(doc: Path) -> None:
    broken = broken_links(doc)
    assert not broken, "\n".join(broken)


def test_anchors_and_links_are_read_as_github_renders_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Table formats: Iceberg, `delta`\n\n## Apache Hudi 0.15.0\n\n## Notes\n\n## Notes\n\n"
        "```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n"
        "[ok](#table-formats-iceberg-delta) [ok](#apache-hudi-0150) [ok](#notes-1) [web](https://example.com/x)\n"
        "[a link whose text runs\nover a line](#notes)\n"
    )
    assert anchors(page) == {"title", "table-formats-iceberg-delta", "apache-hudi-0150", "notes", "notes-1"}
    assert broken_links(page, tmp_path) == []
    page.write_text(page.read_text() + "[bad](#nowhere) [text over\ntwo lines](gone.md)\n")
    problems = [b.split(": ", 1)[1] for b in broken_links(page, tmp_path)]
    assert problems == ["#nowhere: no heading #nowhere in page.md", "gone.md: no file gone.md"]
    assert [n for n, _ in links(page)][-2:] == [18, 18]
