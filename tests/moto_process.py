"""moto as a server in a process of its own, for the tiers whose real clients talk HTTP to AWS: the
benchmark's own (scripts/cdcbench/motoserver.py), which runs its schema registry the same way."""

from __future__ import annotations

from cdcbench.motoserver import moto_server_process

__all__ = ["moto_server_process"]
