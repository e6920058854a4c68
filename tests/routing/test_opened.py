"""``ExecutionOptions.opened``: told when the record is open, before any agent runs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from intentusnet import (
    FileExecutionStore,
    IdempotencyTimeout,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    RecordStatus,
    compute_hash,
)
from intentusnet.routing.seams import ExecutionOptions
from intentusnet.store.file.layout import relative_path

ORDER = {"intent": {"name": "order"}, "payload": {"n": 1}}


def _router(store: object, ran: list[str]) -> IntentRouter:
    router = IntentRouter(store=store)  # type: ignore[arg-type]

    @router.agent("order", name="order")
    def order(env: object, ctx: object) -> dict[str, int]:
        ran.append("agent")
        return {"n": 1}

    return router


def test_opened_is_told_the_id_once_the_record_is_on_disk(tmp_path: Path) -> None:
    """The callback gets the id while the record is in the store, before the agent."""
    ran: list[str] = []
    seen: list[tuple[str, RecordStatus, list[str]]] = []
    with FileExecutionStore(tmp_path) as store, _router(store, ran) as router:

        def opened(execution_id: str) -> None:
            status = store.load(execution_id).header.status
            seen.append((execution_id, status, list(ran)))

        answer = router.route_intent(ORDER, options=ExecutionOptions(opened=opened))
    assert seen == [(answer.metadata.execution_id, RecordStatus.IN_PROGRESS, [])]
    assert ran == ["agent"]


def test_opened_on_the_async_route() -> None:
    """``await route(options=ExecutionOptions(opened=...))`` tells it too."""
    seen: list[str] = []
    with _router(MemoryExecutionStore(), []) as router:
        options = ExecutionOptions(opened=seen.append)
        answer = asyncio.run(router.route(ORDER, options=options))
    assert seen == [answer.metadata.execution_id]


def test_nothing_recorded_nothing_told() -> None:
    """A router without a store opens no record: the callback is not called."""
    seen: list[str] = []
    with _router(None, []) as router:
        answer = router.route_intent(
            ORDER, options=ExecutionOptions(opened=seen.append)
        )
    assert answer.status == "success"
    assert seen == []


def test_keyed_opened_names_the_keys_execution_once() -> None:
    """With a key: told once by the run that opens it; a finished key tells none."""
    ran: list[str] = []
    with _router(MemoryExecutionStore(), ran) as router:
        first: list[str] = []
        answer = router.route_intent(
            ORDER,
            options=ExecutionOptions(opened=first.append),
            idempotency_key="k-1",
        )
        again: list[str] = []
        repeated = router.route_intent(
            ORDER,
            options=ExecutionOptions(opened=again.append),
            idempotency_key="k-1",
        )
    assert first == [answer.metadata.execution_id]
    assert again == []  # finished: the recorded answer comes at once
    assert repeated.metadata.from_replay
    assert ran == ["agent"]


def test_keyed_caller_waiting_is_told_the_running_execution() -> None:
    """A second caller of a running key is told its id before the answer comes."""
    release = threading.Event()
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("order", name="order")
    def order(env: object, ctx: object) -> dict[str, int]:
        release.wait(10)
        return {"n": 1}

    told_first: list[str] = []
    told_second = threading.Event()
    second: list[str] = []
    answers: list[object] = []

    def tell_second(execution_id: str) -> None:
        second.append(execution_id)
        told_second.set()

    def call(opened: object) -> None:
        options = ExecutionOptions(opened=opened)  # type: ignore[arg-type]
        answers.append(router.route_intent(ORDER, options=options, idempotency_key="k"))

    with router:
        one = threading.Thread(target=call, args=(told_first.append,))
        one.start()
        while not told_first:
            one.join(0.01)
        two = threading.Thread(target=call, args=(tell_second,))
        two.start()
        assert told_second.wait(10), "the waiting caller was not told"
        assert second == told_first
        release.set()
        one.join(10)
        two.join(10)
    assert len(answers) == 2


def test_a_key_allows_no_other_option() -> None:
    """With a key, options carrying anything but ``opened`` are refused."""
    with (
        _router(MemoryExecutionStore(), []) as router,
        pytest.raises(ValueError, match="only opened"),
    ):
        router.route_intent(
            ORDER, options=ExecutionOptions(execution_id="x"), idempotency_key="k"
        )


# A process that creates a record file exclusively, as the file store does, and is
# killed before it writes the header: the state a crash (or a power loss before the
# file's data reached the disk) leaves between a record's creation and its first line.
_KILLED_CREATING = """
import os, signal, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path), exist_ok=True)
os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_key_whose_record_was_never_written_says_so(tmp_path: Path) -> None:
    """A key's record left empty by a killed creator: a plain error, nothing run."""
    ran: list[str] = []
    keyed = {**ORDER, "routing": {"timeoutMs": 300}}
    envelope_hash = compute_hash(IntentEnvelope.model_validate(keyed))
    with FileExecutionStore(tmp_path) as store, _router(store, ran) as router:
        claim = store.claim_key("order-9", envelope_hash, "exec-" + "a" * 32)
        claim.release()
        killed = subprocess.run(
            [
                sys.executable,
                "-c",
                _KILLED_CREATING,
                str(tmp_path / relative_path(claim.execution_id)),
            ],
            check=False,
            timeout=30,
        )
        assert killed.returncode == -9
        with pytest.raises(IdempotencyTimeout, match="never started") as raised:
            router.route_intent(keyed, idempotency_key="order-9")
        assert "intentusnet prune" in str(raised.value)
        assert ran == []
        store.prune(timedelta(days=1))
        answer = router.route_intent(keyed, idempotency_key="order-9")
    assert answer.payload == {"n": 1}
    assert ran == ["agent"]
