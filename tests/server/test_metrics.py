"""The service's metrics, through prometheus_client."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

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
