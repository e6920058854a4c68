"""The library form: an MCP SDK client whose calls are steps of the agent's execution.

::

    async with Client(params) as client:
        tools = RecordingClient(client)
        result = await tools.call_tool("search", {"q": "weather"})

Inside an agent (``current_context()``), ``call_tool``, ``read_resource`` and
``get_prompt`` are recorded as steps named as the proxy names them
(``mcp:tools/call:TOOL``, ...), keyed by the canonical hash of the arguments,
with the SDK's result (JSON) as output; ``intentusnet.rerun`` serves them. A
tool named in ``side_effects``, or marked ``destructiveHint`` by a
``list_tools`` made through the wrapper, is a ``side_effect=True`` step: never
made again by a re-run. Outside an agent the calls are plain calls.

Needs the ``mcp`` extra (this module imports the SDK).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Protocol, TypeVar

import mcp_types
from pydantic import BaseModel

from ..._util.jsonvalue import JSONObject, JSONValue
from ...routing.agents import current_context
from .jsonrpc import destructive_tools, step_of

__all__ = ["McpClient", "RecordingClient"]

_M = TypeVar("_M", bound=BaseModel)


class McpClient(Protocol):
    """What is wrapped: the SDK's ``mcp.Client`` (or anything shaped like it)."""

    async def call_tool(
        self, name: str, arguments: dict[str, JSONValue] | None = None
    ) -> mcp_types.CallToolResult:
        """Call a tool."""

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """Read a resource."""

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """Get a prompt."""

    async def list_tools(self) -> mcp_types.ListToolsResult:
        """List the tools."""


class RecordingClient:
    """Records an MCP client's calls as steps of the running agent's execution.

    Added in 0.1.0.

    Args:
        client: the SDK client (``mcp.Client``), connected.
        side_effects: tools never made again by a re-run.
    """

    def __init__(
        self, client: McpClient, *, side_effects: Collection[str] = ()
    ) -> None:
        self.client = client
        self.side_effects = set(side_effects)

    async def list_tools(self) -> mcp_types.ListToolsResult:
        """List the tools (not a step); learns which are ``destructiveHint``."""
        listing = await self.client.list_tools()
        self.side_effects |= destructive_tools(_json(listing))
        return listing

    async def call_tool(
        self, name: str, arguments: dict[str, JSONValue] | None = None
    ) -> mcp_types.CallToolResult:
        """Call tool ``name`` as the step ``mcp:tools/call:NAME``."""
        given = dict(arguments or {})
        return await self._step(
            "tools/call",
            {"name": name, "arguments": given},
            lambda: self.client.call_tool(name, given),
            mcp_types.CallToolResult,
            side_effect=name in self.side_effects,
        )

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """Read resource ``uri`` as the step ``mcp:resources/read``."""
        return await self._step(
            "resources/read",
            {"uri": uri},
            lambda: self.client.read_resource(uri),
            mcp_types.ReadResourceResult,
        )

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """Get prompt ``name`` as the step ``mcp:prompts/get:NAME``."""
        given = dict(arguments or {})
        params: JSONObject = {"name": name, "arguments": dict(given)}
        return await self._step(
            "prompts/get",
            params,
            lambda: self.client.get_prompt(name, given),
            mcp_types.GetPromptResult,
        )

    async def _step(
        self,
        method: str,
        params: JSONObject,
        call: Callable[[], Awaitable[_M]],
        model: type[_M],
        *,
        side_effect: bool = False,
    ) -> _M:
        ctx = current_context()
        if ctx is None:
            return await call()
        name, args = step_of(method, params)

        async def recorded(**_: object) -> JSONValue:
            return _json(await call())

        output = await ctx.astep(name, args, recorded, side_effect=side_effect)
        return model.model_validate(output)


def _json(result: BaseModel) -> JSONValue:
    """A result in its wire form (what the proxy records for the same call)."""
    value: JSONValue = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value
