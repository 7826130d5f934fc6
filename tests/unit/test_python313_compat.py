"""The shipped job code (glue_scripts/) stays within what Python 3.13 accepts.

Glue 6.0 runs Python 3.13; the suite runs on 3.11 (this machine kind has no 3.13). So the code Glue
runs is read with `ast` for what 3.12 and 3.13 removed from the standard library (modules, and names
of modules that remain), and compiled with warnings as errors: an invalid escape sequence in a string
is a DeprecationWarning on 3.11, a SyntaxWarning on 3.12+ and is on its way to an error."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "glue_scripts"

# Standard-library modules that are gone in 3.13: PEP 594's "dead batteries" and lib2to3 (3.13), and
# what 3.12 removed (distutils by PEP 632, imp, asynchat, asyncore, smtpd).
REMOVED_MODULES = {
    "aifc": "3.13", "audioop": "3.13", "cgi": "3.13", "cgitb": "3.13", "chunk": "3.13", "crypt": "3.13",
    "imghdr": "3.13", "mailcap": "3.13", "msilib": "3.13", "nis": "3.13", "nntplib": "3.13",
    "ossaudiodev": "3.13", "pipes": "3.13", "sndhdr": "3.13", "spwd": "3.13", "sunau": "3.13",
    "telnetlib": "3.13", "uu": "3.13", "xdrlib": "3.13", "lib2to3": "3.13", "tkinter.tix": "3.13",
    "distutils": "3.12", "imp": "3.12", "asynchat": "3.12", "asyncore": "3.12", "smtpd": "3.12",
}  # fmt: skip

# Names removed from modules that remain (the "Removed" sections of What's New in Python 3.12, 3.13).
REMOVED_NAMES = {
    ("locale", "resetlocale"): "3.13", ("locale", "format"): "3.12",
    ("typing", "io"): "3.13", ("typing", "re"): "3.13",
    ("re", "template"): "3.13", ("re", "TEMPLATE"): "3.13", ("re", "T"): "3.13",
    ("unittest", "findTestCases"): "3.13", ("unittest", "makeSuite"): "3.13",
    ("unittest", "getTestCaseNames"): "3.13",
    ("configparser", "LegacyInterpolation"): "3.13", ("configparser", "SafeConfigParser"): "3.12",
    ("ssl", "wrap_socket"): "3.12", ("ssl", "match_hostname"): "3.12", ("ssl", "RAND_pseudo_bytes"): "3.12",
    ("sqlite3", "OptimizedUnicode"): "3.12", ("sqlite3", "enable_shared_cache"): "3.12",
    ("importlib", "find_loader"): "3.12", ("pkgutil", "ImpImporter"): "3.12", ("pkgutil", "ImpLoader"): "3.12",
    ("io", "OpenWrapper"): "3.12",
}  # fmt: skip


def _removed_module(name: str) -> str | None:
    for removed in REMOVED_MODULES:
        if name == removed or name.startswith(removed + "."):
            return removed
    return None


def removed_uses(source: str, filename: str = "<source>") -> list[str]:
    """`file:line: what` for each use of a module or name that Python 3.13 no longer has."""
    tree = ast.parse(source, filename)
    aliases: dict[str, str] = {}  # local name -> standard module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[(alias.asname or alias.name).split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
                if removed := _removed_module(alias.name):
                    found.append(
                        f"{filename}:{node.lineno}: import {alias.name} (removed in {REMOVED_MODULES[removed]})"
                    )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if removed := _removed_module(node.module):
                found.append(f"{filename}:{node.lineno}: from {node.module} (removed in {REMOVED_MODULES[removed]})")
                continue
            for alias in node.names:
                if removed := _removed_module(f"{node.module}.{alias.name}"):
                    found.append(
                        f"{filename}:{node.lineno}: {node.module}.{alias.name} (removed in {REMOVED_MODULES[removed]})"
                    )
                elif version := REMOVED_NAMES.get((node.module, alias.name)):
                    found.append(f"{filename}:{node.lineno}: {node.module}.{alias.name} (removed in {version})")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases):
            continue
        if version := REMOVED_NAMES.get((aliases[node.value.id], node.attr)):
            found.append(f"{filename}:{node.lineno}: {aliases[node.value.id]}.{node.attr} (removed in {version})")
    return found


def compile_errors(source: str, filename: str = "<source>") -> list[str]:
    """Compiling with every warning as an error: what 3.11 only warns about and later versions refuse."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            compile(source, filename, "exec", dont_inherit=True)
        except (SyntaxError, DeprecationWarning, SyntaxWarning) as exc:
            return [f"{filename}: {exc}"]
    return []


def shipped_files() -> list[Path]:
    return sorted(SHIPPED.rglob("*.py"))


def test_shipped_code_uses_nothing_python_313_removed() -> None:
    files = shipped_files()
    assert len(files) > 20, f"glue_scripts/ should hold the job's modules, found {len(files)}"
    found = [
        use for path in files for use in removed_uses(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, "Glue 6.0 runs Python 3.13, which no longer has:\n" + "\n".join(found)


def test_shipped_code_compiles_with_warnings_as_errors() -> None:
    found = [
        err
        for path in shipped_files()
        for err in compile_errors(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_removed_modules_and_names() -> None:
    source = (
        "import cgi\n"
        "import distutils.util\n"
        "from telnetlib import Telnet\n"
        "import locale as loc\n"
        "loc.resetlocale()\n"
        "from typing import io\n"
        "import ssl\n"
        "ssl.wrap_socket(None)\n"
    )
    found = removed_uses(source)
    assert [f.split(": ", 1)[1] for f in found] == [
        "import cgi (removed in 3.13)",
        "import distutils.util (removed in 3.12)",
        "from telnetlib (removed in 3.13)",
        "typing.io (removed in 3.13)",
        "locale.resetlocale (removed in 3.13)",
        "ssl.wrap_socket (removed in 3.12)",
    ]
    # What remains in 3.13 passes: the module itself, other names of it, a relative import of that name.
    assert (
        removed_uses("import locale\nlocale.setlocale(locale.LC_ALL, '')\nfrom typing import IO\nfrom . import cgi\n")
        == []
    )


def test_the_compile_check_refuses_an_invalid_escape_sequence() -> None:
    assert compile_errors('PATTERN = "\\d+"\n')
    assert compile_errors('PATTERN = r"\\d+"\n') == []
