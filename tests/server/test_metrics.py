"""The service's metrics, through prometheus_client."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    MemoryExecutionStore,
    PriceTable,
    ReplayCache,
    savings_report,
)
from intentusnet.server.metrics import LATENCY_BUCKETS, Metrics


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.render().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_render_is_valid_exposition_format() -> None:
    """The text parses as Prometheus exposition, odd label values included."""
    metrics = Metrics()
    metrics.route_started()
    metrics.route_finished(0.002, "success", None, False)
    metrics.route_started()
    metrics.route_finished(0.2, "error", "AGENT_TIMEOUT", True)
    metrics.problem('odd"code\\')
    samples = _samples(metrics)
    assert samples[("intentusnet_http_problems_total", (("code", 'odd"code\\'),))] == 1
    assert (
        samples[("intentusnet_intent_errors_total", (("code", "AGENT_TIMEOUT"),))] == 1
    )


def test_histogram_is_cumulative() -> None:
    """Buckets count observations at or below their bound; +Inf counts all."""
    metrics = Metrics()
    for seconds in (0.0001, 0.003, 0.003, 100.0):
        metrics.route_started()
        metrics.route_finished(seconds, "success", None, False)
    samples = _samples(metrics)
    buckets = [
        value
        for (name, labels), value in samples.items()
        if name == "intentusnet_route_duration_seconds_bucket"
    ]
    assert len(buckets) == len(LATENCY_BUCKETS) + 1
    assert buckets == sorted(buckets)
    assert buckets[0] == 1
    assert buckets[-1] == 4
    key = ("intentusnet_route_duration_seconds_bucket", (("le", "0.005"),))
    assert samples[key] == 3
    assert samples[("intentusnet_route_duration_seconds_count", ())] == 4


def test_counts_hits_misses_errors_and_in_flight() -> None:
    """Cache hits and misses, error codes and the in-flight gauge add up."""
    metrics = Metrics()
    metrics.route_started()
    metrics.route_started()
    metrics.route_finished(0.01, "success", None, True)
    metrics.replayed()
    samples = _samples(metrics)
    assert samples[("intentusnet_cache_hits_total", ())] == 1
    assert samples[("intentusnet_cache_misses_total", ())] == 0
    assert samples[("intentusnet_intents_in_flight", ())] == 1
    assert samples[("intentusnet_replays_total", ())] == 1
    assert samples[("intentusnet_intents_routed_total", (("status", "error"),))] == 0
    metrics.route_abandoned()
    assert metrics.in_flight == 0


def test_process_metrics_and_separate_registries() -> None:
    """Process metrics are there; two services in one process count apart."""
    one, two = Metrics(), Metrics()
    one.replayed()
    assert not one.multiprocess
    samples = _samples(two)
    assert samples[("intentusnet_replays_total", ())] == 0
    assert samples[("process_resident_memory_bytes", ())] > 0
    assert ("process_cpu_seconds_total", ()) in samples


def _llm_store() -> MemoryExecutionStore:
    """A store whose agent answers carry usage: 1 miss and 2 hits of model m1."""
    store = MemoryExecutionStore()
    usage = {"provider": "openai", "model": "m1", "inputTokens": 5, "outputTokens": 3}
    with IntentRouter(store=store, cache=ReplayCache()) as router:
        router.agent("llm", name="llm")(lambda env, ctx: {"usage": usage})
        for _ in range(3):
            router.route_intent({"intent": {"name": "llm"}})
    return store


@pytest.mark.parametrize("multiprocess", [False, True], ids=["one", "multiprocess"])
def test_llm_savings_are_read_from_the_store(multiprocess: bool, tmp_path) -> None:
    """intentusnet_llm_* say what the store's calls spent and its hits avoided."""
    store = _llm_store()
    prices = PriceTable.from_json(
        {"currency": "USD", "models": {"m1": {"input": 1e6, "output": 1e7}}}
    )
    metrics = Metrics(str(tmp_path) if multiprocess else None)
    metrics.watch(lambda: savings_report(store, prices))
    samples = _samples(metrics)
    labels = (("model", "m1"), ("provider", "openai"))

    def value(name: str, **more: str) -> float:
        return samples[(name, tuple(sorted((*labels, *more.items()))))]

    assert value("intentusnet_llm_calls_total", outcome="miss") == 1
    assert value("intentusnet_llm_calls_total", outcome="hit") == 2
    tokens = "intentusnet_llm_tokens_total"
    assert value(tokens, direction="input", outcome="miss") == 5
    assert value(tokens, direction="output", outcome="miss") == 3
    assert value(tokens, direction="input", outcome="hit") == 10
    assert value(tokens, direction="output", outcome="hit") == 6
    cost = "intentusnet_llm_cost_total"
    assert value(cost, outcome="miss", currency="USD") == 5 + 30
    assert value(cost, outcome="hit", currency="USD") == 10 + 60
    metrics.close()


def test_llm_cost_only_with_prices() -> None:
    """Without a price table there is no cost metric; calls and tokens remain."""
    store = _llm_store()
    metrics = Metrics()
    metrics.watch(lambda: savings_report(store))
    names = {name for name, _ in _samples(metrics)}
    assert "intentusnet_llm_calls_total" in names
    assert not any(name.startswith("intentusnet_llm_cost") for name in names)


def test_llm_metrics_left_out_when_the_store_cannot_be_read(tmp_path, caplog) -> None:
    """A store that fails to answer leaves /metrics answering, without llm series."""
    store = FileExecutionStore(tmp_path / "records")
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "catalog.sqlite3").mkdir()  # not a database
    metrics = Metrics()
    metrics.watch(lambda: savings_report(store))
    names = {name for name, _ in _samples(metrics)}
    assert "intentusnet_intents_routed_total" in names
    assert not any(name.startswith("intentusnet_llm_") for name in names)
    assert "what caching saved cannot be read" in caplog.text
