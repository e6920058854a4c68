"""Record format: assembly, derived state, and tamper evidence on raw bytes."""

from __future__ import annotations

import copy
import hashlib
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from recordkit import (
    attempt_end,
    edit,
    envelope,
    finished,
    line_offsets,
    record_file,
    reseal,
    response,
    start,
)

from intentusnet._util.jsonvalue import JSONObject
from intentusnet.errors import (
    RecordIntegrityError,
    UnsupportedSchemaVersion,
)
from intentusnet.record.format import GENESIS_HASH, seal
from intentusnet.record.model import (
    SCHEMA_VERSION,
    EventType,
    RecordStatus,
    ReplayableReason,
)
from intentusnet.record.reader import parse_record
from intentusnet.record.verify import verify_bytes
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore, MemoryExecutionStore

DOCS = Path(__file__).resolve().parents[2] / "docs" / "records.md"


@pytest.fixture
def store(tmp_path: Path) -> FileExecutionStore:
    """A file store in a temporary directory."""
    return FileExecutionStore(tmp_path / "records")


def test_completed_record_loads_with_its_events_in_order(
    store: FileExecutionStore,
) -> None:
    """A finished record loads as completed and replayable, events chained."""
    execution_id = finished(store)
    record = store.load(execution_id)
    header = record.header
    assert (header.status, header.replayable, header.replayable_reason) == (
        RecordStatus.COMPLETED,
        True,
        None,
    )
    assert [e.type for e in record.events] == [
        EventType.INTENT_RECEIVED,
        EventType.ROUTER_DECISION,
        EventType.AGENT_ATTEMPT_START,
        EventType.AGENT_ATTEMPT_END,
        EventType.FINAL_RESPONSE,
    ]
    assert [e.seq for e in record.events] == [1, 2, 3, 4, 5]
    for before, after in zip(record.events, record.events[1:], strict=False):
        assert after.prev_hash == before.hash
        assert after.at_ms >= before.at_ms
    assert header.chain_head == record.events[-1].hash
    assert record.final_response == response(execution_id)
    assert (header.intent_name, header.agent, header.duration_ms) == (
        "echo",
        "echo",
        1.5,
    )
    assert header.completed_utc is not None
    assert header.completed_utc >= header.created_utc
    assert record.envelope == envelope()


def test_error_response_makes_a_failed_but_replayable_record(
    store: FileExecutionStore,
) -> None:
    """An error response is the recorded answer: failed, still replayable."""
    header = store.load(finished(store, status="error")).header
    assert (header.status, header.replayable) == (RecordStatus.FAILED, True)


def test_open_record_is_in_progress_and_abandoned_one_incomplete(
    store: FileExecutionStore,
) -> None:
    """A record is in progress while its writer is open, incomplete once abandoned."""
    writer = start(store)
    header = store.load(writer.execution_id).header
    assert header.status is RecordStatus.IN_PROGRESS
    assert header.replayable_reason is ReplayableReason.EXECUTION_INCOMPLETE
    writer.close()
    header = store.load(writer.execution_id).header
    assert header.status is RecordStatus.INCOMPLETE
    assert not header.replayable


def test_recording_failure_event_makes_record_not_replayable(
    store: FileExecutionStore,
) -> None:
    """A record whose recorder reported a failure is never replayed."""
    writer = start(store)
    writer.append(EventType.RECORDING_FAILURE, {"error": "disk full"})
    writer.complete(response(writer.execution_id))
    header = store.load(writer.execution_id).header
    assert header.status is RecordStatus.COMPLETED
    assert header.replayable_reason is ReplayableReason.RECORDING_FAILURE


def test_invalidated_record_is_manually_invalidated(store: FileExecutionStore) -> None:
    """An INVALIDATED event after the final response makes the record not replayable."""
    execution_id = finished(store)
    store.invalidate(execution_id, "stale answer")
    record = store.load(execution_id)
    assert record.header.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED
    assert record.events[-1].data == {"reason": "stale answer"}


def test_envelope_not_matching_its_recorded_hash_is_envelope_invalid(
    store: FileExecutionStore,
) -> None:
    """A record whose envelope does not hash to the recorded hash is not replayable."""
    writer = start(store, envelope_hash="sha256:" + "ab" * 32)
    writer.complete(response(writer.execution_id))
    header = store.load(writer.execution_id).header
    assert header.replayable_reason is ReplayableReason.ENVELOPE_INVALID


def test_envelope_resealed_after_a_load_is_envelope_invalid_on_the_next(
    store: FileExecutionStore,
) -> None:
    """A record loaded once, then its envelope changed and resealed, loads invalid."""
    execution_id = finished(store)
    assert store.load(execution_id).header.replayable
    path = record_file(store, execution_id)

    def change(number: int, fields: JSONObject) -> None:
        if number == 1:
            fields["envelope"] = envelope("changed")  # envelopeHash kept

    path.write_bytes(reseal(path.read_bytes(), change))
    header = store.load(execution_id).header
    assert header.replayable_reason is ReplayableReason.ENVELOPE_INVALID


def test_envelope_that_is_not_json_on_load_is_envelope_invalid(tmp_path: Path) -> None:
    """An envelope holding a value JSON cannot carry exactly is envelope_invalid."""
    store = MemoryExecutionStore()
    wire = envelope()
    wire["payload"] = {"big": 2**60}  # beyond +-(2**53-1)
    writer = store.open(wire, envelope_hash="sha256:" + "0" * 64)
    writer.complete(response(writer.execution_id))
    header = store.load(writer.execution_id).header
    assert header.replayable_reason is ReplayableReason.ENVELOPE_INVALID


def test_every_changed_byte_anywhere_is_detected(store: FileExecutionStore) -> None:
    """Changing any single byte of a record, first and last line included, raises."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    original = path.read_bytes()
    for offset in range(len(original)):
        changed = bytearray(original)
        changed[offset] ^= 0x01
        with pytest.raises(RecordIntegrityError):
            parse_record(bytes(changed), execution_id, lambda _owner: False)


def test_truncation_at_any_offset_loses_only_the_torn_line(
    store: FileExecutionStore,
) -> None:
    """A record cut anywhere keeps each whole line before the cut, reads incomplete."""
    execution_id = finished(store)
    original = record_file(store, execution_id).read_bytes()
    first_line = original.index(b"\n") + 1
    full = parse_record(original, execution_id, lambda _owner: False)
    for cut in range(first_line, len(original)):
        record = parse_record(original[:cut], execution_id, lambda _owner: False)
        whole_lines = original[:cut].count(b"\n")
        assert record.events == full.events[: whole_lines - 1]
        assert record.torn_tail == (original[cut - 1] != 0x0A)
        assert record.header.status is RecordStatus.INCOMPLETE
        assert record.header.replayable_reason is ReplayableReason.EXECUTION_INCOMPLETE


def test_torn_last_line_on_disk_reads_as_incomplete(store: FileExecutionStore) -> None:
    """A file ending in a partly written line loads as incomplete, not damaged."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(path.read_bytes()[:-40])
    record = store.load(execution_id)
    assert record.torn_tail
    assert record.header.status is RecordStatus.INCOMPLETE
    assert record.final_response is None
    assert record.events[-1].type is EventType.AGENT_ATTEMPT_END


def test_cut_header_line_holds_no_record_and_verify_sees_the_cut(
    store: FileExecutionStore,
) -> None:
    """A settled record cut inside line 1: load and verify both say lines were cut."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(RecordIntegrityError, match="lines were cut from its end"):
        store.load(execution_id)
    report = store.verify(execution_id)
    assert not report.valid
    assert not report.recording_failure
    assert "lines were cut from its end" in report.failures[0]


@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_flipped_byte_names_the_line(store: FileExecutionStore, which: str) -> None:
    """A flipped byte in the first, a middle or the last line names that line."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    starts = line_offsets(path)
    number = {"first": 1, "middle": 3, "last": len(starts)}[which]
    edit(path, starts[number - 1] + 40)
    with pytest.raises(RecordIntegrityError) as caught:
        store.load(execution_id)
    assert caught.value.line == number
    assert caught.value.execution_id == execution_id
    assert f"line {number}:" in str(caught.value)


def test_swapped_lines_break_the_chain(store: FileExecutionStore) -> None:
    """Two events swapped are reported as a broken chain at the first of them."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    lines = path.read_bytes().split(b"\n")
    lines[2], lines[3] = lines[3], lines[2]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(RecordIntegrityError, match="line 3: chain broken"):
        store.load(execution_id)


def test_removed_middle_line_breaks_the_chain(store: FileExecutionStore) -> None:
    """A deleted event line is detected at the line that followed it."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    lines = path.read_bytes().split(b"\n")
    del lines[2]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(RecordIntegrityError, match="line 3: chain broken"):
        store.load(execution_id)


def test_replaced_final_newline_is_an_edit_not_a_crash(
    store: FileExecutionStore,
) -> None:
    """A whole last line whose newline became another byte is tampering."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    edit(path, path.stat().st_size - 1, xor=0x20)
    with pytest.raises(RecordIntegrityError, match="newline was replaced"):
        store.load(execution_id)


@pytest.mark.parametrize("junk", [b"x", b'{"seq":7,"type":"FINAL_RESP', b"\x00" * 9])
def test_bytes_after_the_last_line_of_a_completed_record_fail(
    store: FileExecutionStore, junk: bytes
) -> None:
    """Unterminated bytes appended to a completed record are an edit, not a crash."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(path.read_bytes() + junk)
    with pytest.raises(
        RecordIntegrityError, match="after the last line of a completed"
    ):
        store.load(execution_id)
    report = store.verify(execution_id)
    assert not report.valid
    assert report.failures == (
        f"line 7: {len(junk)} bytes after the last line of a completed record "
        "(a completed record is appended to by whole lines only)",
    )


def test_torn_tail_of_a_record_being_completed_is_tolerated(
    store: FileExecutionStore,
) -> None:
    """While its writer still holds it, a partly visible last write is a torn tail."""
    execution_id = finished(store)
    data = record_file(store, execution_id).read_bytes() + b'{"seq":7'
    record = parse_record(data, execution_id, lambda _owner: True)
    assert record.torn_tail
    assert record.header.status is RecordStatus.COMPLETED


def test_record_file_renamed_to_another_id_is_refused(
    store: FileExecutionStore,
) -> None:
    """A record's header must name the id of the file it is in."""
    execution_id = finished(store)
    data = record_file(store, execution_id).read_bytes()
    with pytest.raises(RecordIntegrityError, match="header names execution"):
        parse_record(data, "exec-other", lambda _owner: False)


def test_newer_schema_version_is_refused_clearly() -> None:
    """A record of a future format is refused with a message to upgrade."""
    line, _ = seal({"schemaVersion": SCHEMA_VERSION + 1, "prevHash": GENESIS_HASH})
    with pytest.raises(UnsupportedSchemaVersion) as caught:
        parse_record(line, "exec-1", lambda _owner: False)
    message = str(caught.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert "Upgrade intentusnet" in message
    assert caught.value.code == "unsupported_schema"


def test_missing_schema_version_is_an_integrity_error() -> None:
    """A first line without schemaVersion is not a record."""
    line, _ = seal({"executionId": "exec-1", "prevHash": GENESIS_HASH})
    with pytest.raises(RecordIntegrityError, match="no valid schemaVersion"):
        parse_record(line, "exec-1", lambda _owner: False)


def test_event_after_final_response_other_than_invalidated_is_refused(
    store: FileExecutionStore,
) -> None:
    """Only INVALIDATED (and CACHE_HIT traces) may follow the final response."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    record = store.load(execution_id)
    line, _ = seal(
        {
            "seq": len(record.events) + 1,
            "type": "AGENT_ATTEMPT_START",
            "atMs": 9.0,
            "data": {"agent": "echo", "attempt": 2},
            "prevHash": record.header.chain_head,
        }
    )
    path.write_bytes(path.read_bytes() + line)
    with pytest.raises(RecordIntegrityError, match="after FINAL_RESPONSE"):
        store.load(execution_id)


def test_unknown_event_type_is_refused(store: FileExecutionStore) -> None:
    """A sealed line with an event type this version does not know is refused."""
    writer = start(store)
    writer.close()
    path = record_file(store, writer.execution_id)
    record = store.load(writer.execution_id)
    line, _ = seal(
        {
            "seq": len(record.events) + 1,
            "type": "TELEPORTED",
            "atMs": 1.0,
            "data": {},
            "prevHash": record.header.chain_head,
        }
    )
    path.write_bytes(path.read_bytes() + line)
    with pytest.raises(RecordIntegrityError, match="unknown event type 'TELEPORTED'"):
        store.load(writer.execution_id)


def test_verify_report_counts_lines_and_names_each_failure(
    store: FileExecutionStore,
) -> None:
    """verify() checks every line and reports one failure per edited line."""
    execution_id = finished(store)
    report = store.verify(execution_id)
    assert (report.valid, report.events_total, report.events_verified) == (True, 6, 6)
    path = record_file(store, execution_id)
    starts = line_offsets(path)
    edit(path, starts[1] + 30)
    edit(path, starts[4] + 30)
    report = store.verify(execution_id)
    assert not report.valid
    assert report.events_verified == 4
    assert [f.split(":")[0] for f in report.failures] == ["line 2", "line 5"]


def test_verify_notes_a_torn_tail_without_failing(store: FileExecutionStore) -> None:
    """A torn last line is crash damage: noted, not a failure."""
    writer = start(store)
    writer.close()
    path = record_file(store, writer.execution_id)
    path.write_bytes(path.read_bytes() + b'{"seq":4,"ty')
    report = store.verify(writer.execution_id)
    assert report.valid
    assert report.notes
    assert "torn last line" in report.notes[0]


def test_to_json_gives_camel_case_wire_forms(store: FileExecutionStore) -> None:
    """Records serialise to the camelCase shapes docs/records.md describes."""
    record = store.load(finished(store))
    wire = record.to_json()
    assert set(wire) == {"header", "envelope", "events", "finalResponse", "tornTail"}
    header = wire["header"]
    assert isinstance(header, dict)
    assert header["status"] == "completed"
    assert header["replayableReason"] is None
    assert header["intent"] == {"name": "echo", "version": "1.0"}
    assert orjson.loads(orjson.dumps(wire)) == wire


def _schemas() -> dict[str, object]:
    text = DOCS.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- schema: ([\w-]+) -->\n```json\n(.*?)```", text, re.S)
    return {name: orjson.loads(body) for name, body in blocks}


def test_documented_json_schemas_match_real_lines(store: FileExecutionStore) -> None:
    """Every line of a real record validates against the schemas in docs/records.md."""
    import jsonschema

    schemas = _schemas()
    assert set(schemas) >= {"header-line", "event-line", "header"}
    writer = start(store)
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"echo": 1}))
    writer.append(EventType.RECORDING_FAILURE, {"error": "disk full"})
    writer.complete(response(writer.execution_id))
    store.invalidate(writer.execution_id, "why not")
    lines = record_file(store, writer.execution_id).read_bytes().splitlines()
    jsonschema.validate(orjson.loads(lines[0]), schemas["header-line"])
    for line in lines[1:]:
        jsonschema.validate(orjson.loads(line), schemas["event-line"])
    header = store.load(writer.execution_id).header.to_json()
    jsonschema.validate(header, schemas["header"])


def _resealed(data: bytes, change: Callable[[int, JSONObject], bytes | None]) -> bytes:
    """Re-chain a record after ``change(seq, fields)`` edits event lines.

    ``change`` edits the fields in place, or returns a line body (without its
    hash field) to seal as it is; every line after the header is sealed again.
    """
    lines = data.split(b"\n")[:-1]
    out = [lines[0] + b"\n"]
    prev = "sha256:" + lines[0][-66:-2].decode()
    for line in lines[1:]:
        fields = orjson.loads(line)
        del fields["hash"]
        fields["prevHash"] = prev
        body = change(fields["seq"], fields) or orjson.dumps(fields)[:-1]
        digest = hashlib.sha256(body).hexdigest()
        out.append(body + b',"hash":"sha256:' + digest.encode() + b'"}\n')
        prev = "sha256:" + digest
    return b"".join(out)


def _at_ms_not_a_number(seq: int, fields: JSONObject) -> None:
    if seq == 2:
        fields["atMs"] = "soon"


def test_malformed_event_past_its_type_is_refused_on_load(
    store: FileExecutionStore,
) -> None:
    """A sealed event whose seq and type hold but not the rest: load names its line."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(_resealed(path.read_bytes(), _at_ms_not_a_number))
    with pytest.raises(RecordIntegrityError, match=r"line 3.*numeric atMs"):
        store.load(execution_id)
    report = verify_bytes(path.read_bytes(), execution_id)
    assert not report.valid
    assert [f.split(":")[0] for f in report.failures] == ["line 3"]


def test_catalog_lists_a_record_with_a_malformed_event_as_damaged(
    store: FileExecutionStore,
) -> None:
    """reindex() reads every line: such a record is listed as integrity_failure."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(_resealed(path.read_bytes(), _at_ms_not_a_number))
    assert store.reindex() == 1
    (summary,) = store.list()
    assert summary.replayable_reason is ReplayableReason.INTEGRITY_FAILURE


def test_type_given_twice_in_a_line_is_read_one_way_by_load_and_verify(
    store: FileExecutionStore,
) -> None:
    """A line with a duplicated key (JSON keeps the last) reads alike everywhere.

    The line is parsed once, so load and verify see the same event; here a
    resealed ROUTER_DECISION that also says INVALIDATED reads as INVALIDATED.
    """
    execution_id = finished(store)
    path = record_file(store, execution_id)

    def twice(seq: int, fields: JSONObject) -> bytes | None:
        if seq != 2:
            return None
        body = orjson.dumps(fields)[:-1]
        return body.replace(b',"prevHash"', b',"type":"INVALIDATED","prevHash"')

    path.write_bytes(_resealed(path.read_bytes(), twice))
    record = store.load(execution_id)
    assert record.events[1].type is EventType.INVALIDATED
    assert record.header.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED
    assert verify_bytes(path.read_bytes(), execution_id).valid


def test_envelope_nested_too_deep_on_load_is_envelope_invalid() -> None:
    """An envelope nested past the JSON depth limit is envelope_invalid, no crash."""
    deep: object = 1
    for _ in range(220):  # past MAX_DEPTH (200), within what orjson writes
        deep = [deep]
    wire = envelope()
    wire["payload"] = {"deep": deep}
    line, _ = seal(
        {
            "schemaVersion": SCHEMA_VERSION,
            "executionId": "exec-1",
            "createdUtc": "2026-01-01T00:00:00.000000Z",
            "envelopeHash": "sha256:" + "0" * 64,
            "intent": {"name": "echo", "version": "1.0"},
            "envelope": wire,
            "prevHash": GENESIS_HASH,
        }
    )
    header = parse_record(line, "exec-1", lambda _owner: False).header
    assert header.replayable_reason is ReplayableReason.ENVELOPE_INVALID


def test_a_record_loaded_before_is_checked_again_after_an_edit(
    store: FileExecutionStore,
) -> None:
    """What a load remembers is keyed by the file's exact bytes: an edit is found."""
    execution_id = finished(store)
    store.load(execution_id)
    store.load(execution_id)
    path = record_file(store, execution_id)
    edit(path, line_offsets(path)[-1] + 40)
    with pytest.raises(RecordIntegrityError, match="line 6"):
        store.load(execution_id)


def test_every_load_returns_objects_of_its_own(store: FileExecutionStore) -> None:
    """Changing what one load returned does not change what the next returns."""
    execution_id = finished(store)
    first = store.load(execution_id)
    assert first.final_response is not None
    first.final_response["payload"] = {"echo": "changed"}
    first.envelope["payload"] = {"text": "changed"}
    assert first.header.owner is not None
    first.header.owner["pid"] = -1
    again = store.load(execution_id)
    assert again.final_response == response(execution_id)
    assert again.envelope == envelope()
    assert again.header.owner is not None
    assert again.header.owner["pid"] != -1


def test_record_types_are_immutable_values(store: FileExecutionStore) -> None:
    """Loaded records compare, hash, print and pickle by field and refuse changes."""
    execution_id = finished(store)
    record, again = store.load(execution_id), store.load(execution_id)
    assert record == again
    assert record.events[0] == again.events[0]
    assert record != store.load(finished(store, "other"))
    with pytest.raises(AttributeError):
        record.header.status = RecordStatus.FAILED  # type: ignore[misc]
    with pytest.raises(AttributeError):
        record.events[0].seq = 9  # type: ignore[misc]
    with pytest.raises(AttributeError):
        record.extra = 1  # type: ignore[attr-defined]
    (summary,) = store.list()[:1]
    assert hash(summary) == hash(store.list()[0])
    assert repr(record.events[0]).startswith("ExecutionEvent(seq=1, type=")
    assert pickle.loads(pickle.dumps(record)) == record
    assert copy.copy(record.header) == record.header
    result = ReplayEngine(record).replay()
    assert pickle.loads(pickle.dumps(result)) == result
