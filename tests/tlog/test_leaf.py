"""The leaf's bytes: one closed record's id, chain head and key, versioned."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from intentusnet.errors import LogIntegrityError
from intentusnet.tlog.leaf import LogLeaf

HEAD = "sha256:" + "ab" * 32


def test_leaf_bytes_are_the_documented_four_lines() -> None:
    """A signed record's leaf is the version line, id, chain head and key id."""
    leaf = LogLeaf("exec-1", HEAD, "ed25519:0123456789abcdef")
    assert leaf.to_bytes() == (
        b"intentusnet log leaf v1\nexec-1\n"
        + HEAD.encode()
        + b"\ned25519:0123456789abcdef\n"
    )


def test_a_deletion_leaf_has_its_own_version_line() -> None:
    """A deletion leaf reads ``intentusnet log deletion v1``, and parses back."""
    leaf = LogLeaf("exec-1", HEAD, "ed25519:0123456789abcdef", deleted=True)
    data = leaf.to_bytes()
    assert data.startswith(b"intentusnet log deletion v1\nexec-1\n")
    assert LogLeaf.from_bytes(data) == leaf
    assert LogLeaf.from_bytes(LogLeaf("exec-1", HEAD, None).to_bytes()).deleted is False
    assert leaf.indexed_head != leaf.chain_head


def test_an_unsigned_record_names_no_key() -> None:
    """An unsigned record's key line reads ``unsigned`` and parses back to None."""
    data = LogLeaf("exec-1", HEAD, None).to_bytes()
    assert data.endswith(b"\nunsigned\n")
    assert LogLeaf.from_bytes(data).key_id is None


@given(
    execution_id=st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}", fullmatch=True),
    head=st.binary(min_size=32, max_size=32).map(lambda b: "sha256:" + b.hex()),
    key=st.none()
    | st.binary(min_size=8, max_size=8).map(lambda b: "ed25519:" + b.hex()),
)
def test_leaves_round_trip(execution_id: str, head: str, key: str | None) -> None:
    """Every valid leaf parses back to itself."""
    leaf = LogLeaf(execution_id, head, key)
    assert LogLeaf.from_bytes(leaf.to_bytes()) == leaf
    assert LogLeaf.from_bytes(leaf.to_bytes()) == leaf


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"intentusnet log leaf v2\nexec-1\n" + HEAD.encode() + b"\nunsigned\n",
        b"intentusnet log deletion v2\nexec-1\n" + HEAD.encode() + b"\nunsigned\n",
        b"intentusnet log leaf v1\nexec-1\n" + HEAD.encode() + b"\nunsigned",
        b"intentusnet log leaf v1\nexec-1\n" + HEAD.encode() + b"\nunsigned\nmore\n",
        b"intentusnet log leaf v1\n../x\n" + HEAD.encode() + b"\nunsigned\n",
        b"intentusnet log leaf v1\n.hidden\n" + HEAD.encode() + b"\nunsigned\n",
        b"intentusnet log leaf v1\nexec-1\nsha256:AB\nunsigned\n",
        b"intentusnet log leaf v1\nexec-1\n" + HEAD.encode() + b"\ned25519:xyz\n",
        b"intentusnet log leaf v1\nex\xc3\xa9c\n" + HEAD.encode() + b"\nunsigned\n",
    ],
    ids=["empty", "v2", "deletion v2", "no last newline", "extra line", "path id",
         "dot id", "short head", "bad key", "non-ascii"],
)  # fmt: skip
def test_malformed_leaves_are_refused(data: bytes) -> None:
    """A leaf not exactly of the version 1 form raises LogIntegrityError."""
    with pytest.raises(LogIntegrityError):
        LogLeaf.from_bytes(data)


def test_a_bad_field_is_refused_when_made() -> None:
    """Making a leaf with an id holding a newline raises, not writes a fifth line."""
    with pytest.raises(LogIntegrityError, match="invalid execution id"):
        LogLeaf("a\nb", HEAD, None).to_bytes()
