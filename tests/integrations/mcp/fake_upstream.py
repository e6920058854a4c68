"""A raw JSON-RPC upstream (no SDK): answers every request with its own params.

A ``tools/call`` of the tool ``garbage`` writes a line that is not JSON before
its answer, as a broken server would. A ``tools/call`` of ``hang`` writes this
process's id to the file ``MCP_TEST_PID`` names, then blocks for a minute
without reading its input, as a server busy in a long call does.
"""

import json
import os
import sys
import time

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    params = message.get("params") or {}
    if params.get("name") == "garbage":
        sys.stdout.write("this is not JSON\n")
    if params.get("name") == "hang":
        with open(os.environ["MCP_TEST_PID"], "w", encoding="utf-8") as out:
            out.write(str(os.getpid()))
        time.sleep(60)
    text = json.dumps(params.get("arguments"), sort_keys=True)
    answer = {"content": [{"type": "text", "text": text}], "isError": False}
    sys.stdout.write(
        json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer})
    )
    sys.stdout.write("\n")
    sys.stdout.flush()
