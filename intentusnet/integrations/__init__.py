"""Integrations with other libraries; each module imports its library on use.

``intentusnet.integrations.httpx``: transports that record and replay HTTP
calls, for any client or SDK built on ``httpx``;
``intentusnet.integrations.httpx2``: their twins for ``httpx2`` (the ``httpx2``
extra). Both run the one recording core in ``recording``.
``intentusnet.integrations.mcp``: the MCP proxy behind ``intentusnet mcp proxy``.
``intentusnet.integrations.opentelemetry``: OpenTelemetry spans of a router's
executions and of the transports' calls (the ``otel`` extra).
"""
