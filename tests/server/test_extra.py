"""The server extra stays optional: the core never imports FastAPI or uvicorn."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import intentusnet
from intentusnet import IntentRouter
import intentusnet.http.agent_app, intentusnet.http.client, intentusnet.http.remote
from intentusnet.cli import cli
from intentusnet.cli.app import COMMANDS
cli.get_command(None, "serve")
loaded = sorted(m for m in ("fastapi", "uvicorn", "starlette") if m in sys.modules)
print(",".join(loaded))
"""


def test_core_does_not_import_the_server_extra() -> None:
    """Routing, remote agents, the client and the CLI load without FastAPI/uvicorn."""
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
