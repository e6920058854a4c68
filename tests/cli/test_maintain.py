"""``verify``, ``invalidate``, ``reindex``, ``prune`` and ``stats``."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from genai_prices import Usage, calc_price
from integrations.fakeapi import FakeAPI
from llmkit import Expected, record_calls
from recordkit import change_answer, reseal

from intentusnet.errors import UnsupportedSchemaVersion
from intentusnet.record.model import VerifyReport
from intentusnet.store import FileExecutionStore
from intentusnet.store.file.layout import relative_path

from .support import Invoke, record_file

VERDICT = re.compile(
    r"^(?P<id>\S+): (?P<ok>\d+)/(?P<total>\d+) events verified, "
    r"(?P<failures>\d+) failures - (?P<verdict>VALID|INVALID)$"
)


def test_verify_one_valid_record(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A sound record: N/N events verified, 0 failures - VALID, exit 0."""
    result = invoke("--store", str(store_root), "verify", ids["completed"])
    assert result.exit_code == 0, result.output
    first, total = result.stdout.splitlines()
    match = VERDICT.match(first)
    assert match is not None, first
    assert match["id"] == ids["completed"]
    assert match["ok"] == match["total"]
    assert (match["failures"], match["verdict"]) == ("0", "VALID")
    assert total.startswith("Total: 1 records (0 invalid, 0 recording failures)")
    assert total.endswith("0 failures - VALID")


def test_verify_tampered_exits_6(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A flipped byte: INVALID with its failure listed, exit 6."""
    result = invoke(
        "--store", str(store_root), "verify", ids["completed"], ids["tampered"]
    )
    assert result.exit_code == 6
    lines = result.stdout.splitlines()
    verdicts = {m["id"]: m for m in map(VERDICT.match, lines) if m is not None}
    assert verdicts[ids["completed"]]["verdict"] == "VALID"
    bad = verdicts[ids["tampered"]]
    assert bad["verdict"] == "INVALID"
    assert int(bad["failures"]) >= 1
    assert int(bad["ok"]) < int(bad["total"])
    assert any(line.startswith("  line ") for line in lines)
    assert lines[-1].startswith("Total: 2 records (1 invalid,")
    assert lines[-1].endswith("INVALID")


def test_verify_all_json(invoke: Invoke, store_root: Path, ids: dict[str, str]) -> None:
    """--all --json reports the failing record and a total over all; exit 6."""
    result = invoke("--store", str(store_root), "verify", "--all", "--json")
    assert result.exit_code == 6
    doc = orjson.loads(result.stdout)
    (report,) = doc["records"]
    assert report["executionId"] == ids["tampered"]
    assert report["valid"] is False
    assert set(report) == {
        "executionId",
        "eventsTotal",
        "eventsVerified",
        "failures",
        "valid",
        "notes",
        "recordingFailure",
        "keyId",
    }
    total = doc["total"]
    assert total["records"] == len(ids)
    assert total["invalid"] == 1
    assert total["recordingFailures"] == 0
    assert total["failures"] == len(report["failures"])
    assert total["valid"] is False


def test_verify_all_each_prints_every_record(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--all --each prints one line per record; the totals are the same."""
    result = invoke("--store", str(store_root), "verify", "--all", "--each", "--json")
    assert result.exit_code == 6
    doc = orjson.loads(result.stdout)
    reports = {r["executionId"]: r for r in doc["records"]}
    assert set(reports) == set(ids.values())
    assert reports[ids["completed"]]["valid"] is True
    assert doc["total"]["eventsTotal"] == sum(
        r["eventsTotal"] for r in reports.values()
    )
    text = invoke("--store", str(store_root), "verify", "--all", "--each")
    verdicts = [m for m in map(VERDICT.match, text.stdout.splitlines()) if m]
    assert len(verdicts) == len(ids)


def test_verify_each_needs_all(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--each (or --jobs) without --all is a usage error (exit 2)."""
    result = invoke("--store", str(store_root), "verify", "--each", ids["completed"])
    assert result.exit_code == 2
    assert "--each and --jobs go with --all" in result.stderr


def test_verify_reports_a_headerless_file_as_a_recording_failure(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A file with no complete first line: a note, not a failure; exit 0."""
    with FileExecutionStore(store_root) as store:
        store.delete(ids["tampered"])  # its file and its row
    target = store_root / relative_path("exec-headerless")
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b'{"schemaVersion": 1, "execu')  # a torn first line
    result = invoke("--store", str(store_root), "verify", "--all")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "exec-headerless: 0/0 events verified, 0 failures - RECORDING FAILURE"
    )
    assert lines[1].startswith("  note: recording failure: the file has no complete")
    assert lines[-1].startswith(
        f"Total: {len(ids)} records (0 invalid, 1 recording failures)"
    )
    assert lines[-1].endswith("- VALID")
    one = invoke("--store", str(store_root), "verify", "--json", "exec-headerless")
    assert one.exit_code == 0
    assert orjson.loads(one.stdout)["records"][0]["recordingFailure"] is True


def test_verify_all_valid_store_exits_0(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """Without the tampered record every record verifies: exit 0, no progress text."""
    with FileExecutionStore(store_root) as store:
        store.delete(ids["tampered"])  # its file and its row
    result = invoke("--store", str(store_root), "verify", "--all")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].endswith("- VALID")
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_verify_goes_on_past_an_unreadable_record(
    invoke: Invoke,
    store_root: Path,
    ids: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A record that cannot be checked fails; the others are still verified."""
    real_verify = FileExecutionStore.verify

    def verify(self: FileExecutionStore, execution_id: str) -> VerifyReport:
        if execution_id == ids["completed"]:
            raise UnsupportedSchemaVersion("schemaVersion 99", execution_id)
        return real_verify(self, execution_id)

    monkeypatch.setattr(FileExecutionStore, "verify", verify)
    result = invoke(
        "--store", str(store_root), "verify", ids["completed"], ids["failed"]
    )
    assert result.exit_code == 6
    lines = result.stdout.splitlines()
    assert lines[0] == f"{ids['completed']}: 0/0 events verified, 1 failures - INVALID"
    assert "schemaVersion 99" in lines[1]
    assert lines[2].startswith(f"{ids['failed']}: ")
    assert lines[2].endswith("- VALID")


def test_verify_needs_ids_or_all(invoke: Invoke, store_root: Path) -> None:
    """Neither IDs nor --all, or both, is a usage error (exit 2)."""
    assert invoke("--store", str(store_root), "verify").exit_code == 2
    both = invoke("--store", str(store_root), "verify", "--all", "exec-x")
    assert both.exit_code == 2


def test_verify_unknown_id_exits_3(invoke: Invoke, store_root: Path) -> None:
    """An unknown id is exit 3, with one line."""
    result = invoke("--store", str(store_root), "verify", "exec-none")
    assert result.exit_code == 3
    assert len(result.stderr.splitlines()) == 1


def test_verify_empty_store(invoke: Invoke, store_root: Path) -> None:
    """--all over an empty store verifies nothing and succeeds."""
    result = invoke("--store", str(store_root), "verify", "--all")
    assert result.exit_code == 0
    assert result.stdout.startswith("Total: 0 records")


def test_invalidate(invoke: Invoke, store_root: Path, ids: dict[str, str]) -> None:
    """invalidate marks the record; --json confirms; the header shows the reason."""
    result = invoke(
        "--store",
        str(store_root),
        "invalidate",
        ids["completed"],
        "--reason",
        "bad answer",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout) == {
        "executionId": ids["completed"],
        "invalidated": True,
        "reason": "bad answer",
        "appended": True,
    }
    shown = invoke("--store", str(store_root), "records", "show", ids["completed"])
    header = orjson.loads(shown.stdout)["header"]
    assert header["replayableReason"] == "manually_invalidated"


def test_invalidate_while_being_written_exits_1(
    invoke: Invoke, store_root: Path
) -> None:
    """A record another writer still holds cannot be invalidated: StoreError, 1."""
    store = FileExecutionStore(store_root)
    writer = store.open(
        {"intent": {"name": "echo"}}, envelope_hash="sha256:" + "0" * 64
    )
    try:
        result = invoke(
            "--store",
            str(store_root),
            "invalidate",
            writer.execution_id,
            "--reason",
            "x",
        )
    finally:
        writer.close()
        store.close()
    assert result.exit_code == 1
    assert "still being written" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_invalidate_needs_reason(invoke: Invoke, store_root: Path) -> None:
    """--reason is required: exit 2."""
    assert invoke("--store", str(store_root), "invalidate", "exec-x").exit_code == 2


def test_invalidate_unknown_exits_3(invoke: Invoke, store_root: Path) -> None:
    """Invalidating a record that does not exist exits 3."""
    result = invoke(
        "--store", str(store_root), "invalidate", "exec-none", "--reason", "x"
    )
    assert result.exit_code == 3


def test_reindex_restores_the_catalog(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """After the catalog is deleted, reindex brings every record back."""
    for path in store_root.glob("catalog.sqlite3*"):
        path.unlink()
    result = invoke("--store", str(store_root), "reindex", "--json")
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout) == {"records": len(ids), "changed": []}
    listed = invoke("--store", str(store_root), "records", "list", "--json")
    assert len(orjson.loads(listed.stdout)) == len(ids)
    text = invoke("--store", str(store_root), "reindex")
    assert text.stdout == f"Reindexed {len(ids)} records.\n"


def test_reindex_names_a_record_edited_and_rehashed_and_exits_6(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A record edited, every hash recomputed, is listed, exit 6, and stays caught."""
    path = record_file(store_root, ids["completed"])
    path.write_bytes(reseal(path.read_bytes(), change_answer("forged")))
    result = invoke("--store", str(store_root), "reindex")
    assert result.exit_code == 6, result.output
    assert result.stdout.splitlines()[1:] == [
        f"{ids['completed']}: changed since the catalog saw it - line 6: its hash "
        "is not the one the catalog recorded - INVALID",
        "1 records changed since they were indexed; kept as integrity_failure (not "
        "accepted as they are now).",
    ]
    as_json = invoke("--store", str(store_root), "reindex", "--json")
    assert as_json.exit_code == 6
    assert orjson.loads(as_json.stdout)["changed"] == [
        {
            "executionId": ids["completed"],
            "problem": "line 6: its hash is not the one the catalog recorded",
        }
    ]
    verified = invoke("--store", str(store_root), "verify", ids["completed"])
    assert verified.exit_code == 6


def test_prune_dry_run_then_for_real(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--dry-run lists and keeps; without it the records are deleted."""
    kept = invoke("--store", str(store_root), "prune", "--older-than", "1d", "--json")
    assert orjson.loads(kept.stdout) == {
        "executionIds": [],
        "count": 0,
        "dryRun": False,
    }
    dry = invoke(
        "--store", str(store_root), "prune", "--older-than", "0s", "--dry-run", "--json"
    )
    assert dry.exit_code == 0, dry.output
    listed = orjson.loads(dry.stdout)
    assert listed["dryRun"] is True
    assert set(listed["executionIds"]) == set(ids.values())
    assert record_file(store_root, ids["completed"]).exists()
    real = invoke("--store", str(store_root), "prune", "--older-than", "0s")
    assert real.exit_code == 0, real.output
    assert set(real.stdout.split()) == set(ids.values())
    assert real.stderr == f"Deleted {len(ids)} records.\n"
    assert list(store_root.glob("*/*.jsonl")) == []


def test_prune_bad_duration_exits_2(invoke: Invoke, store_root: Path) -> None:
    """A duration click cannot parse is a usage error."""
    result = invoke("--store", str(store_root), "prune", "--older-than", "soon")
    assert result.exit_code == 2
    assert "is not a duration" in result.stderr


def test_stats(invoke: Invoke, store_root: Path, ids: dict[str, str]) -> None:
    """stats counts by status and intent, in text and in JSON."""
    result = invoke("--store", str(store_root), "stats", "--json")
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["records"] == len(ids)
    assert doc["byStatus"]["failed"] == 1
    assert doc["byIntent"]["flaky"] == 1
    assert doc["bytesOnDisk"] > 0
    text = invoke("--store", str(store_root), "stats").stdout
    assert f"Records: {len(ids)} (" in text
    assert "By status:" in text
    assert "By intent:" in text


def test_stats_empty_store(invoke: Invoke, store_root: Path) -> None:
    """An empty store has zero records."""
    result = invoke("--store", str(store_root), "stats", "--json")
    assert result.exit_code == 0
    assert orjson.loads(result.stdout)["records"] == 0


def test_stats_show_cache_hits_and_counts(invoke: Invoke, store_root: Path) -> None:
    """stats reports recorded hits and the default cache directory's counts."""
    from intentusnet import IntentRouter
    from intentusnet.cache.replay_cache import ReplayCache

    store = FileExecutionStore(store_root)
    cache = ReplayCache()
    with IntentRouter(store=store, cache=cache) as router:
        router.agent("cached", name="echo")(lambda env, ctx: {"ok": True})
        for _ in range(3):
            router.route_intent({"intent": {"name": "cached"}})
    cache.close()
    store.close()
    doc = orjson.loads(invoke("--store", str(store_root), "stats", "--json").stdout)
    assert doc["cacheHits"] == 2
    (counts,) = doc["caches"]
    assert (counts["namespace"], counts["hits"], counts["misses"]) == ("default", 2, 1)
    assert counts["entries"] == 1
    text = invoke("--store", str(store_root), "stats").stdout
    assert "Cache hits recorded: 2" in text
    assert "Cache 'default': 2 hits, 1 misses, 1 entries" in text
    elsewhere = store_root.parent / "elsewhere"
    result = invoke(
        "--store", str(store_root), "stats", "--json", "--cache-dir", str(elsewhere)
    )
    assert orjson.loads(result.stdout)["caches"] == []
    assert not elsewhere.exists()


def test_invalidating_twice_is_a_no_op_that_says_so(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """The second invalidate appends nothing, exits 0 and names the first reason."""
    store = ("--store", str(store_root))
    target = ids["completed"]
    first = invoke(*store, "invalidate", target, "--reason", "bad answer")
    assert first.exit_code == 0, first.output
    path = next(store_root.glob(f"*/{target}.jsonl"))
    before = path.read_bytes()
    again = invoke(*store, "invalidate", target, "--reason", "still bad")
    assert again.exit_code == 0, again.output
    assert again.stdout == (
        f"{target} was already invalidated (reason: bad answer); nothing appended\n"
    )
    as_json = invoke(*store, "invalidate", target, "--reason", "x", "--json")
    assert orjson.loads(as_json.stdout) == {
        "executionId": target,
        "invalidated": True,
        "reason": "bad answer",
        "appended": False,
    }
    assert path.read_bytes() == before


LLM_CALLS = [
    ("openai", "gpt-4o-mini", "hello there"),
    ("openai", "gpt-4o-mini", "hello there"),
    ("openai", "gpt-4o-mini", "hello there"),
    ("anthropic", "claude-3-5-haiku-latest", "bonjour"),
]


@pytest.fixture
def llm_store(store_root: Path) -> dict[tuple[str, str], Expected]:
    """A store holding OpenAI and Anthropic calls (misses and hits)."""
    with FakeAPI() as api:
        store = FileExecutionStore(store_root)
        expected = record_calls(store, api.url, LLM_CALLS)
        store.close()
    return expected


def test_stats_shows_what_caching_saved(
    invoke: Invoke,
    store_root: Path,
    tmp_path: Path,
    llm_store: dict[tuple[str, str], Expected],
) -> None:
    """stats counts LLM calls, tokens spent and avoided, and their costs."""
    mini = llm_store[("openai", "gpt-4o-mini")]
    haiku = llm_store[("anthropic", "claude-3-5-haiku-latest")]
    text = invoke("--store", str(store_root), "stats").stdout
    assert "LLM calls: 4 (2 hits, 2 misses)" in text
    spent_in = mini.spent[0] + haiku.spent[0]
    spent_out = mini.spent[1] + haiku.spent[1]
    assert f"Tokens spent on misses: {spent_in} input, {spent_out} output" in text
    assert (
        f"Tokens avoided by hits: {mini.avoided[0]} input, {mini.avoided[1]} output"
        in text
    )
    # without --prices: the prices genai-prices publishes, in USD
    published = calc_price(
        Usage(input_tokens=mini.avoided[0], output_tokens=mini.avoided[1]),
        "gpt-4o-mini",
    )
    assert f"Cost avoided: {float(published.total_price):.6f} USD" in text
    row = next(line.split() for line in text.splitlines() if "gpt-4o-mini" in line)
    assert row[:9] == ["openai", "gpt-4o-mini", "3", "2", "1"] + [
        str(n) for n in (*mini.spent, *mini.avoided)
    ]  # then the cost spent and avoided
    prices = tmp_path / "prices.json"
    prices.write_bytes(
        orjson.dumps(
            {"currency": "EUR", "models": {"gpt-4o*": {"input": 1e6, "output": 2e6}}}
        )
    )
    priced = invoke("--store", str(store_root), "stats", "--prices", str(prices))
    assert priced.exit_code == 0, priced.output
    avoided = mini.avoided[0] * 1 + mini.avoided[1] * 2
    assert f"Cost avoided: {avoided:.6f} EUR" in priced.stdout
    assert "No price for: claude-3-5-haiku-latest" in priced.stdout
    args = ("--store", str(store_root), "stats", "--json")
    doc = orjson.loads(invoke(*args, INTENTUSNET_PRICES=str(prices)).stdout)
    llm = doc["llm"]
    assert (llm["calls"], llm["hits"], llm["misses"]) == (4, 2, 2)
    assert llm["currency"] == "EUR"
    assert llm["cost"]["avoided"] == pytest.approx(avoided)
    assert llm["outputTokens"] == {"spent": spent_out, "avoided": mini.avoided[1]}


def test_a_usd_table_overrides_the_published_prices_model_by_model(
    invoke: Invoke,
    store_root: Path,
    tmp_path: Path,
    llm_store: dict[tuple[str, str], Expected],
) -> None:
    """A USD table prices its models; the others keep the published prices."""
    mini = llm_store[("openai", "gpt-4o-mini")]
    haiku = llm_store[("anthropic", "claude-3-5-haiku-latest")]
    prices = tmp_path / "prices.json"
    prices.write_bytes(
        orjson.dumps(
            {"currency": "USD", "models": {"gpt-4o*": {"input": 1e6, "output": 2e6}}}
        )
    )
    args = ("--store", str(store_root), "stats", "--json", "--prices", str(prices))
    doc = orjson.loads(invoke(*args).stdout)
    by_model = {row["model"]: row for row in doc["llm"]["models"]}
    ours = mini.spent[0] * 1 + mini.spent[1] * 2
    assert by_model["gpt-4o-mini"]["cost"]["spent"] == pytest.approx(ours)
    usage = Usage(input_tokens=haiku.spent[0], output_tokens=haiku.spent[1])
    published = float(calc_price(usage, "claude-3-5-haiku-latest").total_price)
    assert by_model["claude-3-5-haiku-latest"]["cost"]["spent"] == pytest.approx(
        published
    )


def test_stats_without_llm_calls(invoke: Invoke, store_root: Path) -> None:
    """A store without LLM calls says so."""
    text = invoke("--store", str(store_root), "stats").stdout
    assert "LLM calls: none recorded" in text
    doc = orjson.loads(invoke("--store", str(store_root), "stats", "--json").stdout)
    assert doc["llm"]["models"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{", "not valid JSON"),
        (
            b'{"currency": "USD", "models": {"gpt-4o": {"input": "?", "output": 1}}}',
            "models['gpt-4o'].input: must be a number >= 0, not '?'",
        ),
        (
            b'{"currency": "USD", "models": {"gpt-4o": {"input": 1}}}',
            ".output: missing",
        ),
    ],
)
def test_stats_refuses_a_bad_price_table(
    invoke: Invoke, store_root: Path, tmp_path: Path, content: bytes, message: str
) -> None:
    """A bad --prices file exits 2, naming the file, the model and the field."""
    prices = tmp_path / "prices.json"
    prices.write_bytes(content)
    result = invoke("--store", str(store_root), "stats", "--prices", str(prices))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert f"{prices}: " in result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    missing = invoke("--store", str(store_root), "stats", "--prices", "nope.toml")
    assert missing.exit_code == 2
    assert "nope.toml: cannot read: No such file or directory" in missing.stderr
