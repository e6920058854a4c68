"""Helpers shared by the command's tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
from click.testing import Result

import intentusnet
from intentusnet import JSONObject, JSONValue

Invoke = Callable[..., Result]

#: The source tree under test, for subprocesses: put first on PYTHONPATH, it makes
#: the installed script run this checkout's package, not an editable install's.
CHECKOUT = str(Path(intentusnet.__file__).resolve().parents[1])

#: The debugging example, an application for ``run`` and ``rerun`` (``CRM_APP``).
CRM_EXAMPLE = Path(CHECKOUT) / "examples" / "debug_fix_replay.py"
CRM_APP = "debug_fix_replay:router"
#: What the example's agent is asked: a sender the CRM does not know (it fails).
CRM_REQUEST = {"intent": {"name": "crm.qualify"}, "payload": {"email": "grace@x.io"}}


def record_crm_failure(invoke: Invoke, tmp_path: Path) -> str:
    """Route the request the example fails on (``run``); return its execution id."""
    result = invoke(
        "run", "--app", CRM_APP, str(write_json(tmp_path / "e.json", CRM_REQUEST))
    )
    assert result.exit_code == 8, result.output  # the execution failed
    response = orjson.loads(result.stdout)
    assert response["status"] == "error"
    forget_crm_app()
    return str(response["metadata"]["executionId"])


def forget_crm_app() -> None:
    """Close the example's router and unload it, so the next command imports it."""
    module = sys.modules.pop("debug_fix_replay", None)
    if module is not None:
        module.router.close()


#: An application module for ``run --app`` and for making records: an echo agent,
#: a failing agent, and a FALLBACK pair where the first one fails.
APP_SOURCE = textwrap.dedent(
    """
    import os
    from intentusnet import IntentRouter

    store = None
    if os.environ.get("DEMO_STORE"):
        from intentusnet.store import FileExecutionStore
        store = FileExecutionStore(
            os.environ["DEMO_STORE"],
            signing_key=os.environ.get("DEMO_SIGNING_KEY") or None,
        )

    router = IntentRouter(store=store)
    not_a_router = 42

    @router.agent("echo")
    def echo(envelope, ctx):
        return {"echo": envelope.payload}

    @router.agent("boom")
    def boom(envelope, ctx):
        raise RuntimeError("agent exploded")

    @router.agent("flaky", priority=1)
    def first(envelope, ctx):
        raise ValueError("first one fails")

    @router.agent("flaky", priority=2)
    def second(envelope, ctx):
        return {"from": "second"}
    """
)


def envelope(intent: str = "echo", **payload: JSONValue) -> JSONObject:
    """Return a wire envelope for ``intent`` with ``payload``."""
    routing: JSONObject = {"strategy": "FALLBACK"} if intent == "flaky" else {}
    body: JSONObject = dict(payload)
    return {"intent": {"name": intent}, "payload": body, "routing": routing}


def write_json(path: Path, value: object) -> Path:
    """Write ``value`` as JSON to ``path`` and return the path."""
    path.write_bytes(orjson.dumps(value))
    return path


def record_file(root: Path, execution_id: str) -> Path:
    """Return the file of record ``execution_id`` in the store at ``root``."""
    (path,) = root.glob(f"*/{execution_id}.jsonl")
    return path


def tamper(root: Path, execution_id: str) -> None:
    """Flip one byte in the middle of a record's second line."""
    path = record_file(root, execution_id)
    data = bytearray(path.read_bytes())
    second = data.index(b"\n") + 1
    middle = second + (data.index(b"\n", second) - second) // 2
    data[middle] ^= 0x01
    path.write_bytes(bytes(data))


#: An application that names its store the documented way: it follows ``--store``.
NAMED_APP_SOURCE = textwrap.dedent(
    """
    from intentusnet import IntentRouter, open_store

    router = IntentRouter(store=open_store())

    @router.agent("echo")
    def echo(envelope, ctx):
        return {"echo": envelope.payload}
    """
)


class WitnessProcess:
    """``intentusnet witness`` on 127.0.0.1 (a free port), until stopped."""

    def __init__(
        self, cwd: Path, *argv: str, env: dict[str, str] | None = None
    ) -> None:
        self.errors = cwd / "witness-stderr.txt"
        with self.errors.open("wb") as err:  # the child keeps its own copy
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "intentusnet.cli",
                    "witness",
                    "--listen",
                    "127.0.0.1:0",
                    *argv,
                ],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=err,
                env={
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join(
                        [CHECKOUT, os.environ.get("PYTHONPATH", "")]
                    ),
                    **(env or {}),
                },
            )
        assert self.process.stdout is not None
        banner = self.process.stdout.readline().decode()  # EOF if it exits
        if not banner.startswith("Witness "):
            self.kill()
            errors = self.errors.read_text()[-500:]
            raise RuntimeError(f"the witness did not start: {errors}")
        self.vkey = banner.split(" ")[1]
        self.url = banner.split(" on ")[1].split(" ")[0]

    def post(self, body: bytes) -> httpx.Response:
        """POST body to /add-checkpoint."""
        with httpx.Client(trust_env=False, timeout=10) as http:
            return http.post(self.url + "/add-checkpoint", content=body)

    def kill(self) -> int:
        """SIGKILL, wait (bounded); the exit code."""
        self.process.kill()
        return self.wait()

    def wait(self) -> int:
        """Wait for the process to end (bounded), close its stdout; its exit code."""
        try:
            return self.process.wait(timeout=30)
        finally:
            assert self.process.stdout is not None
            self.process.stdout.close()

    def stop(self) -> int:
        """SIGTERM, wait (bounded); the exit code (uvicorn re-raises SIGTERM)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.wait()
        except subprocess.TimeoutExpired:
            return self.kill()
        return 0 if code == -signal.SIGTERM else code


#: The shop example's agents (tests/routing/shopkit.py), an application ``--app`` names.
SHOP_KIT = Path(CHECKOUT) / "tests" / "routing" / "shopkit.py"
SHOP_APP = "shopkit:router"


def run_shop(
    tmp_path: Path, *argv: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGV`` with the shop's store and ledger in ``tmp_path``."""
    env = dict(os.environ)
    env.update(
        SHOP_STORE=str(tmp_path / "store"),
        SHOP_LOG=str(tmp_path / "log"),
        PYTHONPATH=os.pathsep.join([CHECKOUT, str(SHOP_KIT.parent)]),
        **extra,
    )
    return subprocess.run(
        [sys.executable, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
