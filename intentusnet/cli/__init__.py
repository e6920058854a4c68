"""The ``intentusnet`` command: inspect, replay, verify and manage records.

A thin click layer over the library (DESIGN §8); ``main`` is the console
script's entry point and ``cli`` the click group, for embedding and testing.
``cli`` loads on first use: ``main`` answers ``replay ID`` without click.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._quick import main as main

if TYPE_CHECKING:
    from .app import cli as cli

__all__ = ["cli", "main"]


def __getattr__(name: str) -> object:
    if name == "cli":
        from .app import cli

        return cli
    raise AttributeError(f"module 'intentusnet.cli' has no attribute {name!r}")
