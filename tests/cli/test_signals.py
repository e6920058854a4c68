"""``intentusnet signal``: a signal kept for a waiting execution; refusals."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from intentusnet import FileExecutionStore, IntentRouter, RecordStatus, Recovery


@pytest.fixture
def waiting(store_root: Path) -> tuple[IntentRouter, str, str]:
    """A router on ``store_root``: an execution waiting for ``go``, and a done one."""
    router = IntentRouter(store=FileExecutionStore(store_root))
    router.agent("wait", name="wait")(lambda env, ctx: {"got": ctx.wait_for("go")})
    router.agent("done", name="done")(lambda env, ctx: {})
    waits = router.route_intent({"intent": {"name": "wait"}, "payload": {}})
    done = router.route_intent({"intent": {"name": "done"}, "payload": {}})
    return router, str(waits.metadata.execution_id), str(done.metadata.execution_id)


def test_a_signal_is_kept_and_recovery_resumes_the_wait_with_it(
    invoke, store_root: Path, waiting: tuple[IntentRouter, str, str]
) -> None:  # type: ignore[no-untyped-def]
    """Exit 0, the signal's id; the next recovery scan answers the wait with it."""
    router, execution_id, _done = waiting
    result = invoke(
        "--store",
        str(store_root),
        "signal",
        execution_id,
        "go",
        '{"ok": true}',
        "--json",
    )
    assert result.exit_code == 0, result.output
    shown = orjson.loads(result.stdout)
    assert shown["executionId"] == execution_id
    assert shown["signal"].startswith("sig-")
    [woken] = Recovery(router, grace=0).run_once().resumed
    final = router.store.load(woken.resumed_as)
    assert final.header.status is RecordStatus.COMPLETED
    assert final.final_response["payload"] == {"got": {"ok": True}}
    router.close()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["go", "{not json"], 2, "the payload is not JSON"),
        (["  ", "1"], 2, "printable characters"),
        (["go", '"' + "x" * 70_000 + '"'], 2, "at most 65536"),
    ],
)
def test_bad_input_exits_2_and_keeps_nothing(
    invoke,  # type: ignore[no-untyped-def]
    store_root: Path,
    waiting: tuple[IntentRouter, str, str],
    args: list[str],
    code: int,
    message: str,
) -> None:
    """InvalidSignal: one line on stderr, no traceback, no signal kept."""
    router, execution_id, _done = waiting
    result = invoke("--store", str(store_root), "signal", execution_id, *args)
    assert result.exit_code == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert router.store.signals(execution_id) == []  # type: ignore[union-attr]
    router.close()


def test_a_finished_or_unknown_execution_is_refused(
    invoke, store_root: Path, waiting: tuple[IntentRouter, str, str]
) -> None:  # type: ignore[no-untyped-def]
    """Finished: exit 4 (finished); unknown: exit 3; nothing kept."""
    router, _execution_id, done = waiting
    finished = invoke("--store", str(store_root), "signal", done, "go", "1")
    assert finished.exit_code == 4
    assert "(finished)" in finished.stderr
    unknown = invoke("--store", str(store_root), "signal", "exec-" + "0" * 32, "go")
    assert unknown.exit_code == 3
    assert router.store.signals(done) == []  # type: ignore[union-attr]
    router.close()


def test_inspect_shows_what_a_waiting_execution_waits_for(
    invoke, store_root: Path, waiting: tuple[IntentRouter, str, str]
) -> None:  # type: ignore[no-untyped-def]
    """records list --status waiting lists it; inspect names the signal, --json too."""
    router, execution_id, _done = waiting
    listed = invoke(
        "--store", str(store_root), "records", "list", "--status", "waiting", "--json"
    )
    assert [r["executionId"] for r in orjson.loads(listed.stdout)] == [execution_id]
    shown = invoke("--store", str(store_root), "inspect", execution_id)
    assert "waiting:         for signal 'go' (no timeout)" in shown.stdout
    as_json = invoke("--store", str(store_root), "inspect", execution_id, "--json")
    assert orjson.loads(as_json.stdout)["durable"]["waiting"]["name"] == "go"
    router.close()
