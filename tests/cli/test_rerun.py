"""``rerun`` from anywhere, ``--dry-run``, exit 8, and ``last --intent``."""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from .support import CRM_APP, Invoke, forget_crm_app, record_crm_failure, write_json

#: An application whose agent takes a snapshot between two steps; the clock is
#: read outside any step, so only the snapshot brings the recorded value back.
SNAPSHOT_APP = textwrap.dedent(
    """
    import os
    from intentusnet import IntentRouter, open_store

    router = IntentRouter(store=open_store())
    CALLS = []

    @router.agent("job", name="job")
    def job(envelope, ctx):
        first = ctx.step("fetch", {"n": 1}, lambda n: CALLS.append("fetch") or 7)
        state = ctx.snapshot("fetched", {"first": first, "at": os.environ["CLOCK"]})
        total = ctx.step("sum", {"s": state}, lambda s: CALLS.append("sum") or 1)
        return {"at": state["at"], "total": total}
    """
)


def test_from_a_step_by_number_or_name(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """--from STEP serves what came before and runs the rest; a name works too."""
    failed = record_crm_failure(invoke, tmp_path)
    store = ("--store", str(store_root))
    for ref in ("1", "crm.lookup"):
        result = invoke(
            *store, "rerun", failed, "--app", CRM_APP, "--from", ref, "--json"
        )
        forget_crm_app()
        assert result.exit_code == 8, result.output  # the lookup is not fixed
        doc = orjson.loads(result.stdout)
        assert (doc["mode"], doc["fromStep"]) == ("from_step", 1)
        assert doc["served"] == ["email.send"]
    fixed = invoke(
        *store, "rerun", failed, "--app", CRM_APP, "--from", "1", CRM_FIXED="1"
    )
    assert fixed.exit_code == 0, fixed.output
    assert f"Re-ran {failed} from crm.lookup (step 1) as " in fixed.stdout


def test_override_answers_a_step_with_the_output_given(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """--override STEP=JSON serves the edited output; scoring follows it live."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke(
        "--store",
        str(store_root),
        "rerun",
        failed,
        "--app",
        CRM_APP,
        "--override",
        'crm.lookup={"name": "Grace", "employees": 60}',
    )
    assert result.exit_code == 0, result.output
    assert "served: crm.lookup (step 1) [output given], email.send (step 2)" in (
        result.stdout
    )
    assert '"score": 50' in result.stdout
    assert sys.modules["debug_fix_replay"].CALLS == {"crm": 0, "model": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--override", "1"], "is not STEP=JSON"),
        (["--override", "1={nope"], "the output for step '1' is not JSON"),
        (["--from", "9"], "the record has no step 9 (it has steps 1 to 3)"),
        (["--live", "email.send"], "is a side effect"),
        (["--from", "1", "--from-failure"], "give one starting point"),
        (["--from-snapshot", "x"], "the record has no snapshot 'x' (its snapshots"),
    ],
)
def test_bad_options_exit_2_before_the_app_is_imported(
    invoke: Invoke,
    crm: Path,
    store_root: Path,
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    """A wrong option is a usage error, found before any application code runs."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke(
        "--store", str(store_root), "rerun", failed, "--app", CRM_APP, *args
    )
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "debug_fix_replay" not in sys.modules


def test_dry_run_prints_each_step_and_runs_nothing(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """--dry-run needs no --app, records nothing and says served/live/side effect."""
    failed = record_crm_failure(invoke, tmp_path)
    store = ("--store", str(store_root))
    before = invoke(*store, "records", "list", "--json").stdout
    result = invoke(*store, "rerun", failed, "--from-root-cause", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"Dry run: re-running {failed} from the root cause, crm.lookup (step 1) "
        "would do this"
    )
    assert lines[2:] == [
        "    1  crm.lookup  live         the root cause: runs live",
        "    2  email.send  side effect  a side effect: never made again, served",
        "    3  crm.score   live         after step 1: runs live",
    ]
    assert invoke(*store, "records", "list", "--json").stdout == before
    assert "debug_fix_replay" not in sys.modules

    doc = orjson.loads(invoke(*store, "rerun", failed, "--dry-run", "--json").stdout)
    assert [s["action"] for s in doc["steps"]] == [
        "serve",
        "side_effect",
        "replay_error",
    ]


def test_rerun_without_app_or_dry_run_is_a_usage_error(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """--app is required unless --dry-run."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke("--store", str(store_root), "rerun", failed)
    assert result.exit_code == 2
    assert "rerun needs --app MODULE:ATTR (unless --dry-run)" in result.stderr


def test_from_snapshot_restores_the_recorded_state(
    invoke: Invoke, app_dir: Path, store_root: Path, tmp_path: Path
) -> None:
    """--from-snapshot serves up to the snapshot, returns its state, runs the rest."""
    (app_dir / "demo_app_snap.py").write_text(SNAPSHOT_APP)
    store = ("--store", str(store_root))
    request = write_json(tmp_path / "job.json", {"intent": {"name": "job"}})
    ran = invoke(
        *store, "run", "--app", "demo_app_snap:router", str(request), CLOCK="9"
    )
    assert ran.exit_code == 0, ran.output
    del sys.modules["demo_app_snap"]
    result = invoke(
        *store,
        "rerun",
        "last",
        "--app",
        "demo_app_snap:router",
        "--from-snapshot",
        "fetched",
        "--json",
        CLOCK="10",
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["mode"] == "from_snapshot"
    assert doc["response"]["payload"] == {"at": "9", "total": 1}
    assert doc["served"] == ["fetch", "snapshot:fetched"]
    assert doc["ran"] == ["sum"]
    assert sys.modules["demo_app_snap"].CALLS == ["sum"]


# -- last --intent -------------------------------------------------------------------


def test_last_with_intent_names_the_newest_record_of_that_intent(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """`last --intent NAME` in inspect, debug, diff and rerun --dry-run."""
    store = ("--store", str(store_root))
    shown = invoke(*store, "inspect", "last", "--intent", "flaky", "--json")
    assert shown.exit_code == 0, shown.output
    assert orjson.loads(shown.stdout)["header"]["executionId"] == ids["fallback"]
    # the option may come first: it is read before the ID
    debug = invoke(*store, "debug", "--intent", "nobody-handles-this", "last", "--json")
    assert orjson.loads(debug.stdout)["explanation"]["executionId"] == ids["failed"]
    diff = invoke(
        *store, "diff", ids["completed"], "last", "--intent", "echo", "--json"
    )
    assert diff.exit_code == 0, diff.output
    assert orjson.loads(diff.stdout)["b"] == ids["incomplete"]
    plan = invoke(*store, "rerun", "last", "--intent", "flaky", "--dry-run", "--json")
    assert orjson.loads(plan.stdout)["executionId"] == ids["fallback"]


def test_intent_without_last_or_matching_nothing(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--intent without `last` is a usage error; an intent with no record exits 3."""
    store = ("--store", str(store_root))
    alone = invoke(*store, "inspect", ids["completed"], "--intent", "echo")
    assert alone.exit_code == 2
    assert "--intent narrows 'last' only" in alone.stderr
    none = invoke(*store, "debug", "last", "--intent", "nothing-like-it")
    assert none.exit_code == 3
    assert "no records of intent 'nothing-like-it'" in none.stderr
    assert "'last --intent nothing-like-it' names none" in none.stderr


def test_from_root_cause_of_a_record_that_did_not_fail(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """No failure, no root cause to start from: exit 2, nothing run."""
    result = invoke(
        "--store",
        str(store_root),
        "rerun",
        ids["completed"],
        "--from-root-cause",
        "--dry-run",
    )
    assert result.exit_code == 2
    assert "did not fail: it has no root cause to start from" in result.stderr


def test_live_lookup_strictly_stops_on_the_changed_scoring(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """--live runs the fixed lookup; scoring then needs other args: a miss, exit 7."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke(
        "--store",
        str(store_root),
        "rerun",
        failed,
        "--app",
        CRM_APP,
        "--live",
        "crm.lookup",
        CRM_FIXED="1",
    )
    assert result.exit_code == 7
    assert "step 'crm.score'" in result.stderr
    assert "--allow-live runs such steps live" in result.stderr
    assert sys.modules["debug_fix_replay"].MAILBOX == []


# -- --block-network ---------------------------------------------------------------

#: An application with two agents asking a local server: ``raw`` with urllib (not
#: recorded), ``fetch`` through the recording transport (a step of its execution).
NETWORK_APP = textwrap.dedent(
    """
    import os
    import urllib.request

    import httpx
    from intentusnet import IntentRouter, open_store
    from intentusnet.integrations.httpx import RecordingTransport

    store = open_store()
    router = IntentRouter(store=store)

    def url():
        return f"http://127.0.0.1:{os.environ['PORT']}/answer"

    @router.agent("raw", name="raw")
    def raw(envelope, ctx):
        with urllib.request.urlopen(url(), timeout=10) as answer:
            return {"got": answer.read().decode()}

    @router.agent("fetch", name="fetch")
    def fetch(envelope, ctx):
        with httpx.Client(transport=RecordingTransport(store), timeout=10) as http:
            return {"got": http.get(url()).text}
    """
)


@contextmanager
def answering() -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 answering ``42``: its port and the paths asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet

        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"42")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,))
    thread.start()
    try:
        yield str(server.server_address[1]), asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def record_network_run(
    invoke: Invoke, store_root: Path, tmp_path: Path, intent: str, port: str
) -> str:
    """Run ``intent`` of the network application; return its execution id."""
    request = write_json(tmp_path / f"{intent}.json", {"intent": {"name": intent}})
    ran = invoke(
        "--store", str(store_root), "run", "--app", "demo_app_net:router",
        str(request), PORT=port,
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    answer = orjson.loads(ran.stdout)
    assert answer["payload"] == {"got": "42"}
    del sys.modules["demo_app_net"]  # the re-run imports today's code afresh
    return str(answer["metadata"]["executionId"])


def test_block_network_stops_a_call_not_recorded_with_exit_7(
    invoke: Invoke, app_dir: Path, store_root: Path, tmp_path: Path
) -> None:
    """A connection the record cannot answer is refused with exit 7, no traceback.

    The address is named, and the server is never reached.
    """
    (app_dir / "demo_app_net.py").write_text(NETWORK_APP)
    with answering() as (port, asked):
        executed = record_network_run(invoke, store_root, tmp_path, "raw", port)
        result = invoke(
            "--store", str(store_root), "rerun", executed,
            "--app", "demo_app_net:router", "--block-network", PORT=port,
        )  # fmt: skip
        assert asked == ["/answer"]  # the recorded run only
    assert result.exit_code == 7, result.output
    assert f"network access to 127.0.0.1:{port} is blocked" in result.stderr
    assert "the re-run's record: exec-" in result.stderr
    assert "Traceback" not in result.output


def test_allow_host_lets_a_host_through(
    invoke: Invoke, app_dir: Path, store_root: Path, tmp_path: Path
) -> None:
    """--allow-host keeps a host reachable; without --block-network it is refused."""
    (app_dir / "demo_app_net.py").write_text(NETWORK_APP)
    store = ("--store", str(store_root))
    app = ("--app", "demo_app_net:router")
    with answering() as (port, asked):
        executed = record_network_run(invoke, store_root, tmp_path, "raw", port)
        result = invoke(
            *store, "rerun", executed, *app,
            "--block-network", "--allow-host", "127.0.0.1", PORT=port,
        )  # fmt: skip
        assert asked == ["/answer", "/answer"]
    assert result.exit_code == 0, result.output
    alone = invoke(*store, "rerun", executed, *app, "--allow-host", "127.0.0.1")
    assert alone.exit_code == 2
    assert "--allow-host needs --block-network" in alone.stderr


def test_block_network_serves_a_transport_call_from_the_record(
    invoke: Invoke, app_dir: Path, store_root: Path, tmp_path: Path
) -> None:
    """A request through the recording transport is a step: served, no socket."""
    (app_dir / "demo_app_net.py").write_text(NETWORK_APP)
    with answering() as (port, _asked):
        executed = record_network_run(invoke, store_root, tmp_path, "fetch", port)
    result = invoke(
        "--store", str(store_root), "rerun", executed,
        "--app", "demo_app_net:router", "--block-network", "--json", PORT=port,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["served"] == [f"http GET 127.0.0.1:{port}/answer"]
    assert doc["response"]["payload"] == {"got": "42"}
