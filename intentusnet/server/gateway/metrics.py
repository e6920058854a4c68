"""What the gateway counts, exposed on ``GET /metrics`` as Prometheus text.

The gateway has its own registry (never the library's global one). Labels take
only values from closed sets: the configured upstream names (``""`` for a path
naming none), the cache states, the gateway's error types, so the number of
series stays bounded whatever callers send. What caching saved
(``intentusnet_llm_*``, tokens and, with a price table, cost) is read from the
store when ``/metrics`` is asked, as ``serve`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from ..metrics import CONTENT_TYPE, LATENCY_BUCKETS, SavingsCollector

if TYPE_CHECKING:
    from ...cache.savings import SavingsReport

__all__ = ["CACHE_STATES", "CONTENT_TYPE", "UPSTREAM_ERRORS", "GatewayMetrics"]

#: The ``cache`` label: the transports' states, and ``none`` for an answer the
#: gateway gave itself (an error: a refused request, a replay miss, ...).
CACHE_STATES: Final = ("hit", "miss", "bypass", "none")
#: The ``kind`` label of upstream errors: no answer in time, no connection,
#: or an answer with a 5xx status.
UPSTREAM_ERRORS: Final = ("timeout", "unreachable", "status_5xx")


class GatewayMetrics:
    """The gateway's counters, gauge and histograms. Thread-safe.

    Args:
        upstreams: the upstream names (the ``upstream`` label's values).
    """

    def __init__(self, upstreams: Collection[str]) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        self._requests = Counter(
            "intentusnet_gateway_requests",
            "Requests answered, by upstream, cache state and status class.",
            ["upstream", "cache", "status"],
            registry=registry,
        )
        self._errors = Counter(
            "intentusnet_gateway_errors",
            "Requests the gateway answered with its own error, by error type.",
            ["type"],
            registry=registry,
        )
        self._upstream_errors = Counter(
            "intentusnet_gateway_upstream_errors",
            "Forwarded requests that failed upstream: timeout, unreachable, or "
            "answered with a 5xx status.",
            ["upstream", "kind"],
            registry=registry,
        )
        self._head = Histogram(
            "intentusnet_gateway_response_head_seconds",
            "Seconds from a request's arrival to its response's head (the first "
            "byte of a stream), by cache state.",
            ["cache"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._whole = Histogram(
            "intentusnet_gateway_response_seconds",
            "Seconds from a request's arrival to the end of its response's body.",
            ["cache"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._in_flight = Gauge(
            "intentusnet_gateway_in_flight",
            "Requests being answered now.",
            registry=registry,
        )
        for name in (*upstreams, ""):
            for kind in UPSTREAM_ERRORS:
                self._upstream_errors.labels(upstream=name, kind=kind)
        #: each cache state's two histograms, and the requests' counters by
        #: their labels as first used: looked up by labels once, not per request
        self._times = {
            cache: (self._head.labels(cache=cache), self._whole.labels(cache=cache))
            for cache in CACHE_STATES
        }
        self._counted: dict[tuple[str, str, int], Counter] = {}

    def watch(self, report: Callable[[], SavingsReport]) -> None:
        """Expose what caching saved, as ``report`` reads it from the store."""
        self.registry.register(SavingsCollector(report))

    def started(self) -> None:
        """Count a request being answered now."""
        self._in_flight.inc()

    def answered(
        self, upstream: str, cache: str, status: int, head: float, whole: float
    ) -> None:
        """Count one request answered: its upstream, cache state, status, times."""
        self._in_flight.dec()
        key = (upstream, cache, status // 100)
        counted = self._counted.get(key)
        if counted is None:
            counted = self._counted[key] = self._requests.labels(
                upstream=upstream, cache=cache, status=f"{status // 100}xx"
            )
        counted.inc()
        head_seconds, seconds = self._times[cache]  # one of CACHE_STATES
        head_seconds.observe(head)
        seconds.observe(whole)

    def error(self, kind: str) -> None:
        """Count one request the gateway answered with its own error."""
        self._errors.labels(type=kind).inc()

    def upstream_error(self, upstream: str, kind: str) -> None:
        """Count one forwarded request that failed upstream (``UPSTREAM_ERRORS``)."""
        self._upstream_errors.labels(upstream=upstream, kind=kind).inc()

    def render(self) -> bytes:
        """Every metric as Prometheus text."""
        return generate_latest(self.registry)
