"""``intentusnet witness``: a real server on 127.0.0.1, its answers and restarts."""

from __future__ import annotations

import base64
import signal
from pathlib import Path

import httpx
import pytest
from tlogkit import aics_tlog

from intentusnet.record.keys import SigningKey
from intentusnet.tlog.cosignature import count_cosigners, parse_cosigner
from intentusnet.tlog.log import TileLog

from .support import Invoke, WitnessProcess

ORIGIN = "example.com/intentusnet"


def request(old: int, proof: list[bytes], note: bytes) -> bytes:
    """An add-checkpoint request body."""
    lines = [f"old {old}", *(base64.b64encode(h).decode() for h in proof)]
    return ("\n".join(lines) + "\n\n").encode() + note


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, Path]:
    """The log's and the witness's key files."""
    log_private, log_public = SigningKey.generate().save(tmp_path / "logkey")
    witness_private, _ = SigningKey.generate().save(tmp_path / "witnesskey")
    return {"log": log_private, "log.pub": log_public, "witness": witness_private}


def witness_args(tmp_path: Path, keys: dict[str, Path]) -> list[str]:
    """The witness's options: ORIGIN with the log's key, state under tmp_path."""
    return [
        "--log", f"{ORIGIN}={keys['log.pub']}",
        "--key", str(keys["witness"]),
        "--state", str(tmp_path / "state"),
    ]  # fmt: skip


def grown(path: Path, key_file: Path, size: int, tag: str = "") -> TileLog:
    """A log of ``size`` leaves (appended to when it exists)."""
    log = TileLog(path, origin=ORIGIN, signing_key=SigningKey.load(key_file))
    log.append([f"{tag}leaf {i}".encode() for i in range(log.size, size)])
    return log


def note_of(log: TileLog) -> bytes:
    """The log's signed checkpoint."""
    note = log.checkpoint_note()
    assert note is not None
    return note


def test_the_server_cosigns_answers_409_and_422(
    tmp_path: Path, keys: dict[str, Path]
) -> None:
    """200 with a cosignature aics-tlog verifies; 409 text/x.tlog.size; 422; 404."""
    witness = WitnessProcess(tmp_path, *witness_args(tmp_path, keys))
    try:
        log = grown(tmp_path / "log", keys["log"], 5)
        ok = witness.post(request(0, [], note_of(log)))
        assert ok.status_code == 200, ok.text
        cosigner = parse_cosigner(witness.vkey)
        assert count_cosigners(note_of(log) + ok.content, [cosigner]) == (1, [])
        blob = base64.b64decode(ok.text.split(" ")[2])
        head = log.tree_head()
        assert aics_tlog().cosign.verify_cosignature(
            blob[4:], cosigner.name, cosigner.key.raw, ORIGIN, 5, head.root
        )
        grown(tmp_path / "log", keys["log"], 12)
        conflict = witness.post(request(0, [], note_of(log)))
        assert conflict.status_code == 409
        assert conflict.headers["content-type"] == "text/x.tlog.size"
        assert conflict.text == "5\n"
        proof = log.prove_consistency(5, 12)
        bad = witness.post(request(5, [proof[0][::-1], *proof[1:]], note_of(log)))
        assert bad.status_code == 422
        assert witness.post(request(5, proof, note_of(log))).status_code == 200
        other = TileLog(tmp_path / "o", origin="other/log",
                        signing_key=SigningKey.load(keys["log"]))  # fmt: skip
        other.append([b"x"])
        assert witness.post(request(0, [], note_of(other))).status_code == 404
        assert witness.post(b"x" * 70_000).status_code == 413
    finally:
        assert witness.stop() == 0


def test_a_witness_refuses_a_rollback_across_its_restart(
    tmp_path: Path, keys: dict[str, Path]
) -> None:
    """Killed (SIGKILL) after cosigning 9 leaves, restarted: 4 and a fork refused."""
    args = witness_args(tmp_path, keys)
    first = WitnessProcess(tmp_path, *args)
    grown(tmp_path / "old", keys["log"], 4)
    log = grown(tmp_path / "log", keys["log"], 9)
    assert first.post(request(0, [], note_of(log))).status_code == 200
    assert first.kill() == -signal.SIGKILL
    again = WitnessProcess(tmp_path, *args)
    try:
        older = note_of(TileLog(tmp_path / "old"))
        rolled = again.post(request(0, [], older))
        assert (rolled.status_code, rolled.text) == (409, "9\n")
        assert again.post(request(9, [], older)).status_code == 400
        fork = note_of(grown(tmp_path / "fork", keys["log"], 9, tag="forked "))
        assert again.post(request(9, [], fork)).status_code == 422
    finally:
        assert again.stop() == 0


def test_killed_after_persisting_it_holds_the_new_size(
    tmp_path: Path, keys: dict[str, Path]
) -> None:
    """Killed between persisting and cosigning: restarted, it holds the new size."""
    args = witness_args(tmp_path, keys)
    log = grown(tmp_path / "log", keys["log"], 3)
    dying = WitnessProcess(
        tmp_path, *args, env={"INTENTUSNET_WITNESS_KILL_AT": "persisted"}
    )
    with pytest.raises(httpx.TransportError):
        dying.post(request(0, [], note_of(log)))
    assert dying.wait() == -signal.SIGKILL
    again = WitnessProcess(tmp_path, *args)
    try:
        held = again.post(request(0, [], note_of(log)))
        assert (held.status_code, held.text) == (409, "3\n")
        assert again.post(request(3, [], note_of(log))).status_code == 200
    finally:
        assert again.stop() == 0


def test_the_command_refuses_bad_options(
    invoke: Invoke, tmp_path: Path, keys: dict[str, Path]
) -> None:
    """Non-loopback without --public, a bad --log or --name, a held state: exit 2."""
    args = witness_args(tmp_path, keys)
    result = invoke("witness", "--listen", "0.0.0.0:0", *args)
    assert result.exit_code == 2
    assert "--public" in result.output
    for bad in ("no-equals", "with space=x.pub", "=x.pub"):
        result = invoke("witness", "--log", bad, *args[2:])
        assert result.exit_code == 2
        assert "ORIGIN=PUBKEY" in result.output
    result = invoke("witness", *args, "--name", "a+b")
    assert result.exit_code == 2
    running = WitnessProcess(tmp_path, *args)
    try:
        result = invoke("witness", "--listen", "127.0.0.1:0", *args)
        assert result.exit_code == 2
        assert "another witness" in result.output
    finally:
        assert running.stop() == 0
