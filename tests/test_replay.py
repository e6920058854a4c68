"""ReplayEngine: the recorded answer, what it refuses, and what forcing gives."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from recordkit import (
    attempt_end,
    change_answer,
    envelope,
    finished,
    record_file,
    reseal,
    response,
    start,
)

from intentusnet._util.jsonvalue import JSONObject
from intentusnet.errors import ReplayHashMismatch, ReplayNotAllowed, SignatureError
from intentusnet.hashing import compute_hash
from intentusnet.record.keys import SigningKey
from intentusnet.record.model import EventType
from intentusnet.record.signing import KeyRing, SignatureStatus
from intentusnet.replay import ReplayEngine, diff_paths
from intentusnet.store import FileExecutionStore, MemoryExecutionStore


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay must not reach outside the record: any connection attempt fails."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("replay tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store."""
    return MemoryExecutionStore()


def test_replay_returns_the_recorded_response(store: MemoryExecutionStore) -> None:
    """A completed record replays its exact payload, status, error and metadata."""
    execution_id = finished(store)
    result = ReplayEngine(store.load(execution_id)).replay()
    recorded = response(execution_id)
    assert result.payload == recorded["payload"]
    assert result.metadata == recorded["metadata"]
    assert (result.status, result.error) == ("success", None)
    assert result.from_replay
    assert result.original_execution_id == execution_id
    assert (result.forced, result.partial, result.warnings) == (False, False, ())


def test_failed_record_replays_its_error(store: MemoryExecutionStore) -> None:
    """The error response of a failed execution is what replays."""
    execution_id = finished(store, status="error")
    result = ReplayEngine(store.load(execution_id)).replay()
    assert result.status == "error"
    assert result.payload is None
    assert result.error == response(execution_id, status="error")["error"]


def test_from_store_loads_and_verifies(tmp_path: Path) -> None:
    """from_store reads the record through the store."""
    with FileExecutionStore(tmp_path) as store:
        execution_id = finished(store)
        engine = ReplayEngine.from_store(store, execution_id)
    assert engine.is_replayable() == (True, None)
    assert engine.replay().original_execution_id == execution_id


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        ("unfinished", "execution_incomplete"),
        ("invalidated", "manually_invalidated"),
        ("recording_failure", "recording_failure"),
        ("wrong_hash", "envelope_invalid"),
    ],
)
def test_not_replayable_record_is_refused_with_its_reason(
    store: MemoryExecutionStore, spoil: str, reason: str
) -> None:
    """Each reason a record is not replayable is the reason replay() refuses."""
    if spoil == "wrong_hash":
        writer = start(store, envelope_hash="sha256:" + "1" * 64)
    else:
        writer = start(store)
    if spoil == "recording_failure":
        writer.append(EventType.RECORDING_FAILURE, {"error": "disk full"})
    if spoil == "unfinished":
        writer.close()
    else:
        writer.complete(response(writer.execution_id))
    if spoil == "invalidated":
        store.invalidate(writer.execution_id, "stale")
    engine = ReplayEngine(store.load(writer.execution_id))
    assert engine.is_replayable() == (False, reason)
    with pytest.raises(ReplayNotAllowed) as caught:
        engine.replay()
    assert caught.value.reason == reason
    assert caught.value.execution_id == writer.execution_id


def test_matching_envelope_replays_even_with_other_volatile_fields(
    store: MemoryExecutionStore,
) -> None:
    """An envelope that differs only in unhashed fields (request id) matches."""
    execution_id = finished(store)
    again = envelope()
    again["metadata"] = {"requestId": "req-other", "createdAt": "2030-01-01T00:00:00Z"}
    result = ReplayEngine(store.load(execution_id)).replay(env=again)
    assert result.payload == {"echo": "hello"}


def test_mismatching_envelope_names_both_hashes_and_the_paths(
    store: MemoryExecutionStore,
) -> None:
    """A different envelope raises ReplayHashMismatch saying what changed."""
    record = store.load(finished(store))
    other = envelope("goodbye")
    other["context"] = {"tenant": "acme"}
    with pytest.raises(ReplayHashMismatch) as caught:
        ReplayEngine(record).replay(env=other)
    error = caught.value
    assert error.expected == record.header.envelope_hash
    assert error.actual == compute_hash(other)
    assert error.paths == ["payload.text", "tenant"]
    assert "payload.text" in str(error)


def test_envelope_object_with_to_wire_is_accepted(store: MemoryExecutionStore) -> None:
    """Any object with to_wire() (an IntentEnvelope) can be checked against a record."""

    class Wired:
        def to_wire(self) -> JSONObject:
            return envelope()

    record = store.load(finished(store))
    assert ReplayEngine(record).replay(env=Wired()).payload == {"echo": "hello"}


def test_forced_incomplete_replay_gives_last_successful_output(
    store: MemoryExecutionStore,
) -> None:
    """Forcing an unfinished record returns the last agent output, marked partial."""
    writer = start(store)
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"draft": 1}))
    writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": 2})
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"draft": 2}))
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end(None, outcome="error"))
    writer.close()
    result = ReplayEngine(store.load(writer.execution_id)).replay(force=True)
    assert (result.partial, result.forced, result.status) == (True, True, "success")
    assert result.payload == {"draft": 2}
    assert result.metadata["eventsRecorded"] == 7
    assert result.metadata["lastEvent"] == "AGENT_ATTEMPT_END"
    text = " ".join(result.warnings)
    assert "execution_incomplete" in text
    assert "never finished" in text
    assert "'echo'" in text


def test_forced_replay_with_no_finished_agent_has_no_payload(
    store: MemoryExecutionStore,
) -> None:
    """If no agent finished, a forced replay has payload None and says so."""
    writer = start(store)
    writer.close()
    result = ReplayEngine(store.load(writer.execution_id)).replay(force=True)
    assert result.payload is None
    assert result.partial
    assert result.status == "error"
    assert result.error is not None
    assert any("no agent finished" in w for w in result.warnings)


def test_forced_invalidated_replay_returns_response_with_warning(
    store: MemoryExecutionStore,
) -> None:
    """Forcing an invalidated record returns its response, loudly."""
    execution_id = finished(store)
    store.invalidate(execution_id, "stale")
    result = ReplayEngine(store.load(execution_id)).replay(force=True)
    assert result.payload == {"echo": "hello"}
    assert result.forced
    assert not result.partial
    assert result.warnings
    assert "manually_invalidated" in result.warnings[0]


def test_force_on_replayable_record_changes_nothing(
    store: MemoryExecutionStore,
) -> None:
    """force=True on a replayable record is a normal replay without warnings."""
    result = ReplayEngine(store.load(finished(store))).replay(force=True)
    assert (result.forced, result.warnings) == (False, ())


def test_result_to_json_is_camel_case(store: MemoryExecutionStore) -> None:
    """ReplayResult.to_json() gives the wire form the CLI prints."""
    wire = ReplayEngine(store.load(finished(store))).replay().to_json()
    assert set(wire) == {
        "payload",
        "metadata",
        "status",
        "error",
        "fromReplay",
        "originalExecutionId",
        "forced",
        "partial",
        "warnings",
    }
    assert orjson.loads(orjson.dumps(wire)) == wire


def test_diff_paths_names_every_difference() -> None:
    """diff_paths reports changed, added and removed values at their JSON paths."""
    left = {"a": {"b": [1, 2, 3], "c": 1}, "d": True, "odd key": 1}
    right = {"a": {"b": [1, 5], "c": 1.0}, "d": 1, "e": None, "odd key": 2}
    assert diff_paths(left, right) == [
        "a.b[1]",
        "a.b[2]",
        "d",
        "e",
        "['odd key']",
    ]
    assert diff_paths(left, left) == []
    assert len(diff_paths(list(range(100)), list(range(1, 101)), limit=5)) == 5


def test_replay_runs_no_agent_code(tmp_path: Path) -> None:
    """A routed execution replays without calling its agent again."""
    import intentusnet.routing.router as router_module

    calls: list[int] = []
    with FileExecutionStore(tmp_path) as store:
        with router_module.IntentRouter(store=store) as router:

            @router.agent("echo", name="echo")
            def echo(env: object, ctx: object) -> JSONObject:
                calls.append(1)
                return {"echo": "hello"}

            answer = router.route_intent(envelope())
        execution_id = answer.metadata.execution_id
        assert calls == [1]
        result = ReplayEngine.from_store(store, execution_id).replay(env=envelope())
    assert calls == [1]
    assert result.payload == answer.payload == {"echo": "hello"}


def test_read_path_imports_neither_pydantic_nor_httpx() -> None:
    """Loading, verifying and replaying records needs no pydantic or httpx."""
    probe = (
        "import sys, intentusnet.replay, intentusnet.store; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'httpx') or m == 'intentusnet.envelope'); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_events_yields_each_line_verified(store: MemoryExecutionStore) -> None:
    """events() walks the header then each event, checking each line's hash."""
    execution_id = finished(store)
    engine = ReplayEngine.from_store(store, execution_id)
    walked = list(engine.events())
    record = engine.record
    assert [line.line for line in walked] == list(range(1, len(record.events) + 2))
    assert walked[0].event is None
    assert [line.event for line in walked[1:]] == list(record.events)
    assert all(line.ok and line.problem is None for line in walked)
    assert [line.verified for line in walked] == [line.line for line in walked]
    assert {line.total for line in walked} == {len(walked)}
    assert walked[-1].hash == record.header.chain_head
    doc = walked[1].to_json()
    assert doc["event"] == record.events[0].to_json()
    assert (doc["ok"], doc["verified"]) == (True, 2)


def test_events_of_changed_bytes_name_the_changed_line(
    store: MemoryExecutionStore,
) -> None:
    """A changed line fails its check; the lines after it still link to it."""
    execution_id = finished(store)
    engine = ReplayEngine.from_store(store, execution_id)
    data = bytearray(store.raw(execution_id))
    second = data.index(b"\n") + 1
    data[second + 20] ^= 0x01
    walked = list(engine.events(bytes(data)))
    assert [line.ok for line in walked[:3]] == [True, False, True]
    assert "hash mismatch, the line was changed" in (walked[1].problem or "")
    assert walked[-1].verified == len(walked) - 1


def test_events_need_the_record_bytes(store: MemoryExecutionStore) -> None:
    """An engine built from a record alone has no bytes to check: ValueError."""
    engine = ReplayEngine(store.load(finished(store)))
    with pytest.raises(ValueError, match="checks the record's bytes"):
        next(engine.events())


def test_replay_with_keys_checks_the_signature_first(tmp_path: Path) -> None:
    """Signed records replay; forged, unknown-key, unsigned-if-required ones never."""
    key = SigningKey.generate()
    ring = KeyRing([key.public_key])
    signed = FileExecutionStore(tmp_path / "signed", signing_key=key)
    good, forged = finished(signed, "good"), finished(signed, "forged")
    engine = ReplayEngine.from_store(signed, good, keys=ring)
    assert engine.signature is not None
    assert engine.signature.status is SignatureStatus.SIGNED_VALID
    assert engine.replay().payload == {"echo": "hello"}
    path = record_file(signed, forged)
    path.write_bytes(reseal(path.read_bytes(), change_answer("forged")))
    record = signed.load(forged)
    assert ReplayEngine(record).replay().payload == {"echo": "forged"}  # no keys
    with pytest.raises(SignatureError, match="signed-invalid") as caught:
        ReplayEngine(record, keys=ring)
    assert (caught.value.status, caught.value.exit_code) == ("signed-invalid", 6)
    with pytest.raises(SignatureError, match="unknown-key"):
        ReplayEngine.from_store(
            signed, good, keys=KeyRing([SigningKey.generate().public_key])
        )
    unsigned = MemoryExecutionStore()
    plain = unsigned.load(finished(unsigned))
    assert ReplayEngine(plain, keys=ring).replay().status == "success"
    strict = KeyRing([key.public_key], require_signature=True)
    with pytest.raises(SignatureError, match="unsigned"):
        ReplayEngine(plain, keys=strict)


def test_events_hold_a_signed_record_to_the_order_verify_does(tmp_path: Path) -> None:
    """Walking a signed record: its signature verifies; cut off, the end fails."""
    signed = FileExecutionStore(tmp_path / "signed", signing_key=SigningKey.generate())
    execution_id = finished(signed)
    engine = ReplayEngine.from_store(signed, execution_id)
    walked = list(engine.events())
    assert walked[-1].event is not None
    assert walked[-1].event.type is EventType.SIGNATURE
    assert all(line.ok for line in walked)
    data = signed.raw(execution_id)
    unsigned = data[: data.rstrip(b"\n").rindex(b"\n") + 1]  # the signature removed
    cut = list(engine.events(unsigned))
    assert [line.ok for line in cut] == [True] * (len(cut) - 1) + [False]
    assert "closed without a signature" in (cut[-1].problem or "")
    assert cut[-1].verified == cut[-1].total - 1
