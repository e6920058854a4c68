"""Record, replay and cache the calls an agent makes to MCP servers.

``intentusnet mcp proxy`` (docs/mcp.md) runs :mod:`.proxy`: the session pump
(:mod:`.session`) between a client (stdio, or HTTP: :mod:`.listen`) and a
server over stdio (:mod:`.stdio`) or streamable HTTP (:mod:`.http`), each call
a step (:mod:`.jsonrpc` names them), a replay or a cache answered from a
record's steps (:mod:`.calls`). It speaks JSON-RPC itself and needs no MCP SDK.
:mod:`.client` (the ``mcp`` extra) wraps the official SDK's client so an
agent's own calls are steps of its execution.
"""
