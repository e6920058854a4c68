"""Make ``signed.jsonl``: a completed, then invalidated, signed record.

Recorded by a store given a signing key, then invalidated by a store given a
second key (a rotation), so the sample holds line 1's ``keyId`` and two
``SIGNATURE`` lines by two keys; ``signed-a.pub`` and ``signed-b.pub`` are
their public keys (the private keys are thrown away). Tests load it and check
it, so a change that can no longer read or check signed records fails CI.
Re-run only on purpose (the record is golden):

    python records/make_signed_sample.py
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from intentusnet import FileExecutionStore, IntentRouter, JSONObject, SigningKey

HERE = Path(__file__).resolve().parent
ENVELOPE: JSONObject = {
    "intent": {"name": "summarize"},
    "payload": {"text": "Signed when closed. Checked with the public key."},
}


def main() -> None:
    """Make the sample."""
    first, second = SigningKey.generate(), SigningKey.generate()
    with tempfile.TemporaryDirectory() as tmp:
        store = FileExecutionStore(tmp, signing_key=first)
        with IntentRouter(store=store) as router:
            router.agent("summarize", name="short")(
                lambda env, ctx: {"summary": str(env.payload["text"]).split(".")[0]}
            )
            response = router.route_intent(ENVELOPE)
        store.close()
        execution_id = str(response.metadata.execution_id)
        rotated = FileExecutionStore(tmp, signing_key=second)
        rotated.invalidate(execution_id, "withdrawn after the key was rotated")
        rotated.close()
        source = next(Path(tmp).glob(f"*/{execution_id}.jsonl"))
        shutil.copyfile(source, HERE / "signed.jsonl")
    (HERE / "signed.envelope.json").write_text(json.dumps(ENVELOPE, indent=2) + "\n")
    (HERE / "signed-a.pub").write_bytes(first.public_key.pem())
    (HERE / "signed-b.pub").write_bytes(second.public_key.pem())
    print("records/signed.jsonl")


if __name__ == "__main__":
    main()
