"""yaml_text: JSON values as YAML block text, exact and read back as they were.

PyYAML (installed with the dev dependencies, by schemathesis) is the reader:
a YAML 1.1 parser, the stricter of the two versions about plain words.
"""

from __future__ import annotations

import math

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from intentusnet._util.jsonvalue import JSONValue
from intentusnet._util.yamltext import yaml_text

#: Strings: any characters, and strings near YAML's syntax (plain words that
#: read as other types, colons, quotes, line breaks, edge spaces).
STRINGS = (
    st.text()
    | st.text(alphabet="aeynoNul :#-.,'\"\t\n\\1_@")
    | st.sampled_from(["yes", "No", "null", "~", "1.0", "0x1f", "1_0", "2026-12-07"])
)
#: Any JSON value, finite floats.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | STRINGS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(STRINGS, inner, max_size=4)
    ),
    max_leaves=12,
)


def same(a: JSONValue, b: object) -> bool:
    """Equal as JSON values: types kept (1 is not 1.0 nor True), floats exactly."""
    if isinstance(a, float):
        return isinstance(b, float) and (
            a == b and math.copysign(1, a) == math.copysign(1, b)
        )
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and list(a) == list(b)
            and all(same(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


@settings(max_examples=600, deadline=None)
@given(JSON_VALUES)
def test_every_json_value_reads_back_as_itself(value: JSONValue) -> None:
    """Whatever the value, PyYAML's safe_load of the text gives it back exactly."""
    text = yaml_text(value)
    assert same(value, yaml.safe_load(text)), text


def test_a_record_like_document_reads_as_written() -> None:
    """The exact text: plain words, quoted look-alikes, blocks, nesting."""
    value = {
        "executionId": "exec-01a2",
        "envelopeHash": "sha256:8325",
        "intent": {"name": "http.request", "version": "1.0"},
        "replayable": True,
        "reason": None,
        "durationMs": 134.03,
        "tiny": 1e-05,
        "seq": 4,
        "words": ["yes", "no", "null", "On", "", "it's", "a: b", "tab\there"],
        "body": '{"city": "Oslo", "celsius": 4}',
        "traceback": "Traceback:\n  File x\nValueError: bad\n",
        "empty": {},
        "none": [],
        "attempts": [{"agent": "httpx", "outcome": "success"}, [1, 2]],
    }
    assert yaml_text(value) == (
        "executionId: exec-01a2\n"
        "envelopeHash: sha256:8325\n"
        "intent:\n"
        "  name: http.request\n"
        "  version: '1.0'\n"
        "replayable: true\n"
        "reason: null\n"
        "durationMs: 134.03\n"
        "tiny: 1.0e-05\n"
        "seq: 4\n"
        "words:\n"
        "  - 'yes'\n"
        "  - 'no'\n"
        "  - 'null'\n"
        "  - 'On'\n"
        "  - ''\n"
        "  - 'it''s'\n"
        "  - 'a: b'\n"
        '  - "tab\\there"\n'
        'body: \'{"city": "Oslo", "celsius": 4}\'\n'
        "traceback: |\n"
        "  Traceback:\n"
        "    File x\n"
        "  ValueError: bad\n"
        "empty: {}\n"
        "none: []\n"
        "attempts:\n"
        "  - agent: httpx\n"
        "    outcome: success\n"
        "  - - 1\n"
        "    - 2\n"
    )
    assert yaml.safe_load(yaml_text(value)) == value


def test_awkward_strings_fall_back_to_quotes() -> None:
    """Control characters are escaped; a block that cannot keep its text is quoted."""
    assert yaml_text("bell\x07 and \u2028") == '"bell\\x07 and \\u2028"\n'
    assert yaml_text(" indented\nsecond") == '" indented\\nsecond"\n'
    assert yaml_text("two\n\n") == "|+\n  two\n\n"
    assert yaml_text("no end\nline") == "|-\n  no end\n  line\n"
    long_key = "k" * 1200
    assert yaml_text({long_key: 1}) == f"? {long_key}\n: 1\n"
    assert yaml.safe_load(yaml_text({long_key: {"a": 1}})) == {long_key: {"a": 1}}
