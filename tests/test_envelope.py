import datetime as dt

import orjson
import pytest

from intentusnet import (
    CacheDirective,
    EnvelopeValidationError,
    IntentEnvelope,
    IntentRef,
    RoutingOptions,
    RoutingStrategy,
    compute_hash,
)

WIRE_KEYS = {
    None: {"version", "intent", "payload", "context", "metadata", "routing"},
    "intent": {"name", "version"},
    "context": {"caller", "tenant", "priority", "tags"},
    "metadata": {"requestId", "traceId", "createdAt", "source", "identityChain"},
    "routing": {"strategy", "targetAgent", "fallbackAgents", "timeoutMs", "cache"},
}


def nested_dict(levels):
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def nested_list(levels):
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def assert_clean(exc, path):
    """The error names ``path`` and reads as one plain line, not a traceback."""
    text = str(exc)
    assert exc.path == path
    assert text.startswith(f"{path}: ") if path else text
    assert "\n" not in text
    assert len(text) < 300
    for noise in ("Traceback", "pydantic", "errors.pydantic.dev", "input_value"):
        assert noise not in text


# -- defaults --------------------------------------------------------------------


def test_only_the_intent_is_required():
    """An envelope from just an intent gets every documented default."""
    env = IntentEnvelope(intent=IntentRef(name="summarize"))
    assert env.version == "1.0"
    assert env.intent.version == "1.0"
    assert env.payload == {}
    assert (env.context.caller, env.context.tenant) == (None, None)
    assert (env.context.priority, env.context.tags) == (0, [])
    assert env.routing.strategy is RoutingStrategy.DIRECT
    assert env.routing.target_agent is None
    assert env.routing.fallback_agents == []
    assert env.routing.timeout_ms is None
    assert env.routing.cache is CacheDirective.DEFAULT


def test_request_id_is_filled_and_unique():
    """Each envelope gets its own request id."""
    ids = {IntentEnvelope(intent=IntentRef(name="x")).metadata.request_id for _ in "ab"}
    assert len(ids) == 2
    assert all(i.startswith("req-") and len(i) > 8 for i in ids)


def test_created_time_is_now_in_utc():
    """The created time is filled in as an aware UTC datetime, close to now."""
    before = dt.datetime.now(dt.UTC)
    created = IntentEnvelope(intent=IntentRef(name="x")).metadata.created_at
    after = dt.datetime.now(dt.UTC)
    assert created.utcoffset() == dt.timedelta(0)
    assert before <= created <= after


# -- the wire form -----------------------------------------------------------------


def full_envelope():
    return IntentEnvelope.model_validate(
        {
            "intent": {"name": "summarize", "version": "2.0"},
            "payload": {"text": "hi", "n": [1, 2.5, None, True]},
            "context": {"caller": "c", "tenant": "t", "priority": 3, "tags": ["a"]},
            "metadata": {
                "requestId": "req-1",
                "traceId": "tr-1",
                "createdAt": "2026-01-02T03:04:05Z",
                "source": "cli",
                "identityChain": ["alice"],
            },
            "routing": {
                "strategy": "FALLBACK",
                "targetAgent": "a",
                "fallbackAgents": ["b", "c"],
                "timeoutMs": 1500,
                "cache": "bypass",
            },
        }
    )


def test_wire_form_is_camel_case():
    """to_wire and model_dump(by_alias) use exactly the camelCase wire keys."""
    env = full_envelope()
    for wire in (env.to_wire(), env.model_dump(mode="json", by_alias=True)):
        assert set(wire) == WIRE_KEYS[None]
        for part in ("intent", "context", "metadata", "routing"):
            assert set(wire[part]) == WIRE_KEYS[part]
        assert wire["routing"]["targetAgent"] == "a"
        assert wire["routing"]["fallbackAgents"] == ["b", "c"]
        assert wire["routing"]["timeoutMs"] == 1500
        assert wire["metadata"]["requestId"] == "req-1"


def test_wire_values_are_plain_json():
    """The wire form holds only JSON types: enums as strings, time as ISO 8601 UTC."""
    wire = full_envelope().to_wire()
    assert wire["routing"]["strategy"] == "FALLBACK"
    assert type(wire["routing"]["strategy"]) is str
    assert type(wire["routing"]["cache"]) is str
    created = dt.datetime.fromisoformat(wire["metadata"]["createdAt"])
    assert created == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert orjson.loads(orjson.dumps(wire)) == wire


def test_wire_round_trip():
    """model_validate(to_wire()) gives an equal envelope, also through JSON text."""
    env = full_envelope()
    again = IntentEnvelope.model_validate(env.to_wire())
    assert again == env
    assert again.to_wire() == env.to_wire()
    from_text = IntentEnvelope.model_validate_json(orjson.dumps(env.to_wire()))
    assert from_text.to_wire() == env.to_wire()
    assert compute_hash(from_text) == compute_hash(env)


@pytest.mark.parametrize(
    "created",
    [
        "2026-01-02T03:04:05Z",
        "2026-01-02T03:04:05.250000+02:00",
        "2026-01-02T03:04:05.000001",
        "0999-12-31T23:59:59-01:30",
    ],
)
def test_to_wire_is_pydantic_dump_and_a_copy(created):
    """to_wire() is the pydantic dump, a copy the caller may change."""
    wire = full_envelope().to_wire()
    wire["payload"] = {"t": ("a", {"b": (1, 2.5)}), "deep": [[{"x": None}]]}
    wire["metadata"]["createdAt"] = created
    env = IntentEnvelope.model_validate(wire)
    copy = env.to_wire()
    assert copy == env.model_dump(mode="json", by_alias=True)
    assert copy["payload"]["t"] == ["a", {"b": [1, 2.5]}]  # tuples become lists
    copy["payload"]["deep"][0][0]["x"] = 1
    copy["context"]["tags"].append("changed")
    assert env.payload["deep"][0][0]["x"] is None
    assert env.context.tags == ["a"]


def test_snake_case_names_are_accepted_too():
    """Python field names validate to the same envelope as the wire aliases."""
    by_name = IntentEnvelope.model_validate(
        {"intent": {"name": "x"}, "routing": {"target_agent": "a", "timeout_ms": 5}}
    )
    by_alias = IntentEnvelope.model_validate(
        {"intent": {"name": "x"}, "routing": {"targetAgent": "a", "timeoutMs": 5}}
    )
    assert by_name.routing == by_alias.routing


def test_routing_strategy_values():
    """RoutingStrategy has exactly DIRECT, FALLBACK, BROADCAST and PARALLEL."""
    assert [s.value for s in RoutingStrategy] == [
        "DIRECT",
        "FALLBACK",
        "BROADCAST",
        "PARALLEL",
    ]
    for strategy in RoutingStrategy:
        routing = RoutingOptions.model_validate({"strategy": strategy.value})
        assert routing.strategy is strategy


def test_unknown_strategy_lists_the_valid_ones():
    """A wrong strategy is refused with the valid values in the message."""
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope.model_validate(
            {"intent": {"name": "x"}, "routing": {"strategy": "ROUND_ROBIN"}}
        )
    assert_clean(info.value, "routing.strategy")
    for value in ("DIRECT", "FALLBACK", "BROADCAST", "PARALLEL"):
        assert value in str(info.value)


def test_envelope_is_immutable():
    """Fields of an envelope cannot be reassigned after construction."""
    env = IntentEnvelope(intent=IntentRef(name="x"))
    with pytest.raises(ValueError, match="frozen"):
        env.payload = {"a": 1}  # type: ignore[misc]


# -- unknown fields ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"intent": {"name": "x"}, "priority": 1}, "priority"),
        ({"intent": {"name": "x", "lang": "en"}}, "intent.lang"),
        ({"intent": {"name": "x"}, "context": {"user": "u"}}, "context.user"),
        ({"intent": {"name": "x"}, "metadata": {"spanId": "s"}}, "metadata.spanId"),
        ({"intent": {"name": "x"}, "routing": {"retries": 2}}, "routing.retries"),
        # keys that name the constructor's own parameters or the class
        ({"intent": {"name": "x"}, "self": 1}, "self"),
        ({"intent": {"name": "x"}, "data": 1}, "data"),
        ({"intent": {"name": "x"}, "__class__": "X"}, "__class__"),
    ],
)
def test_unknown_fields_are_rejected(data, path):
    """Unknown fields, top-level or nested, are refused and named."""
    with pytest.raises(EnvelopeValidationError, match="unknown field") as info:
        IntentEnvelope.model_validate(data)
    assert_clean(info.value, path)


def test_non_string_keys_are_refused():
    """A mapping with a non-string key is an envelope error, not a TypeError."""
    with pytest.raises(EnvelopeValidationError, match="keys must be strings"):
        IntentEnvelope.model_validate({1: "x", "intent": {"name": "x"}})


# -- hostile envelopes ------------------------------------------------------------


def named(**fields):
    """A wire envelope with a valid intent and the given top-level fields."""
    return {"intent": {"name": "x"}, **fields}


WRONG = [
    ({}, "intent", "required"),
    ({"payload": {"a": 1}}, "intent", "required"),
    ({"intent": "summarize"}, "intent", "dictionary"),
    ({"intent": {}}, "intent.name", "required"),
    ({"intent": {"name": 3}}, "intent.name", "string"),
    ({"intent": {"name": ""}}, "intent.name", "at least 1"),
    ({"intent": {"name": "x" * 300}}, "intent.name", "at most 256"),
    (named(version="2.0"), "version", "1.0"),
    (named(payload=[1]), "payload", "JSON object"),
    (named(payload=None), "payload", "JSON object"),
    (named(payload="{}"), "payload", "JSON object"),
    (named(context={"priority": "high"}), "context.priority", "integer"),
    (named(context={"tags": [1]}), "context.tags[0]", "string"),
    (named(metadata={"createdAt": "soon"}), "metadata.createdAt", "datetime"),
    (named(routing={"timeoutMs": "5s"}), "routing.timeoutMs", "integer"),
    (named(routing={"timeoutMs": 0}), "routing.timeoutMs", "greater than 0"),
    (named(routing={"fallbackAgents": "b"}), "routing.fallbackAgents", "list"),
    (named(routing={"cache": "never"}), "routing.cache", "no_store"),
]


@pytest.mark.parametrize(("data", "path", "words"), WRONG, ids=[w[1] for w in WRONG])
def test_wrong_fields_name_their_path(data, path, words):
    """Missing or mistyped fields are refused with their wire path and a reason."""
    with pytest.raises(EnvelopeValidationError, match=words) as info:
        IntentEnvelope.model_validate(data)
    assert_clean(info.value, path)


def test_constructor_reports_like_model_validate():
    """Keyword construction raises the same clean, path-naming error."""
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope(intent={"name": "x"}, routing={"timeout_ms": -1})
    assert info.value.path.startswith("routing.timeout")
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope(payload={})
    assert_clean(info.value, "intent")


def test_several_errors_report_the_first_and_a_count():
    """With several problems, the first is named and the rest counted."""
    with pytest.raises(EnvelopeValidationError, match=r"\(and 1 more\)") as info:
        IntentEnvelope.model_validate(
            {"intent": {"name": 1}, "routing": {"timeoutMs": "x"}}
        )
    assert info.value.path == "intent.name"


@pytest.mark.parametrize("data", [[1], "envelope", None, 3, b"{}", ("a", 1)])
def test_non_dict_input_is_refused(data):
    """Anything but a JSON object is refused as a whole envelope."""
    with pytest.raises(EnvelopeValidationError, match="must be a JSON object") as info:
        IntentEnvelope.model_validate(data)
    assert info.value.path == ""


def test_payload_paths_are_precise():
    """A bad payload value is named down to its index and key."""
    items = [{"price": 1}, {"price": 2}, {"price": 3}, {"price": float("inf")}]
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope(intent=IntentRef(name="x"), payload={"items": items})
    assert_clean(info.value, "payload.items[3].price")
    assert info.value.code == "envelope_invalid"
    assert info.value.exit_code == 2
    assert isinstance(info.value, ValueError)


DEEP = 10_000


@pytest.mark.parametrize(
    ("data", "path_start"),
    [
        (named(payload=nested_dict(DEEP)), "payload.a.a.a"),
        (named(payload={"l": nested_list(DEEP)}), "payload.l[0]"),
        ({"intent": {"name": "x", "extra": nested_dict(DEEP)}}, "intent.extra"),
        ({"intent": nested_dict(DEEP)}, "intent"),
        (named(context={"tags": nested_list(DEEP)}), "context.tags"),
        (named(deep=nested_list(DEEP)), "deep"),
    ],
    ids=["payload dict", "payload list", "unknown field", "intent", "tags", "top"],
)
def test_deep_nesting_is_refused_not_a_recursion_error(data, path_start):
    """10,000 nested levels anywhere give a clean validation error."""
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope.model_validate(data)
    assert info.value.path.startswith(path_start)
    assert len(str(info.value)) < 300
    assert "\n" not in str(info.value)


def test_deep_nesting_in_json_text_is_refused():
    """10,000 nested arrays in JSON text give a clean validation error."""
    text = '{"intent":{"name":"x"},"payload":{"a":' + "[" * DEEP + "]" * DEEP + "}}"
    with pytest.raises(EnvelopeValidationError, match="not valid JSON"):
        IntentEnvelope.model_validate_json(text)


@pytest.mark.parametrize(
    "text",
    [
        b'{"intent": ',
        b"",
        b"\xff\xfe",
        b'{"intent": {"name": "x"}} trailing',
        b'{"intent": {"name": "x"}, "payload": {"a": NaN}}',
        b'{"intent": {"name": "x"}, "payload": {"a": "\\ud800"}}',
        b'{"intent": {"name": "x"}, "intent": {"name": "y"}}',
        b'{"intent": {"name": "x"}, "payload": {"a": [{"b": 1, "b": 1}]}}',
        b'{"intent": {"name": "x"}, "payload": {"a\\u0000b": 1}}',
        b'{"intent": {"name": "x", "name\\u0000": "y"}}',
    ],
    ids=[
        "truncated",
        "empty",
        "not utf-8",
        "trailing",
        "NaN",
        "lone surrogate",
        "duplicate key",
        "duplicate nested key",
        "NUL in a payload key",
        "NUL in an intent key",
    ],
)
def test_invalid_json_text_is_refused(text):
    """Text that is not JSON is refused with a one-line "not valid JSON" error."""
    with pytest.raises(EnvelopeValidationError, match=r"^not valid JSON") as info:
        IntentEnvelope.model_validate_json(text)
    assert "\n" not in str(info.value)


def test_equal_keys_in_different_objects_and_nul_in_values_are_json():
    """A key repeated across objects, or a NUL inside a value, is no fault."""
    text = (
        b'{"intent": {"name": "x"}, "payload": {"name": "a\\u0000", "p": {"name": 1}}}'
    )
    env = IntentEnvelope.model_validate_json(text)
    assert env.payload == {"name": "a\x00", "p": {"name": 1}}


def test_json_text_must_hold_an_object():
    """JSON text holding an array is refused as a whole envelope."""
    with pytest.raises(EnvelopeValidationError, match="must be a JSON object"):
        IntentEnvelope.model_validate_json(b"[1, 2]")


def test_json_text_errors_name_the_path():
    """Valid JSON text with a bad field names the field like model_validate does."""
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope.model_validate_json(b'{"intent": {"name": "x", "v": 1}}')
    assert_clean(info.value, "intent.v")


def ten_mb_payload():
    # ``weight`` is an integral float: hashing takes the slower reference path.
    row = {"id": 0, "score": 0.25, "weight": 1.0, "text": "lorem ipsum " * 80}
    rows = [{**row, "id": i} for i in range(10_000)]
    payload = {"rows": rows}
    assert len(orjson.dumps(payload)) > 10_000_000
    return payload


def test_ten_megabyte_payload_is_handled():
    """A 10 MB payload is accepted and hashed alike in both forms, or refused."""
    payload = ten_mb_payload()
    text = orjson.dumps({"intent": {"name": "x"}, "payload": payload})
    try:
        env = IntentEnvelope(intent=IntentRef(name="x"), payload=payload)
        from_text = IntentEnvelope.model_validate_json(text)
    except EnvelopeValidationError as exc:
        assert_clean(exc, exc.path)
    else:
        assert compute_hash(env) == compute_hash(from_text)
        assert compute_hash(env.to_wire()) == compute_hash(env)


def _router_answers():
    """Responses as the router makes them: success, fallback, all failed, broadcast."""
    from intentusnet import IntentRouter

    router = IntentRouter()
    router.agent("ok", name="good")(lambda env, ctx: {"got": env.payload, "t": (1, 2)})
    router.agent("fails", name="bad", priority=1)(lambda env, ctx: 1 / 0)
    router.agent("fails", name="good2", priority=2)(lambda env, ctx: {"n": 2.5})
    with router:
        yield router.route_intent({"intent": {"name": "ok"}, "payload": {"a": [1]}})
        for strategy in ("DIRECT", "FALLBACK", "BROADCAST", "PARALLEL"):
            yield router.route_intent(
                {"intent": {"name": "fails"}, "routing": {"strategy": strategy}}
            )
        yield router.route_intent({"intent": {"name": "missing"}})


def test_response_wire_form_validates_back_to_the_same_answer():
    """Every answer's wire form, as the store records it, validates back to it."""
    from intentusnet import AgentResponse

    answers = list(_router_answers())
    assert {a.status for a in answers} == {"success", "error"}
    answers.append(
        AgentResponse.model_validate(
            {
                "status": "error",
                "error": {"code": "AGENT_ERROR", "message": "m", "details": {"k": [1]}},
                "metadata": {"fromReplay": True, "originalExecutionId": "exec-1"},
            }
        )
    )
    answers.append(AgentResponse.model_validate({"metadata": {"custom": {"x": 1}}}))
    for answer in answers:
        wire = orjson.loads(orjson.dumps(answer.to_wire()))
        assert AgentResponse.model_validate(wire).to_wire() == answer.to_wire()


@pytest.mark.parametrize(
    "make",
    [
        lambda: IntentEnvelope.model_validate(
            {"intent": {"name": "x"}, "payload": {"a": 1}}
        ),
        lambda: IntentEnvelope(intent=IntentRef(name="x"), payload={"a": 1}),
        lambda: IntentEnvelope(intent={"name": "x"}, payload={"a": 1}),
    ],
)
def test_an_envelope_is_checked_once_per_validation(monkeypatch, make):
    """Validation walks the payload once: parts are not validated twice over."""
    import intentusnet.envelope as envelope_module

    walked = []
    check = envelope_module.check_json
    monkeypatch.setattr(
        envelope_module,
        "check_json",
        lambda value, path="": walked.append(path) or check(value, path),
    )
    env = make()
    assert walked == ["payload"]
    assert compute_hash(env) == compute_hash(env.to_wire())


HUGE = 123456789012345678901234567890
HUGE_MESSAGE = (
    f"integer {HUGE} is beyond +-(2**53-1) and would lose precision in JSON; "
    "send it as a string"
)


def test_huge_integers_in_json_text_are_refused_like_in_python():
    """A 30-digit integer in JSON text gets the error it gets from Python values."""
    text = b'{"intent": {"name": "x"}, "payload": {"n": %d}}' % HUGE
    with pytest.raises(EnvelopeValidationError) as from_python:
        IntentEnvelope.model_validate({"intent": {"name": "x"}, "payload": {"n": HUGE}})
    with pytest.raises(EnvelopeValidationError) as from_text:
        IntentEnvelope.model_validate_json(text)
    assert (
        str(from_text.value) == str(from_python.value) == f"payload.n: {HUGE_MESSAGE}"
    )
    assert from_text.value.path == "payload.n"
    negative = text.replace(b"%d" % HUGE, b"-%d" % HUGE)
    with pytest.raises(EnvelopeValidationError, match=r"^payload\.n: integer -1234"):
        IntentEnvelope.model_validate_json(negative)


@pytest.mark.parametrize("value", [HUGE, 2**53, -(2**53)])
def test_priority_beyond_2_53_is_refused_with_the_same_error(value):
    """No integer field takes what JSON cannot carry exactly."""
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope.model_validate(
            {"intent": {"name": "x"}, "context": {"priority": value}}
        )
    assert info.value.path == "context.priority"
    assert str(info.value).endswith("would lose precision in JSON; send it as a string")
    assert (
        IntentEnvelope.model_validate(
            {"intent": {"name": "x"}, "context": {"priority": 2**53 - 1}}
        ).context.priority
        == 2**53 - 1
    )


def test_json_checked_context_skips_only_the_walk():
    """With JSON_CHECKED an answer's payload is not walked, but must be a dict."""
    from intentusnet import AgentResponse
    from intentusnet.envelope import JSON_CHECKED

    nan = {"x": float("nan")}
    with pytest.raises(ValueError, match="NaN"):
        AgentResponse.model_validate({"payload": nan})
    with pytest.raises(ValueError, match="JSON object"):
        AgentResponse.model_validate({"payload": [1]}, context=JSON_CHECKED)
    checked = {"x": 1}
    answer = AgentResponse.model_validate({"payload": checked}, context=JSON_CHECKED)
    assert answer.payload is checked
