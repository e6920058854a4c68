"""A small MCP server for the proxy's tests (the official SDK), run over stdio.

Every call of a tool appends a line to the file named by ``MCP_TEST_CALLS``,
so a test sees which calls reached the server; the process id goes to the file
named by ``MCP_TEST_PID``, so a test can kill it. ``MCP_TEST_PRIVATE_TTL_MS``
makes every ``resources/read`` answer carry ``cacheScope: "private"`` and that
``ttlMs``.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import Completion, ToolAnnotations

_PRIVATE = os.environ.get("MCP_TEST_PRIVATE_TTL_MS")
server = MCPServer(
    "intentusnet-test",
    log_level="CRITICAL",
    cache_hints=None
    if _PRIVATE is None
    else {"resources/read": CacheHint(ttl_ms=int(_PRIVATE), scope="private")},
)
_counter = {"n": 0}


def _called(name: str) -> None:
    path = os.environ.get("MCP_TEST_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(name + "\n")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    _called("add")
    return a + b


@server.tool()
def counter() -> int:
    """A number that changes on every call (so replays are visible)."""
    _called("counter")
    _counter["n"] += 1
    return _counter["n"]


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    _called("slow")
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    _called("fail")
    raise ValueError(f"failed: {reason}")


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report progress ``count`` times, then answer."""
    _called("steps")
    for done in range(1, count + 1):
        await ctx.report_progress(done, count, f"step {done}")
        await asyncio.sleep(0.01)
    return f"{count} steps"


@server.tool()
async def chatty(count: int, ctx: Context) -> str:
    """Log a line and report progress ``count`` times each, in turn, then answer."""
    _called("chatty")
    for done in range(1, count + 1):
        await ctx.info(f"line {done}")
        await ctx.report_progress(done, count)
        await asyncio.sleep(0.01)
    return f"{count} lines"


@server.tool()
async def paced(count: int, seconds: float, ctx: Context) -> str:
    """Report progress ``count`` times, ``seconds`` apart, then answer."""
    _called("paced")
    for done in range(1, count + 1):
        if done > 1:
            await asyncio.sleep(seconds)
        await ctx.report_progress(done, count)
    return f"{count} paced"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete(item: str) -> str:
    """Delete an item (a side effect)."""
    _called("delete")
    return f"deleted {item}"


@server.tool()
def crash() -> str:
    """The server dies mid-call."""
    _called("crash")
    os._exit(3)


@server.tool()
async def roots(ctx: Context) -> str:
    """Ask the client for its roots (a request of the server's own) mid-call."""
    _called("roots")
    listed = await ctx.session.list_roots()
    return ", ".join(str(root.uri) for root in listed.roots)


_later: set[asyncio.Task[None]] = set()


@server.tool()
async def announce(ctx: Context) -> str:
    """Answer, then tell the client its resources changed: outside any request."""
    _called("announce")
    session = ctx.session

    async def later() -> None:
        await asyncio.sleep(0.3)
        await session.send_resource_list_changed()

    task = asyncio.get_running_loop().create_task(later())
    _later.add(task)
    task.add_done_callback(_later.discard)
    return "announced"


@server.resource("memo://greeting")
def greeting() -> str:
    """A fixed resource."""
    return "hello"


@server.resource("memo://count")
def count() -> str:
    """A resource that changes on every read (so who got which is visible)."""
    _called("count")
    _counter["n"] += 1
    return str(_counter["n"])


@server.prompt()
def review(code: str) -> str:
    """A prompt."""
    return f"Review this: {code}"


@server.completion()
async def complete(ref: object, argument: object, context: object) -> Completion:
    """Complete a prompt's argument: the values that start with what is typed."""
    typed = str(getattr(argument, "value", ""))
    _called("complete")
    return Completion(
        values=[v for v in ("python", "perl", "rust") if v.startswith(typed)]
    )


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_PID"):  # so that a test can kill this process
        with open(os.environ["MCP_TEST_PID"], "w", encoding="utf-8") as out:
            out.write(str(os.getpid()))
    if len(sys.argv) == 3 and sys.argv[1] == "http":  # server.py http PORT
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
