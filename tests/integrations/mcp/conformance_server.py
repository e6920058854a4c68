"""An MCP server for the official conformance suite, in both protocol revisions.

Written with the official Python SDK (``mcp`` 2.3), it offers what the suite's
server scenarios ask for (``@modelcontextprotocol/conformance`` 0.2): the
tools, resources and prompts named ``test_*``, logging, subscriptions,
completion, server requests (sampling, elicitation, roots), multi-round-trip
``InputRequiredResult`` exchanges with ``requestState``, an ``x-mcp-header``
parameter, and resumable event streams. The SDK answers a 2025-11-25 client
(``initialize``) and a stateless 2026-07-28 one (``_meta``) alike.

Run: ``conformance_server.py http PORT`` (streamable HTTP on 127.0.0.1) or
``conformance_server.py`` (stdio). Used by
``tests/integrations/mcp/test_conformance.py`` and
``benchmarks/bench_mcp_conformance.py``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import sys
from typing import Annotated, Any

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequest,
    InputRequiredResult,
    JSONRPCMessage,
    ListRootsRequest,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

#: A 1x1 PNG and a tiny WAV: what the image and audio scenarios expect back.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
#: requestState is sealed with this fixed test key (the SDK wants 32 bytes).
STATE_KEY = b"intentusnet-conformance-request-state-key"


class Events(EventStore):
    """Every event of the run, in memory: streams resume from any of them."""

    def __init__(self) -> None:
        self._events: list[tuple[str, int, JSONRPCMessage | None]] = []
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        """Keep one event; its id is its number in the run."""
        number = next(self._ids)
        self._events.append((stream_id, number, message))
        return str(number)

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        """Send the events of ``last_event_id``'s stream that came after it."""
        if not last_event_id.isdigit():
            return None
        seen = int(last_event_id)
        stream = next((s for s, n, _ in self._events if n == seen), None)
        if stream is None:
            return None
        for owner, number, message in self._events:
            if owner == stream and number > seen and message is not None:
                await send_callback(EventMessage(message, str(number)))
        return stream


server = MCPServer(
    name="intentusnet-conformance",
    version="1.0.0",
    log_level="CRITICAL",
    request_state_security=RequestStateSecurity(keys=[STATE_KEY]),
)


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


# -- tools: content ------------------------------------------------------------


@server.tool()
def test_simple_text() -> str:
    """Answer one line of text."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> list[ImageContent]:
    """Answer an image."""
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list[AudioContent]:
    """Answer a sound."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


def _embedded(uri: str, text: str, kind: str = "text/plain") -> EmbeddedResource:
    contents = TextResourceContents(uri=uri, mime_type=kind, text=text)
    return EmbeddedResource(type="resource", resource=contents)


@server.tool()
def test_embedded_resource() -> list[EmbeddedResource]:
    """Answer a resource, embedded."""
    return [_embedded("test://embedded-resource", "This is an embedded resource.")]


@server.tool()
def test_multiple_content_types() -> list[
    TextContent | ImageContent | EmbeddedResource
]:
    """Answer text, an image and a resource at once."""
    data = json.dumps({"test": "data", "value": 123})
    return [
        _text("Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        _embedded("test://mixed-content-resource", data, "application/json"),
    ]


@server.tool()
def test_error_handling() -> str:
    """Fail (a result with ``isError``)."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Refuse with a JSON-RPC error unless the client can sample."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="This tool needs the client's sampling capability",
            data={"requiredCapabilities": {"sampling": {}}},
        )
    return "The client can sample."


@server.tool()
def test_x_mcp_header(
    region: Annotated[
        str,
        Field(
            description="Sent again in the Mcp-Param-Region header",
            json_schema_extra={"x-mcp-header": "Region"},
        ),
    ] = "<none>",  # noqa: PT028 - a tool's parameter (the suite's name), not a test's
) -> str:
    """Echo the region (its value mirrored in a header: SEP-2243)."""
    return f"region={region}"


# -- tools: what the server sends while a call runs ----------------------------


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Log three lines while running."""
    for line in ("Tool execution started", "Tool processing data"):
        await ctx.info(line)
        await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress 0, 50, 100; answer the progress token."""
    for done in (0, 50, 100):
        if done:
            await asyncio.sleep(0.05)
        await ctx.report_progress(done, 100, f"Completed step {done} of 100")
    meta = ctx.request_context.meta if ctx.request_context else None
    return str(meta.get("progress_token") if meta else 0)


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Ask the client's model (a request of the server's own, in the call)."""
    try:
        answer = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=_text(prompt))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
    except Exception as exc:
        return f"Sampling not supported or error: {exc}"
    said = answer.content.text if answer.content.type == "text" else "No response"
    return f"LLM response: {said}"


class _Reply(BaseModel):
    response: str = Field(description="User's response")


class _Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


def _options(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


class _Enums(BaseModel):
    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": _options(
                ("low", "Low Priority"),
                ("medium", "Medium Priority"),
                ("high", "High Priority"),
            )
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={
            "items": {"type": "string", "enum": ["read", "write", "execute"]}
        },
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {
                "anyOf": _options(
                    ("feature", "New Feature"),
                    ("bug", "Bug Fix"),
                    ("docs", "Documentation"),
                )
            }
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    )


async def _elicited(ctx: Context, message: str, schema: type[BaseModel]) -> str:
    try:
        answer = await ctx.elicit(message=message, schema=schema)
    except Exception as exc:
        return f"not supported or error: {exc}"
    content = answer.data.model_dump_json() if answer.action == "accept" else "{}"
    return f"action={answer.action}, content={content}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Ask the user (elicitation) one question."""
    return "User response: " + await _elicited(ctx, message, _Reply)


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Ask with a default for every primitive type (SEP-1034)."""
    asked = "Please provide user information"
    return "Elicitation result: " + await _elicited(ctx, asked, _Defaults)


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Ask with each kind of enum schema (SEP-1330)."""
    asked = "Please select values using different enum schema types"
    return "Elicitation completed: " + await _elicited(ctx, asked, _Enums)


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Close the call's event stream mid-call; the client resumes it (SEP-1699)."""
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


@server.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Change the tool list and say so (to ``subscriptions/listen`` streams)."""
    server.add_tool(_dynamic, name="test_dynamic_tool")
    server.remove_tool("test_dynamic_tool")
    await ctx.notify_tools_changed()
    return "tool list changed"


@server.tool()
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Change the prompt list and say so."""
    prompt = Prompt.from_function(_dynamic, name="test_dynamic_prompt")
    server.add_prompt(prompt)
    server.remove_prompt("test_dynamic_prompt")
    await ctx.notify_prompts_changed()
    return "prompt list changed"


def _dynamic() -> str:
    """Added and removed again by the ``test_trigger_*`` tools."""
    return "dynamic"


# -- tools: multi-round-trip requests (2026-07-28, SEP-2322) -------------------

_NAME = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
_OK = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _ask(message: str, schema: dict[str, Any] = _NAME) -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def _sample(text: str, tokens: int) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=_text(text))
    return CreateMessageRequest(
        params=CreateMessageRequestParams(messages=[message], max_tokens=tokens)
    )


def _field(answer: object, key: str) -> object:
    """A field of an accepted elicitation's content, or None."""
    if isinstance(answer, ElicitResult) and answer.content:
        return answer.content.get(key)
    return None


@server.tool()
async def test_input_required_result_elicitation(
    ctx: Context,
) -> str | InputRequiredResult:
    """Ask the user's name first; greet once it is given."""
    given = ctx.input_responses or {}
    if "user_name" in given:
        return f"Hello, {_field(given['user_name'], 'name') or 'stranger'}!"
    return InputRequiredResult(input_requests={"user_name": _ask("What is your name?")})


@server.tool()
async def test_input_required_result_sampling(
    ctx: Context,
) -> str | InputRequiredResult:
    """Ask the client's model first; answer what it said."""
    given = ctx.input_responses or {}
    if "capital_question" in given:
        answer = given["capital_question"]
        said = (
            answer.content.text
            if isinstance(answer, CreateMessageResult) and answer.content.type == "text"
            else "?"
        )
        return f"Model said: {said}"
    question = _sample("What is the capital of France?", 100)
    return InputRequiredResult(input_requests={"capital_question": question})


@server.tool()
async def test_input_required_result_list_roots(
    ctx: Context,
) -> str | InputRequiredResult:
    """Ask the client's roots first; count them."""
    given = ctx.input_responses or {}
    if "client_roots" in given:
        answer = given["client_roots"]
        count = len(answer.roots) if isinstance(answer, ListRootsResult) else 0
        return f"Client exposed {count} root(s)."
    return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})


@server.tool()
async def test_input_required_result_request_state(
    ctx: Context,
) -> str | InputRequiredResult:
    """Ask for a confirmation with a requestState; check it comes back."""
    given = ctx.input_responses or {}
    if "confirm" in given and ctx.request_state == "request-state-nonce":
        return "state-ok: confirmation received"
    return InputRequiredResult(
        input_requests={"confirm": _ask("Please confirm", _OK)},
        request_state="request-state-nonce",
    )


@server.tool()
async def test_input_required_result_multiple_inputs(
    ctx: Context,
) -> str | InputRequiredResult:
    """Ask for an elicitation, a sample and the roots at once."""
    given = ctx.input_responses or {}
    if {"user_name", "greeting", "client_roots"} <= given.keys():
        return "All inputs received."
    asked: dict[str, InputRequest] = {
        "user_name": _ask("What is your name?"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    return InputRequiredResult(input_requests=asked, request_state="multiple-inputs")


@server.tool()
async def test_input_required_result_multi_round(
    ctx: Context,
) -> str | InputRequiredResult:
    """Three rounds: a name, then a color, then the answer; the state says which."""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    given = ctx.input_responses or {}
    if state["round"] == 1 and "step1" in given:
        color = {
            "type": "object",
            "properties": {"color": {"type": "string"}},
            "required": ["color"],
        }
        name = _field(given["step1"], "name")
        return InputRequiredResult(
            input_requests={"step2": _ask("Step 2: Your favorite color?", color)},
            request_state=json.dumps({"round": 2, "name": name}),
        )
    if state["round"] == 2 and "step2" in given:
        return f"{state.get('name')} likes {_field(given['step2'], 'color')}."
    return InputRequiredResult(  # the first round, or a response out of order
        input_requests={"step1": _ask("Step 1: What is your name?")},
        request_state=json.dumps({"round": 1}),
    )


@server.tool()
async def test_input_required_result_tampered_state(
    ctx: Context,
) -> str | InputRequiredResult:
    """Ask with a state; a tampered one is refused by the SDK before this runs."""
    if ctx.request_state is None:
        return InputRequiredResult(
            input_requests={"confirm": _ask("Please confirm", _OK)},
            request_state="round-1",
        )
    return f"state-ok: {ctx.request_state}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> InputRequiredResult:
    """Ask only for what the client says it can answer."""
    can = ctx.client_capabilities
    asked: dict[str, InputRequest] = {}
    if can is None or can.sampling is not None:
        asked["sample"] = _sample("Say hello", 50)
    if can is None or can.elicitation is not None:
        asked["ask"] = _ask("What is your name?")
    return InputRequiredResult(input_requests=asked, request_state="capability-gated")


# -- tools: a JSON Schema 2020-12 input schema, kept as written ----------------

_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {
        "properties": {"contactMethod": {"const": "phone"}},
        "required": ["contactMethod"],
    },
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(name="json_schema_2020_12_tool")
def json_schema_2020_12_tool() -> str:
    """Listed with a JSON Schema 2020-12 input schema (set below)."""
    return "json_schema_2020_12_tool"


# MCPServer.tool() takes no input schema of its own (SDK 2.3): the listed one
# is replaced, so tools/list shows it exactly as written.
server._tool_manager._tools["json_schema_2020_12_tool"].parameters = _SCHEMA_2020_12


# -- resources -----------------------------------------------------------------

_subscribed: set[str] = set()


@server.resource("test://static-text")
def static_text() -> str:
    """A fixed text."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary")
def static_binary() -> bytes:
    """A fixed image, as bytes."""
    return base64.b64decode(PNG)


@server.resource("test://template/{id}/data")
def template_data(id: str) -> str:
    """A resource per id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource")
def watched() -> str:
    """A resource a client may subscribe to."""
    return "Watched resource content"


# -- prompts -------------------------------------------------------------------


@server.prompt()
def test_simple_prompt() -> list[UserMessage]:
    """A prompt with no arguments."""
    return [UserMessage(role="user", content=_text("This is a simple prompt."))]


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two arguments."""
    said = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
    return [UserMessage(role="user", content=_text(said))]


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt with a resource in it."""
    return [
        UserMessage(
            role="user", content=_embedded(resourceUri, "Embedded resource content.")
        ),
        UserMessage(role="user", content=_text("Please process the resource above.")),
    ]


@server.prompt()
def test_prompt_with_image() -> list[UserMessage]:
    """A prompt with an image in it."""
    image = ImageContent(type="image", data=PNG, mime_type="image/png")
    return [
        UserMessage(role="user", content=image),
        UserMessage(role="user", content=_text("Please analyze the image above.")),
    ]


@server.prompt()
async def test_input_required_result_prompt(
    ctx: Context,
) -> list[UserMessage] | InputRequiredResult:
    """A prompt that asks the user for its context first (a non-tool round trip)."""
    given = ctx.input_responses or {}
    if "user_context" in given:
        said = _field(given["user_context"], "context") or "?"
        return [UserMessage(role="user", content=_text(f"Use this context: {said}"))]
    schema = {
        "type": "object",
        "properties": {"context": {"type": "string"}},
        "required": ["context"],
    }
    asked = _ask("What context should the prompt use?", schema)
    return InputRequiredResult(input_requests={"user_context": asked})


# -- the requests MCPServer has no decorator for (SDK 2.3) ---------------------


async def _set_level(
    ctx: ServerRequestContext, params: SetLevelRequestParams
) -> EmptyResult:
    return EmptyResult()


async def _subscribe(
    ctx: ServerRequestContext, params: SubscribeRequestParams
) -> EmptyResult:
    _subscribed.add(str(params.uri))
    return EmptyResult()


async def _unsubscribe(
    ctx: ServerRequestContext, params: UnsubscribeRequestParams
) -> EmptyResult:
    _subscribed.discard(str(params.uri))
    return EmptyResult()


_lowlevel = server._lowlevel_server
_lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)
_lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
_lowlevel.add_request_handler(
    "resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe
)


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    """No suggestions (the suite checks the answer's shape)."""
    return Completion(values=[], total=0, has_more=False)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "http":
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            event_store=Events(),
            retry_interval=100,  # ms: the resumed-stream scenarios wait this long
        )
    else:
        server.run("stdio")
