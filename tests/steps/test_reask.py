"""Finding a recorded HTTP call in a record and editing its request body."""

from __future__ import annotations

from typing import Any

import pytest

from intentusnet import IntentRouter, ReaskRefused
from intentusnet.steps.reask import edited, parse_edit, recorded_call
from intentusnet.store import MemoryExecutionStore

MARKER = "[redacted:hmac-sha256:" + "0" * 32 + "]"
URL = "https://api.example/v1/chat/completions"


def _record(*requests: dict[str, Any]) -> Any:
    """A record whose agent made one ``http`` step per request (as a transport does)."""
    store = MemoryExecutionStore()
    with IntentRouter(store=store) as router:

        @router.agent("ask")
        def agent(env: Any, ctx: Any) -> dict[str, Any]:
            for request in requests:
                ctx.step(f"http POST {URL}", request, lambda **_: {"status": 200})
            return {}

        answer = router.route_intent({"intent": {"name": "ask"}})
    return store.load(answer.metadata.execution_id)


def _request(**body: Any) -> dict[str, Any]:
    return {"method": "POST", "url": URL, "headers": {}, "json": body}


def test_edits_set_nested_values_and_add_keys() -> None:
    """Paths set values deep down and add keys; the changed paths are listed."""
    call = recorded_call(_record(_request(model="a", messages=[{"content": "hi"}])), 1)
    assert call.response == {"status": 200}
    body, changed = edited(
        call,
        dict([parse_edit('messages[0].content="yo"'), parse_edit("top_p=0.5")]),
        model="b",
    )
    assert body == {"model": "b", "messages": [{"content": "yo"}], "top_p": 0.5}
    assert changed == ["messages[0].content", "model", "top_p"]
    assert call.body == {"model": "a", "messages": [{"content": "hi"}]}


def test_redacted_values_must_be_given() -> None:
    """A body recorded with markers is refused until an edit replaces them."""
    call = recorded_call(_record(_request(user=MARKER, note="(ignored)")), 1)
    with pytest.raises(ReaskRefused, match="redacted or ignored at note, user"):
        edited(call, {})
    body, _ = edited(call, {"user": "u-1", "note": "n"})
    assert body == {"user": "u-1", "note": "n"}


def test_a_body_that_is_not_json_is_refused() -> None:
    """Only the hash of a binary body is recorded: it cannot be sent again."""
    request = {"method": "POST", "url": URL, "headers": {}, "bodySha256": "ab"}
    with pytest.raises(ReaskRefused, match="has no JSON body"):
        recorded_call(_record(request), 1)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("temperature", "write PATH=JSON"),
        ("=1", "write PATH=JSON"),
        ("model=gpt-4o", "the value is not JSON"),
    ],
)
def test_parse_edit_refuses_what_is_not_path_equals_json(
    text: str, reason: str
) -> None:
    """An edit without '=' or with a value that is not JSON names the fix."""
    with pytest.raises(ReaskRefused, match=reason):
        parse_edit(text)
