"""Helpers shared by the record, store and replay tests: envelopes and records."""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from intentusnet._util.jsonvalue import JSONObject
from intentusnet.hashing import compute_hash
from intentusnet.record.model import EventType
from intentusnet.store import FileExecutionStore, MemoryExecutionStore
from intentusnet.store.writer import ChainWriter

Store = FileExecutionStore | MemoryExecutionStore


def envelope(text: str = "hello", **extra: object) -> JSONObject:
    """A wire-form envelope for the ``echo`` intent."""
    wire: JSONObject = {
        "version": "1.0",
        "intent": {"name": "echo", "version": "1.0"},
        "payload": {"text": text},
        "context": {"caller": None, "tenant": None, "priority": 0, "tags": []},
        "metadata": {
            "requestId": "req-1",
            "traceId": None,
            "createdAt": "2026-11-22T07:20:00Z",
            "source": None,
            "identityChain": [],
        },
        "routing": {
            "strategy": "DIRECT",
            "targetAgent": None,
            "fallbackAgents": [],
            "timeoutMs": None,
            "cache": "default",
        },
    }
    wire.update(extra)  # type: ignore[arg-type]
    return wire


def attempt_end(output: JSONObject | None, outcome: str = "success") -> JSONObject:
    """The AGENT_ATTEMPT_END data the router writes for agent ``echo``."""
    return {
        "agent": "echo",
        "attempt": 1,
        "outcome": outcome,
        "durationMs": 0.25,
        "output": output,
        "error": None,
        "traceback": None,
    }


def response(execution_id: str, *, status: str = "success") -> JSONObject:
    """An AgentResponse wire dict as the router completes a record with."""
    error: JSONObject | None = None
    payload: JSONObject | None = {"echo": "hello"}
    if status == "error":
        payload = None
        error = {
            "code": "AGENT_ERROR",
            "message": "boom",
            "agent": "echo",
            "retryable": False,
            "details": {},
        }
    return {
        "status": status,
        "payload": payload,
        "error": error,
        "metadata": {"executionId": execution_id, "agent": "echo", "durationMs": 1.5},
    }


def start(store: Store, text: str = "hello", **kwargs: object) -> ChainWriter:
    """Open a record and write what the router writes before the agent returns."""
    wire = envelope(text)
    env_hash = kwargs.pop("envelope_hash", None) or compute_hash(wire)
    writer = store.open(wire, envelope_hash=env_hash, **kwargs)  # type: ignore[arg-type]
    writer.append(
        EventType.INTENT_RECEIVED, {"requestId": "req-1", "envelopeHash": env_hash}
    )
    writer.append(
        EventType.ROUTER_DECISION,
        {"strategy": "DIRECT", "candidates": ["echo"], "skipped": {}, "reason": "r"},
    )
    writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": 1})
    return writer


def finished(store: Store, text: str = "hello", *, status: str = "success") -> str:
    """Write a whole record (one successful attempt, final response); its id."""
    writer = start(store, text)
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"echo": text}))
    writer.complete(response(writer.execution_id, status=status))
    return writer.execution_id


def record_file(store: FileExecutionStore, execution_id: str) -> Path:
    """The file holding a record."""
    (path,) = store.root.glob(f"*/{execution_id}.jsonl")
    return path


def edit(path: Path, offset: int, xor: int = 0x01) -> None:
    """Change one byte of a file."""
    data = bytearray(path.read_bytes())
    data[offset] ^= xor
    path.write_bytes(bytes(data))


def line_offsets(path: Path) -> list[int]:
    """Start offset of every line of a file."""
    data = path.read_bytes()
    offsets = [0]
    offsets += [i + 1 for i, byte in enumerate(data) if byte == 0x0A][:-1]
    return offsets


def disk_fills_mid_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every ``os.write`` write half its bytes, then fail with ENOSPC.

    ``monkeypatch.undo()`` frees the disk again.
    """
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)


def reseal(data: bytes, change: Callable[[int, JSONObject], None]) -> bytes:
    """Edit a record's lines and recompute every hash, as a careful forger would.

    ``change(line_number, fields)`` edits each line's fields in place (line 1 is
    the header). Every line is then sealed again the way record/format.py seals
    it (orjson, ``hash`` the SHA-256 of the bytes before ``,"hash"``), and a
    ``SIGNATURE`` line's ``seq`` and ``chainHead`` are pointed at the new line
    before it: only the signature itself can tell.
    """
    out: list[bytes] = []
    prev = "sha256:" + "0" * 64
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        fields = orjson.loads(line)
        del fields["hash"], fields["prevHash"]
        change(number, fields)
        if fields.get("type") == "SIGNATURE":
            fields["data"]["seq"] = number - 2
            fields["data"]["chainHead"] = prev
        fields["prevHash"] = prev
        body = orjson.dumps(fields)[:-1]
        digest = hashlib.sha256(body).hexdigest()
        out.append(body + b',"hash":"sha256:' + digest.encode() + b'"}\n')
        prev = "sha256:" + digest
    return b"".join(out)


def change_answer(text: str) -> Callable[[int, JSONObject], None]:
    """A ``reseal`` change: every recorded answer of ``finished`` now says ``text``."""

    def change(number: int, fields: JSONObject) -> None:
        data = fields.get("data")
        if not isinstance(data, dict):
            return
        if fields["type"] == "AGENT_ATTEMPT_END":
            data["output"] = {"echo": text}
        elif fields["type"] == "FINAL_RESPONSE":
            answer = data["response"]
            assert isinstance(answer, dict)
            answer["payload"] = {"echo": text}

    return change
