"""The Prometheus text the service writes by itself."""

from __future__ import annotations

import re

from intentusnet.server.metrics import LATENCY_BUCKETS, Metrics

_SAMPLE = re.compile(r'^[a-z_]+(\{[a-z]+="(?:[^"\\\n]|\\.)*"\})? \S+$')


def test_render_is_valid_exposition_format() -> None:
    """Every line is a HELP, a TYPE or a well-formed sample."""
    metrics = Metrics()
    metrics.route_started()
    metrics.route_finished(0.002, "success", None, False)
    metrics.route_started()
    metrics.route_finished(0.2, "error", "AGENT_TIMEOUT", True)
    metrics.problem('odd"code\\')
    for line in metrics.render().splitlines():
        assert line.startswith(("# HELP ", "# TYPE ")) or _SAMPLE.match(line), line


def test_histogram_is_cumulative() -> None:
    """Buckets count observations at or below their bound; +Inf counts all."""
    metrics = Metrics()
    for seconds in (0.0001, 0.003, 0.003, 100.0):
        metrics.route_started()
        metrics.route_finished(seconds, "success", None, False)
    text = metrics.render()
    counts = [
        int(m.group(1)) for m in re.finditer(r'_bucket\{le="[^"]+"\} (\d+)', text)
    ]
    assert len(counts) == len(LATENCY_BUCKETS) + 1
    assert counts == sorted(counts)
    assert counts[0] == 1
    assert counts[-1] == 4
    assert 'le="0.005"} 3' in text


def test_counts_hits_misses_errors_and_in_flight() -> None:
    """Cache hits and misses, error codes and the in-flight gauge add up."""
    metrics = Metrics()
    metrics.route_started()
    metrics.route_started()
    metrics.route_finished(0.01, "success", None, True)
    metrics.replayed()
    text = metrics.render()
    assert "intentusnet_cache_hits_total 1" in text
    assert "intentusnet_cache_misses_total 0" in text
    assert "intentusnet_intents_in_flight 1" in text
    assert "intentusnet_replays_total 1" in text
    metrics.route_abandoned()
    assert metrics.in_flight == 0
