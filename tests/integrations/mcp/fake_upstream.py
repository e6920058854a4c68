"""A raw JSON-RPC upstream (no SDK): answers every request with its own params.

A ``tools/call`` of the tool ``garbage`` writes a line that is not JSON before
its answer, as a broken server would.
"""

import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    params = message.get("params") or {}
    if params.get("name") == "garbage":
        sys.stdout.write("this is not JSON\n")
    text = json.dumps(params.get("arguments"), sort_keys=True)
    answer = {"content": [{"type": "text", "text": text}], "isError": False}
    sys.stdout.write(
        json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer})
    )
    sys.stdout.write("\n")
    sys.stdout.flush()
