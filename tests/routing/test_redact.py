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
    ReplayEngine,
    ReplayHashMismatch,
    RerunOptions,
    compute_hash,
    rerun,
)
from intentusnet._util.paths import parse
from intentusnet.record.model import EventType

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


# -- through the router ------------------------------------------------------------


def test_secret_never_reaches_the_store(store):
    """Envelope, step args, answers and error texts hold markers, on every file."""
    router = kyc_router(store, standard())
    with router:
        router.route_intent(ask(SSN))
        router.route_intent(ask(SSN))  # a hit: the journal and the cache files
    assert leaked(store.root, SSN, TOKEN) == []
    record = store.load(store.list()[0].execution_id)
    assert record.header.replayable
    assert record.envelope["payload"]["user"]["ssn"] == standard().marker(SSN)
    assert compute_hash(record.envelope) == record.header.envelope_hash


def test_equal_secrets_hit_and_different_ones_miss(store):
    """The cache looks the redacted envelope up: equal SSNs hit, others run."""
    seen: list[str] = []
    with kyc_router(store, standard(), seen) as router:
        first = router.route_intent(ask(SSN))
        again = router.route_intent(ask(SSN))
        other = router.route_intent(ask(OTHER_SSN))
    assert seen == [SSN, OTHER_SSN]  # agents get the envelope as sent
    assert not first.metadata.from_replay
    assert again.metadata.from_replay
    assert not other.metadata.from_replay
    assert first.metadata.envelope_hash != other.metadata.envelope_hash


def test_live_caller_gets_the_answer_replay_gets_markers(store):
    """The caller sees the token; a cache hit and a replay see its marker."""
    redactor = standard()
    with kyc_router(store, redactor) as router:
        live = router.route_intent(ask(SSN))
        hit = router.route_intent(ask(SSN))
    marker = redactor.marker(TOKEN)
    assert live.payload == {"ok": True, "token": TOKEN, "echo": f"checked {SSN}"}
    assert hit.payload["token"] == marker
    assert hit.payload["echo"] == f"checked {redactor.marker(SSN)}"
    replayed = ReplayEngine.from_store(store, live.metadata.execution_id).replay()
    assert replayed.payload == hit.payload


def test_replay_checks_a_redacted_envelope(store):
    """replay(env=...) takes the envelope redacted; the raw one differs at its path."""
    redactor = standard()
    envelope = IntentEnvelope.model_validate(ask(SSN))
    with kyc_router(store, redactor, cache=False) as router:
        execution_id = router.route_intent(envelope).metadata.execution_id
    engine = ReplayEngine.from_store(store, execution_id)
    assert engine.replay(env=redactor.redact_envelope(envelope)).payload["ok"]
    with pytest.raises(ReplayHashMismatch) as caught:
        engine.replay(env=envelope)
    assert "payload.user.ssn" in str(caught.value)


def test_args_hash_is_stable_and_a_rerun_matches(store):
    """Equal secrets give equal argsHash; a strict re-run serves the step."""
    redactor = standard()
    with kyc_router(store, redactor, cache=False) as router:
        one = router.route_intent(ask(SSN)).metadata.execution_id
        two = router.route_intent(ask(SSN)).metadata.execution_id
        three = router.route_intent(ask(OTHER_SSN)).metadata.execution_id

        def start(execution_id: str) -> dict[str, object]:
            record = store.load(execution_id)
            return next(e.data for e in record.events if e.type == EventType.STEP_START)

        assert start(one)["args"] == {"ssn": redactor.marker(SSN)}
        assert start(one)["argsHash"] == start(two)["argsHash"]
        assert start(one)["argsHash"] != start(three)["argsHash"]
        result = rerun(ReplayEngine.from_store(store, one), router)
    assert [s.source for s in result.steps] == ["record"]
    assert result.diff is not None
    assert result.diff.same


def test_agent_error_text_is_scrubbed(store):
    """An exception quoting a redacted value is recorded with its marker."""
    router = IntentRouter(store=store, redactor=standard())

    @router.agent("kyc")
    def kyc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        raise ValueError(f"no such ssn {env.payload['user']['ssn']}")

    with router:
        response = router.route_intent(ask(SSN))
    assert SSN in response.error.message  # the caller sees what happened
    assert leaked(store.root, SSN) == []
    assert standard().marker(SSN) in store.raw(response.metadata.execution_id).decode()


def test_child_intents_inherit_the_redactor(store):
    """A child's record, and its parent's route step, hold markers only."""
    redactor = standard()
    router = IntentRouter(store=store, redactor=redactor)

    @router.agent("parent")
    def parent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        child = ctx.route(ask(env.payload["user"]["ssn"]))
        return {"child": child.payload}

    router.agent("kyc", name="kyc")(
        lambda env, ctx: {"token": TOKEN, "ssn": env.payload["user"]["ssn"]}
    )
    with router:
        response = router.route_intent(
            {"intent": {"name": "parent"}, "payload": {"user": {"ssn": SSN}}}
        )
    assert response.payload == {"child": {"token": TOKEN, "ssn": SSN}}
    # The child's token is a known secret of the parent: its answer quotes it.
    assert leaked(store.root, TOKEN, SSN) == []
    (child,) = [s for s in store.list() if s.intent_name == "kyc"]
    loaded = store.load(child.execution_id).header
    assert loaded.parent_execution_id == response.metadata.execution_id


def test_broadcast_answers_are_redacted_per_agent(store):
    """Each agent's answer in a BROADCAST response gets the response rules."""
    redactor = standard()
    router = IntentRouter(store=store, redactor=redactor)
    router.agent("kyc", name="a")(lambda env, ctx: {"token": TOKEN})
    router.agent("kyc", name="b")(lambda env, ctx: {"token": TOKEN + "-b"})
    wire = {**ask(SSN), "routing": {"strategy": "BROADCAST"}}
    with router:
        response = router.route_intent(wire)
    assert response.payload == {"a": {"token": TOKEN}, "b": {"token": TOKEN + "-b"}}
    replayed = ReplayEngine.from_store(store, response.metadata.execution_id).replay()
    assert replayed.payload == {
        "a": {"token": redactor.marker(TOKEN)},
        "b": {"token": redactor.marker(TOKEN + "-b")},
    }


def test_a_failing_hook_writes_nothing_unredacted(store):
    """A hook that raises on answers stops the recording; the answer still comes."""

    def hook(where: str, path: str, value: object) -> bool:
        if where == "response":
            raise RuntimeError(f"cannot judge {value}")
        return False

    router = IntentRouter(store=store, redactor=Redactor(KEY, hook=hook))
    router.agent("kyc", name="kyc")(lambda env, ctx: {"token": TOKEN})
    with router:
        response = router.route_intent(ask(SSN))
    assert response.payload == {"token": TOKEN}
    assert "could not redact AGENT_ATTEMPT_END: RuntimeError" in (
        response.metadata.recording_error or ""
    )
    assert leaked(store.root, TOKEN) == []
    assert not store.load(response.metadata.execution_id).header.replayable


@pytest.fixture
def pg_store(pg_dsn: str) -> Iterator[object]:
    """A PostgresExecutionStore on a new database (as in tests/store)."""
    from intentusnet.store import PostgresExecutionStore

    with PostgresExecutionStore(pg_dsn) as store:
        yield store


def test_secret_never_reaches_postgres(pg_store, pg_dsn):
    """Over PostgreSQL, no row of any table holds the secret; the cache still hits."""
    import psycopg

    with kyc_router(pg_store, standard()) as router:
        first = router.route_intent(ask(SSN))
        again = router.route_intent(ask(SSN))
    assert again.metadata.from_replay
    assert again.metadata.original_execution_id == first.metadata.execution_id
    with psycopg.connect(pg_dsn) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'intentusnet_%'"
            )
        ]
        assert "intentusnet_lines" in tables
        for table in tables:
            text = f"SELECT count(*) FROM {table} t WHERE t::text LIKE %s"
            for secret in (SSN, TOKEN):
                hex_secret = secret.encode().hex()
                (plain,) = conn.execute(text, (f"%{secret}%",)).fetchone()
                (raw,) = conn.execute(text, (f"%{hex_secret}%",)).fetchone()
                assert (plain, raw) == (0, 0), f"{secret} in {table}"
        (lines,) = conn.execute("SELECT count(*) FROM intentusnet_lines").fetchone()
    assert lines > 0


def test_step_outputs_and_async_routing(store):
    """A whole step output becomes its marker; route() serves hits redacted too."""
    import asyncio

    redactor = Redactor(KEY, outputs={"vault.get": ["$"]})
    router = IntentRouter(store=store, cache=ReplayCache(), redactor=redactor)

    @router.agent("login")
    async def login(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        token = await ctx.astep("vault.get", {}, _fetch_token)
        return {"header": f"Bearer {token}"}

    async def main() -> tuple[object, object]:
        first = await router.route({"intent": {"name": "login"}})
        again = await router.route({"intent": {"name": "login"}})
        return first, again

    with router:
        first, again = asyncio.run(main())
    assert first.payload == {"header": f"Bearer {TOKEN}"}
    assert again.metadata.from_replay
    assert again.payload == {"header": f"Bearer {redactor.marker(TOKEN)}"}
    record = store.load(first.metadata.execution_id)
    (end,) = [e.data for e in record.events if e.type == EventType.STEP_END]
    assert end["output"] == redactor.marker(TOKEN)
    assert leaked(store.root, TOKEN) == []


async def _fetch_token() -> str:
    return TOKEN


def test_an_override_given_to_a_rerun_is_recorded_redacted(store):
    """override= is an output like a live step's: sealed as its marker."""
    redactor = Redactor(KEY, outputs={"vault.get": ["$"]})
    router = IntentRouter(store=store, redactor=redactor)
    got: list[object] = []

    @router.agent("login")
    def login(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        token = ctx.step("vault.get", {}, lambda: "tok-old-0123456789")
        got.append(token)
        return {"ok": True}

    with router:
        first = router.route_intent({"intent": {"name": "login"}})
        engine = ReplayEngine.from_store(store, first.metadata.execution_id)
        result = rerun(engine, router, RerunOptions(override={"vault.get": TOKEN}))
    assert got[-1] == TOKEN  # the step's code gets the output as given
    assert result.record is not None
    (end,) = [e.data for e in result.record.events if e.type == EventType.STEP_END]
    assert end["overridden"] is True
    assert end["output"] == redactor.marker(TOKEN)
    assert leaked(store.root, TOKEN) == []
