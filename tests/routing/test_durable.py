"""Durable executions across real processes: SIGKILL a router, finish elsewhere.

Each test runs on the file store (processes of one host) and on PostgreSQL,
where the routers, each in its own process with its own connection, stand for
separate hosts: nothing but the database's rows and advisory locks is shared.
"""

from __future__ import annotations

import getpass
import importlib.util
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import orjson
import pytest

from intentusnet import (
    AgentResponse,
    CancelRefused,
    IntentRouter,
    InvalidResolution,
    ListFilters,
    RecordStatus,
    Recovery,
    ResolveRefused,
    ResumeRefused,
    open_store,
)
from intentusnet._util.jsonvalue import JSONObject
from intentusnet.record.durable import resume_of
from intentusnet.routing.recorder import Recorder

KIT = Path(__file__).with_name("shopkit.py")
pytestmark = pytest.mark.slow


@pytest.fixture(params=["file", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The shop's store: a directory, or a new PostgreSQL database."""
    if request.param == "file":
        return str(tmp_path / "store")
    return str(request.getfixturevalue("pg_dsn"))


def _env(tmp_path: Path, where: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(SHOP_STORE=where, SHOP_LOG=str(tmp_path / "log"))
    env.update(extra)
    return env


def _route(
    tmp_path: Path, where: str, *args: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(KIT), "route", *args],
        env=_env(tmp_path, where, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


RECOVER_ONCE = ("recover", "--once", "--grace", "0", "--app", "shopkit:router")


def _recover(
    tmp_path: Path, where: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``intentusnet recover --once --grace 0`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "intentusnet.cli", *RECOVER_ONCE],
        cwd=KIT.parent,
        env=_env(tmp_path, where, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


#: The fault point (``INTENTUSNET_KILL_AT``, intentusnet/_util/faults.py) just
#: after a resume's ``AGENT_ATTEMPT_START``: points 1 and 2 are around its
#: header, 3 and 4 around its ``INTENT_RECEIVED`` (then it is linked), 5 and 6
#: around the piece with ``AGENT_ATTEMPT_START``. Killed there, the resume is
#: linked and the agent has not re-opened step 1.
AFTER_ATTEMPT_START = "6"


def _runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "log"
    return path.read_text().splitlines() if path.exists() else []


def _named(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if line.startswith(f"run:{name}:")]


@pytest.fixture
def shopkit(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """The shop loaded in this process, on the store the killed processes used."""
    monkeypatch.setenv("SHOP_STORE", where)
    monkeypatch.setenv("SHOP_LOG", str(tmp_path / "log"))
    monkeypatch.delenv("SHOP_KILL", raising=False)
    spec = importlib.util.spec_from_file_location(f"shop_{tmp_path.name}", KIT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    module.router.close()
    module.router.store.close()


@pytest.fixture
def shop(shopkit: ModuleType) -> IntentRouter:
    """The shop's router in this process."""
    router: IntentRouter = shopkit.router
    return router


def _resume(shop: IntentRouter, execution_id: str) -> AgentResponse:
    """Resume a killed process's execution once its store has seen the process die.

    A file store's lock goes with the process; PostgreSQL ends a dead client's
    session (and its locks) when the server notices, a moment later, so until
    then a resume is refused as ``owned``, as it would be for a live one.
    """
    deadline = time.monotonic() + 10
    while True:
        try:
            return shop.resume(execution_id)
        except ResumeRefused as refused:
            if refused.reason != "owned" or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def test_killed_after_the_email_is_finished_by_another_process(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Killed after the e-mail: resume serves fetch and e-mail, runs charge once."""
    killed = _route(tmp_path, where, SHOP_KILL="before:charge")
    assert killed.returncode == -9
    [interrupted] = shop.store.list()
    assert interrupted.status is RecordStatus.INCOMPLETE

    answer = _resume(shop, interrupted.execution_id)

    assert answer.status == "success"
    assert answer.payload == {"total": 20}
    runs = _runs(tmp_path)
    assert len(_named(runs, "fetch")) == len(_named(runs, "email")) == 1
    assert len(_named(runs, "charge")) == 1
    new_id = answer.metadata.execution_id
    assert shop.store.resumed_by(interrupted.execution_id) == new_id
    assert resume_of(shop.store.load(new_id)) == interrupted.execution_id
    # the key a step hands the far side is the original execution's, on resume too
    assert _named(runs, "charge")[0] == f"run:charge:{interrupted.execution_id}:3"


def test_side_effect_in_doubt_parks_the_execution(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Killed inside the e-mail step: not sent again, parked, the step named."""
    assert _route(tmp_path, where, SHOP_KILL="in:email").returncode == -9
    [interrupted] = shop.store.list()

    answer = _resume(shop, interrupted.execution_id)

    assert answer.status == "error"
    assert answer.error is not None
    assert answer.error.code.value == "NEEDS_ATTENTION"
    assert answer.error.details["reason"] == "side_effect_in_doubt"
    assert answer.error.details["name"] == "email"
    assert len(_named(_runs(tmp_path), "email")) == 1
    assert len(_named(_runs(tmp_path), "charge")) == 0
    parked = shop.store.load(str(answer.metadata.execution_id))
    assert parked.header.status is RecordStatus.NEEDS_ATTENTION
    assert [
        s.execution_id for s in shop.store.list(ListFilters(status="needs_attention"))
    ] == [parked.execution_id]


def test_idempotent_side_effect_in_doubt_runs_again_with_the_same_key(
    tmp_path: Path, where: str, shop: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idempotent e-mail in doubt runs again, with the key it had the first time."""
    monkeypatch.setenv("SHOP_IDEMPOTENT", "1")
    assert (
        _route(tmp_path, where, SHOP_KILL="in:email", SHOP_IDEMPOTENT="1").returncode
        == -9
    )
    [interrupted] = shop.store.list()

    answer = _resume(shop, interrupted.execution_id)

    assert answer.status == "success"
    emails = _named(_runs(tmp_path), "email")
    assert len(emails) == 2
    assert emails[0] == emails[1]


def test_a_repeated_key_resumes_the_interrupted_execution(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """A retry with the same key finishes the killed run; a third is a replay."""
    assert _route(tmp_path, where, "k-1", SHOP_KILL="before:charge").returncode == -9

    retried = _route(tmp_path, where, "k-1")
    again = _route(tmp_path, where, "k-1")

    first = orjson.loads(retried.stdout)
    second = orjson.loads(again.stdout)
    assert first["payload"] == second["payload"] == {"total": 20}
    assert second["metadata"]["fromReplay"] is True
    assert second["metadata"]["originalExecutionId"] == first["metadata"]["executionId"]
    runs = _runs(tmp_path)
    assert [len(_named(runs, n)) for n in ("fetch", "email", "charge")] == [1, 1, 1]


def _race(tmp_path: Path, where: str, start: Path) -> set[str]:
    """Eight processes sending key ``race`` once ``start`` exists: what each ran."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(KIT), "slow", "race", str(start)],
            env=_env(tmp_path, where),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    start.write_text("")
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    return {orjson.loads(out)["payload"]["ran"] for out in outputs}


def test_eight_processes_with_one_key_run_the_agent_once(
    tmp_path: Path, where: str
) -> None:
    """Eight racing processes sending one key: one run, one answer for all."""
    start = tmp_path / "go"
    payloads = _race(tmp_path, where, start)
    assert len(_named(_runs(tmp_path), "slow")) == 1
    assert len(payloads) == 1


def test_racers_on_a_key_whose_claimer_died_unopened_run_it_once(
    tmp_path: Path, where: str
) -> None:
    """A claimer killed before its record opened: eight racing retries run it once."""
    start = tmp_path / "go"
    start.write_text("")
    # Fault point 1 is just before the record's header: the key is claimed,
    # nothing of its execution is open.
    killed = subprocess.run(
        [sys.executable, str(KIT), "slow", "race", str(start)],
        env=_env(tmp_path, where, INTENTUSNET_KILL_AT="1"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -9
    with open_store(where) as store:
        claimed = store.find_by_idempotency_key("race")  # type: ignore[attr-defined]
        assert claimed is not None
        assert not store.exists(claimed)
    start.unlink()
    payloads = _race(tmp_path, where, start)
    runs = _named(_runs(tmp_path), "slow")
    assert len(runs) == 1
    assert payloads == {runs[0].split(":")[2]} == {claimed}


def test_random_kills_lose_nothing_and_repeat_nothing(shopkit: ModuleType) -> None:
    """Ten routers killed at random points: recovery ends every order, none twice."""
    counts = shopkit.kill_trial(10, seed=24)

    assert counts["submitted"] == 10
    ended = counts["completed"] + counts["failed"] + counts["needs_attention"]
    assert ended == 10, counts
    for bad in ("unfinished", "lost", "no_reason", "side_effects_twice"):
        assert counts[bad] == 0, counts
    assert counts["steps_rerun"] == counts["emails_skipped"] == 0, counts


def _steps_of(shop: IntentRouter, execution_id: str) -> list[str]:
    return [e.type.value for e in shop.store.load(execution_id).events]


def test_a_resume_killed_before_its_first_step_loses_no_step(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Killed after the e-mail, its recovery killed before step 1: one e-mail."""
    assert _route(tmp_path, where, SHOP_KILL="before:charge").returncode == -9
    [origin] = shop.store.list()
    killed = _recover(tmp_path, where, INTENTUSNET_KILL_AT=AFTER_ATTEMPT_START)
    assert killed.returncode == -9, killed.stderr
    resumed = shop.store.resumed_by(origin.execution_id)
    assert resumed is not None
    events = _steps_of(shop, resumed)
    assert events[-1] == "AGENT_ATTEMPT_START"
    assert "STEP_START" not in events  # the resume holds no step

    report = Recovery(shop, grace=0, backoff=0).run_once()  # here, no waiting

    assert [o.action for o in report.outcomes] == ["resumed"]
    runs = _runs(tmp_path)
    assert [len(_named(runs, n)) for n in ("fetch", "email", "charge")] == [1, 1, 1]
    head = shop.store.resumed_by(resumed)
    assert head is not None
    record = shop.store.load(head)
    assert record.header.status is RecordStatus.COMPLETED
    assert record.final_response["payload"] == {"total": 20}


def test_a_keyed_retry_killed_before_its_first_step_loses_no_step(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """A keyed retry killed before step 1, then another retry: one e-mail."""
    assert _route(tmp_path, where, "k-2", SHOP_KILL="before:charge").returncode == -9
    killed = _route(tmp_path, where, "k-2", INTENTUSNET_KILL_AT=AFTER_ATTEMPT_START)
    assert killed.returncode == -9, killed.stderr

    retried = _route(tmp_path, where, "k-2")

    assert retried.returncode == 0, retried.stderr
    assert orjson.loads(retried.stdout)["payload"] == {"total": 20}
    runs = _runs(tmp_path)
    assert [len(_named(runs, n)) for n in ("fetch", "email", "charge")] == [1, 1, 1]


def _parked_on_the_email(tmp_path: Path, where: str, shop: IntentRouter) -> str:
    """An order killed inside its e-mail, resumed and parked: the parked record."""
    assert _route(tmp_path, where, SHOP_KILL="in:email").returncode == -9
    [interrupted] = shop.store.list()
    answer = _resume(shop, interrupted.execution_id)
    assert answer.error is not None
    assert answer.error.details["reason"] == "side_effect_in_doubt"
    assert answer.error.details["step"] == 2
    return interrupted.execution_id


def _cli(
    tmp_path: Path, where: str, *args: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``intentusnet --store WHERE ARGS`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "intentusnet.cli", "--store", where, *args],
        cwd=KIT.parent,
        env=_env(tmp_path, where, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_resolved_as_happened_recovery_finishes_without_sending_again(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """resolve --happened: recovery serves the e-mail's given output, charges once."""
    origin = _parked_on_the_email(tmp_path, where, shop)
    parked = _chain_newest(shop, origin)
    shown = _cli(tmp_path, where, "inspect", parked).stdout
    commands = [
        line.split(":", 1)[1].strip()
        for line in shown.splitlines()
        if line.strip().startswith("to move it on:")
    ]
    assert commands == [
        f"intentusnet resolve {parked} --step 2 --happened --output JSON",
        f"intentusnet resolve {parked} --step 2 --not-happened",
        f"intentusnet cancel {parked}",
    ]

    # the command inspect shows, run as shown (its JSON filled in)
    command = shlex.split(commands[0].replace("JSON", """'{"id": "m-1"}'"""))
    resolved = _cli(tmp_path, where, *command[1:])
    assert resolved.returncode == 0, resolved.stderr
    decision_id = resolved.stdout.strip()
    assert _recover(tmp_path, where).returncode == 0

    runs = _runs(tmp_path)
    assert [len(_named(runs, n)) for n in ("fetch", "email", "charge")] == [1, 1, 1]
    decision = shop.store.load(decision_id)
    [event] = [e for e in decision.events if e.type.value == "OPERATOR_DECISION"]
    assert event.data["by"] == getpass.getuser()
    assert (event.data["via"], event.data["happened"]) == ("cli", True)
    assert event.data["output"] == {"id": "m-1"}
    assert shop.store.verify(decision_id).valid
    finished = shop.store.load(shop.store.resumed_by(decision_id))
    assert finished.header.status is RecordStatus.COMPLETED
    [email] = [
        e for e in finished.events
        if e.type.value == "STEP_END" and e.data["name"] == "email"
    ]  # fmt: skip
    assert email.data["output"] == {"id": "m-1"}
    assert email.data["servedFrom"]["executionId"] == decision_id


def test_resolved_as_not_happened_the_email_is_sent_once(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """resolve --not-happened: the e-mail runs once more, then never again."""
    origin = _parked_on_the_email(tmp_path, where, shop)
    shop.resolve(origin, step=2, happened=False, by="ops@example.com")

    assert _recover(tmp_path, where).returncode == 0
    assert _recover(tmp_path, where).returncode == 0  # nothing left to do

    runs = _runs(tmp_path)
    # the first line is the e-mail the operator says never went out
    assert [len(_named(runs, n)) for n in ("fetch", "email", "charge")] == [1, 2, 1]
    head = shop.store.load(_chain_newest(shop, origin))
    assert head.header.status is RecordStatus.COMPLETED
    assert head.final_response["payload"] == {"total": 20}


def test_a_resolved_execution_has_its_recovery_attempts_again(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Recovery counts attempts from the decision: resumed though max_attempts=1."""
    origin = _parked_on_the_email(tmp_path, where, shop)  # one resume already
    decision = shop.resolve(origin, step=2, happened=True)

    [outcome] = Recovery(shop, grace=0, max_attempts=1).run_once().outcomes

    assert (outcome.execution_id, outcome.action) == (decision, "resumed")
    finished = shop.store.load(str(outcome.resumed_as))
    assert finished.header.status is RecordStatus.COMPLETED
    assert len(_named(_runs(tmp_path), "email")) == 1


def test_a_resume_killed_inside_a_step_resolved_as_not_happened_parks_again(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Resolved not happened, then killed inside the e-mail again: in doubt again."""
    origin = _parked_on_the_email(tmp_path, where, shop)
    shop.resolve(origin, step=2, happened=False)
    killed = _cli(
        tmp_path, where, "resume", origin, "--app", "shopkit:router",
        SHOP_KILL="in:email",
    )  # fmt: skip
    assert killed.returncode == -9

    answer = _resume(shop, origin)

    assert answer.error is not None
    assert answer.error.details["reason"] == "side_effect_in_doubt"
    assert len(_named(_runs(tmp_path), "email")) == 2
    assert len(_named(_runs(tmp_path), "charge")) == 0


def _chain_newest(shop: IntentRouter, execution_id: str) -> str:
    current = execution_id
    while (following := shop.store.resumed_by(current)) is not None:
        current = following
    return current


def test_resolve_refuses_bad_input_and_writes_nothing(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Another step, output not JSON, output without --happened, no flag: refused."""
    origin = _parked_on_the_email(tmp_path, where, shop)
    before = len(shop.store.list())
    cases = [
        (("--step", "3", "--happened"), 4, "wrong_step"),
        (("--step", "2", "--happened", "--output", "{nope"), 2, "not JSON"),
        (("--step", "2", "--not-happened", "--output", "1"), 2, "--happened only"),
        (("--step", "2"), 2, "--not-happened"),
    ]
    for args, code, said in cases:
        refused = _cli(tmp_path, where, "resolve", origin, *args)
        assert (refused.returncode, refused.stdout) == (code, ""), args
        assert said in refused.stderr
        assert "Traceback" not in refused.stderr
    with pytest.raises(InvalidResolution, match="not JSON"):
        shop.resolve(origin, step=2, happened=True, output={1, 2})
    assert len(shop.store.list()) == before
    newest = _chain_newest(shop, origin)
    assert newest != origin  # still the parked record, nothing linked after it
    assert shop.store.load(newest).header.status is RecordStatus.NEEDS_ATTENTION


def test_resolve_refuses_an_execution_that_is_not_parked(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """An interrupted execution, and a finished one, cannot be resolved."""
    assert _route(tmp_path, where, SHOP_KILL="in:email").returncode == -9
    [interrupted] = shop.store.list()
    with pytest.raises(ResolveRefused) as refused:
        shop.resolve(interrupted.execution_id, step=2, happened=True)
    assert refused.value.reason == "not_parked"
    assert "incomplete" in str(refused.value)
    assert len(shop.store.list()) == 1


def test_two_operators_resolving_at_once_one_wins(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """Two resolutions of one step at once: one record is written, the other told."""
    origin = _parked_on_the_email(tmp_path, where, shop)
    start = threading.Barrier(2)

    def decide(happened: bool) -> str:
        start.wait()
        try:
            return shop.resolve(origin, step=2, happened=happened)
        except ResolveRefused as refused:
            return refused.reason

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(decide, [True, False]))

    won = [o for o in outcomes if o.startswith("exec-")]
    assert len(won) == 1
    assert next(o for o in outcomes if o not in won) in ("owned", "resolved")
    assert _chain_newest(shop, origin) == won[0]
    again = _cli(tmp_path, where, "resolve", origin, "--step", "2", "--happened")
    assert again.returncode == 4
    assert "(resolved)" in again.stderr


@pytest.mark.parametrize("pause", ["before its decision", "before its close"])
def test_a_resolution_linked_but_not_yet_written_is_owned_not_running(
    tmp_path: Path,
    where: str,
    shop: IntentRouter,
    monkeypatch: pytest.MonkeyPatch,
    pause: str,
) -> None:
    """While the first resolve writes its linked record, it owns the execution.

    Both points of that window are walked: the record linked before its decision
    is written, and the decision written before the record is closed. A second
    operator asking there is told ``owned`` (not ``not_parked``: the chain's newest
    record is a decision being made, not a running execution), and ``resolved``
    once the first is closed.
    """
    origin = _parked_on_the_email(tmp_path, where, shop)
    linked, go_on = threading.Event(), threading.Event()
    write_event, close = Recorder.event, Recorder.abandon

    def wait_here() -> None:
        if not go_on.is_set():
            linked.set()  # the first resolve, its record linked: wait here
            assert go_on.wait(30)

    def event(
        self: Recorder, event_type: str, data: JSONObject, *, now: bool = False
    ) -> None:
        if event_type == "OPERATOR_DECISION" and pause == "before its decision":
            wait_here()
        write_event(self, event_type, data, now=now)

    def abandon(self: Recorder) -> None:
        if pause == "before its close":
            wait_here()
        close(self)

    monkeypatch.setattr(Recorder, "event", event)
    monkeypatch.setattr(Recorder, "abandon", abandon)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(shop.resolve, origin, step=2, happened=True)
        assert linked.wait(30)
        assert _chain_newest(shop, origin) != origin  # its record is linked
        with pytest.raises(ResolveRefused) as refused:
            shop.resolve(origin, step=2, happened=False)
        assert refused.value.reason == "owned"
        go_on.set()
        won = first.result(timeout=30)
    with pytest.raises(ResolveRefused) as refused:
        shop.resolve(origin, step=2, happened=False)
    assert refused.value.reason == "resolved"
    assert won in str(refused.value)
    assert _chain_newest(shop, origin) == won


# -- cancel ---------------------------------------------------------------------------


def _ticking(tmp_path: Path, where: str, *args: str) -> subprocess.Popen[str]:
    """A router process ticking (``shopkit.py tick``), once its record is open."""
    process = subprocess.Popen(
        [sys.executable, str(KIT), "tick", *args],
        env=_env(tmp_path, where),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while len(_named(_runs(tmp_path), "tick")) < 2:
        assert time.monotonic() < deadline, "the ticking process never ticked"
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)
    return process


def test_cancel_stops_a_running_execution_of_another_process(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """cancel ID: the process running it stops at a step within 1 s; key, list agree."""
    ticking = _ticking(tmp_path, where, "t-1")
    [running] = shop.store.list()
    assert running.status is RecordStatus.IN_PROGRESS

    asked = _cli(tmp_path, where, "cancel", running.execution_id)
    requested = time.monotonic()
    out, _ = ticking.communicate(timeout=30)
    observed = time.monotonic() - requested

    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == running.execution_id
    assert "cancel requested" in asked.stderr
    assert observed <= 1.0
    answer = orjson.loads(out)
    assert (answer["status"], answer["error"]["code"]) == ("error", "CANCELLED")
    assert answer["error"]["details"]["by"] == getpass.getuser()
    record = shop.store.load(running.execution_id)
    assert record.header.status is RecordStatus.CANCELLED
    assert shop.store.verify(running.execution_id).valid
    ticks = len(_named(_runs(tmp_path), "tick"))
    listed = _cli(tmp_path, where, "records", "list", "--status", "cancelled", "--json")
    assert [r["executionId"] for r in orjson.loads(listed.stdout)] == [
        running.execution_id
    ]
    # the key answers with the cancellation; recovery leaves it alone
    again = orjson.loads(_route_tick(tmp_path, where, "t-1").stdout)
    assert again["metadata"]["fromReplay"] is True
    assert again["error"]["code"] == "CANCELLED"
    assert Recovery(shop, grace=0).run_once().outcomes == ()
    assert len(_named(_runs(tmp_path), "tick")) == ticks


def _route_tick(
    tmp_path: Path, where: str, key: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(KIT), "tick", key],
        env=_env(tmp_path, where),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cancel_closes_parked_and_interrupted_executions(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """A parked and an interrupted execution are closed cancelled; nothing runs."""
    origin = _parked_on_the_email(tmp_path, where, shop)
    assert _route(tmp_path, where, SHOP_KILL="before:charge").returncode == -9
    [interrupted] = [
        s.execution_id
        for s in shop.store.list(ListFilters(status="incomplete"))
        if s.execution_id != origin
    ]

    for execution_id in (origin, interrupted):
        record, closed = shop.cancel(execution_id, by="ops@example.com")
        assert closed
        cancelled = shop.store.load(record)
        assert cancelled.header.status is RecordStatus.CANCELLED
        assert resume_of(cancelled) == _chain_previous(shop, record)
        [event] = [e for e in cancelled.events if e.type.value == "OPERATOR_DECISION"]
        assert (event.data["action"], event.data["by"]) == ("cancel", "ops@example.com")
    assert Recovery(shop, grace=0).run_once().outcomes == ()
    assert len(_named(_runs(tmp_path), "charge")) == 0
    assert len(_named(_runs(tmp_path), "email")) == 2  # one per order, never again
    with pytest.raises(ResumeRefused, match="complete"):
        shop.resume(interrupted)


def _chain_previous(shop: IntentRouter, record: str) -> str | None:
    return resume_of(shop.store.load(record))


def test_a_cancel_requested_before_a_crash_is_honoured_by_recovery(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """A chain that died with a cancel request pending is closed, not resumed."""
    assert _route(tmp_path, where, SHOP_KILL="before:charge").returncode == -9
    [interrupted] = shop.store.list()
    request = {"by": "ops", "via": "cli", "atUtc": "2026-12-07T00:00:00Z"}
    assert shop.store.request_cancel(interrupted.execution_id, request) is None

    [outcome] = Recovery(shop, grace=0).run_once().outcomes

    assert (outcome.action, outcome.reason) == ("cancelled", "cancelled")
    closed = shop.store.load(str(outcome.resumed_as))
    assert closed.header.status is RecordStatus.CANCELLED
    assert len(_named(_runs(tmp_path), "charge")) == 0


def test_cancel_refuses_a_finished_execution_and_a_second_cancel(
    tmp_path: Path, where: str, shop: IntentRouter
) -> None:
    """A finished execution is not cancelled; of two cancels at once, one wins."""
    assert _route(tmp_path, where).returncode == 0
    [done] = shop.store.list()
    refused = _cli(tmp_path, where, "cancel", done.execution_id)
    assert refused.returncode == 4
    assert "(finished)" in refused.stderr
    assert "completed" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _route(tmp_path, where, SHOP_KILL="before:charge").returncode == -9
    [interrupted] = [
        s.execution_id for s in shop.store.list() if s.execution_id != done.execution_id
    ]
    start = threading.Barrier(2)

    def stop(by: str) -> str:
        start.wait()
        try:
            return shop.cancel(interrupted, by=by)[0]
        except CancelRefused as lost:
            return lost.reason

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(stop, ["ann", "bob"]))

    # The loser is refused: "cancelled" if it asked while the winner's request
    # stood, "finished" if the winner had closed the chain before it looked.
    [won] = [o for o in outcomes if o not in ("cancelled", "finished")]
    assert len(outcomes) == 2
    assert shop.store.load(won).header.status is RecordStatus.CANCELLED
    assert len(shop.store.list()) == 3  # the two orders and one cancellation
    again = _cli(tmp_path, where, "cancel", interrupted)
    assert again.returncode == 4
    assert "(finished)" in again.stderr
