"""Execution and request ids: UUIDv7 in hex, and no repeats across a fork."""

from __future__ import annotations

import os

from intentusnet._util.ids import new_execution_id, new_request_id, uuid7_hex


def test_ids_are_uuid7_in_hex() -> None:
    """32 hex digits with the RFC 9562 version 7 and variant bits."""
    value = int(uuid7_hex(), 16)
    assert len(uuid7_hex()) == 32
    assert value >> 76 & 0xF == 7
    assert value >> 62 & 0b11 == 0b10
    assert new_execution_id().startswith("exec-")
    assert new_request_id().startswith("req-")


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    """The generator is reseeded in the child: its next ids are its own."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its next ids and leave at once
        os.close(read)
        os.write(write, " ".join(uuid7_hex()[12:] for _ in range(4)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split())
    os.waitpid(pid, 0)
    ours = {uuid7_hex()[12:] for _ in range(4)}
    assert len(theirs) == 4
    assert not ours & theirs
