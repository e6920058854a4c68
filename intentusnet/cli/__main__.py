"""``python -m intentusnet.cli``: the same as the ``intentusnet`` command."""

from __future__ import annotations

from . import main

main()
