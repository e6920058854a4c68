"""Make the sample records in this folder: one record of each state.

Each sample is produced by the real router and store, then copied here as
``<state>.jsonl`` beside ``<state>.envelope.json``, the envelope it was made
from. Tests load every sample, so a change of format that cannot read these
records any more fails CI. Re-run only on purpose (the records are golden):

    python records/make_samples.py
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from intentusnet import (
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
)

HERE = Path(__file__).resolve().parent

ENVELOPES: dict[str, dict[str, object]] = {
    "completed": {
        "intent": {"name": "summarize"},
        "payload": {"text": "Records remember everything. Replays repeat it."},
        "context": {"tenant": "acme"},
        "routing": {"strategy": "FALLBACK"},
    },
    "failed": {
        "intent": {"name": "summarize"},
        "payload": {"text": ""},
        "routing": {"targetAgent": "flaky"},
    },
    "incomplete": {
        "intent": {"name": "summarize"},
        "payload": {"text": "This one never finishes.", "hang": True},
        "routing": {"strategy": "BROADCAST"},
    },
    "invalidated": {
        "intent": {"name": "summarize"},
        "payload": {"text": "Answered once, then withdrawn."},
        "routing": {"targetAgent": "short"},
    },
    "tampered": {
        "intent": {"name": "summarize"},
        "payload": {"text": "Someone edited this record afterwards."},
        "routing": {"targetAgent": "short"},
    },
}


def build_router(store: FileExecutionStore) -> IntentRouter:
    """The agents every sample was routed to."""
    router = IntentRouter(store=store)

    @router.agent("summarize", name="flaky", priority=10)
    def flaky(env: IntentEnvelope, ctx: object) -> dict[str, object]:
        raise ConnectionError("model endpoint refused the connection")

    @router.agent("summarize", name="short", priority=20)
    def short(env: IntentEnvelope, ctx: object) -> dict[str, object]:
        if env.payload.get("hang"):
            print("started", flush=True)
            signal.pause()  # the parent kills us here
        return {"summary": str(env.payload["text"]).split(".")[0] + "."}

    return router


def route(root: str, state: str) -> str:
    """Route the state's envelope into the store at ``root``; return the id."""
    store = FileExecutionStore(root)
    with build_router(store) as router:
        response = router.route_intent(ENVELOPES[state])
    store.close()
    return str(response.metadata.execution_id)


def killed(root: str) -> None:
    """Route the 'incomplete' envelope in a child and SIGKILL it mid-agent."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", root],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "started"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()


def main() -> None:
    """Make every sample."""
    if sys.argv[1:2] == ["--child"]:
        route(sys.argv[2], "incomplete")
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "store")
        ids = {state: route(root, state) for state in ("completed", "failed")}
        ids["invalidated"] = route(root, "invalidated")
        store = FileExecutionStore(root)
        store.invalidate(ids["invalidated"], "answer withdrawn by the operator")
        ids["tampered"] = route(root, "tampered")
        killed(root)
        ids["incomplete"] = next(
            summary.execution_id
            for summary in store.list()
            if summary.execution_id not in ids.values()
        )
        store.close()
        for state, execution_id in ids.items():
            source = next(Path(root).glob(f"*/{execution_id}.jsonl"))
            target = HERE / f"{state}.jsonl"
            shutil.copyfile(source, target)
            (HERE / f"{state}.envelope.json").write_text(
                json.dumps(ENVELOPES[state], indent=2) + "\n"
            )
        # Edit the agent's answer in the middle of the record, keeping the JSON
        # valid: only the hash chain can tell.
        tampered = HERE / "tampered.jsonl"
        lines = tampered.read_bytes().split(b"\n")
        index = next(i for i, line in enumerate(lines) if b"AGENT_ATTEMPT_END" in line)
        edited = lines[index].replace(b"Someone edited", b"No one edited", 1)
        assert edited != lines[index]
        lines[index] = edited
        tampered.write_bytes(b"\n".join(lines))
    for state in ENVELOPES:
        print(f"records/{state}.jsonl")


if __name__ == "__main__":
    main()
