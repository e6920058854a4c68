"""Service metrics in the Prometheus text exposition format (version 0.0.4).

Counters, one gauge and one histogram, kept in memory per process and written
as text by :meth:`Metrics.render`. Labels take only values from closed sets
(response status, error codes), never intent names or other caller input, so
the number of series stays bounded whatever callers send.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import Final

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS", "Metrics"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: Upper bounds, in seconds, of the routing latency histogram's buckets.
LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class Metrics:
    """What the service counts. Thread-safe; every update takes one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._routed: dict[str, int] = {}
        self._intent_errors: dict[str, int] = {}
        self._problems: dict[str, int] = {}
        self._cache_hits = 0
        self._cache_misses = 0
        self._replays = 0
        self._in_flight = 0
        self._buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # the last is +Inf
        self._latency_sum = 0.0

    def route_started(self) -> None:
        """Count an intent being routed now."""
        with self._lock:
            self._in_flight += 1

    def route_finished(
        self, seconds: float, status: str, error_code: str | None, from_replay: bool
    ) -> None:
        """Record one routed intent: its latency, status, error code, cache use."""
        slot = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        with self._lock:
            self._in_flight -= 1
            self._routed[status] = self._routed.get(status, 0) + 1
            if error_code is not None:
                self._intent_errors[error_code] = (
                    self._intent_errors.get(error_code, 0) + 1
                )
            if from_replay:
                self._cache_hits += 1
            else:
                self._cache_misses += 1
            self._buckets[slot] += 1
            self._latency_sum += seconds

    def route_abandoned(self) -> None:
        """Forget an intent that ended without an answer (it raised)."""
        with self._lock:
            self._in_flight -= 1

    def replayed(self) -> None:
        """Count one replay served."""
        with self._lock:
            self._replays += 1

    def problem(self, code: str) -> None:
        """Count one request answered with an error (a problem document)."""
        with self._lock:
            self._problems[code] = self._problems.get(code, 0) + 1

    @property
    def in_flight(self) -> int:
        """Intents being routed right now."""
        return self._in_flight

    def render(self) -> str:
        """Return every metric as Prometheus text."""
        with self._lock:
            routed = dict(self._routed)
            intent_errors = dict(self._intent_errors)
            problems = dict(self._problems)
            hits, misses = self._cache_hits, self._cache_misses
            replays, in_flight = self._replays, self._in_flight
            buckets, total = list(self._buckets), self._latency_sum
        out: list[str] = []
        _family(
            out,
            "intentusnet_intents_routed_total",
            "counter",
            "Intents routed, by the status of the answer.",
            _labelled("status", routed, ("success", "error")),
        )
        _family(
            out,
            "intentusnet_intent_errors_total",
            "counter",
            "Routed intents answered with an error, by ErrorInfo code.",
            _labelled("code", intent_errors),
        )
        _family(
            out,
            "intentusnet_http_problems_total",
            "counter",
            "Requests refused with a problem document, by problem code.",
            _labelled("code", problems),
        )
        _family(
            out,
            "intentusnet_cache_hits_total",
            "counter",
            "Intents answered from an earlier record instead of running agents.",
            [("", hits)],
        )
        _family(
            out,
            "intentusnet_cache_misses_total",
            "counter",
            "Intents answered by running agents.",
            [("", misses)],
        )
        _family(
            out,
            "intentusnet_replays_total",
            "counter",
            "Executions replayed through the API.",
            [("", replays)],
        )
        _family(
            out,
            "intentusnet_intents_in_flight",
            "gauge",
            "Intents being routed now.",
            [("", in_flight)],
        )
        out.append(
            "# HELP intentusnet_route_duration_seconds "
            "Time to route an intent and record it."
        )
        out.append("# TYPE intentusnet_route_duration_seconds histogram")
        running = 0
        for bound, count in zip((*LATENCY_BUCKETS, None), buckets, strict=True):
            running += count
            le = "+Inf" if bound is None else _number(bound)
            out.append(
                f'intentusnet_route_duration_seconds_bucket{{le="{le}"}} {running}'
            )
        out.append(f"intentusnet_route_duration_seconds_sum {_number(total)}")
        out.append(f"intentusnet_route_duration_seconds_count {running}")
        return "\n".join(out) + "\n"


def _labelled(
    label: str, counts: dict[str, int], always: Iterable[str] = ()
) -> list[tuple[str, int]]:
    keys = sorted({*always, *counts})
    return [(f'{{{label}="{_escape(key)}"}}', counts.get(key, 0)) for key in keys]


def _family(
    out: list[str],
    name: str,
    kind: str,
    help_text: str,
    samples: list[tuple[str, int]],
) -> None:
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")
    out.extend(f"{name}{labels} {value}" for labels, value in samples)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value))
