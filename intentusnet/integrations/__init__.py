"""Integrations with other libraries; each module imports its library on use.

``intentusnet.integrations.httpx``: transports that record and replay HTTP
calls, for any client or SDK built on ``httpx``.
``intentusnet.integrations.mcp``: the MCP proxy behind ``intentusnet mcp proxy``.
"""
