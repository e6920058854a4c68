"""``last`` as an execution id: every ID argument reads it as the newest record."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from intentusnet import IntentRouter
from intentusnet.record.model import EventType
from intentusnet.store import FileExecutionStore

from .support import Invoke, envelope

APP = "demo_app:router"


@pytest.fixture
def two_runs(store_root: Path) -> tuple[str, str]:
    """Two records of the echo intent: the older one, then the newer one."""
    with IntentRouter(store=FileExecutionStore(store_root)) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
        older = router.route_intent(envelope(text="older")).metadata.execution_id
        newer = router.route_intent(envelope(text="newer")).metadata.execution_id
    assert older is not None
    assert newer is not None
    return older, newer


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "last", "--json"],
        ["records", "show", "last"],
        ["replay", "last"],
        ["debug", "last", "--json"],
        ["verify", "last", "--json"],
        ["diff", "last", "last", "--json"],
    ],
    ids=lambda command: " ".join(command[:-1] if command[-1] == "--json" else command),
)
def test_last_names_the_newest_record(
    invoke: Invoke, store_root: Path, two_runs: tuple[str, str], command: list[str]
) -> None:
    """Each command given ``last`` works on the newest record, not an older one."""
    older, newer = two_runs
    result = invoke("--store", str(store_root), *command)
    assert result.exit_code == 0, result.output
    output = result.output
    if command[0] == "debug":  # it names the older run it compared the config with
        doc = orjson.loads(output)
        assert doc["configuration"]["comparedWith"] == older
        output = orjson.dumps(doc["explanation"]).decode()
    assert newer in output or '"newer"' in output
    assert older not in output
    assert '"older"' not in output


def test_replay_last_prints_the_newest_answer(
    invoke: Invoke, store_root: Path, two_runs: tuple[str, str]
) -> None:
    """``replay last`` prints the newest answer and names its record as the original."""
    _, newer = two_runs
    result = invoke("--store", str(store_root), "replay", "last", "--json")
    assert result.exit_code == 0, result.output
    replayed = orjson.loads(result.stdout)
    assert replayed["originalExecutionId"] == newer
    assert replayed["payload"] == {"echo": {"text": "newer"}}


def test_invalidate_last_invalidates_only_the_newest(
    invoke: Invoke, store_root: Path, two_runs: tuple[str, str]
) -> None:
    """``invalidate last`` marks the newest record and leaves the older one alone."""
    older, newer = two_runs
    result = invoke("--store", str(store_root), "invalidate", "last", "--reason", "x")
    assert result.exit_code == 0, result.output
    assert newer in result.output
    store = FileExecutionStore(store_root)
    try:
        assert store.load(newer).header.replayable is False
        assert store.load(older).header.replayable is True
    finally:
        store.close()


def test_rerun_last_reruns_the_newest(
    invoke: Invoke, app_dir: Path, store_root: Path, two_runs: tuple[str, str]
) -> None:
    """``rerun last --app`` re-runs the newest record through today's router."""
    _, newer = two_runs
    result = invoke("--store", str(store_root), "rerun", "last", "--app", APP, "--json")
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["originalExecutionId"] == newer


def test_other_ids_are_taken_as_given(
    invoke: Invoke, store_root: Path, two_runs: tuple[str, str]
) -> None:
    """An id other than ``last`` names that record, even when a newer one exists."""
    older, _ = two_runs
    result = invoke("--store", str(store_root), "records", "show", older, "--json")
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["header"]["executionId"] == older


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "last"],
        ["records", "show", "last"],
        ["replay", "last"],
        ["debug", "last"],
        ["verify", "last"],
        ["diff", "last", "last"],
        ["invalidate", "last", "--reason", "x"],
        ["rerun", "last", "--app", APP],
    ],
    ids=" ".join,
)
def test_last_in_an_empty_store_exits_3(
    invoke: Invoke, store_root: Path, command: list[str]
) -> None:
    """``last`` in a store with no record is a clear "not found" error, exit 3."""
    result = invoke("--store", str(store_root), *command)
    assert result.exit_code == 3, result.output
    assert "no records in" in result.stderr
    assert "'last' names none" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("mistyped", ["lats", "lst", "Last"])
def test_an_id_close_to_last_gets_last_suggested(
    invoke: Invoke, store_root: Path, two_runs: tuple[str, str], mistyped: str
) -> None:
    """An id that names no record and is close to ``last`` suggests ``last``, exit 3."""
    result = invoke("--store", str(store_root), "replay", mistyped)
    assert result.exit_code == 3, result.output
    assert f"no record {mistyped!r}" in result.stderr
    assert "Did you mean 'last'?" in result.stderr
    assert result.stdout == ""
    far = invoke("--store", str(store_root), "replay", "exec-nothing")
    assert far.exit_code == 3
    assert "Did you mean" not in far.stderr


def test_a_recorded_id_close_to_last_is_read_as_given(
    invoke: Invoke, store_root: Path, two_runs: tuple[str, str]
) -> None:
    """A record whose id is close to ``last`` (``lats``) is that record, no hint."""
    from recordkit import attempt_end, response, start

    with FileExecutionStore(store_root) as store:
        writer = start(store, "typo", execution_id="lats")
        writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"echo": "typo"}))
        writer.complete(response("lats"))
    result = invoke("--store", str(store_root), "records", "show", "lats", "--json")
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["header"]["executionId"] == "lats"
    assert result.stderr == ""
