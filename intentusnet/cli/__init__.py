"""The ``intentusnet`` command: inspect, replay, verify and manage records.

A thin click layer over the library (DESIGN §8); ``main`` is the console
script's entry point and ``cli`` the click group, for embedding and testing.
"""

from __future__ import annotations

from .app import cli as cli
from .app import main as main

__all__ = ["cli", "main"]
