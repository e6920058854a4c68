"""Recorded MCP calls answered through the store's step index (no subprocess)."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    MemoryExecutionStore,
    PostgresExecutionStore,
    record_steps,
)
from intentusnet._util.jsonvalue import JSONValue
from intentusnet._util.time import parse_utc
from intentusnet.errors import RecordIntegrityError
from intentusnet.hashing import compute_hash
from intentusnet.integrations.mcp.calls import ASKER, Asker
from intentusnet.integrations.mcp.proxy import session_envelope
from intentusnet.integrations.mcp.sources import recorded_calls
from intentusnet.routing.execution import jsonish
from intentusnet.routing.seams import ExecutionOptions

UPSTREAM = ["python", "server.py"]
ENVELOPE = session_envelope(UPSTREAM)
READ = "mcp:resources/read"
MEMO = {"uri": "memo://a"}
#: One recorded request: (step name, arguments, answer).
Call = tuple[str, dict[str, JSONValue], JSONValue]
#: The sessions ``_session`` records name no revision (no ``initialize``, no
#: ``mcp:asked-by``): records of stateless requests from before revisions were
#: recorded, which answer stateless requests.
STATELESS = Asker("2026-07-28", stateless=True)


def _session(store: Any, calls: Sequence[Call]) -> str:
    """Record one MCP session of UPSTREAM holding ``calls`` as the proxy does."""
    router = IntentRouter(store=store)

    @router.agent("mcp.session", name="mcp-proxy")
    def proxy(envelope: Any, ctx: Any) -> dict[str, int]:
        for name, args, answer in calls:
            ctx.step(name, args, lambda answer=answer, **_: answer)
        return {"requests": len(calls)}

    execution_id = router.route_intent(ENVELOPE).metadata.execution_id
    router.close()
    assert execution_id is not None
    return execution_id


def _add(a: int, b: int) -> Call:
    return "mcp:tools/call:add", {"a": a, "b": b}, {"content": [a + b]}


def _text(calls: Any, call: Call, asker: Asker = STATELESS) -> JSONValue:
    """The answer ``calls`` gives to ``call`` by ``asker`` (None: not recorded)."""
    found = calls.find(call[0], jsonish(call[1])[1], asker)
    return None if found is None else found[1].output


def _replay(store: Any, **options: Any) -> Any:
    options = {"force": False, "required": True, **options}
    return recorded_calls(store, compute_hash(ENVELOPE), None, **options)


def test_every_session_answers_more_than_fifty(tmp_path: Path) -> None:
    """60 sessions: the oldest one's call is answered, as is the newest's."""
    store = FileExecutionStore(tmp_path)
    for n in range(60):
        _session(store, [_add(n, 1000)])
    calls = _replay(store)
    assert _text(calls, _add(0, 1000)) == {"content": [1000]}
    assert _text(calls, _add(59, 1000)) == {"content": [1059]}
    assert _text(calls, _add(0, 1)) is None
    store.close()


def test_the_newest_session_holding_a_call_answers_it(tmp_path: Path) -> None:
    """Two sessions answer the same call differently: the newer one wins."""
    store = MemoryExecutionStore()
    _session(store, [("mcp:tools/call:now", {}, "old")])
    _session(store, [("mcp:tools/call:now", {}, "new")])
    _session(store, [_add(1, 2)])
    assert _text(_replay(store), ("mcp:tools/call:now", {}, None)) == "new"


def test_record_id_narrows_to_one_session(tmp_path: Path) -> None:
    """--record ID: only that session answers, though newer ones hold the call."""
    store = FileExecutionStore(tmp_path)
    old = _session(store, [("mcp:tools/call:now", {}, "old"), _add(1, 2)])
    _session(store, [("mcp:tools/call:now", {}, "new"), _add(3, 4)])
    calls = recorded_calls(store, None, old, force=False, required=True)
    assert _text(calls, ("mcp:tools/call:now", {}, None)) == "old"
    assert _text(calls, _add(3, 4)) is None
    store.close()


def _tamper(store: FileExecutionStore, execution_id: str) -> None:
    """Change one byte of a record's answer (its hash chain no longer holds)."""
    path = next(store.root.rglob(f"{execution_id}*"))
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"new"', b'"bad"', 1))
    assert path.read_bytes() != data


def test_a_tampered_session_is_not_served(tmp_path: Path) -> None:
    """The index points at a changed record: the next recording answers, or none."""
    store = FileExecutionStore(tmp_path)
    _session(store, [("mcp:tools/call:now", {}, "old")])
    newest = _session(store, [("mcp:tools/call:now", {}, "new")])
    _tamper(store, newest)
    now = ("mcp:tools/call:now", {}, None)
    assert _text(_replay(store), now) == "old"
    with pytest.raises(RecordIntegrityError):  # --record naming it: refused
        recorded_calls(store, None, newest, force=True, required=True)
    store.close()
    lone = FileExecutionStore(tmp_path / "lone")
    tampered = _session(lone, [("mcp:tools/call:now", {}, "new")])
    _session(lone, [_add(1, 2)])
    _tamper(lone, tampered)
    assert _text(_replay(lone), now) is None  # a miss, never the changed answer
    lone.close()


def test_a_replay_serves_the_call_that_came_before_the_change(tmp_path: Path) -> None:
    """An outdated answer still answers its own turn; asked again, it is refused."""
    store = MemoryExecutionStore()
    updated = ("mcp:notifications/resources/updated", MEMO, None)
    _session(store, [(READ, MEMO, "first")])
    _session(store, [(READ, MEMO, "before the change"), updated])
    calls = _replay(store)
    read = (READ, MEMO, None)
    assert _text(calls, read) == "before the change"  # its turn: it came first
    assert _text(calls, read) is None  # asked after the change: stale
    _session(store, [updated, (READ, MEMO, "after")])
    calls = _replay(store)
    assert [_text(calls, read), _text(calls, read)] == ["after", "after"]


def test_a_cache_session_never_serves_an_outdated_answer(tmp_path: Path) -> None:
    """resources/read before a resources/updated of its URI: an older one answers."""
    store = MemoryExecutionStore()
    updated = ("mcp:notifications/resources/updated", MEMO, None)
    _session(store, [(READ, MEMO, "first")])
    _session(store, [(READ, MEMO, "stale"), updated])
    calls = recorded_calls(
        store,
        compute_hash(ENVELOPE),
        None,
        force=False,
        required=False,
        clock=time.time,
    )
    assert _decide(calls, (READ, MEMO, None)) == ("serve", "first")


def _decide(calls: Any, call: Call, asker: Asker = STATELESS) -> tuple[str, JSONValue]:
    """What a cache session does with ``call`` by ``asker``: serve (what) or go live."""

    def decide() -> Any:
        ASKER.set(asker)
        args_hash = jsonish(call[1])[1]
        return calls.decide(call[0], call[1], args_hash, side_effect=False)

    decision = contextvars.copy_context().run(decide)
    recorded = decision.recorded
    return decision.action, None if recorded is None else recorded.output


@pytest.mark.parametrize(
    ("ttl_ms", "later", "served"),
    [
        (60_000, 30.0, True),  # younger than its time to live
        (60_000, 61.0, False),  # older: forwarded
        (0, 0.0, False),  # ttlMs 0: stale at once
        (None, 10**6, True),  # no hint: only a notification outdates it
    ],
)
def test_a_cache_session_honours_ttl_ms(
    ttl_ms: int | None, later: float, served: bool
) -> None:
    """resources/read carrying ttlMs is served from the cache only while fresh."""
    store = MemoryExecutionStore()
    answer: dict[str, JSONValue] = {"contents": [{"uri": "memo://a", "text": "x"}]}
    if ttl_ms is not None:
        answer["ttlMs"] = ttl_ms
    record = store.load(_session(store, [(READ, MEMO, answer)]))
    (end,) = [e for e in record.events if e.type == "STEP_END"]
    came = (parse_utc(record.header.created_utc) or 0) / 1e6 + end.at_ms / 1000
    calls = recorded_calls(
        store,
        compute_hash(ENVELOPE),
        None,
        force=False,
        required=False,
        clock=lambda: came + later,
    )
    action, output = _decide(calls, (READ, MEMO, None))
    assert (action == "serve", output == answer) == (served, served)
    replayed = _replay(store)  # a replay has no clock: served whatever its age
    assert _text(replayed, (READ, MEMO, None)) == answer


def test_a_live_notification_drops_what_it_outdates() -> None:
    """In a cache session a live resources/updated: the recorded read is forwarded."""
    store = MemoryExecutionStore()
    _session(store, [(READ, MEMO, "recorded"), _add(1, 2)])
    calls = recorded_calls(
        store, compute_hash(ENVELOPE), None, force=False, required=False
    )
    assert _decide(calls, (READ, MEMO, None)) == ("serve", "recorded")
    calls.notified("mcp:notifications/resources/updated", MEMO)
    assert _decide(calls, (READ, MEMO, None)) == ("live", None)
    assert _decide(calls, _add(1, 2)) == ("serve", {"content": [3]})


def _came(record: Any) -> float:
    """When the record's (one) step ended, in epoch seconds."""
    (end,) = [e for e in record.events if e.type == "STEP_END"]
    return (parse_utc(record.header.created_utc) or 0) / 1e6 + end.at_ms / 1000


def test_an_answer_a_cache_session_served_is_as_old_as_the_original() -> None:
    """A served answer recorded again keeps its first time: its ttlMs is not reset."""
    store = MemoryExecutionStore()
    answer = {"contents": [{"uri": "memo://a", "text": "x"}], "ttlMs": 60_000}
    original = store.load(_session(store, [(READ, MEMO, answer)]))
    came = _came(original)

    def cached(now: float) -> Any:
        return recorded_calls(
            store,
            compute_hash(ENVELOPE),
            None,
            force=False,
            required=False,
            clock=lambda: now,
        )

    # a cache session serves it (fresh then) and records it as served
    router = IntentRouter(store=store)

    @router.agent("mcp.session", name="mcp-proxy")
    def proxy(envelope: Any, ctx: Any) -> JSONValue:
        return ctx.step(READ, MEMO, lambda **_: "forwarded")

    def route() -> Any:
        ASKER.set(STATELESS)  # as the proxy's session does for each request
        return router.route_intent(
            ENVELOPE, options=ExecutionOptions(cassette=cached(came))
        )

    reply = contextvars.copy_context().run(route)
    router.close()
    assert reply.payload == answer
    served = store.load(reply.metadata.execution_id)
    assert record_steps(served)[0].source == "record"
    again = _came(served)
    assert again > came
    # later than the original's ttl, sooner than the served copy's
    halfway = (again - came) / 2
    assert _decide(cached(again + 60 - halfway), (READ, MEMO, None)) == ("live", None)
    assert _decide(cached(came + 59), (READ, MEMO, None)) == ("serve", answer)


def test_postgres_answers_alike_and_refuses_a_changed_session(pg_dsn: str) -> None:
    """Over PostgreSQL: every session answers; a changed line is never served."""
    with PostgresExecutionStore(pg_dsn) as pg_store:
        _every_session_of(pg_store)


def _every_session_of(pg_store: Any) -> None:
    for n in range(55):
        _session(pg_store, [_add(n, 1000)])
    _session(pg_store, [("mcp:tools/call:now", {}, "old")])
    newest = _session(pg_store, [("mcp:tools/call:now", {}, "new")])
    changed = pg_store._db.run(
        "UPDATE intentusnet_lines SET line = "
        "convert_to(replace(convert_from(line, 'UTF8'), '\"new\"', '\"bad\"'), 'UTF8') "
        "WHERE execution_id = %s "
        "AND position('\"new\"' in convert_from(line, 'UTF8')) > 0 RETURNING seq",
        [newest],
    )
    assert changed  # the answer's line now says "bad"
    calls = _replay(pg_store)
    assert _text(calls, _add(0, 1000)) == {"content": [1000]}
    assert _text(calls, ("mcp:tools/call:now", {}, None)) == "old"


COUNTER = "mcp:tools/call:counter"
V2025 = "2025-11-25"
V2026 = "2026-07-28"


def _revision_session(store: Any, asked_in: JSONValue, answer: JSONValue) -> str:
    """Record a session whose counter call was asked in ``asked_in``, as the proxy does.

    ``"init:VERSION"``: a session that negotiated VERSION with ``initialize``;
    anything else: a stateless call whose ``mcp:asked-by`` step names it.
    """
    router = IntentRouter(store=store)

    @router.agent("mcp.session", name="mcp-proxy")
    def proxy(envelope: Any, ctx: Any) -> JSONValue:
        if isinstance(asked_in, str) and asked_in.startswith("init:"):
            version = asked_in.removeprefix("init:")
            init = {"protocolVersion": version}
            ctx.step("mcp:initialize", init, lambda **_: init)
            return ctx.step(COUNTER, {}, lambda **_: answer)

        def call(**_: Any) -> JSONValue:
            asked = {"protocolVersion": asked_in}
            ctx.step("mcp:asked-by", asked, lambda **_: None)
            return answer

        return ctx.step(COUNTER, {}, call)

    execution_id = router.route_intent(ENVELOPE).metadata.execution_id
    router.close()
    assert execution_id is not None
    return execution_id


@pytest.mark.parametrize(
    ("asker", "served"),
    [
        (Asker(V2025), "a 2025 answer"),  # a 2025 session's call
        (Asker(V2026, stateless=True), "a 2026 answer"),  # a stateless request
        (Asker(None), "the malformed request's error"),  # one naming no revision
        (Asker("2025-06-18"), None),  # a revision nothing was recorded in
        (Asker(V2025, stateless=True), None),  # stateless, naming 2025
        (Asker(V2026), None),  # a session that negotiated 2026
    ],
)
def test_an_answer_is_given_only_in_the_revision_it_was_asked_in(
    asker: Asker, served: str | None
) -> None:
    """Each revision (or none) gets its own recorded answer, never another's."""
    store = MemoryExecutionStore()
    _revision_session(store, f"init:{V2025}", "a 2025 answer")
    _revision_session(store, V2026, "a 2026 answer")
    _revision_session(store, None, "the malformed request's error")
    assert _text(_replay(store), (COUNTER, {}, None), asker) == served
    cached = recorded_calls(
        store, compute_hash(ENVELOPE), None, force=False, required=False
    )
    action, output = _decide(cached, (COUNTER, {}, None), asker)
    assert (action, output) == (("serve", served) if served else ("live", None))


@pytest.mark.parametrize(
    ("asker", "served"),
    [
        (Asker(V2025), "old 2025"),  # the revision its initialize negotiated
        (Asker("2025-06-18"), None),
        (Asker(V2026, stateless=True), "old stateless"),  # the old stateless record
        (Asker(None), None),  # a request naming no revision: neither
    ],
)
def test_records_from_before_revisions_answer_the_revision_they_recorded(
    asker: Asker, served: str | None
) -> None:
    """Records without mcp:asked-by: a session's initialize says its revision."""
    store = MemoryExecutionStore()
    _session(store, [(COUNTER, {}, "old stateless")])
    _revision_session(store, f"init:{V2025}", "old 2025")
    assert _text(_replay(store), (COUNTER, {}, None), asker) == served


def test_initialize_prefers_a_session_of_the_asked_revision() -> None:
    """initialize: a session that negotiated the client's revision, else the newest."""
    store = MemoryExecutionStore()
    _revision_session(store, "init:2025-06-18", "old")
    _revision_session(store, f"init:{V2025}", "new")
    init = ("mcp:initialize", {"protocolVersion": "2025-06-18"}, None)
    assert _text(_replay(store), init, Asker("2025-06-18")) == {
        "protocolVersion": "2025-06-18"
    }
    assert _text(_replay(store), init, Asker("2024-11-05")) == {
        "protocolVersion": V2025
    }


def _private_session(store: Any, client: str | None, text: str, scope: str) -> str:
    """Record a stateless resources/read by ``client`` whose answer has ``scope``."""
    router = IntentRouter(store=store)
    answer = {"contents": [{"uri": "memo://a", "text": text}], "cacheScope": scope}

    @router.agent("mcp.session", name="mcp-proxy")
    def proxy(envelope: Any, ctx: Any) -> JSONValue:
        def read(**_: Any) -> JSONValue:
            asked: dict[str, JSONValue] = {"protocolVersion": V2026}
            if client is not None:
                asked["client"] = client
            ctx.step("mcp:asked-by", asked, lambda **_: None)
            return answer

        return ctx.step(READ, MEMO, read)

    execution_id = router.route_intent(ENVELOPE).metadata.execution_id
    router.close()
    assert execution_id is not None
    return execution_id


CLIENTS = [None, "sha256:aa", "sha256:bb", "anonymous"]


@pytest.mark.parametrize("recorded_for", CLIENTS)
@pytest.mark.parametrize("asked_by", CLIENTS)
def test_a_private_answer_goes_only_to_its_own_client(
    recorded_for: str | None, asked_by: str | None
) -> None:
    """cacheScope private: the same client only (the anonymous ones are one)."""
    store = MemoryExecutionStore()
    _private_session(store, "sha256:public", "public", "public")
    _private_session(store, recorded_for, "private", "private")
    asker = Asker(V2026, stateless=True, client=asked_by)
    expected = "private" if recorded_for == asked_by else "public"
    found = _text(_replay(store), (READ, MEMO, None), asker)
    assert isinstance(found, dict)
    assert found["contents"][0]["text"] == expected  # type: ignore[index]
    cached = recorded_calls(
        store, compute_hash(ENVELOPE), None, force=False, required=False
    )
    action, output = _decide(cached, (READ, MEMO, None), asker)
    assert action == "serve"
    assert isinstance(output, dict)
    assert output["contents"][0]["text"] == expected  # type: ignore[index]
