"""Fixtures for the ``intentusnet`` command's tests."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from intentusnet import IntentRouter, JSONObject, compute_hash
from intentusnet.cli import cli
from intentusnet.record.model import EventType
from intentusnet.store import FileExecutionStore

from .support import (
    APP_SOURCE,
    CRM_EXAMPLE,
    Invoke,
    envelope,
    forget_crm_app,
    tamper,
)


@pytest.fixture(autouse=True)
def _store_environment() -> Iterator[None]:
    """INTENTUSNET_STORE as it was: run, serve and rerun put --store in it."""
    saved = os.environ.get("INTENTUSNET_STORE")
    yield
    if saved is None:
        os.environ.pop("INTENTUSNET_STORE", None)
    else:
        os.environ["INTENTUSNET_STORE"] = saved


@pytest.fixture
def invoke() -> Invoke:
    """Run the command in-process; exceptions escaping click fail the test."""
    runner = CliRunner()

    def run(
        *args: str, input: bytes | str | None = None, color: bool = False, **env: str
    ) -> Result:
        return runner.invoke(
            cli,
            list(args),
            input=input,
            env=env or None,
            color=color,
            catch_exceptions=False,
        )

    return run


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory holding ``demo_app.py``; sys.path and modules restored.

    Every ``demo_app*`` module imported is forgotten after the test, its router
    and that router's store closed.
    """
    directory = tmp_path / "app"
    directory.mkdir()
    (directory / "demo_app.py").write_text(APP_SOURCE)
    monkeypatch.chdir(directory)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield directory
    for name in [m for m in sys.modules if m.startswith("demo_app")]:
        router = getattr(sys.modules[name], "router", None)
        if router is not None:
            router.close()
            if router.store is not None:  # a PostgreSQL store holds a connection
                router.store.close()
        del sys.modules[name]


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """An empty store directory."""
    root = tmp_path / "records"
    root.mkdir()
    return root


def _route(router: IntentRouter, env: JSONObject) -> str:
    execution_id = router.route_intent(env).metadata.execution_id
    assert execution_id is not None
    return execution_id


@pytest.fixture
def ids(store_root: Path) -> dict[str, str]:
    """Records of every kind in ``store_root``, by kind.

    completed (echo), failed (no agent), fallback (first agent raised, second
    answered), incomplete (an attempt finished, no final response), tampered
    (a completed record with a flipped byte).
    """
    store = FileExecutionStore(store_root)
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})

        @router.agent("flaky", name="first", priority=1)
        def first(env: object, ctx: object) -> dict[str, object]:
            raise ValueError("first one fails")

        router.agent("flaky", name="second", priority=2)(lambda e, c: {"n": 2})
        made = {
            "completed": _route(router, envelope(text="hello")),
            "failed": _route(router, envelope("nobody-handles-this")),
            "fallback": _route(router, envelope("flaky")),
            "tampered": _route(router, envelope(text="to be tampered")),
        }
    wire = envelope(text="crashed")
    writer = store.open(wire, envelope_hash=compute_hash(wire))
    writer.append(EventType.INTENT_RECEIVED, {"requestId": "r", "envelopeHash": ""})
    writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": 1})
    writer.append(
        EventType.AGENT_ATTEMPT_END,
        {
            "agent": "echo",
            "attempt": 1,
            "outcome": "success",
            "durationMs": 1.5,
            "output": {"echo": "partial"},
            "error": None,
            "traceback": None,
        },
    )
    writer.close()
    made["incomplete"] = writer.execution_id
    store.close()
    tamper(store_root, made["tampered"])
    return made


@pytest.fixture
def crm(
    tmp_path: Path, store_root: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The example app importable from the working directory, recording to the store."""
    directory = tmp_path / "app"
    directory.mkdir()
    shutil.copyfile(CRM_EXAMPLE, directory / "debug_fix_replay.py")
    monkeypatch.chdir(directory)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("CRM_STORE", str(store_root))
    monkeypatch.delenv("CRM_FIXED", raising=False)
    forget_crm_app()
    yield directory
    forget_crm_app()
