"""``records list``, ``records show`` and ``inspect``."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import yaml

from intentusnet.cli.records import STATUSES
from intentusnet.record.model import RecordStatus

from .support import Invoke

HOSTILE_IDS = ["../x", "/etc/passwd", "a/b", ".hidden", "x" * 129, "a\x00b", ""]


def test_list_table_newest_first(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """The table has a header row and one row per record, newest first."""
    result = invoke("--store", str(store_root), "records", "list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "CREATED",
        "INTENT",
        "AGENT",
        "STATUS",
        "REPLAYABLE",
        "DURATION",
    ]
    shown = [line.split()[0] for line in lines[1:]]
    created = [line.split()[1] for line in lines[1:]]
    assert sorted(created, reverse=True) == created
    assert set(shown) == set(ids.values())
    assert "\x1b[" not in result.stdout  # no colour when not a terminal


def test_list_json_round_trips(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--json prints an array of summaries with stable camelCase keys."""
    result = invoke("--store", str(store_root), "records", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = orjson.loads(result.stdout)
    assert {row["executionId"] for row in rows} == set(ids.values())
    by_id = {row["executionId"]: row for row in rows}
    completed = by_id[ids["completed"]]
    assert set(completed) == {
        "executionId",
        "createdUtc",
        "intent",
        "envelopeHash",
        "status",
        "replayable",
        "replayableReason",
        "agent",
        "durationMs",
    }
    assert completed["status"] == "completed"
    assert completed["agent"] == "echo"
    assert by_id[ids["incomplete"]]["replayableReason"] == "execution_incomplete"


def test_list_filters(invoke: Invoke, store_root: Path, ids: dict[str, str]) -> None:
    """--intent, --status, --since and --limit narrow the list."""

    def listed(*options: str) -> list[str]:
        result = invoke(
            "--store", str(store_root), "records", "list", "--json", *options
        )
        assert result.exit_code == 0, result.output
        return [row["executionId"] for row in orjson.loads(result.stdout)]

    assert listed("--intent", "flaky") == [ids["fallback"]]
    assert listed("--status", "failed") == [ids["failed"]]
    assert len(listed("--limit", "2")) == 2
    assert len(listed("--since", "1h")) == len(ids)
    assert listed("--since", "2999-01-01") == []
    assert len(listed("--since", "2000-01-01T00:00:00Z")) == len(ids)


@pytest.mark.parametrize(
    "options",
    [["--status", "done"], ["--since", "yesterday"], ["--limit", "0"]],
)
def test_list_bad_filter_is_usage_error(
    invoke: Invoke, store_root: Path, options: list[str]
) -> None:
    """A filter value click cannot parse exits 2."""
    result = invoke("--store", str(store_root), "records", "list", *options)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_list_new_filters(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--until, --replayable, --id-prefix and --hash narrow the list as the store."""

    def rows(*options: str) -> list[dict[str, object]]:
        result = invoke(
            "--store", str(store_root), "records", "list", "--json", *options
        )
        assert result.exit_code == 0, result.output
        listed = orjson.loads(result.stdout)
        assert isinstance(listed, list)
        return listed

    every = rows()
    assert len(every) == len(ids)
    newest, oldest = every[0], every[-1]
    # --until is exclusive: the newest record's own time leaves it out.
    until = [r["executionId"] for r in rows("--until", str(newest["createdUtc"]))]
    assert newest["executionId"] not in until
    assert len(until) == len(ids) - 1
    assert rows("--until", str(oldest["createdUtc"])) == []
    assert len(rows("--until", "2999-01-01")) == len(ids)
    assert rows("--until", "1h") == []  # an hour ago: before every record
    replayable = {r["executionId"] for r in rows("--replayable")}
    not_replayable = {r["executionId"] for r in rows("--not-replayable")}
    assert ids["completed"] in replayable
    assert ids["incomplete"] in not_replayable
    assert replayable | not_replayable == set(ids.values())
    assert not replayable & not_replayable
    assert all(r["replayable"] is True for r in rows("--replayable"))
    wanted = ids["fallback"]
    assert [r["executionId"] for r in rows("--id-prefix", wanted[:-1])] == [wanted]
    assert rows("--id-prefix", "nothing-starts-so") == []
    by_id = {r["executionId"]: r for r in every}
    same = str(by_id[ids["completed"]]["envelopeHash"])
    assert [r["executionId"] for r in rows("--hash", same)] == [ids["completed"]]
    assert rows("--hash", "sha256:" + "0" * 64) == []
    both = rows("--hash", same, "--not-replayable")
    assert both == []


def test_list_new_filters_leave_out_cache_hits(
    invoke: Invoke, store_root: Path
) -> None:
    """With --until, --replayable, --id-prefix or --hash only records are listed."""
    source = _served_twice(store_root)
    for options in (
        ["--until", "2999-01-01"],
        ["--replayable"],
        ["--id-prefix", "exec-"],
        ["--id-prefix", "hit-"],
    ):
        result = invoke(
            "--store", str(store_root), "records", "list", "--json", *options
        )
        assert result.exit_code == 0, result.output
        kinds = [row.get("kind") for row in orjson.loads(result.stdout)]
        assert "cache_hit" not in kinds, options
    listed = orjson.loads(
        invoke(
            "--store", str(store_root), "records", "list", "--json", "--replayable"
        ).stdout
    )
    assert [row["executionId"] for row in listed] == [source]


@pytest.mark.parametrize(
    ("options", "named", "said"),
    [
        (["--until", "tomorrow"], "--until", "neither an ISO 8601 time"),
        (["--id-prefix", "a/b"], "--id-prefix", "cannot start an execution id"),
        (["--id-prefix", "x" * 129], "--id-prefix", "1-128 characters"),
        (["--id-prefix", ""], "--id-prefix", "cannot start an execution id"),
        (["--hash", "sha256:abc"], "--hash", "not an envelope hash"),
        (["--hash", "SHA256:" + "A" * 64], "--hash", "lowercase"),
        (["--hash", "0" * 64], "--hash", "not an envelope hash"),
        (["--replayable=yes"], "--replayable", "does not take a value"),
    ],
)
def test_list_bad_new_filter_names_the_option(
    invoke: Invoke,
    store_root: Path,
    options: list[str],
    named: str,
    said: str,
) -> None:
    """A bad --until, --id-prefix or --hash exits 2 naming the option, no traceback."""
    result = invoke("--store", str(store_root), "records", "list", *options)
    assert result.exit_code == 2
    assert named in result.stderr
    assert said in result.stderr
    assert "Traceback" not in result.output


def test_status_choices_are_the_record_states() -> None:
    """--status offers exactly the library's RecordStatus values."""
    assert tuple(status.value for status in RecordStatus) == STATUSES


def test_list_empty_store(invoke: Invoke, store_root: Path) -> None:
    """An empty store lists nothing: a note for people, [] for machines."""
    result = invoke("--store", str(store_root), "records", "list")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "No records.\n"
    result = invoke("--store", str(store_root), "records", "list", "--json")
    assert orjson.loads(result.stdout) == []


def test_show_prints_the_record(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """records show prints the assembled record; --json prints it on one line."""
    result = invoke("--store", str(store_root), "records", "show", ids["completed"])
    assert result.exit_code == 0, result.output
    record = orjson.loads(result.stdout)
    assert record["header"]["executionId"] == ids["completed"]
    assert record["envelope"]["payload"] == {"text": "hello"}
    assert [e["type"] for e in record["events"]][-1] == "FINAL_RESPONSE"
    assert record["finalResponse"]["payload"] == {"echo": {"text": "hello"}}
    compact = invoke(
        "--store", str(store_root), "records", "show", "--json", ids["completed"]
    )
    assert compact.stdout.count("\n") == 1
    assert orjson.loads(compact.stdout) == record


@pytest.mark.parametrize("name", ["completed", "fallback", "failed", "incomplete"])
def test_show_formats_print_the_same_document(
    invoke: Invoke, store_root: Path, ids: dict[str, str], name: str
) -> None:
    """--format json is --json; yaml reads back as the document; markdown holds it."""
    show = ("--store", str(store_root), "records", "show", ids[name])
    record = orjson.loads(invoke(*show).stdout)
    as_json = invoke(*show, "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    assert as_json.stdout == invoke(*show, "--json").stdout
    assert invoke(*show, "--json", "--format", "json").stdout == as_json.stdout
    as_yaml = invoke(*show, "--format", "yaml")
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.stdout) == record
    page = invoke(*show, "--format", "markdown")
    assert page.exit_code == 0, page.output
    text = page.stdout
    assert text.startswith(f"# {ids[name]}: ")
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    assert headings == [
        f"### {e['seq']}. {e['type']} (at {e['atMs']} ms)" for e in record["events"]
    ]
    blocks = re.findall(r"^```yaml\n(.*?)^```$", text, re.S | re.M)
    assert yaml.safe_load(blocks[0]) == record["header"]
    assert yaml.safe_load(blocks[1]) == record["envelope"]
    final = record["finalResponse"]
    if final is None:
        assert "None: the record did not finish." in text
    else:
        assert yaml.safe_load(blocks[-1]) == final


def test_show_refuses_an_unknown_format_or_two_formats(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A format not offered, or --json with another format: usage error, exit 2."""
    show = ("--store", str(store_root), "records", "show", ids["completed"])
    unknown = invoke(*show, "--format", "yml")
    assert unknown.exit_code == 2
    assert (
        "Invalid value for '--format': 'yml' is not one of 'json', 'yaml', "
        "'markdown'." in unknown.stderr
    )
    both = invoke(*show, "--json", "--format", "yaml")
    assert both.exit_code == 2
    assert "Error: --json and --format yaml ask for two formats" in both.stderr
    assert unknown.stdout == both.stdout == ""
    assert "Traceback" not in unknown.stderr + both.stderr


@pytest.mark.parametrize("command", [["records", "show"], ["inspect"]])
def test_unknown_id_exits_3(
    invoke: Invoke, store_root: Path, ids: dict[str, str], command: list[str]
) -> None:
    """An id with no record is one line on stderr and exit 3."""
    result = invoke("--store", str(store_root), *command, "exec-0000")
    assert result.exit_code == 3
    assert result.stderr == f"Error: no record exec-0000 in store {store_root}\n"


@pytest.mark.parametrize("bad_id", HOSTILE_IDS)
def test_hostile_ids_exit_3(invoke: Invoke, store_root: Path, bad_id: str) -> None:
    """Ids that could name a path outside the store are refused with exit 3."""
    result = invoke("--store", str(store_root), "records", "show", bad_id)
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: invalid execution id")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", [["records", "show"], ["inspect"]])
def test_tampered_record_exits_6(
    invoke: Invoke, store_root: Path, ids: dict[str, str], command: list[str]
) -> None:
    """Reading a record with a broken chain is an integrity failure: exit 6."""
    result = invoke("--store", str(store_root), *command, ids["tampered"])
    assert result.exit_code == 6
    assert ids["tampered"] in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_inspect_shows_timeline_and_traceback(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """inspect shows the header, every event, the fallback and its traceback."""
    result = invoke("--store", str(store_root), "inspect", ids["fallback"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Execution {ids['fallback']}" in out
    assert "flaky@1.0" in out
    for event in ("ROUTER_DECISION", "FALLBACK_TRIGGERED", "FINAL_RESPONSE"):
        assert event in out
    assert "first -> second (AGENT_ERROR)" in out
    assert "ValueError: first one fails" in out
    assert "Traceback (most recent call last)" in out
    assert '"n": 2' in out


def test_inspect_incomplete_says_so(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """An unfinished record shows its state and that there is no response."""
    result = invoke("--store", str(store_root), "inspect", ids["incomplete"])
    assert result.exit_code == 0, result.output
    assert "no (execution_incomplete)" in result.stdout
    assert "none: the execution did not finish" in result.stdout


def test_inspect_json(invoke: Invoke, store_root: Path, ids: dict[str, str]) -> None:
    """inspect --json gives header, timeline rows and the final response."""
    result = invoke("--store", str(store_root), "inspect", "--json", ids["fallback"])
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert set(doc) == {
        "header",
        "fingerprint",
        "replayOf",
        "timeline",
        "durable",
        "finalResponse",
        "tornTail",
        "tree",
    }
    ends = [row for row in doc["timeline"] if row["type"] == "AGENT_ATTEMPT_END"]
    assert [(r["agent"], r["outcome"]) for r in ends] == [
        ("first", "error"),
        ("second", "success"),
    ]
    assert ends[0]["error"]["code"] == "AGENT_ERROR"
    assert "ValueError" in ends[0]["traceback"]
    assert set(ends[0]) == {
        "seq",
        "offsetMs",
        "type",
        "agent",
        "durationMs",
        "outcome",
        "detail",
        "error",
        "traceback",
    }
    assert doc["finalResponse"]["payload"] == {"n": 2}


def _served_twice(store_root: Path) -> str:
    """Route one envelope three times through a cached router; the source id."""
    from intentusnet import IntentRouter
    from intentusnet.cache.replay_cache import ReplayCache
    from intentusnet.store import FileExecutionStore

    store = FileExecutionStore(store_root)
    cache = ReplayCache()
    with IntentRouter(store=store, cache=cache) as router:
        router.agent("cached", name="echo")(lambda env, ctx: {"ok": True})
        source = router.route_intent({"intent": {"name": "cached"}})
        router.route_intent({"intent": {"name": "cached"}})
        router.route_intent({"intent": {"name": "cached"}})
    cache.close()
    store.close()
    assert source.metadata.execution_id is not None
    return source.metadata.execution_id


def test_list_shows_cache_hits(invoke: Invoke, store_root: Path) -> None:
    """Hits are listed as cache_hit rows naming their source; --no-hits hides."""
    source = _served_twice(store_root)
    result = invoke("--store", str(store_root), "records", "list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split()[-1] == "SOURCE"
    hits = [line.split() for line in lines[1:] if "cache_hit" in line]
    assert len(hits) == 2
    assert all(row[0].startswith("hit-") and row[-1] == source for row in hits)
    rows = orjson.loads(
        invoke("--store", str(store_root), "records", "list", "--json").stdout
    )
    assert [row.get("kind") for row in rows] == ["cache_hit", "cache_hit", None]
    assert rows[0]["sourceExecutionId"] == source
    for options in (["--no-hits"], ["--status", "completed"]):
        listed = invoke("--store", str(store_root), "records", "list", *options)
        assert "cache_hit" not in listed.stdout
        assert "SOURCE" not in listed.stdout
    limited = invoke("--store", str(store_root), "records", "list", "--limit", "1")
    assert len(limited.stdout.splitlines()) == 2
