"""Record, replay and cache the calls an agent makes to MCP servers.

``intentusnet mcp proxy`` (docs/mcp.md) runs :mod:`.proxy`: the session pump
(:mod:`.session`) between a client and a server over stdio (:mod:`.stdio`) or
streamable HTTP (:mod:`.http`), each call a step (:mod:`.jsonrpc` names them),
a replay or a cache answered from a record's steps (:mod:`.calls`). It speaks
JSON-RPC itself and needs no MCP SDK; the ``mcp`` extra brings the official
SDK for clients and servers.
"""
