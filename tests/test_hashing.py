import datetime as dt
import enum
import hashlib
import json
import math
import re
import sys
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from intentusnet import (
    CacheDirective,
    EnvelopeValidationError,
    IntentContext,
    IntentEnvelope,
    IntentMetadata,
    IntentRef,
    RoutingOptions,
    canonical_json,
    compute_hash,
)
from intentusnet._util.jsonvalue import MAX_DEPTH, MAX_SAFE_INT
from intentusnet.hashing import hashed_view

VECTORS_FILE = (
    Path(__file__).parent.parent / "intentusnet" / "envelope-hash-vectors.json"
)
VECTORS = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))["vectors"]
HASH_FORM = re.compile(r"sha256:[0-9a-f]{64}")


def nested(levels, leaf=1):
    """``levels`` arrays, one inside the next, around ``leaf``."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def envelope(payload=None, **fields):
    return IntentEnvelope(
        intent=fields.pop("intent", IntentRef(name="summarize")),
        payload={"text": "hello"} if payload is None else payload,
        **fields,
    )


# -- the published vectors ----------------------------------------------------


def test_vectors_cover_the_cases_the_docs_promise():
    """The vectors include the floats, unicode keys, tenants and fallback cases."""
    names = {v["name"] for v in VECTORS}
    assert len(VECTORS) >= 15
    assert {"integral float equals int", "int", "floats", "tenant acme"} <= names
    assert "astral and private-use keys (UTF-16 order)" in names
    assert {"fallback routing", "fallback order matters"} <= names


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector_hash_is_sha256_of_its_hashed_view(vector):
    """Each vector's hash is "sha256:" + hex SHA-256 of its hashedView text."""
    digest = hashlib.sha256(vector["hashedView"].encode("utf-8")).hexdigest()
    assert vector["hash"] == "sha256:" + digest


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector_model_hash(vector):
    """An envelope validated from the vector's wire form has the vector's hash."""
    env = IntentEnvelope.model_validate(vector["envelope"])
    assert compute_hash(env) == vector["hash"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector_hashed_view_text(vector):
    """The canonical hashed view is the vector's hashedView, byte for byte."""
    expected = vector["hashedView"].encode("utf-8")
    env = IntentEnvelope.model_validate(vector["envelope"])
    assert canonical_json(hashed_view(vector["envelope"])) == expected
    assert canonical_json(env.hashed_view()) == expected


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector_wire_hash(vector):
    """compute_hash of the wire dict, and of the model's own wire form, agree."""
    env = IntentEnvelope.model_validate(vector["envelope"])
    assert compute_hash(vector["envelope"]) == vector["hash"]
    assert compute_hash(env.to_wire()) == vector["hash"]


def test_hash_form():
    """A hash is "sha256:" and 64 lowercase hex digits."""
    assert HASH_FORM.fullmatch(compute_hash(envelope()))


# -- canonical JSON against the rfc8785 package --------------------------------

# Private-use BMP characters (U+E000..U+FFFF) sort after astral characters in
# UTF-16 order but before them in code point order.
KEY_CHARS = st.one_of(
    st.characters(max_codepoint=0x7F),
    st.characters(min_codepoint=0x80, max_codepoint=0xD7FF),
    st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF),
    st.characters(min_codepoint=0x10000),
)
KEYS = st.text(KEY_CHARS, max_size=3)
# Lone surrogates are excluded explicitly: they are not JSON text (refused by
# check_json, tested on their own), and newer Hypothesis versions generate them.
STRINGS = st.text(
    st.one_of(
        st.characters(max_codepoint=0x1F),
        st.characters(exclude_categories=("Cs",)),
    )
)
EDGE_FLOATS = [
    0.0,
    1.0,
    0.5,
    0.1,
    0.7,
    100.0,
    123456789.125,
    1e-5,
    1e-6,
    1e-7,
    1e15,
    1e16,
    1e21,
    1e22,
    2.0**53,
    2.0**53 + 2,
    5e-324,
    sys.float_info.min,
    sys.float_info.max,
]
for edge in (1e-6, 1e-5, 1e15, 1e16, 1e21):
    EDGE_FLOATS += [math.nextafter(edge, 0), math.nextafter(edge, math.inf)]
EDGE_FLOATS += [-x for x in EDGE_FLOATS]
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(EDGE_FLOATS),
    st.integers(-(2**70), 2**70).map(float),
    st.floats(min_value=1e-8, max_value=1e-4),
    st.floats(min_value=1e14, max_value=1e23),
)
INTS = st.one_of(
    st.integers(-MAX_SAFE_INT, MAX_SAFE_INT),
    st.sampled_from([MAX_SAFE_INT, -MAX_SAFE_INT, 10**15 - 1, 10**15, -(10**15)]),
)
SCALARS = st.one_of(st.none(), st.booleans(), INTS, FLOATS, STRINGS)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_canonical_json_matches_rfc8785(value):
    """canonical_json gives the rfc8785 package's bytes for any JSON value."""
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=600, deadline=None)
@given(FLOATS)
def test_floats_match_rfc8785_alone_and_nested(number):
    """Every finite float is written as RFC 8785 does, at top level and nested."""
    assert canonical_json(number) == rfc8785.dumps(number)
    assert canonical_json([number]) == rfc8785.dumps([number])
    assert canonical_json({"k": number}) == rfc8785.dumps({"k": number})


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=3))
def test_envelope_hash_matches_rfc8785(payload):
    """compute_hash is sha256 of the rfc8785 bytes of the hashed view, both ways."""
    env = IntentEnvelope(intent=IntentRef(name="p"), payload=payload)
    view = {
        "version": "1.0",
        "intent": {"name": "p", "version": "1.0"},
        "payload": payload,
        "tenant": None,
        "routing": {"strategy": "DIRECT", "targetAgent": None, "fallbackAgents": []},
    }
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(view)).hexdigest()
    assert compute_hash(env) == expected
    assert compute_hash(env.to_wire()) == expected


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(KEYS, SCALARS, min_size=2, max_size=8))
def test_key_insertion_order_is_irrelevant(obj):
    """Reversing a dict's insertion order leaves its canonical bytes unchanged."""
    assert canonical_json(dict(reversed(obj.items()))) == canonical_json(obj)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, b"1"),
        (-0.0, b"0"),
        (1e16, b"10000000000000000"),
        (1e21, b"1e+21"),
        (1e-6, b"0.000001"),
        (1e-7, b"1e-7"),
        (True, b"true"),
        ("\u2028\x1f/", b'"\xe2\x80\xa8\\u001f/"'),
        ({"\U0001f600": 1, "\uffff": 2}, b'{"\xf0\x9f\x98\x80":1,"\xef\xbf\xbf":2}'),
    ],
)
def test_canonical_json_known_texts(value, text):
    """Known RFC 8785 texts, including top-level numbers and UTF-16 key order."""
    assert canonical_json(value) == text


# -- equal meaning, equal hash -------------------------------------------------

BASE = envelope({"a": 1, "b": [1, 2], "c": {"x": "y"}})

SAME_MEANING = {
    "payload key order": lambda: envelope({"c": {"x": "y"}, "b": [1, 2], "a": 1}),
    "request id": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        metadata=IntentMetadata(request_id="req-other"),
    ),
    "trace id": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}}, metadata=IntentMetadata(trace_id="t")
    ),
    "created time": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        metadata=IntentMetadata(created_at=dt.datetime(2001, 1, 1, tzinfo=dt.UTC)),
    ),
    "source and identity chain": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        metadata=IntentMetadata(source="cli", identity_chain=["alice", "gateway"]),
    ),
    "caller, priority and tags": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        context=IntentContext(caller="bob", priority=9, tags=["x", "y"]),
    ),
    "timeout": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}}, routing=RoutingOptions(timeout_ms=5)
    ),
    "cache directive": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        routing=RoutingOptions(cache=CacheDirective.BYPASS),
    ),
    "integral floats": lambda: envelope({"a": 1.0, "b": [1.0, 2.0], "c": {"x": "y"}}),
}


@pytest.mark.parametrize("change", list(SAME_MEANING), ids=list(SAME_MEANING))
def test_volatile_changes_keep_the_hash(change):
    """Changing only volatile fields, or key order, or 1 to 1.0, keeps the hash."""
    assert compute_hash(SAME_MEANING[change]()) == compute_hash(BASE)


DIFFERENT_MEANING = {
    "payload value": lambda: envelope({"a": 2, "b": [1, 2], "c": {"x": "y"}}),
    "payload array order": lambda: envelope({"a": 1, "b": [2, 1], "c": {"x": "y"}}),
    "payload true for 1": lambda: envelope({"a": True, "b": [1, 2], "c": {"x": "y"}}),
    "payload string for number": lambda: envelope(
        {"a": "1", "b": [1, 2], "c": {"x": "y"}}
    ),
    "intent name": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}}, intent=IntentRef(name="translate")
    ),
    "intent version": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        intent=IntentRef(name="summarize", version="2.0"),
    ),
    "tenant": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}}, context=IntentContext(tenant="acme")
    ),
    "strategy": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        routing=RoutingOptions(strategy="FALLBACK"),
    ),
    "target agent": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        routing=RoutingOptions(target_agent="fast"),
    ),
    "fallback agents": lambda: envelope(
        {"a": 1, "b": [1, 2], "c": {"x": "y"}},
        routing=RoutingOptions(fallback_agents=["a"]),
    ),
}


@pytest.mark.parametrize("change", list(DIFFERENT_MEANING), ids=list(DIFFERENT_MEANING))
def test_meaningful_changes_change_the_hash(change):
    """Changing payload, intent, tenant or routing choice changes the hash."""
    assert compute_hash(DIFFERENT_MEANING[change]()) != compute_hash(BASE)


def test_tenants_never_share_a_hash():
    """Two tenants, and no tenant, give three different hashes."""
    hashes = {
        compute_hash(envelope(context=IntentContext(tenant=t)))
        for t in (None, "acme", "globex")
    }
    assert len(hashes) == 3


def test_fallback_order_changes_the_hash():
    """The same fallback agents in another order is another request."""
    ab = envelope(routing=RoutingOptions(fallback_agents=["a", "b"]))
    ba = envelope(routing=RoutingOptions(fallback_agents=["b", "a"]))
    assert compute_hash(ab) != compute_hash(ba)


def test_python_and_wire_construction_hash_equal():
    """An envelope built from Python objects hashes like its own wire form."""
    env = envelope(
        {"price": 9.5, "n": 3.0},
        context=IntentContext(tenant="acme"),
        routing=RoutingOptions(
            strategy="FALLBACK", target_agent="a", fallback_agents=["b"]
        ),
    )
    wire = env.to_wire()
    assert compute_hash(env) == compute_hash(wire)
    assert compute_hash(IntentEnvelope.model_validate(wire)) == compute_hash(env)
    assert compute_hash(orjson.loads(orjson.dumps(wire))) == compute_hash(env)


def test_model_copy_with_update_rehashes():
    """A copy with a new payload or routing hashes like a freshly built envelope."""
    env = envelope({"n": 1.5})
    copy = env.model_copy(update={"payload": {"n": 2.0}})
    assert compute_hash(copy) == compute_hash(envelope({"n": 2}))
    routed = env.model_copy(update={"routing": RoutingOptions(target_agent="x")})
    fresh = envelope({"n": 1.5}, routing=RoutingOptions(target_agent="x"))
    assert compute_hash(routed) == compute_hash(fresh)


def test_payload_at_the_nesting_limit_hashes_from_its_wire_form():
    """An envelope accepted at the nesting limit also hashes from its wire form."""
    env = envelope({"a": nested(MAX_DEPTH - 1)})
    assert compute_hash(env.to_wire()) == compute_hash(env)


# -- values JSON cannot carry ----------------------------------------------------


class Color(enum.IntEnum):
    RED = 1


NOT_JSON = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "bytes": b"x",
    "set": {1, 2},
    "frozenset": frozenset(),
    "object": object(),
    "decimal": Decimal("1.5"),
    "datetime": dt.datetime(2020, 1, 1),
    "int enum": Color.RED,
    "int key": {1: "x"},
    "tuple key": {(1,): "x"},
    "2**53": 2**53,
    "-(2**53)": -(2**53),
    "huge int": 10**100,
    "lone surrogate": "a\ud800",
}


def with_bad(value):
    return {"items": [{}, {}, {}, {"price": value}]}


@pytest.mark.parametrize("bad", list(NOT_JSON), ids=list(NOT_JSON))
def test_canonical_json_refuses_non_json_naming_the_path(bad):
    """canonical_json refuses a non-JSON value and names where it is."""
    with pytest.raises(EnvelopeValidationError) as info:
        canonical_json(with_bad(NOT_JSON[bad]))
    assert info.value.path == "items[3].price"
    assert str(info.value).startswith("items[3].price: ")


@pytest.mark.parametrize("bad", list(NOT_JSON), ids=list(NOT_JSON))
def test_envelope_refuses_non_json_at_construction(bad):
    """Building an envelope refuses a non-JSON payload value, naming its path."""
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope(intent=IntentRef(name="x"), payload=with_bad(NOT_JSON[bad]))
    assert info.value.path == "payload.items[3].price"
    with pytest.raises(EnvelopeValidationError) as info:
        IntentEnvelope.model_validate(
            {"intent": {"name": "x"}, "payload": with_bad(NOT_JSON[bad])}
        )
    assert info.value.path == "payload.items[3].price"


@pytest.mark.parametrize("bad", list(NOT_JSON), ids=list(NOT_JSON))
def test_wire_hash_refuses_non_json(bad):
    """compute_hash of a wire dict refuses a non-JSON payload value by path."""
    wire = {"intent": {"name": "x"}, "payload": with_bad(NOT_JSON[bad])}
    with pytest.raises(EnvelopeValidationError) as info:
        compute_hash(wire)
    assert info.value.path == "payload.items[3].price"


def test_non_string_key_refusal_names_the_object():
    """A non-string key is reported at the object holding it, with the key shown."""
    with pytest.raises(EnvelopeValidationError, match=r"^a\.b: object key 1 is a int"):
        canonical_json({"a": {"b": {1: 2}}})


def test_odd_keys_are_quoted_in_paths():
    """Keys that are not identifiers appear quoted in the path."""
    with pytest.raises(EnvelopeValidationError) as info:
        canonical_json({"a b": [0, float("nan")]})
    assert info.value.path == "['a b'][1]"


def test_top_level_non_json_is_reported_at_the_root():
    """A bad value at the top has the root path "$"."""
    with pytest.raises(EnvelopeValidationError) as info:
        canonical_json(float("nan"))
    assert info.value.path == "$"


def test_tuples_are_arrays():
    """Tuples are accepted and written as arrays, in envelopes too."""
    assert canonical_json({"a": (1, (2.0, "x"))}) == b'{"a":[1,[2,"x"]]}'
    as_tuple = envelope({"a": (1, 2)})
    assert compute_hash(as_tuple) == compute_hash(envelope({"a": [1, 2]}))


def test_safe_integer_bounds_are_accepted():
    """+-(2**53-1) are accepted and written exactly."""
    assert canonical_json([MAX_SAFE_INT, -MAX_SAFE_INT]) == (
        b"[9007199254740991,-9007199254740991]"
    )


def test_nesting_up_to_the_limit_is_accepted():
    """MAX_DEPTH nested arrays are JSON; one more level is refused by path."""
    assert canonical_json(nested(MAX_DEPTH)) == b"[" * MAX_DEPTH + b"1" + (
        b"]" * MAX_DEPTH
    )
    with pytest.raises(EnvelopeValidationError, match="nested deeper than"):
        canonical_json(nested(MAX_DEPTH + 1))


def test_hostile_nesting_is_refused_without_recursion_error():
    """10,000 nested levels give a validation error, not a RecursionError."""
    deep = nested(10_000)
    with pytest.raises(EnvelopeValidationError) as info:
        canonical_json({"a": deep})
    assert info.value.path.startswith("a[0][0]")
    assert len(str(info.value)) < 300
    with pytest.raises(EnvelopeValidationError):
        compute_hash({"intent": {"name": "x"}, "payload": {"a": deep}})


def test_lone_surrogate_tenant_in_a_model_is_a_validation_error():
    """A lone surrogate in the hashed tenant is refused by path, never a crash."""
    data = {"intent": {"name": "x"}, "context": {"tenant": "\udc00"}}
    with pytest.raises(EnvelopeValidationError) as info:
        compute_hash(IntentEnvelope.model_validate(data))
    assert info.value.path == "context.tenant"


def test_lone_surrogate_tenant_in_a_wire_dict_is_a_validation_error():
    """compute_hash of a wire dict names a lone-surrogate tenant by its wire path."""
    wire = {"intent": {"name": "x"}, "context": {"tenant": "\udc00"}}
    with pytest.raises(EnvelopeValidationError) as info:
        compute_hash(wire)
    assert info.value.path == "context.tenant"


# -- the hashing document --------------------------------------------------------

DOC = Path(__file__).parent.parent / "docs" / "hashing.md"


def test_doc_python_blocks_run(monkeypatch):
    """The Python blocks of docs/hashing.md run, and the hash shown is the real one."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 2
    monkeypatch.chdir(DOC.parent.parent)
    namespace: dict = {}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)
    assert repr(compute_hash(namespace["env"])) in blocks[0]
    exec(compile(blocks[1], str(DOC), "exec"), {})


def test_doc_worked_example_matches_its_vector():
    """The worked example shows its vector's exact canonical text and hash."""
    text = DOC.read_text(encoding="utf-8")
    vector = next(v for v in VECTORS if v["name"] == "integral float equals int")
    assert f"\n   {vector['hashedView']}\n" in text
    assert f"\n   {vector['hash']}\n" in text
    assert f"these {len(vector['hashedView'].encode())} bytes" in text


@pytest.mark.parametrize("value", [[1], "text", None, 5, ("a",)])
def test_compute_hash_of_a_non_mapping_is_a_validation_error(value):
    """Anything but an envelope or a mapping is refused, not an AttributeError."""
    with pytest.raises(EnvelopeValidationError, match="must be a JSON object"):
        compute_hash(value)


def test_compute_hash_of_any_mapping_is_that_of_its_dict():
    """A read-only mapping hashes as the dict it holds."""
    from types import MappingProxyType

    wire = {"intent": {"name": "x"}, "payload": {"a": 1}}
    assert compute_hash(MappingProxyType(wire)) == compute_hash(wire)
