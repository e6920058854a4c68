"""``intentusnet diff`` of a BROADCAST execution: a deviation point per branch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    ReplayEngine,
    rerun,
)
from intentusnet.store import FileExecutionStore

from .support import Invoke


def _broadcast(root: Path, day: str) -> str:
    store = FileExecutionStore(root)
    with IntentRouter(store=store) as router:

        @router.agent("plan", name="alpha", priority=1)
        def alpha(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            return {"lat": ctx.step("geo.find", {"city": "Oslo"}, lambda city: 59)}

        @router.agent("plan", name="beta", priority=2)
        def beta(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            return {"sky": ctx.step("weather", {"day": day}, lambda day: "clear")}

        response = router.route_intent(
            {"intent": {"name": "plan"}, "routing": {"strategy": "BROADCAST"}}
        )
    store.close()
    assert response.metadata.execution_id is not None
    return response.metadata.execution_id


def test_diff_prints_each_branch_and_its_deviation_point(
    invoke: Invoke, store_root: Path
) -> None:
    """Entries name their branch; a Branches section says where each one parts."""
    first, second = _broadcast(store_root, "mon"), _broadcast(store_root, "tue")
    result = invoke("--store", str(store_root), "diff", first, "last")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "first deviation: weather (args_changed)" in out
    assert "> args_changed     [beta] weather (step 2 -> 2): args differ at day" in out
    branches = out.split("Branches\n", 1)[1].splitlines()
    assert branches == [
        "  alpha: same",
        "  beta: first deviation: weather (args_changed)",
    ]
    doc = orjson.loads(
        invoke("--store", str(store_root), "diff", first, second, "--json").stdout
    )
    assert [(b["agent"], b["same"]) for b in doc["branches"]] == [
        ("alpha", True),
        ("beta", False),
    ]


def _qualifier(version: str, store: FileExecutionStore) -> IntentRouter:
    def qualify(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        if env.payload["email"] != "ada@x.io":
            raise ValueError("unknown sender")
        return {"ok": True}

    router = IntentRouter(store=store)
    router.agent("crm.qualify", name="qualifier", version=version)(qualify)
    return router


def _qualify(root: Path, version: str, email: str) -> str:
    store = FileExecutionStore(root)
    with _qualifier(version, store) as router:
        response = router.route_intent(
            {"intent": {"name": "crm.qualify"}, "payload": {"email": email}}
        )
    store.close()
    assert response.metadata.execution_id is not None
    return response.metadata.execution_id


def test_debug_reports_configuration_drift(invoke: Invoke, store_root: Path) -> None:
    """debug compares the configuration with the last completed run of the intent."""
    store = ("--store", str(store_root))
    alone = _qualify(store_root, "1.0", "eve@x.io")
    doc = orjson.loads(invoke(*store, "debug", alone, "--json").stdout)
    assert doc["configuration"]["comparedWith"] is None
    assert doc["configuration"]["why"] == "no completed crm.qualify run before it"
    assert doc["configuration"]["same"] is None

    good = _qualify(store_root, "1.0", "ada@x.io")
    same = _qualify(store_root, "1.0", "eve@x.io")
    doc = orjson.loads(invoke(*store, "debug", same, "--json").stdout)
    assert (doc["configuration"]["comparedWith"], doc["configuration"]["same"]) == (
        good,
        True,
    )
    text = invoke(*store, "debug", same).stdout
    assert f"  the same as {good} (the last completed crm.qualify run before it)" in (
        text
    )

    drifted = _qualify(store_root, "2.0", "eve@x.io")
    doc = orjson.loads(invoke(*store, "debug", drifted, "--json").stdout)
    assert doc["configuration"]["same"] is False
    assert doc["configuration"]["changes"] == ["qualifier 1.0 -> 2.0"]
    assert doc["configuration"]["fingerprint"].startswith("sha256:")
    text = invoke(*store, "debug", drifted).stdout
    assert f"CHANGED since {good} (the last completed crm.qualify run before it): " in (
        text
    )

    # a re-run is compared with the run it re-ran
    source = FileExecutionStore(store_root)
    with _qualifier("3.0", source) as router:
        result = rerun(ReplayEngine.from_store(source, same), router)
    source.close()
    rerun_id = str(result.execution_id)
    doc = orjson.loads(invoke(*store, "debug", rerun_id, "--json").stdout)
    assert doc["configuration"]["comparedWith"] == same
    assert doc["configuration"]["why"] == "the run this one re-ran"
    assert doc["configuration"]["changes"] == ["qualifier 1.0 -> 3.0"]
