"""Redaction: secrets become keyed markers before anything is hashed or sealed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    Redactor,
    ReplayCache,
)
from intentusnet.routing._paths import parse

KEY = b"k" * 32
SSN = "123-45-6789"
OTHER_SSN = "987-65-4321"
TOKEN = "tok-SECRET-0123456789"
MARKER = re.compile(r"\[redacted:hmac-sha256:[0-9a-f]{32}\]")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


def leaked(root: Path, *secrets: str) -> list[str]:
    """Every file under ``root`` holding one of ``secrets``, byte for byte."""
    return [
        f"{secret} in {path}"
        for path in root.rglob("*")
        if path.is_file()
        for secret in secrets
        if secret.encode() in path.read_bytes()
    ]


def ask(ssn: str, text: str = "hi") -> dict[str, object]:
    return {"intent": {"name": "kyc"}, "payload": {"user": {"ssn": ssn}, "q": text}}


def kyc_router(store, redactor, seen=None, cache=True) -> IntentRouter:
    """A router whose agent echoes the SSN it got and answers with a token."""
    router = IntentRouter(
        store=store, cache=ReplayCache() if cache else None, redactor=redactor
    )

    @router.agent("kyc")
    def kyc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        ssn = env.payload["user"]["ssn"]
        if seen is not None:
            seen.append(ssn)
        checked = ctx.step("registry.check", {"ssn": ssn}, lambda ssn: {"ok": True})
        return {"ok": checked["ok"], "token": TOKEN, "echo": f"checked {ssn}"}

    return router


def standard() -> Redactor:
    return Redactor(KEY, payload=["user.ssn"], args=["ssn"], responses=["token"])


# -- the Redactor itself ---------------------------------------------------------


def test_marker_is_keyed_stable_and_short():
    """Equal values give equal markers; another key or value gives another."""
    one, two = Redactor(KEY), Redactor(b"j" * 32)
    assert one.marker(SSN) == one.marker(SSN)
    assert one.marker(SSN) != one.marker(OTHER_SSN)
    assert one.marker(SSN) != two.marker(SSN)
    assert MARKER.fullmatch(one.marker({"any": ["json", 1]}))
    assert one.marker(1) != one.marker("1")  # canonical JSON of the value
    assert "k" * 16 not in repr(one)


@pytest.mark.parametrize(
    ("key", "error", "message"),
    [
        (b"", ValueError, "at least 16 bytes, got 0"),
        ("short", ValueError, "at least 16 bytes, got 5"),
        (12345, TypeError, "bytes or str, not int"),
    ],
)
def test_bad_keys_are_refused(key, error, message):
    """An empty, short or non-bytes key is refused, saying why."""
    with pytest.raises(error, match=message):
        Redactor(key)


@pytest.mark.parametrize(
    ("rules", "error", "message"),
    [
        ({"payload": "user.ssn"}, TypeError, r"list of paths, not str: write \['user"),
        ({"payload": ["user..ssn"]}, ValueError, "payload: bad path 'user..ssn' at "),
        ({"payload": ["$"]}, ValueError, "whole payload"),
        ({"responses": ["**"]}, ValueError, "whole payload"),
        ({"args": {"crm": ["a[x]"]}}, ValueError, r"args\['crm'\]: bad path"),
        ({"args": {"": ["a"]}}, TypeError, "step names"),
        ({"http_headers": ["x bad"]}, ValueError, "not a header name"),
        ({"hook": "yes"}, TypeError, "hook must be callable"),
    ],
)
def test_bad_rules_give_clear_errors(rules, error, message):
    """A malformed rule names the rule set, the path and the place at fault."""
    with pytest.raises(error, match=message):
        Redactor(KEY, **rules)


def test_path_syntax():
    """Keys, indices, wildcards, quoted keys and the root parse as documented."""
    assert parse("user.ssn") == ("user", "ssn")
    assert parse("$.messages[*].content")[0] == "messages"
    assert parse('headers["x.y"][2]') == ("headers", "x.y", 2)
    assert parse("$") == ()
    assert repr(parse("**.password")[0]) == "**"


def test_redact_envelope_paths_wildcards_and_text():
    """Rules pick nodes anywhere; a picked secret is replaced inside text too."""
    redactor = Redactor(KEY, payload=["user.ssn", "messages[*].content", "**.password"])
    env = IntentEnvelope.model_validate(
        {
            "intent": {"name": "x"},
            "payload": {
                "user": {"ssn": SSN, "name": "Ada"},
                "note": f"my ssn is {SSN}",
                "messages": [{"role": "user", "content": "hello there"}],
                "deep": [{"password": "hunter22"}],
            },
        }
    )
    shown = redactor.redact_envelope(env).payload
    ssn = redactor.marker(SSN)
    assert shown["user"] == {"ssn": ssn, "name": "Ada"}
    assert shown["note"] == f"my ssn is {ssn}"
    assert shown["messages"][0] == {
        "role": "user",
        "content": redactor.marker("hello there"),
    }
    assert shown["deep"][0]["password"] == redactor.marker("hunter22")
    assert env.payload["user"]["ssn"] == SSN  # the original is untouched
    again = redactor.redact_envelope(redactor.redact_envelope(env))
    assert again.payload == shown  # a marker is never redacted again
    plain = IntentEnvelope.model_validate(
        {"intent": {"name": "x"}, "payload": {"a": 1}}
    )
    assert redactor.redact_envelope(plain) is plain


def test_hook_sees_where_and_path():
    """The hook is asked about every node; True redacts it."""
    calls: list[tuple[str, str]] = []

    def hook(where: str, path: str, value: object) -> bool:
        calls.append((where, path))
        return isinstance(value, str) and value.startswith("sk-")

    redactor = Redactor(KEY, hook=hook)
    env = IntentEnvelope.model_validate(
        {"intent": {"name": "x"}, "payload": {"keys": ["sk-live-1234", "ok"]}}
    )
    assert redactor.redact_envelope(env).payload == {
        "keys": [redactor.marker("sk-live-1234"), "ok"]
    }
    assert ("payload", "keys[0]") in calls
    assert ("payload", "$") not in calls  # a payload stays an object
