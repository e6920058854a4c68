"""Re-asking one recorded model call: the recorded request, edited, sent live.

``reask(record, step, store=store, edits={"temperature": 0.2}, model="gpt-4o")``
takes the model call a record holds (an ``http`` step, or a transport record:
:mod:`intentusnet.steps.reask` finds it and applies the edits), sends it to the
recorded URL with a key from the environment, never from the record, and
records the answers. The re-ask is an execution of its own, intent
``intentusnet.reask``, whose payload names the source (``reaskOf``, ``step``)
and the edits; each ask is one of its ``http`` steps, and each answer the
transport's own record, as any call an agent makes. The result puts the
recorded answer and the new ones side by side: their texts, the paths where
they differ, their tokens and, with a price table, their cost.

The key is read from ``OPENAI_API_KEY`` for OpenAI's APIs and
``ANTHROPIC_API_KEY`` for Anthropic's (told by the request's path, as token
usage is), or from the variable ``key_env`` names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import httpx
import orjson

from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import IntentEnvelope, IntentRef
from ..errors import ReaskRefused, StoreError
from ..routing.agents import AgentContext
from ..routing.redact import is_marker
from ..routing.router import IntentRouter
from ..steps.reask import RecordedCall, edited, recorded_call
from ..steps.view import record_steps
from ._reasked import ReaskAnswer, ReaskResult, answer_of
from .httpx import RecordingTransport
from .usage import api_of

if TYPE_CHECKING:
    from ..cache.prices import PriceTable
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore

__all__ = [
    "KEY_VARIABLES",
    "MAX_TIMES",
    "REASK_INTENT",
    "ReaskAnswer",
    "ReaskResult",
    "reask",
]

#: The intent a re-ask is recorded under.
REASK_INTENT: Final = "intentusnet.reask"
#: The environment variable holding each vendor's key, and how it is sent.
KEY_VARIABLES: Final = {
    "openai": ("OPENAI_API_KEY", "authorization", "Bearer "),
    "anthropic": ("ANTHROPIC_API_KEY", "x-api-key", ""),
}
_VENDORS: Final = {"openai": "OpenAI", "anthropic": "Anthropic"}
#: At most this many asks at once: each one costs money.
MAX_TIMES: Final = 20
_TIMEOUT: Final = httpx.Timeout(120.0, connect=10.0)


def reask(
    record: ExecutionRecord,
    step: int | None = None,
    *,
    store: ExecutionStore,
    edits: Mapping[str, JSONValue] | None = None,
    model: str | None = None,
    times: int = 1,
    prices: PriceTable | None = None,
    key_env: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ReaskResult:
    """Send a recorded model call again, edited, and compare the answers.

    Args:
        record: the record holding the call.
        step: the call's step number in ``record``; ``None`` when ``record``
            is the call's own (a transport record).
        store: where the re-ask and its answers are recorded.
        edits: JSON body paths and the values to set there, in order
            (``{"temperature": 0.2, "messages[0].content": "..."}``).
        model: the model to ask instead (the edit ``model``).
        times: how many times to ask (1 to 20), to see the spread.
        prices: prices the tokens, recorded and new.
        key_env: the environment variable holding the key, instead of the
            vendor's usual one (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``).
        transport: the httpx transport that makes the calls (a proxy's, say);
            ``httpx.HTTPTransport()`` by default.

    Returns:
        The recorded answer and the new ones, side by side.

    Raises:
        ReaskRefused: the call cannot be asked again as asked (the reason
            says why: not a model call, a side effect, a bad edit, no key in
            the environment); nothing was sent.
        StoreError: the re-ask could not be recorded.

    Added in 0.1.0.
    """
    if isinstance(times, bool) or not 1 <= times <= MAX_TIMES:
        raise ReaskRefused(f"times must be 1 to {MAX_TIMES}, not {times!r}")
    call = recorded_call(record, step)
    url = str(call.request["url"])
    api = api_of(urlsplit(url).path)
    if api is None:
        raise ReaskRefused(
            f"{call.where} ({call.request['method']} {url}) is not a call to an "
            "LLM API (OpenAI's /chat/completions, /completions, /embeddings, "
            "/responses; Anthropic's /messages)"
        )
    body, changed = edited(call, edits or {}, model)
    headers = _headers(call, api[0], key_env)
    asked: JSONObject = {
        "reaskOf": call.execution_id,
        "step": call.step,
        "set": dict(edits or {}),
        "model": model,
        "times": times,
    }
    execution_id = _ask(store, asked, call, body, headers, times, transport)
    done = store.load(execution_id)
    sent = {**call.request, "json": body}
    answers = tuple(
        answer_of(sent, s.output if s.ok else None, s.error_text, s.child_execution_id)
        for s in record_steps(done)
        if s.name.startswith("http ")
    )
    recorded = answer_of(call.request, call.response, call.error, call.answered_by)
    return ReaskResult(
        source_execution_id=call.execution_id,
        step=call.step,
        execution_id=execution_id,
        request=body,
        changed=tuple(changed),
        recorded=recorded,
        answers=answers,
        prices=prices,
    )


def _headers(call: RecordedCall, provider: str, key_env: str | None) -> dict[str, str]:
    """The recorded headers, and the key from the environment."""
    variable, name, prefix = KEY_VARIABLES[provider]
    variable = key_env or variable
    key = os.environ.get(variable, "").strip()
    if not key:
        raise ReaskRefused(
            f"no key for {_VENDORS[provider]}'s API: set {variable} (records "
            "never hold keys)"
            + ("" if key_env else " or name another variable with --key-env")
        )
    recorded = call.request.get("headers")
    headers = {
        str(k): str(v)
        for k, v in (recorded.items() if isinstance(recorded, dict) else ())
    }
    hidden = sorted(k for k, v in headers.items() if is_marker(v))
    if hidden:
        raise ReaskRefused(
            f"the request of {call.where} was recorded with the headers "
            f"{', '.join(hidden)} redacted, so it cannot be sent as it was"
        )
    return {**headers, "content-type": "application/json", name: prefix + key}


def _ask(
    store: ExecutionStore,
    asked: JSONObject,
    call: RecordedCall,
    body: JSONObject,
    headers: dict[str, str],
    times: int,
    transport: httpx.BaseTransport | None,
) -> str:
    """Record the re-ask as an execution whose agent makes the calls; its id.

    A call that fails without a response (the host is unreachable, say) is
    that step's failure; the other asks still go.
    """
    method, url = str(call.request["method"]), str(call.request["url"])
    content = orjson.dumps(body)

    def ask(env: IntentEnvelope, ctx: AgentContext) -> JSONObject:
        recording = RecordingTransport(store, mode="record", wrapped=transport)
        statuses: list[JSONValue] = []
        with httpx.Client(transport=recording, timeout=_TIMEOUT) as client:
            for _ in range(times):
                try:
                    answer = client.request(
                        method, url, headers=headers, content=content
                    )
                except httpx.HTTPError as exc:  # the step records the failure
                    statuses.append(f"{type(exc).__name__}: {exc}")
                else:
                    statuses.append(answer.status_code)
        return {"statuses": statuses}

    router = IntentRouter(store=store)
    try:
        router.agent(IntentRef(name=REASK_INTENT), name="reask")(ask)
        envelope = IntentEnvelope(intent=IntentRef(name=REASK_INTENT), payload=asked)
        response = router.route_intent(envelope)
    finally:
        router.close()
    execution_id = response.metadata.execution_id
    if execution_id is None:  # the store could not be written
        error = response.error
        raise StoreError(
            "the re-ask could not be recorded"
            + ("" if error is None else f": {error.message}")
        )
    return execution_id
