"""``intentusnet replay``: recorded answers, refusals, forcing, envelope checks."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from click.testing import Result

from intentusnet.cli import params

from .support import Invoke, envelope, write_json


def replay(
    invoke: Invoke, root: Path, *args: str, input: bytes | None = None
) -> Result:
    """Run ``intentusnet --store ROOT replay ARGS``."""
    return invoke("--store", str(root), "replay", *args, input=input)


def test_replay_prints_the_result(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A completed record replays its payload, marked fromReplay."""
    result = replay(invoke, store_root, ids["completed"])
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["status"] == "success"
    assert doc["payload"] == {"echo": {"text": "hello"}}
    assert doc["fromReplay"] is True
    assert doc["originalExecutionId"] == ids["completed"]
    assert doc["forced"] is False
    assert doc["partial"] is False
    assert doc["warnings"] == []
    assert doc["metadata"]["agent"] == "echo"
    assert result.stderr == ""


def test_replayed_metadata_agrees_that_it_is_a_replay(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--json: metadata.fromReplay is true beside fromReplay, naming the record."""
    result = replay(invoke, store_root, ids["completed"], "--json")
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["fromReplay"] is True
    assert doc["metadata"]["fromReplay"] is True
    assert doc["metadata"]["originalExecutionId"] == ids["completed"]
    assert doc["metadata"]["executionId"] == ids["completed"]


def test_replay_json_is_one_line(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--json prints the same document on one line."""
    pretty = orjson.loads(replay(invoke, store_root, ids["failed"]).stdout)
    result = replay(invoke, store_root, "--json", ids["failed"])
    assert result.stdout.count("\n") == 1
    assert orjson.loads(result.stdout) == pretty
    assert pretty["status"] == "error"
    assert pretty["error"]["code"] == "NO_AGENT"


def test_not_replayable_exits_4(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """An incomplete record is refused, one line naming the reason, exit 4."""
    result = replay(invoke, store_root, ids["incomplete"])
    assert result.exit_code == 4
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: record {ids['incomplete']} is not replayable "
        "(execution_incomplete); use --force to replay it anyway\n"
    )


def test_force_warns_and_replays_partial(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--force prints the WARNING line and the partial result."""
    result = replay(invoke, store_root, "--force", ids["incomplete"])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "WARNING: Forcing replay of non-replayable record (execution_incomplete)\n"
    )
    doc = orjson.loads(result.stdout)
    assert doc["forced"] is True
    assert doc["partial"] is True
    assert doc["payload"] == {"echo": "partial"}
    assert doc["warnings"]


def test_force_on_replayable_record_is_quiet(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--force on a replayable record warns nothing and is not marked forced."""
    result = replay(invoke, store_root, "--force", ids["completed"])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert orjson.loads(result.stdout)["forced"] is False


def test_invalidated_record_exits_4_until_forced(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """After invalidate, replay exits 4; --force replays with the reason."""
    done = invoke(
        "--store", str(store_root), "invalidate", ids["completed"], "--reason", "wrong"
    )
    assert done.exit_code == 0, done.output
    assert replay(invoke, store_root, ids["completed"]).exit_code == 4
    forced = replay(invoke, store_root, "--force", ids["completed"])
    assert forced.exit_code == 0
    assert "(manually_invalidated)" in forced.stderr
    assert orjson.loads(forced.stdout)["payload"] == {"echo": {"text": "hello"}}


def test_unknown_and_bad_ids_exit_3(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """An unknown id and a path-like id both exit 3 with one line."""
    for bad in ("exec-unknown", "../../etc/passwd"):
        result = replay(invoke, store_root, bad)
        assert result.exit_code == 3, bad
        assert len(result.stderr.splitlines()) == 1


def test_tampered_record_exits_6(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A record with a broken chain cannot be replayed: exit 6."""
    result = replay(invoke, store_root, ids["tampered"])
    assert result.exit_code == 6
    assert "Error: record" in result.stderr


def test_verify_envelope_match(
    invoke: Invoke, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """The same envelope (other request id and time) matches and replays."""
    wire = envelope(text="hello")
    wire["metadata"] = {"requestId": "another", "createdAt": "2020-01-01T00:00:00Z"}
    file = write_json(tmp_path / "env.json", wire)
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == "Envelope hash matches.\n"
    assert orjson.loads(result.stdout)["payload"] == {"echo": {"text": "hello"}}


def test_verify_envelope_from_stdin(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--verify-envelope - reads the envelope from stdin."""
    data = orjson.dumps(envelope(text="hello"))
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", "-", input=data
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == "Envelope hash matches.\n"


def test_verify_envelope_mismatch_exits_5(
    invoke: Invoke, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """A changed envelope prints both hashes and the differing paths, exit 5."""
    wire = envelope(text="HELLO")
    wire["routing"] = {"strategy": "FALLBACK"}
    file = write_json(tmp_path / "env.json", wire)
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 5
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == "Envelope hash mismatch."
    assert lines[1].startswith("  recorded: sha256:")
    assert lines[2].startswith("  given:    sha256:")
    assert lines[1][12:] != lines[2][12:]
    assert lines[3] == "  differing paths:"
    assert sorted(line.strip() for line in lines[4:]) == [
        "payload.text",
        "routing.strategy",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not valid JSON"),
        (bytes(range(256)) * 64, "is not valid JSON"),
        (b"[1, 2, 3]", "holds a array, not a JSON object"),
        (b"", "is not valid JSON"),
    ],
    ids=["invalid-json", "binary", "array", "empty"],
)
def test_bad_envelope_file_exits_2(
    invoke: Invoke,
    store_root: Path,
    ids: dict[str, str],
    tmp_path: Path,
    content: bytes,
    message: str,
) -> None:
    """Invalid JSON, binary data, a non-object or an empty file: one line, exit 2."""
    file = tmp_path / "env.json"
    file.write_bytes(content)
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert result.stdout == ""


def test_unreadable_envelope_file_exits_2(
    invoke: Invoke, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """A missing file or a directory is one line, exit 2."""
    for path in (tmp_path / "missing.json", tmp_path):
        result = replay(
            invoke, store_root, ids["completed"], "--verify-envelope", str(path)
        )
        assert result.exit_code == 2
        assert result.stderr.startswith("Error: cannot read envelope file")
        assert len(result.stderr.splitlines()) == 1


def test_permission_denied_exits_2(
    invoke: Invoke,
    store_root: Path,
    ids: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file without read permission is one line, exit 2."""
    file = write_json(tmp_path / "env.json", envelope())
    file.chmod(0)
    if os.geteuid() == 0:
        # root reads every file: make the open fail the way it fails for users
        real_open = Path.open

        def denied(self: Path, *args: object, **kwargs: object) -> object:
            if self == file:
                raise PermissionError(13, "Permission denied", str(self))
            return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Path, "open", denied)
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 2
    assert "Permission denied" in result.stderr


def test_ten_megabyte_envelope(
    invoke: Invoke, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """A 10 MB envelope is read and hashed: a clean mismatch, not a crash."""
    file = write_json(tmp_path / "big.json", envelope(text="x" * 10_000_000))
    assert file.stat().st_size > 10_000_000
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 5
    assert "payload.text" in result.stderr


def test_envelope_over_the_limit_exits_2(
    invoke: Invoke,
    store_root: Path,
    ids: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file larger than the read limit is refused before parsing."""
    monkeypatch.setattr(params, "MAX_JSON_FILE_BYTES", 1024)
    file = write_json(tmp_path / "env.json", envelope(text="x" * 2000))
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 2
    assert "is larger than" in result.stderr


def test_json_that_is_not_an_envelope_value(
    invoke: Invoke, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """An integer beyond JSON's safe range is named by path: exit 2."""
    file = tmp_path / "env.json"
    file.write_text('{"intent": {"name": "echo"}, "payload": {"n": 9007199254740993}}')
    result = replay(
        invoke, store_root, ids["completed"], "--verify-envelope", str(file)
    )
    assert result.exit_code == 2
    assert "payload.n" in result.stderr
