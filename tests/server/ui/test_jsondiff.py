"""The diff page's aligned JSON: changed paths marked, equal subtrees folded."""

from __future__ import annotations

from intentusnet.server.ui.jsondiff import aligned


def test_changed_leaf_marked_equal_subtree_folded() -> None:
    """Only the changed value is marked; an equal object is one folded row."""
    a = {"args": {"email": "a@x.io", "meta": {"k": [1, 2]}}, "n": 1}
    b = {"args": {"email": "b@x.io", "meta": {"k": [1, 2]}}, "n": 1}
    rows = aligned(a, b)
    changed = [row for row in rows if row.changed]
    assert [(r.key, r.a, r.b) for r in changed] == [
        ('"email": ', '"a@x.io"', '"b@x.io"')
    ]
    [folded] = [row for row in rows if row.folded]
    assert folded.key == '"meta": '
    assert folded.a == folded.b == "{…} 1 key, the same"
    assert '"k"' in folded.folded
    assert [row.depth for row in rows if row.key == '"email": '] == [2]


def test_sides_stay_aligned_when_keys_differ() -> None:
    """A key only one side has is a row whose other side is absent, not shifted."""
    rows = aligned({"x": 1, "gone": True}, {"x": 1, "new": [1]})
    by_key = {row.key: (row.a, row.b, row.changed) for row in rows}
    assert by_key['"gone": '] == ("true", None, True)
    assert by_key['"new": '] == (None, "[\n  1\n]", True)
    assert by_key['"x": '] == ("1", "1", False)


def test_json_types_compared_as_json() -> None:
    """true and 1, 1 and 1.0 differ in JSON, so they are marked as changed."""
    assert [row.changed for row in aligned([True, 1], [1, 1.0])] == [
        False,
        True,
        True,
        False,
    ]


def test_a_missing_side() -> None:
    """A step only one record made: every row is that side's, marked."""
    [row] = aligned(None, {"args": {}}, has_a=False)
    assert row.a is None
    assert row.changed
