"""The entry point of scripts/local-stack. The stack itself is the package scripts/cdcstack/
(its __init__ lists the modules); the command line is cdcstack/commands.py."""

from __future__ import annotations

import sys

from cdcstack.commands import main

if __name__ == "__main__":
    sys.exit(main())
