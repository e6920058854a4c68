"""The router's configuration in every record's header, and its fingerprint."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from intentusnet import IntentRouter, MemoryExecutionStore, RecordDiff, diff_records
from intentusnet.hashing import canonical_json, hash_bytes
from intentusnet.record.model import ExecutionRecord


def _router(store: MemoryExecutionStore, **versions: Any) -> IntentRouter:
    router = IntentRouter(store=store)
    router.agent("job", name="a", version=versions.get("a", "1.0"), priority=1)(
        lambda env, ctx: {"a": 1}
    )
    router.agent("job", name="b", priority=versions.get("b_priority", 2))(
        lambda env, ctx: {"b": 1}
    )
    if versions.get("c"):
        router.agent("job", name="c", priority=3)(lambda env, ctx: {"c": 1})
    if versions.get("other"):
        router.agent("other", name="o")(lambda env, ctx: {})
    return router


def _record(
    store: MemoryExecutionStore, strategy: str = "FALLBACK", **versions: Any
) -> ExecutionRecord:
    with _router(store, **versions) as router:
        response = router.route_intent(
            {"intent": {"name": "job"}, "routing": {"strategy": strategy}}
        )
    assert response.metadata.execution_id is not None
    return store.load(response.metadata.execution_id)


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store."""
    return MemoryExecutionStore()


def test_the_header_carries_the_configuration(store: MemoryExecutionStore) -> None:
    """Agents of the intent in routing order, the strategy, and the documented hash."""
    record = _record(store)
    configuration = record.header.configuration
    assert configuration is not None
    assert configuration["strategy"] == "FALLBACK"
    assert configuration["agents"] == [
        {"name": "a", "version": "1.0", "priority": 1},
        {"name": "b", "version": "1.0", "priority": 2},
    ]
    expected = hash_bytes(
        canonical_json([1, "FALLBACK", [["a", "1.0", 1], ["b", "1.0", 2]]])
    )
    assert configuration["fingerprint"] == expected
    line = orjson.loads(store.raw(record.execution_id).split(b"\n")[0])
    assert line["configuration"] == configuration
    assert record.header.to_json()["configuration"] == configuration


def test_the_fingerprint_follows_agents_versions_priorities_strategy(
    store: MemoryExecutionStore,
) -> None:
    """Each change moves the fingerprint; an agent of another intent does not."""

    def fingerprint(record: ExecutionRecord) -> object:
        assert record.header.configuration is not None
        return record.header.configuration["fingerprint"]

    base = fingerprint(_record(store))
    assert fingerprint(_record(store, other=True)) == base
    changed = [
        _record(store, a="1.1"),
        _record(store, b_priority=0),
        _record(store, c=True),
        _record(store, "BROADCAST"),
    ]
    prints = [fingerprint(record) for record in changed]
    assert base not in prints
    assert len(set(prints)) == len(prints)


def test_the_header_line_matches_the_documented_schema(
    store: MemoryExecutionStore,
) -> None:
    """Line 1 with a configuration validates against docs/records.md."""
    import jsonschema
    from record.test_reader import _schemas

    record = _record(store)
    line = orjson.loads(store.raw(record.execution_id).split(b"\n")[0])
    jsonschema.validate(line, _schemas()["header-line"])
    jsonschema.validate(record.header.to_json(), _schemas()["header"])


def _diff(a: ExecutionRecord, b: ExecutionRecord) -> RecordDiff:
    """The diff of two records, durations left out: these runs' timings are noise."""
    return diff_records(a, b, duration_min_ms=math.inf)


def test_diff_names_what_changed_in_the_configuration(
    store: MemoryExecutionStore,
) -> None:
    """config_changed comes first, says what changed, and is never the deviation."""
    before = _record(store)
    after = _record(store, a="2.0", b_priority=5, c=True)
    found = _diff(before, after)
    first = found.entries[0]
    assert first.kind == "config_changed"
    assert first.changes == ("a 1.0 -> 2.0", "b priority 2 -> 5", "c added")
    assert (
        first.detail
        == "configuration changed: a 1.0 -> 2.0; b priority 2 -> 5; c added"
    )
    assert not first.deviation_point
    assert found.deviation_point is not None
    assert found.deviation_point.kind == "decision_changed"  # c is a candidate
    assert found.same_configuration is False
    upgraded = _diff(before, _record(store, a="1.1"))
    assert upgraded.same  # the same behaviour: only the configuration differs
    assert [e.kind for e in upgraded.entries] == ["config_changed"]
    assert upgraded.deviation_point is None
    doc = found.to_json()
    assert doc["sameConfiguration"] is False
    assert doc["aConfiguration"] != doc["bConfiguration"]
    removed = _diff(after, before).entries[0]
    assert removed.changes == ("a 2.0 -> 1.0", "c removed", "b priority 5 -> 2")
    strategy = _diff(before, _record(store, "BROADCAST")).entries[0]
    assert strategy.changes[0] == "strategy FALLBACK -> BROADCAST"


def test_no_configuration_no_entry(store: MemoryExecutionStore) -> None:
    """A record without a configuration (older) is compared on behaviour only."""
    from recordkit import finished

    old = store.load(finished(store))
    assert old.header.configuration is None
    found = _diff(old, _record(store))
    assert "config_changed" not in [e.kind for e in found.entries]
    assert found.same_configuration is None


def test_a_router_without_a_store_computes_nothing() -> None:
    """Nothing recorded, nothing computed."""
    with IntentRouter() as router:
        router.agent("job", name="a")(lambda env, ctx: {})
        router.route_intent({"intent": {"name": "job"}})
        assert router._configs == {}


@pytest.mark.parametrize("kind", ["memory", "file", "postgres"])
def test_a_signed_redacted_record_carries_the_configuration(
    kind: str, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    """Every store: line 1 names the key and holds the configuration as it is.

    The envelope is redacted and hashed so; the record is signed and replayable.
    """
    import jsonschema
    from record.test_reader import _schemas

    from intentusnet import FileExecutionStore, PostgresExecutionStore, Redactor
    from intentusnet.hashing import compute_hash
    from intentusnet.record.keys import SigningKey
    from intentusnet.record.signing import KeyRing, SignatureStatus

    key = SigningKey.generate()
    store: Any
    if kind == "memory":
        store = MemoryExecutionStore(signing_key=key)
    elif kind == "file":
        store = FileExecutionStore(tmp_path / "records", signing_key=key)
    else:
        store = PostgresExecutionStore(
            request.getfixturevalue("pg_dsn"), signing_key=key
        )
    redactor = Redactor(b"k" * 32, payload=["secret"])
    router = IntentRouter(store=store, redactor=redactor)
    router.agent("job", name="a", version="2.0")(lambda env, ctx: {"a": 1})
    try:
        with router:
            response = router.route_intent(
                {"intent": {"name": "job"}, "payload": {"secret": "hunter2-hunter2"}}
            )
        assert response.metadata.execution_id is not None
        record = store.load(response.metadata.execution_id)
        line = orjson.loads(store.raw(record.execution_id).split(b"\n")[0])
    finally:
        if kind != "memory":  # a memory store has nothing to close
            store.close()
    assert record.header.key_id == key.key_id == line["keyId"]
    configuration = record.header.configuration
    assert configuration is not None
    assert configuration == line["configuration"]
    assert [(a["name"], a["version"]) for a in configuration["agents"]] == [
        ("a", "2.0")
    ]
    assert line["envelope"]["payload"] == {"secret": redactor.marker("hunter2-hunter2")}
    assert record.header.envelope_hash == compute_hash(line["envelope"])
    assert record.header.replayable
    check = KeyRing([key.public_key]).check(record)
    assert check.status is SignatureStatus.SIGNED_VALID
    jsonschema.validate(line, _schemas()["header-line"])
    jsonschema.validate(record.header.to_json(), _schemas()["header"])
