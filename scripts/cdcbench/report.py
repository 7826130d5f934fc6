"""Result tables: printed as plain text and written as Markdown."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def text(self) -> str:
        widths = [
            max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h) for i, h in enumerate(self.header)
        ]
        line = "  ".join("-" * w for w in widths)
        out = [self.title, line, "  ".join(h.ljust(w) for h, w in zip(self.header, widths, strict=True)), line]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in self.rows]
        out += [line, *self.notes]
        return "\n".join(out)

    def markdown(self) -> str:
        out = [f"#### {self.title}", "", "| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in self.rows]
        if self.notes:
            out += ["", *self.notes]
        return "\n".join(out) + "\n"


def rate(events: int, seconds: float) -> str:
    return f"{events / seconds:,.0f}" if seconds > 0 else "-"


def secs(s: float) -> str:
    return f"{s:.2f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"
