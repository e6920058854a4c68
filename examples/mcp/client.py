"""Two MCP clients at once against ``intentusnet mcp proxy --listen`` (docs/mcp.md).

Run: python client.py LOG  -- LOG is the proxy's stderr, where it says
"listening on URL"; this waits (up to 30 s) for that line, then two clients,
at once, each call the tool ``add`` twice and print what it answered.
"""

import asyncio
import re
import sys
import time
from pathlib import Path

from mcp import Client


def proxy_url(log: Path) -> str:
    """The URL the proxy listens on, once its log says so."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(
            r"listening on (\S+)", log.read_text() if log.exists() else ""
        )
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise SystemExit(f"no 'listening on' line in {log}")


async def session(url: str, name: str) -> str:
    # the initialize handshake: each client gets its own session, and record
    async with Client(url, read_timeout_seconds=30, mode="legacy") as client:
        sums = []
        for a, b in ((2, 3), (4, 5)):
            answer = await client.call_tool("add", {"a": a, "b": b})
            sums.append(f"{a} + {b} = {answer.content[0].text}")
        return f"{name}: " + ", ".join(sums)


async def main(url: str) -> None:
    for line in await asyncio.gather(session(url, "one"), session(url, "two")):
        print(line)


if __name__ == "__main__":
    asyncio.run(main(proxy_url(Path(sys.argv[1]))))
