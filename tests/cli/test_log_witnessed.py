"""A store's sequencer publishing checkpoints k of n real witnesses cosigned.

Three ``intentusnet witness`` processes on 127.0.0.1 per module; a signed file
store given them (``log_witnesses=``, or ``$INTENTUSNET_LOG_WITNESSES``) sends
each new checkpoint to them after each batch, and publishes it
(``checkpoint.cosigned``) only when the quorum cosigned.
"""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from recordkit import finished

from intentusnet.errors import LogIntegrityError
from intentusnet.record.keys import SigningKey
from intentusnet.store import FileExecutionStore
from intentusnet.store.file.translog import log_folder, store_log
from intentusnet.tlog.audit import log_origin
from intentusnet.tlog.cadence import LogCadence
from intentusnet.tlog.checkpoint import LogCheckpoint
from intentusnet.tlog.cosignature import count_cosigners, parse_cosigner
from intentusnet.tlog.publish import (
    LogWitnesses,
    publish_checkpoint,
    witnesses_from_env,
)

from .support import WitnessProcess

FAST = LogCadence(seconds=0.05, leaves=256)


class Setup:
    """The logs' keys (one per test: the witnesses remember each log), the witnesses."""

    def __init__(self, keys: list[SigningKey], witnesses: list[WitnessProcess]) -> None:
        self.keys, self.witnesses = keys, witnesses

    def entries(self, *which: int) -> list[str]:
        """``URL=VKEY`` of the witnesses ``which``."""
        return [f"{self.witnesses[i].url}={self.witnesses[i].vkey}" for i in which]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """Four logs' keys and three witnesses of those logs, each with its own state."""
    folder = tmp_path_factory.mktemp("witnesses")
    keys = [SigningKey.generate() for _ in range(4)]
    logs = []
    for i, key in enumerate(keys):
        _, public = key.save(folder / f"logkey{i}")
        logs += ["--log", f"{log_origin(key.key_id)}={public}"]
    processes = []
    try:
        for name in ("w0", "w1", "w2"):
            private, _ = SigningKey.generate().save(folder / f"{name}key")
            processes.append(
                WitnessProcess(
                    folder, *logs, "--key", str(private), "--state", str(folder / name)
                )
            )
        yield Setup(keys, processes)
    finally:
        for process in processes:
            if process.process.poll() is None:
                process.stop()


def published(root: Path, key: SigningKey) -> bytes | None:
    """The store's published, cosigned checkpoint, or None."""
    return store_log(root, key.key_id).cosigned_note()


def size_of(note: bytes, key: SigningKey) -> int:
    """The size of a checkpoint note of the key's log (its signature checked)."""
    return LogCheckpoint.open(note, log_origin(key.key_id), key.public_key).size


def wait_published(root: Path, key: SigningKey, size: int) -> bytes:
    """The published checkpoint once it holds ``size`` leaves (bounded wait)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        note = published(root, key)
        if note is not None and size_of(note, key) == size:
            return note
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint of size {size} published")


def test_published_on_the_cadence_when_k_of_n_cosign(
    setup: Setup, tmp_path: Path
) -> None:
    """2 of 3 witnesses up: the sequencer publishes each batch, cosigned by 2 or 3.

    All three up: published on the cadence (before close), three valid cosignatures;
    one witness down: still published, cosigned by the two others; two down: the log
    grows but nothing is published, and close() returns within the bounded timeout.
    Both restarted (new ports, their state kept): the next batch is cosigned by all
    three, two of them after a 409 (they hold sizes 5 and 3; it asks from 4).
    """
    key = setup.keys[0]
    witnesses = LogWitnesses.parse(setup.entries(0, 1, 2), quorum=2, timeout=2.0)
    cosigners = [parse_cosigner(w.vkey) for w in setup.witnesses]
    root = tmp_path / "store"
    store = FileExecutionStore(
        root, signing_key=key, log_cadence=FAST, log_witnesses=witnesses
    )
    for i in range(3):
        finished(store, f"first {i}")
    note = wait_published(root, key, 3)  # by the thread, on the cadence
    assert count_cosigners(note, cosigners) == (3, [])
    store.close()
    try:
        assert setup.witnesses[2].stop() == 0
        store = FileExecutionStore(
            root, signing_key=key, log_cadence=FAST, log_witnesses=witnesses
        )
        finished(store, "second")
        note = wait_published(root, key, 4)
        assert count_cosigners(note, cosigners) == (2, [])
        store.close()
        assert setup.witnesses[1].stop() == 0
        store = FileExecutionStore(
            root, signing_key=key, log_cadence=FAST, log_witnesses=witnesses
        )
        finished(store, "third")
        started = time.monotonic()
        store.close()
        assert time.monotonic() - started < 5
        assert store_log(root, key.key_id).size == 5
        note = published(root, key)
        assert note is not None
        assert size_of(note, key) == 4
        for i in (1, 2):
            setup.witnesses[i] = restarted(setup.witnesses[i])
        again = LogWitnesses.parse(setup.entries(0, 1, 2), quorum=3, timeout=2.0)
        store = FileExecutionStore(
            root, signing_key=key, log_cadence=FAST, log_witnesses=again
        )
        finished(store, "fourth")
        note = wait_published(root, key, 6)
        assert count_cosigners(note, cosigners) == (3, [])
        store.close()
    finally:
        # the rest of the module needs all three: restart the two stopped ones
        for i in (1, 2):
            if setup.witnesses[i].process.poll() is not None:
                setup.witnesses[i] = restarted(setup.witnesses[i])


def restarted(witness: WitnessProcess) -> WitnessProcess:
    """The witness started again with its own arguments (its state kept)."""
    args = witness.process.args
    assert isinstance(args, list)
    options = [str(a) for a in args[args.index("--listen") + 2 :]]
    return WitnessProcess(witness.errors.parent, *options)


def test_a_fork_is_refused_with_422_and_not_published(
    setup: Setup, tmp_path: Path
) -> None:
    """A fork of a cosigned log: each witness answers 422, said; nothing published.

    One history is published through all three; a copy grown apart is refused by
    each (its problem names the 422 and the tree cosigned before), and its
    published checkpoint stays the one from before the fork.
    """
    key = setup.keys[1]
    witnesses = LogWitnesses.parse(setup.entries(0, 1, 2), quorum=1)
    one, two = tmp_path / "one", tmp_path / "two"
    store = FileExecutionStore(one, signing_key=key, log_witnesses=witnesses)
    for i in range(2):
        finished(store, f"shared {i}")
    store.close()
    shutil.copytree(one, two)
    for root, text in ((one, "one"), (two, "two")):
        store = FileExecutionStore(root, signing_key=key, log_cadence=FAST)
        finished(store, text)
        store.close()
    first = publish_checkpoint(store_log(one, key.key_id), key.public_key, witnesses)
    assert first.published, first.problems
    before = published(two, key)
    outcome = publish_checkpoint(store_log(two, key.key_id), key.public_key, witnesses)
    assert (outcome.published, outcome.cosigned) == (False, 0)
    assert len(outcome.problems) == 3
    for problem in outcome.problems:
        assert "refused the checkpoint (422)" in problem
    assert published(two, key) == before
    assert before is not None
    assert size_of(before, key) == 2


def test_a_hung_witness_is_bounded_by_the_timeout(setup: Setup, tmp_path: Path) -> None:
    """A witness that accepts the connection and never answers costs one timeout.

    The other two cosign, the checkpoint is published (quorum 2), and publishing
    returns within twice the 0.3 s timeout plus the others' time; the hung one's
    problem says it could not be reached.
    """
    key = setup.keys[2]
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # the kernel accepts connections; nobody answers
    try:
        port = hung.getsockname()[1]
        vkey = setup.witnesses[0].vkey
        entries = [f"http://127.0.0.1:{port}={vkey}", *setup.entries(1, 2)]
        witnesses = LogWitnesses.parse(entries, quorum=2, timeout=0.3)
        root = tmp_path / "store"
        store = FileExecutionStore(root, signing_key=key)
        finished(store, "lonely")
        store.close()
        started = time.monotonic()
        outcome = publish_checkpoint(
            store_log(root, key.key_id), key.public_key, witnesses
        )
        assert time.monotonic() - started < 3
        assert (outcome.published, outcome.cosigned) == (True, 2)
        [problem] = outcome.problems
        assert problem.startswith(f"http://127.0.0.1:{port}: cannot reach it: ")
    finally:
        hung.close()


def test_witnesses_from_the_environment(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$INTENTUSNET_LOG_WITNESSES configures a store; malformed values are refused.

    A store opened with the variable set publishes through them; unset, no
    witnesses; an entry without URL, a bad key, a quorum above n or not a number
    raise LogIntegrityError naming the fault, at the store's construction.
    """
    key = setup.keys[3]
    monkeypatch.setenv("INTENTUSNET_LOG_WITNESSES", " ".join(setup.entries(0, 1)))
    monkeypatch.setenv("INTENTUSNET_LOG_WITNESS_QUORUM", "2")
    root = tmp_path / "store"
    store = FileExecutionStore(root, signing_key=key, log_cadence=FAST)
    finished(store, "from env")
    store.close()
    note = published(root, key)
    assert note is not None
    assert size_of(note, key) == 1
    assert (log_folder(root, key.key_id) / "checkpoint.cosigned").is_file()
    assert witnesses_from_env({}) is None
    vkey = setup.witnesses[0].vkey
    bad = {
        vkey: "URL=VKEY",
        "http://x=notakey+1+AAAA": "witness",
        f"http://x={vkey}": None,
    }
    for entry, said in bad.items():
        env = {
            "INTENTUSNET_LOG_WITNESSES": entry,
            "INTENTUSNET_LOG_WITNESS_QUORUM": "2",
        }
        with pytest.raises(LogIntegrityError) as caught:
            witnesses_from_env(env)
        assert said is None or said in str(caught.value)
    with pytest.raises(LogIntegrityError, match="not a number"):
        witnesses_from_env(
            {
                "INTENTUSNET_LOG_WITNESSES": f"http://x={vkey}",
                "INTENTUSNET_LOG_WITNESS_QUORUM": "two",
            }
        )
    monkeypatch.setenv("INTENTUSNET_LOG_WITNESS_QUORUM", "3")
    with pytest.raises(LogIntegrityError, match="quorum of 3"):
        FileExecutionStore(root, signing_key=key)
