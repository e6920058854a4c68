"""A small MCP server (the official SDK, the ``mcp`` extra) for docs/mcp.md.

Run: python server.py            (stdio: a client starts it)
     python server.py http PORT  (streamable HTTP on 127.0.0.1:PORT/mcp)
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("demo", log_level="CRITICAL")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
