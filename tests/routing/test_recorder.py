"""The recorder: every event is on disk before agent code runs, in few writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from recordkit import disk_fills_mid_write, record_file, response, start

from intentusnet import (
    AgentDefinition,
    IntentEnvelope,
    IntentRef,
    IntentRouter,
    RoutingOptions,
)
from intentusnet.errors import StoreError
from intentusnet.record.model import EventType, RecordStatus, ReplayableReason
from intentusnet.store import FileExecutionStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory, closed after the test."""
    with FileExecutionStore(tmp_path / "records") as opened:
        yield opened


def _types(path: Path) -> list[str]:
    """The event types of a record file's complete lines (line 1 is the header)."""
    import orjson

    lines = path.read_bytes().split(b"\n")[1:-1]
    return [orjson.loads(line)["type"] for line in lines]


def test_an_agent_sees_every_earlier_event_on_disk(
    store: FileExecutionStore,
) -> None:
    """When agent code runs, each event before it has reached the OS, sealed."""
    seen: dict[str, list[str]] = {}
    router = IntentRouter(store=store)

    def first(env: IntentEnvelope, ctx: object) -> dict[str, object]:
        path = record_file(store, ctx.execution_id)  # type: ignore[attr-defined]
        seen["first"] = _types(path)
        raise RuntimeError("fall back")

    def second(env: IntentEnvelope, ctx: object) -> dict[str, object]:
        path = record_file(store, ctx.execution_id)  # type: ignore[attr-defined]
        seen["second"] = _types(path)
        return {"ok": True}

    router.register(AgentDefinition(name="a", intents=["work"], priority=1), first)
    router.register(AgentDefinition(name="b", intents=["work"], priority=2), second)
    envelope = IntentEnvelope(
        intent=IntentRef(name="work"), routing=RoutingOptions(strategy="FALLBACK")
    )
    answer = router.route_intent(envelope)
    router.close()
    assert answer.status == "success"
    assert seen["first"] == [
        "INTENT_RECEIVED",
        "ROUTER_DECISION",
        "AGENT_ATTEMPT_START",
    ]
    assert seen["second"] == [
        *seen["first"],
        "AGENT_ATTEMPT_END",
        "FALLBACK_TRIGGERED",
        "AGENT_ATTEMPT_START",
    ]
    execution_id = answer.metadata.execution_id
    assert execution_id is not None
    assert store.verify(execution_id).valid
    assert store.load(execution_id).header.status is RecordStatus.COMPLETED


def test_events_followed_by_router_code_share_one_write(
    store: FileExecutionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DIRECT execution is three writes: header, before and after the agent."""
    router = IntentRouter(store=store)
    router.register(AgentDefinition(name="echo", intents=["echo"]), lambda e, c: {})
    router.route_intent(IntentEnvelope(intent=IntentRef(name="echo")))  # warm up
    writes: list[bytes] = []
    real_write = os.write

    def spy(fd: int, data: bytes) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
            writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    answer = router.route_intent(IntentEnvelope(intent=IntentRef(name="echo")))
    monkeypatch.undo()
    router.close()
    assert [chunk.count(b"\n") for chunk in writes] == [1, 3, 2]
    execution_id = answer.metadata.execution_id
    assert execution_id is not None
    assert b"".join(writes) == record_file(store, execution_id).read_bytes()
    assert store.verify(execution_id).valid


def test_a_held_line_is_written_by_close(store: FileExecutionStore) -> None:
    """append_soon's line reaches the file with the next write, or on close()."""
    writer = start(store)
    path = record_file(store, writer.execution_id)
    writer.append_soon(EventType.AGENT_ATTEMPT_END, {"agent": "echo", "attempt": 1})
    assert path.read_bytes().count(b"\n") == 4
    writer.close()
    assert path.read_bytes().count(b"\n") == 5
    record = store.load(writer.execution_id)
    assert record.events[-1].type is EventType.AGENT_ATTEMPT_END
    assert record.header.status is RecordStatus.INCOMPLETE
    assert store.verify(writer.execution_id).valid


def test_held_lines_survive_a_failed_write(
    store: FileExecutionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails is undone; the held line goes with the next one, chained."""
    writer = start(store)
    writer.append_soon(EventType.AGENT_ATTEMPT_END, {"agent": "echo", "attempt": 1})
    disk_fills_mid_write(monkeypatch)
    with pytest.raises(StoreError, match="No space left"):
        writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "b", "attempt": 2})
    monkeypatch.undo()
    writer.append(EventType.RECORDING_FAILURE, {"error": "disk was full"})
    writer.complete(response(writer.execution_id))
    record = store.load(writer.execution_id)
    assert [e.type for e in record.events[3:]] == [
        EventType.AGENT_ATTEMPT_END,
        EventType.RECORDING_FAILURE,
        EventType.FINAL_RESPONSE,
    ]
    assert store.verify(writer.execution_id).valid
    assert record.header.replayable_reason is ReplayableReason.RECORDING_FAILURE


def test_append_soon_refuses_what_append_refuses(store: FileExecutionStore) -> None:
    """Unknown types, FINAL_RESPONSE and data that is not JSON raise at once."""
    writer = start(store)
    with pytest.raises(ValueError, match="NOT_A_TYPE"):
        writer.append_soon("NOT_A_TYPE", {})
    with pytest.raises(ValueError, match="complete"):
        writer.append_soon(EventType.FINAL_RESPONSE, {})
    with pytest.raises(StoreError, match="not JSON"):
        writer.append_soon(EventType.STEP_START, {"x": object()})  # type: ignore[dict-item]
    writer.complete(response(writer.execution_id))
    assert store.verify(writer.execution_id).valid


ROUTING_CHILD = textwrap.dedent(
    """
    import sys, time
    from intentusnet import AgentDefinition, IntentEnvelope, IntentRef, IntentRouter
    from intentusnet.store import FileExecutionStore

    router = IntentRouter(store=FileExecutionStore(sys.argv[1]))

    def agent(env, ctx):
        if env.payload.get("hang"):
            print(ctx.execution_id, flush=True)
            time.sleep(120)  # killed here
        return {"ok": True}

    router.register(AgentDefinition(name="slow", intents=["work"]), agent)
    done = router.route_intent(IntentEnvelope(intent=IntentRef(name="work")))
    print(done.metadata.execution_id, flush=True)
    router.route_intent(
        IntentEnvelope(intent=IntentRef(name="work"), payload={"hang": True})
    )
    """
)


def test_sigkill_mid_agent_loses_no_event_and_the_record_is_listed(
    store: FileExecutionStore,
) -> None:
    """A router killed inside an agent: both records listed, nothing written lost."""
    child = subprocess.Popen(
        [sys.executable, "-c", ROUTING_CHILD, str(store.root)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        done = child.stdout.readline().strip()
        killed = child.stdout.readline().strip()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    record = store.load(killed)
    assert record.header.status is RecordStatus.INCOMPLETE
    assert [e.type.value for e in record.events] == [
        "INTENT_RECEIVED",
        "ROUTER_DECISION",
        "AGENT_ATTEMPT_START",
    ]
    assert store.verify(killed).valid
    assert {(s.execution_id, s.status) for s in store.list()} == {
        (killed, RecordStatus.INCOMPLETE),
        (done, RecordStatus.COMPLETED),
    }
    assert store.stats().records == 2


#: Routes one intent whose agent fills the disk (argv[2]: "fsize" lowers this
#: process's file size limit to just past the record; "tmpfs" fills the file
#: system with a ballast file) and then answers with 100 KB, so that the final
#: write fails. Prints the execution id and the recording error, then frees the
#: disk and prints the record's state as the store reads it.
DISK_FILLS_CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from intentusnet import AgentDefinition, IntentEnvelope, IntentRef, IntentRouter
    from intentusnet.store import FileExecutionStore

    root, how = sys.argv[1], sys.argv[2]
    ballast = os.path.join(os.path.dirname(root), "ballast")
    unlimited = resource.getrlimit(resource.RLIMIT_FSIZE)[1]

    def fill_the_disk(record):
        if how == "fsize":
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not a signal
            limit = os.path.getsize(record) + 1024
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, unlimited))
            return
        fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
        for size in (65536, 4096, 256, 16, 1):
            try:
                while os.write(fd, b"x" * size):
                    pass
            except OSError:
                pass
        os.close(fd)

    router = IntentRouter(store=FileExecutionStore(root))

    def agent(env, ctx):
        (record,) = [
            os.path.join(d, f)
            for d, _, files in os.walk(root)
            for f in files
            if f == ctx.execution_id + ".jsonl"
        ]
        fill_the_disk(record)
        return {"text": "y" * 100_000}

    router.register(AgentDefinition(name="big", intents=["work"]), agent)
    answer = router.route_intent(IntentEnvelope(intent=IntentRef(name="work")))
    router.close()
    if how == "tmpfs":
        os.unlink(ballast)
    else:
        resource.setrlimit(resource.RLIMIT_FSIZE, (unlimited, unlimited))
    execution_id = answer.metadata.execution_id
    with FileExecutionStore(root) as store:
        header = store.load(execution_id).header
        (listed,) = store.list()
        print(json.dumps({
            "executionId": execution_id,
            "recordingError": answer.metadata.recording_error,
            "status": header.status.value,
            "reason": header.replayable_reason.value,
            "events": [e.type.value for e in store.load(execution_id).events],
            "listed": [listed.status.value, listed.replayable_reason.value],
            "valid": store.verify(execution_id).valid,
        }))
    """
)


def _disk_fills_at_the_final_write(command: list[str]) -> dict[str, object]:
    import orjson

    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = orjson.loads(done.stdout.splitlines()[-1])
    assert isinstance(found, dict)
    assert "could not write the final response" in str(found["recordingError"])
    return found


def _reads_as_a_recording_failure(found: dict[str, object]) -> None:
    assert found["reason"] == "recording_failure"
    assert found["status"] == "incomplete"
    assert found["listed"] == ["incomplete", "recording_failure"]
    assert found["events"] == [
        "INTENT_RECEIVED",
        "ROUTER_DECISION",
        "AGENT_ATTEMPT_START",
        "RECORDING_FAILURE",
    ]
    assert found["valid"] is True


def test_a_file_size_limit_reached_at_the_final_write_is_a_recording_failure(
    tmp_path: Path,
) -> None:
    """The kernel refuses the final write (RLIMIT_FSIZE): the record says why."""
    root = tmp_path / "records"
    found = _disk_fills_at_the_final_write(
        [sys.executable, "-c", DISK_FILLS_CHILD, str(root), "fsize"]
    )
    _reads_as_a_recording_failure(found)
    with FileExecutionStore(root) as store:
        record = store.load(str(found["executionId"]))
        assert record.header.replayable_reason is ReplayableReason.RECORDING_FAILURE
        failure = record.events[-1].data
        assert "could not write the final response" in str(failure["error"])
        assert failure["unwritten"] == ["AGENT_ATTEMPT_END"]


def _can_mount_tmpfs() -> bool:
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_full_disk_at_the_final_write_is_a_recording_failure(tmp_path: Path) -> None:
    """On a real tmpfs filled while the agent runs, the record says why it stops."""
    if not _can_mount_tmpfs():
        pytest.skip("needs root and a private mount namespace to mount a small tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = tmp_path / "child.py"
    script.write_text(DISK_FILLS_CHILD)
    found = _disk_fills_at_the_final_write(
        [
            "unshare",
            "--mount",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=2m tmpfs "{disk}" && '
            f'exec "{sys.executable}" "{script}" "{disk}/records" tmpfs',
        ]
    )
    _reads_as_a_recording_failure(found)


def test_a_cancelled_routing_call_closes_its_record_incomplete(
    store: FileExecutionStore,
) -> None:
    """Cancelled mid-agent: no answer, and the record reads incomplete at once."""
    import asyncio

    router = IntentRouter(store=store)
    entered: list[str] = []

    @router.agent("wait", name="waiter")
    async def waiter(env: IntentEnvelope, ctx: object) -> dict[str, int]:
        entered.append(ctx.execution_id)  # type: ignore[attr-defined]
        await asyncio.sleep(30)
        return {}

    async def cancelled() -> None:
        route = asyncio.ensure_future(router.route({"intent": {"name": "wait"}}))
        while not entered:
            await asyncio.sleep(0.01)
        route.cancel()
        with pytest.raises(asyncio.CancelledError):
            await route
        # the task (and its frames) still alive: the record is closed already
        record = store.load(entered[0])
        assert record.header.status is RecordStatus.INCOMPLETE
        assert record.header.replayable_reason is (
            ReplayableReason.EXECUTION_INCOMPLETE
        )
        assert route.cancelled()

    asyncio.run(asyncio.wait_for(cancelled(), 10))
    router.close()


def test_an_id_whose_record_exists_runs_nothing(store: FileExecutionStore) -> None:
    """Routing under an id already recorded raises RecordExists; no agent runs."""
    from intentusnet.errors import RecordExists
    from intentusnet.routing.seams import ExecutionOptions

    router = IntentRouter(store=store)
    ran: list[int] = []

    @router.agent("work")
    def work(env: IntentEnvelope, ctx: object) -> dict[str, object]:
        ran.append(1)
        return {"ok": True}

    first = router.route_intent({"intent": {"name": "work"}})
    taken = first.metadata.execution_id
    assert taken is not None
    with pytest.raises(RecordExists):
        router.route_intent(
            {"intent": {"name": "work"}}, options=ExecutionOptions(execution_id=taken)
        )
    assert ran == [1]
    assert store.load(taken).header.status is RecordStatus.COMPLETED
