"""Prints the pinned requirements (NAME==VERSION, following -r includes) that the running Python
does not have at exactly that version, one per line; nothing when all are installed.

The set-up scripts run it with the virtualenv's Python before trusting their install stamp: a
package removed or changed by hand after an install is installed again, so a missing install step
cannot hide behind a stamp."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path


def pins(path: Path) -> Iterator[tuple[str, str]]:
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            yield from pins(path.parent / line[3:].strip())
        elif "==" in line:
            name, version = line.split("==", 1)
            yield re.sub(r"\[.*\]", "", name).strip(), version.split(";", 1)[0].strip()


def missing(path: Path) -> list[str]:
    out = []
    for name, version in pins(path):
        try:
            have: str | None = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            out.append(f"{name}=={version} (installed: {have or 'none'})")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        print("usage: check_pins.py REQUIREMENTS_FILE", file=sys.stderr)
        sys.exit(2)
    print("\n".join(missing(Path(sys.argv[1]))))
