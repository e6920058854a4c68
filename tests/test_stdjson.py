"""The stdlib twins give exactly what orjson gives, or leave the answer to orjson.

Every check compares a twin with the orjson call it stands for: the same value
(same types, key order and float bits) or the same error, the same bytes
written. Values and bytes are generated, hostile ones included.
"""

from __future__ import annotations

import enum
import json
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from intentusnet import EnvelopeValidationError, _stdjson, canonical_json
from intentusnet._json import check_json

#: Each option of a twin beside orjson's, and every combination of them.
_FLAGS = [
    (_stdjson.OPT_APPEND_NEWLINE, orjson.OPT_APPEND_NEWLINE),
    (_stdjson.OPT_INDENT_2, orjson.OPT_INDENT_2),
    (_stdjson.OPT_SORT_KEYS, orjson.OPT_SORT_KEYS),
]
OPTIONS = [
    (
        sum(ours for i, (ours, _) in enumerate(_FLAGS) if mask >> i & 1),
        sum(theirs for i, (_, theirs) in enumerate(_FLAGS) if mask >> i & 1),
    )
    for mask in range(8)
]

#: Pieces of JSON and of what is not quite JSON, for assembling hostile bytes.
TOKENS = [
    *(bytes([c]) for c in b'{}[],:"\\-+.eE0123456789 \t\n\r'),
    b'"a"',
    b'"k":',
    b"\\u",
    b"\\ud800",
    b"\\udc00",
    b"\\ud83d\\ude00",
    b"\\u00e9",
    b"\\U00e9",
    b"\\n",
    b"\\/",
    b"9" * 16,
    b"18446744073709551616",
    b"1e400",
    b"0.00001",
    b"1.5e-7",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"true",
    b"false",
    b"null",
    b"\x00",
    b"\x0c",
    b"\x1f",
    b"\x7f",
    b"\xef\xbb\xbf",  # a byte order mark
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xc0\x80",  # an overlong encoding
    b"\xff",
    b"\xc3\xa9",
    b"\xe2\x80\xa8",
    b"\xf0\x9f\x98\x80",
]


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(enum.StrEnum):
    ADA = "ada"


def same(a: object, b: object) -> bool:
    """Equal and alike: the same types throughout, key order, float bits."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, dict) and isinstance(y, dict):
            if list(x) != list(y):
                return False
            stack.extend((x[key], y[key]) for key in x)
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, float) and isinstance(y, float):
            if x.hex() != y.hex():
                return False
        elif x != y:
            return False
    return True


def outcome(call: Any, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    """What a call returned, or the type and message of what it raised."""
    try:
        return ("value", call(*args, **kwargs))
    except Exception as exc:
        return ("error", type(exc), str(exc))


def assert_read_alike(data: bytes) -> None:
    ours, theirs = outcome(_stdjson.loads, data), outcome(orjson.loads, data)
    if ours[0] == theirs[0] == "value":
        assert same(ours[1], theirs[1]), data
    else:
        assert ours == theirs, data


def assert_written_alike(value: object, options: tuple[int, int]) -> None:
    ours = outcome(_stdjson.dumps, value, option=options[0])
    theirs = outcome(orjson.dumps, value, option=options[1])
    assert ours == theirs, value


clean_text = st.text()
any_text = clean_text | st.text(st.characters() | st.characters(categories=["Cs"]))
#: Numbers on either side of each limit of the twins, and of orjson's own.
EDGE_INTS = [
    *(0, -1, 10**15 - 1, -(10**15) + 1, 10**15, 2**53, 2**63 - 1, 2**63),
    *(2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30),
]
EDGE_FLOATS = [
    *(0.0, -0.0, 1e-4, -1e-4, 9.99e-5, 1e-5, 1.5e-7, 1e-10, 1e16, 1e22, 0.1, 1.0),
    *(9.999999999999998e15, 5e-324, 1.7976931348623157e308, float("nan")),
    *(float("inf"), float("-inf")),
]
#: Strings with each character json and orjson might escape differently.
EDGE_TEXTS = [
    '\x00\x1f\x7f\b\f\n\r\t"\\/',
    "\u2028\u2029\ufeff\uffff",
    "\U0001f600",
    "\ud800",
]
edge_ints = st.sampled_from(EDGE_INTS)
edge_floats = st.sampled_from(EDGE_FLOATS)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | edge_ints
    | st.floats()
    | edge_floats
    | any_text
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4)
    ),
    max_leaves=20,
)
#: Values orjson can write: what a record file holds.
written = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | clean_text,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(clean_text, inner, max_size=4)
    ),
    max_leaves=20,
)
#: Values that are not JSON, or not the plain kinds of it.
odd = st.sampled_from(
    [
        (1, 2),
        b"bytes",
        {1, 2},
        {1: "int key"},
        {None: 1},
        {("a",): 1},
        OrderedDict(a=1),
        Colour.RED,
        Level.HIGH,
        Name.ADA,
        {"nested": [Name.ADA]},
        object(),
    ]
)


def nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


# -- reading ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [*EDGE_INTS, *EDGE_FLOATS, *EDGE_TEXTS])
def test_edge_numbers_and_strings_read_alike(value: object) -> None:
    """Each edge value, as json writes it and as orjson does, reads alike."""
    for ascii in (True, False):
        text = json.dumps([value, {"k": value}], ensure_ascii=ascii)
        assert_read_alike(text.encode("utf-8", "surrogatepass"))
    written = outcome(orjson.dumps, [value])
    if written[0] == "value":
        assert_read_alike(written[1])


@given(written)
def test_reads_what_orjson_writes_as_orjson_reads_it(value: object) -> None:
    """A document orjson wrote reads the same through the twin."""
    assert_read_alike(orjson.dumps(value))
    assert_read_alike(orjson.dumps(value, option=orjson.OPT_INDENT_2))


@given(values, st.booleans())
def test_reads_what_json_writes_as_orjson_reads_it(value: object, ascii: bool) -> None:
    """json's text (exponents, NaN, big integers, surrogate escapes) reads alike."""
    text = json.dumps(value, ensure_ascii=ascii)
    assert_read_alike(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=500)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map(b"".join) | st.binary())
@example(b"\xef\xbb\xbf{}")
@example(b'"\\ud800"')
@example(b'"\xed\xa0\x80"')
@example(b"[NaN]")
@example(b"-0")
@example(b"123456789012345678")
@example(b"0.1000000000000000055511151231257827021181583404541015625")
def test_hostile_bytes_read_alike(data: bytes) -> None:
    """Assembled or random bytes: the same value, or orjson's own error."""
    assert_read_alike(data)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(written, st.data())
def test_edited_documents_read_alike(value: object, data: st.DataObject) -> None:
    """A document with a piece cut out and a token put in reads alike."""
    document = orjson.dumps(value)
    start = data.draw(st.integers(0, len(document)))
    end = data.draw(st.integers(start, len(document)))
    token = data.draw(st.sampled_from(TOKENS))
    assert_read_alike(document[:start] + token + document[end:])


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_reads_alike(value: float) -> None:
    """A float written by repr or by orjson reads as orjson reads it."""
    assert_read_alike(repr(value).encode())
    assert_read_alike(orjson.dumps(value))


@pytest.mark.parametrize("levels", [1023, 1024, 1025, 2000])
def test_deep_nesting_reads_alike(levels: int) -> None:
    """At and past orjson's nesting limit of 1024, as orjson answers."""
    assert_read_alike(b"[" * levels + b"]" * levels)
    assert_read_alike(b'{"a":' * levels + b"1" + b"}" * levels)


def test_golden_records_are_read_without_orjson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every line of the golden records is answered by the stdlib alone, alike."""
    files = sorted((Path(__file__).parent.parent / "records").glob("*.jsonl"))
    assert files
    lines = [line for file in files for line in file.read_bytes().splitlines()]
    expected = [orjson.loads(line) for line in lines]
    monkeypatch.setattr(_stdjson, "_orjson", lambda: pytest.fail("orjson used"))
    for line, value in zip(lines, expected, strict=True):
        assert same(_stdjson.loads(line), value)


def test_nesting_past_orjsons_limit_is_refused_at_any_recursion_limit() -> None:
    """With Python's recursion limit raised, json would read what orjson refuses."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        assert_read_alike(b"[" * 1025 + b"]" * 1025)
        assert_read_alike(b"[" * 1024 + b"]" * 1024)
    finally:
        sys.setrecursionlimit(old)


# -- writing ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [*EDGE_INTS, *EDGE_FLOATS, *EDGE_TEXTS])
@pytest.mark.parametrize("options", OPTIONS)
def test_edge_numbers_and_strings_write_alike(
    value: object, options: tuple[int, int]
) -> None:
    """Each edge value, alone and among plain values, writes alike."""
    assert_written_alike(value, options)
    assert_written_alike({"b": [value, 1.5], "a": {"x": "y"}, "c": []}, options)


@given(values | written | odd, st.sampled_from(OPTIONS))
def test_writes_as_orjson_writes(value: object, options: tuple[int, int]) -> None:
    """The same bytes for every option, or orjson's own error."""
    assert_written_alike(value, options)


@given(st.lists(values | odd, max_size=3), st.sampled_from(OPTIONS))
def test_odd_values_inside_containers_write_alike(
    value: list[object], options: tuple[int, int]
) -> None:
    """A value orjson writes its own way, or refuses, inside a container."""
    assert_written_alike({"items": value, "n": 1.5}, options)


@pytest.mark.parametrize("levels", [199, 200, 201, 254, 255])
@pytest.mark.parametrize("options", OPTIONS)
def test_deep_nesting_writes_alike(levels: int, options: tuple[int, int]) -> None:
    """Near and past orjson's depth limit of 255, as orjson answers."""
    assert_written_alike(nested(levels), options)


def test_a_cycle_is_refused_as_orjson_refuses_it() -> None:
    """A list holding itself: orjson's error."""
    loop: list[object] = []
    loop.append(loop)
    assert_written_alike(loop, OPTIONS[0])


def test_a_typical_answer_is_written_without_orjson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stdlib alone writes a replay's answer."""
    answer = {
        "payload": {"echo": {"text": "hello", "é": ["ü", 1, 2.5, None, True]}},
        "metadata": {"durationMs": 50.519, "attempts": [{"durationMs": 0.015}]},
        "warnings": [],
        "skipped": {},
    }
    expected = orjson.dumps(
        answer, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    )
    monkeypatch.setattr(_stdjson, "_orjson", lambda: pytest.fail("orjson used"))
    option = _stdjson.OPT_INDENT_2 | _stdjson.OPT_APPEND_NEWLINE
    assert _stdjson.dumps(answer, option=option) == expected


def test_an_unknown_option_is_refused() -> None:
    """Only the options the library uses are translated."""
    with pytest.raises(ValueError, match="option 8"):
        _stdjson.dumps(1, option=8)


@given(written | st.lists(edge_floats | edge_ints))
def test_sorted_output_is_the_canonical_form_where_orjson_is(value: object) -> None:
    """Where hashing takes orjson's sorted output, the twin writes the same."""
    try:
        plain = check_json(value)
    except EnvelopeValidationError:
        plain = False
    assume(plain)
    ours = _stdjson.dumps(value, option=_stdjson.OPT_SORT_KEYS)
    assert ours == canonical_json(value)  # type: ignore[arg-type]
