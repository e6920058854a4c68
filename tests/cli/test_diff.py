"""``intentusnet diff`` of a BROADCAST execution: a deviation point per branch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from intentusnet import AgentContext, IntentEnvelope, IntentRouter
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
