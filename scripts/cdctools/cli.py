"""The commands' argument parser: a wrong argument is one line naming it and the fix, exit code 2
(argparse's default prints the whole usage first, which buries the line that matters)."""

from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
