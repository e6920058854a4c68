"""The record modules bind orjson's functions, or the stdlib twins if told first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from intentusnet import _jsoncodec, _recordfile, _recordread, _recordverify, hashing

ROOT = Path(__file__).resolve().parent.parent


def test_the_library_binds_orjsons_own_functions() -> None:
    """In-process, every record module calls orjson directly: nothing wraps it."""
    assert _recordread._loads is orjson.loads
    assert _recordfile.loads is _recordverify.loads is orjson.loads
    assert _recordfile.dumps is hashing.dumps is orjson.dumps
    assert hashing.OPT_SORT_KEYS == orjson.OPT_SORT_KEYS
    assert _recordread.JSONDecodeError is orjson.JSONDecodeError


def test_the_first_choice_holds() -> None:
    """Once a module bound orjson's functions, the twins are not taken up."""
    assert _jsoncodec.use_stdlib() is False
    assert _jsoncodec.loads is orjson.loads


def test_an_unknown_name_is_an_attribute_error() -> None:
    """Only the names the record modules use are looked up."""
    with pytest.raises(AttributeError, match="no attribute 'load'"):
        _jsoncodec.load  # noqa: B018


CHOSEN_FIRST = """
import json, sys
from pathlib import Path
from intentusnet import _jsoncodec
assert _jsoncodec.use_stdlib()
from intentusnet import _stdjson, hashing
from intentusnet._recordread import _loads, parse_record
assert _loads is _stdjson.loads and hashing.dumps is _stdjson.dumps
root = Path(sys.argv[1])
data = (root / "records" / "completed.jsonl").read_bytes()
execution_id = json.loads(data.split(b"\\n")[0])["executionId"]
record = parse_record(data, execution_id, lambda owner: False)
assert record.header.replayable and record.final_response is not None
file = root / "docs" / "envelope-hash-vectors.json"
vectors = json.loads(file.read_text())["vectors"]
assert hashing.compute_hash(vectors[0]["envelope"]) == vectors[0]["hash"]
assert "orjson" not in sys.modules, "a plain record needs no orjson"
for vector in vectors:
    assert hashing.compute_hash(vector["envelope"]) == vector["hash"], vector["name"]
print("ok")
"""


def test_chosen_first_the_twins_read_and_hash_without_orjson() -> None:
    """A fresh process that chose the twins reads a record and hashes every vector."""
    done = subprocess.run(
        [sys.executable, "-c", CHOSEN_FIRST, str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
