"""``intentusnet serve``: refusals before binding, workers, keys, graceful stop."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from integrations.fakeapi import FakeAPI
from livekit import ROUTE_KEY, ServeProcess
from llmkit import Expected, record_calls
from pgkit import PASSWORD

from intentusnet import RecordStatus, ReplayEngine
from intentusnet.cli import cli
from intentusnet.cli.params import parse_size
from intentusnet.store import FileExecutionStore, PostgresExecutionStore

APP = """
import asyncio, os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["SERVE_STORE"]))

@router.agent("echo", name="echo")
def echo(env, ctx):
    return {"echo": env.payload, "pid": os.getpid()}

@router.agent("slow", name="slow")
async def slow(env, ctx):
    await asyncio.sleep(0.8)
    return {"slept": True}
"""
STOPPED = (0, -signal.SIGTERM)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """A directory holding ``serveapp.py``."""
    (tmp_path / "serveapp.py").write_text(APP)
    return tmp_path


def _serve(*args: str, **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["serve", *args], env=env)
    return result.exit_code, result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_refuses_non_loopback_without_keys(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an API key, a non-loopback --host exits 2 before anything binds."""
    monkeypatch.delenv("INTENTUSNET_API_KEYS", raising=False)
    monkeypatch.delenv("INTENTUSNET_API_KEYS_FILE", raising=False)
    code, output = _serve("--app", "nothing:here", "--host", host)
    assert code == 2
    assert "without an API key" in output


def test_usage_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bad size, a short key, a missing key file or a bad --app exit 2."""
    monkeypatch.chdir(tmp_path)
    assert _serve("--app", "x:y", "--max-body-size", "lots")[0] == 2
    assert _serve("--app", "x:y", INTENTUSNET_API_KEYS="short")[0] == 2
    assert _serve("--app", "x:y", "--api-keys-file", "missing")[0] == 2
    code, output = _serve("--app", "no_such_module:router")
    assert code == 2
    assert "no_such_module" in output


def test_router_recording_elsewhere_than_the_named_store_exits_2(
    app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named store the router does not record to: exit 2 before anything binds."""
    monkeypatch.chdir(app_dir)
    monkeypatch.setattr(sys, "path", list(sys.path))
    own, named = app_dir / "own", app_dir / "named"
    try:
        code, output = _serve(
            "--app",
            "serveapp:router",
            INTENTUSNET_STORE=str(named),
            SERVE_STORE=str(own),
        )
    finally:
        module = sys.modules.pop("serveapp", None)
        if module is not None:
            module.router.close()
    assert code == 2
    assert (
        f"names {named.resolve()}, but serveapp:router records to {own.resolve()}"
        in output
    )
    assert not named.exists()


def test_parse_size() -> None:
    """Sizes are bytes with an optional K/M unit (binary or decimal)."""
    assert parse_size("1MiB") == 1024 * 1024
    assert parse_size("512 KiB") == 512 * 1024
    assert parse_size("2MB") == 2_000_000
    assert parse_size("100") == 100
    for bad in ("0", "1GB", "-1", "many"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)


@pytest.mark.slow
def test_sigterm_finishes_executions_in_flight(app_dir: Path) -> None:
    """SIGTERM while slow intents run: every caller is answered, no record torn."""
    root = app_dir / "records"
    server = ServeProcess(app_dir, "serveapp:router", env={"SERVE_STORE": str(root)})
    answers: list[int] = []

    def call() -> None:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=20) as http:
            env = {"intent": {"name": "slow"}}
            answers.append(http.post("/v1/intents", json=env).status_code)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with FileExecutionStore(root) as store:
            if len(store.list()) == 4:
                break
        time.sleep(0.02)
    code = server.stop()
    for thread in threads:
        thread.join(20)
    assert code in STOPPED
    assert answers == [200] * 4
    with FileExecutionStore(root) as store:
        summaries = store.list()
        assert [s.status for s in summaries] == ["completed"] * 4
        for summary in summaries:
            report = store.verify(summary.execution_id)
            assert report.valid
            assert not report.notes


# -- a PostgreSQL store named on the command line ---------------------------------

#: An application whose router has no store: ``serve`` gives it the named one.
BARE_APP = """
import os
from intentusnet import IntentRouter

router = IntentRouter()
router.agent("echo", name="echo")(
    lambda env, ctx: {"echo": env.payload, "pid": os.getpid()}
)
"""
#: An application that opens its store the documented way.
NAMED_APP = """
import os
from intentusnet import IntentRouter, open_store

router = IntentRouter(store=open_store())
router.agent("echo", name="echo")(
    lambda env, ctx: {"echo": env.payload, "pid": os.getpid()}
)
"""


def _route(url: str, n: int) -> dict[str, Any]:
    with httpx.Client(base_url=url, trust_env=False, timeout=20) as http:
        answer = http.post(
            "/v1/intents", json={"intent": {"name": "echo"}, "payload": {"n": n}}
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())


@pytest.mark.slow
def test_serve_records_to_the_database_named_by_the_variable(
    tmp_path: Path, pg_dsn: str
) -> None:
    """INTENTUSNET_STORE=URL: routed, listed, replayed by the service; in PostgreSQL."""
    (tmp_path / "bareapp.py").write_text(BARE_APP)
    server = ServeProcess(tmp_path, "bareapp:router", env={"INTENTUSNET_STORE": pg_dsn})
    try:
        answer = _route(server.url, 1)
        execution_id = answer["metadata"]["executionId"]
        with httpx.Client(base_url=server.url, trust_env=False, timeout=20) as http:
            listed = http.get("/v1/executions").json()
            replayed = http.post(f"/v1/executions/{execution_id}/replay")
    finally:
        assert server.stop() in STOPPED
    assert [item["executionId"] for item in listed["items"]] == [execution_id]
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["payload"] == answer["payload"]
    with PostgresExecutionStore(pg_dsn) as store:
        record = store.load(execution_id)
        assert record.header.status == RecordStatus.COMPLETED
        assert store.verify(execution_id).valid
    assert ReplayEngine(record).replay().payload == {
        "echo": {"n": 1},
        "pid": answer["payload"]["pid"],
    }
    assert PASSWORD not in "".join(server.lines)
    assert not (tmp_path / ".intentusnet").exists()


@pytest.mark.slow
def test_serve_workers_follow_the_store_option(tmp_path: Path, pg_dsn: str) -> None:
    """--store URL reaches 2 worker processes: every answer is in the database."""
    (tmp_path / "namedapp.py").write_text(NAMED_APP)
    server = ServeProcess(
        tmp_path, "namedapp:router", "--workers", "2", global_args=("--store", pg_dsn)
    )
    try:
        answers = [_route(server.url, n) for n in range(12)]
    finally:
        assert server.stop() in STOPPED
    with PostgresExecutionStore(pg_dsn) as store:
        stored = {summary.execution_id for summary in store.list()}
    assert stored == {a["metadata"]["executionId"] for a in answers}
    # Answered by the workers uvicorn started, not by the command's own process.
    assert server.process.pid not in {a["payload"]["pid"] for a in answers}
    assert PASSWORD not in "".join(server.lines)
    assert not (tmp_path / ".intentusnet").exists()


def test_serve_refuses_a_router_on_files_when_a_url_is_named(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A router on its own files and --store URL: exit 2, both named, no password."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "serveapp.py").write_text(APP)
    try:
        code, output = _serve(
            "--app",
            "serveapp:router",
            INTENTUSNET_STORE=pg_dsn,
            SERVE_STORE=str(tmp_path / "own"),
        )
    finally:
        module = sys.modules.pop("serveapp", None)
        if module is not None:
            module.router.close()
    assert code == 2
    assert "names PostgreSQL at 127.0.0.1:" in output
    assert f"but serveapp:router records to {(tmp_path / 'own').resolve()}" in output
    assert PASSWORD not in output


def test_serve_refuses_a_bad_price_table(tmp_path: Path) -> None:
    """A bad --prices file exits 2, naming the file and the field, before binding."""
    prices = tmp_path / "prices.json"
    prices.write_text(
        '{"currency": "USD", "models": {"m": {"input": -2, "output": 1}}}'
    )
    code, output = _serve("--app", "x:y", "--prices", str(prices))
    assert code == 2
    assert f"{prices}: models['m'].input: must be a number >= 0, not -2" in output
    assert "Traceback" not in output


# -- one server with two workers, for every test of what the workers share ----------

#: The app the two workers serve: a signing store, an echo agent naming its process.
WORKERS_APP = """
import os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(
    store=FileExecutionStore(
        os.environ["SERVE_STORE"], signing_key=os.environ["SERVE_SIGNING_KEY"]
    )
)
router.agent("echo", name="echo")(
    lambda env, ctx: {"echo": env.payload, "pid": os.getpid()}
)
"""
HEADERS = {"Authorization": f"Bearer {ROUTE_KEY}"}


@dataclass
class Workers:
    """``serve --workers 2`` running, and what its tests check it against."""

    server: ServeProcess
    root: Path
    key_id: str
    gpt: Expected

    def client(self, **options: Any) -> httpx.Client:
        """A new client (a new connection: either worker may take it), keyed."""
        return httpx.Client(
            base_url=self.server.url, trust_env=False, timeout=20, **options
        )


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    """``serve --workers 2`` with a key file, a price table and trusted keys.

    Its store holds four LLM calls recorded before it starts (three to gpt-4o,
    two of them hits, and one to an unpriced model) and signs its records.
    """
    from intentusnet import SigningKey

    directory = tmp_path_factory.mktemp("workers")
    (directory / "workersapp.py").write_text(WORKERS_APP)
    root = directory / "records"
    calls = [("openai", "gpt-4o", "hi there")] * 3 + [("anthropic", "claude-x", "yo")]
    with FakeAPI() as api, FileExecutionStore(root) as store:
        expected = record_calls(store, api.url, calls)
    prices = directory / "prices.toml"
    prices.write_text('currency = "USD"\n[models."gpt-4o"]\ninput = 2e6\noutput = 1e6')
    keys = directory / "api-keys"
    keys.write_text(f"{ROUTE_KEY}\n")
    keys.chmod(0o600)
    key = SigningKey.generate()
    private, _ = key.save(directory / "keys")
    server = ServeProcess(
        directory,
        "workersapp:router",
        "--workers",
        "2",
        "--api-keys-file",
        str(keys),
        "--prices",
        str(prices),
        "--keys",
        str(directory / "keys"),
        env={"SERVE_STORE": str(root), "SERVE_SIGNING_KEY": str(private)},
    )
    try:
        yield Workers(server, root, key.key_id, expected[("openai", "gpt-4o")])
    finally:
        assert server.stop() in STOPPED


def _echo(http: httpx.Client, n: int) -> dict[str, Any]:
    answer = http.post(
        "/v1/intents",
        json={"intent": {"name": "echo"}, "payload": {"n": n}},
        headers=HEADERS,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.slow
def test_workers_share_one_store_and_the_key_file(workers: Workers) -> None:
    """Two worker processes share one store; the key file is enforced."""
    with workers.client() as anonymous:
        assert anonymous.get("/v1/executions").status_code == 401
    ids, pids = set(), set()
    for n in range(40):
        with workers.client() as http:
            answer = _echo(http, n)
        ids.add(answer["metadata"]["executionId"])
        pids.add(answer["payload"]["pid"])
    assert workers.server.process.pid not in pids  # the workers answered
    with FileExecutionStore(workers.root) as store:
        assert ids <= {s.execution_id for s in store.list()}


def _metric_samples(text: str) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return [s for f in text_string_to_metric_families(text) for s in f.samples]


#: A metric sample's name and sorted labels.
Sample = tuple[str, tuple[tuple[str, str], ...]]


def _metrics(http: httpx.Client) -> dict[Sample, float]:
    samples = _metric_samples(http.get("/metrics", headers=HEADERS).text)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


@pytest.mark.slow
def test_metrics_are_totals_over_two_workers(workers: Workers) -> None:
    """With --workers 2, /metrics counts every intent, whichever worker routed it."""
    routed = ("intentusnet_intents_routed_total", (("status", "success"),))
    misses = ("intentusnet_cache_misses_total", ())
    durations = ("intentusnet_route_duration_seconds_count", ())
    with workers.client() as http:
        before = _metrics(http)
    pids: set[int] = set()
    sent = 0

    def route(n: int) -> None:
        # a connection of its own, so the kernel may hand it to either worker
        with workers.client() as http:
            pids.add(_echo(http, n)["payload"]["pid"])

    while (len(pids) < 2 or sent < 40) and sent < 400:
        threads = [threading.Thread(target=route, args=(sent + i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        sent += len(threads)
    assert len(pids) == 2, "one worker routed everything"
    for _ in range(6):  # whichever worker answers, the totals are the same
        with workers.client() as http:
            values = _metrics(http)
        for name in (routed, misses, durations):
            assert values[name] - before.get(name, 0) == sent
        assert values[("intentusnet_intents_in_flight", ())] == 0
        reporting = {
            int(dict(labels)["pid"])
            for (name, labels) in values
            if name == "process_resident_memory_bytes"
        }
        assert reporting == pids


@pytest.mark.slow
def test_llm_savings_over_two_workers(workers: Workers) -> None:
    """With --workers 2, every worker reports the store's LLM savings, once."""
    gpt = workers.gpt

    def gpt_4o(name: str, **labels: str) -> Sample:
        labels.update(model="gpt-4o", provider="openai")
        return name, tuple(sorted(labels.items()))

    pids: set[int] = set()
    for n in range(60):  # until both workers have answered
        with workers.client() as http:
            pids.add(_echo(http, n)["payload"]["pid"])
            values = _metrics(http)
            savings = http.get("/v1/savings", headers=HEADERS).json()
        calls_total = "intentusnet_llm_calls_total"
        assert values[gpt_4o(calls_total, outcome="hit")] == gpt.hits == 2
        assert values[gpt_4o(calls_total, outcome="miss")] == 1
        tokens = gpt_4o(
            "intentusnet_llm_tokens_total", direction="input", outcome="hit"
        )
        assert values[tokens] == gpt.avoided[0]
        cost = gpt_4o("intentusnet_llm_cost_total", currency="USD", outcome="hit")
        assert values[cost] == pytest.approx(2 * gpt.avoided[0] + gpt.avoided[1])
        assert (savings["hits"], savings["misses"]) == (2, 2)
        assert savings["unpriced"] == ["claude-x"]
        if len(pids) == 2 and n >= 4:
            break
    assert len(pids) == 2, "one worker answered everything"


@pytest.mark.slow
def test_workers_check_signatures_with_the_trusted_keys(workers: Workers) -> None:
    """serve --keys DIR reaches every worker: the explorer says verified."""
    with workers.client() as http:
        execution_id = _echo(http, 0)["metadata"]["executionId"]
    for _ in range(4):  # a connection each: either worker may answer
        with workers.client() as http:
            page = http.get(f"/ui/executions/{execution_id}", headers=HEADERS).text
        assert f"signed by key {workers.key_id}, verified" in page


def test_serve_refuses_trusted_keys_it_cannot_read(tmp_path: Path) -> None:
    """A --keys directory that does not exist fails before anything starts."""
    code, output = _serve("--app", "none:router", "--keys", str(tmp_path / "nope"))
    assert code == 2
    assert "does not exist" in output
