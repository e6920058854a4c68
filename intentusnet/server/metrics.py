"""Service metrics through ``prometheus_client``, exposed as Prometheus text 0.0.4.

Each service builds its own registry (never the library's global one), so two
apps in one process count apart. Labels take only values from closed sets
(response status, error codes), never intent names or other caller input, so
the number of series stays bounded whatever callers send.

**Several worker processes** (``intentusnet serve --workers N``): ``serve`` gives
the workers a shared directory in ``PROMETHEUS_MULTIPROC_DIR`` before they start,
``prometheus_client`` keeps each process's values in files there, and every
worker answers ``/metrics`` with the totals over all of them (its multiprocess
mode): counters and the histogram summed, the in-flight gauge summed over live
workers. Process metrics (CPU, memory, open files) come per worker, labelled
with its ``pid``, since they cannot be summed meaningfully.

**What caching saved** (``intentusnet_llm_*``) and **operators' decisions**
(``intentusnet_operator_decisions_total``) are not counted by the service but
read from the store when ``/metrics`` is asked (see :meth:`Metrics.watch`):
every worker reads the same store, so each answers with the same totals, and
LLM calls made by any process recording to the store count. Their ``model``
label takes the model names recorded, bounded by the models a store's calls
use.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from ..errors import IntentusNetError

if TYPE_CHECKING:
    from ..cache.savings import SavingsReport

__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "MULTIPROCESS_ENV",
    "RECOVERY_BUCKETS",
    "DecisionCollector",
    "Metrics",
    "SavingsCollector",
]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
#: Where prometheus_client keeps the values of several processes (its own name).
MULTIPROCESS_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
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
#: Upper bounds, in seconds, of the histogram of time from an interruption to
#: the resumed execution's answer (the grace period is part of it).
RECOVERY_BUCKETS: Final = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0)
_log = logging.getLogger("intentusnet.server")
#: ``counter_1234.db``, ``gauge_livesum_1234.db``: prometheus_client's file names.
_VALUE_FILE: Final = re.compile(r"_(\d+)\.db$")


class Metrics:
    """What the service counts. Thread-safe, as ``prometheus_client`` is.

    Args:
        multiprocess_dir: the directory shared by several worker processes;
            by default ``$PROMETHEUS_MULTIPROC_DIR``, if set (added in 0.1.0).
    """

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self._dir = multiprocess_dir or os.environ.get(MULTIPROCESS_ENV) or None
        registry = self.registry = CollectorRegistry()
        counter = partial(Counter, registry=registry)
        self._routed = counter(
            "intentusnet_intents_routed",
            "Intents routed, by the status of the answer.",
            ["status"],
        )
        # Bound once: the answer's status takes one of these two values.
        self._routed_as = {
            status: self._routed.labels(status=status)
            for status in ("success", "error")
        }
        self._intent_errors = counter(
            "intentusnet_intent_errors",
            "Routed intents answered with an error, by ErrorInfo code.",
            ["code"],
        )
        self._problems = counter(
            "intentusnet_http_problems",
            "Requests refused with a problem document, by problem code.",
            ["code"],
        )
        self._hits = counter(
            "intentusnet_cache_hits",
            "Intents answered from an earlier record instead of running agents.",
        )
        self._misses = counter(
            "intentusnet_cache_misses",
            "Intents answered by running agents.",
        )
        self._replays = counter(
            "intentusnet_replays",
            "Executions replayed through the API.",
        )
        self._in_flight_gauge = Gauge(
            "intentusnet_intents_in_flight",
            "Intents being routed now.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self._duration = Histogram(
            "intentusnet_route_duration_seconds",
            "Time to route an intent and record it.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self._resumed = counter(
            "intentusnet_executions_resumed",
            "Interrupted executions finished by this service's recovery.",
        )
        self._parked = counter(
            "intentusnet_executions_parked",
            "Interrupted executions recovery parked needs_attention.",
        )
        self._recovery = Histogram(
            "intentusnet_recovery_seconds",
            "Time from an execution's interruption (its record's last line) to "
            "the answer of the execution resuming it.",
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )
        self._lock = threading.Lock()
        self._in_flight = 0
        if self._dir is None:
            ProcessCollector(registry=registry)
            self._exposed = registry
        else:
            # The totals of every process, read from the shared directory.
            self._exposed = CollectorRegistry()
            # prometheus_client ships these two without annotations
            MultiProcessCollector(self._exposed, path=self._dir)  # type: ignore[no-untyped-call]
            self._exposed.register(_WorkerProcesses(Path(self._dir)))

    def watch(self, report: Callable[[], SavingsReport]) -> None:
        """Expose what caching saved, as ``report`` reads it from the store.

        Adds the counters ``intentusnet_llm_calls_total{provider,model,outcome}``,
        ``intentusnet_llm_tokens_total{provider,model,direction,outcome}`` and,
        with a price table, ``intentusnet_llm_cost_total{provider,model,outcome,
        currency}``: ``outcome`` is ``miss`` (a call made, its tokens spent) or
        ``hit`` (answered from its record, its tokens avoided); ``direction``
        is ``input`` or ``output``. Added in 0.1.0.
        """
        self._exposed.register(SavingsCollector(report))

    def watch_decisions(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Expose operators' decisions, as ``counts`` reads them from the store.

        Adds the counter ``intentusnet_operator_decisions_total{action}``
        (``resolve``, ``cancel``, ``fork``): every decision the store counted
        (``DecisionTally``), made through any service, the CLI or Python.
        Added in 0.1.0.
        """
        self._exposed.register(DecisionCollector(counts))

    @property
    def multiprocess(self) -> bool:
        """Whether the totals are those of several processes. Added in 0.1.0."""
        return self._dir is not None

    def route_started(self) -> None:
        """Count an intent being routed now."""
        with self._lock:
            self._in_flight += 1
        self._in_flight_gauge.inc()

    def route_finished(
        self, seconds: float, status: str, error_code: str | None, from_replay: bool
    ) -> None:
        """Record one routed intent: its latency, status, error code, cache use."""
        with self._lock:
            self._in_flight -= 1
        self._in_flight_gauge.dec()
        self._routed_as[status].inc()
        if error_code is not None:
            self._intent_errors.labels(code=error_code).inc()
        (self._hits if from_replay else self._misses).inc()
        self._duration.observe(seconds)

    def route_abandoned(self) -> None:
        """Forget an intent that ended without an answer (it raised)."""
        with self._lock:
            self._in_flight -= 1
        self._in_flight_gauge.dec()

    def recovered(
        self, resumed: int, parked: int, completion_seconds: Sequence[float]
    ) -> None:
        """Count one recovery scan's resumed and parked executions.

        ``completion_seconds``: per execution resumed, the time from its
        interruption to its answer. Added in 0.1.0.
        """
        self._resumed.inc(resumed)
        self._parked.inc(parked)
        for seconds in completion_seconds:
            self._recovery.observe(seconds)

    def replayed(self) -> None:
        """Count one replay served."""
        self._replays.inc()

    def problem(self, code: str) -> None:
        """Count one request answered with an error (a problem document)."""
        self._problems.labels(code=code).inc()

    @property
    def in_flight(self) -> int:
        """Intents being routed right now by this process."""
        return self._in_flight

    def render(self) -> bytes:
        """Return every metric as Prometheus text (the totals of all workers)."""
        return generate_latest(self._exposed)

    def close(self) -> None:
        """This process stops serving: its share of the in-flight gauge goes.

        Added in 0.1.0.

        Counters stay in the shared directory: totals keep a stopped worker's
        counts. Nothing to do for a single process.
        """
        if self._dir is not None:
            mark_process_dead(os.getpid(), self._dir)  # type: ignore[no-untyped-call]


class SavingsCollector(Collector):
    """``intentusnet_llm_*``: what caching saved, read from the store per scrape.

    ``serve`` and ``gateway`` register it (``Metrics.watch`` for ``serve``).
    """

    def __init__(self, report: Callable[[], SavingsReport]) -> None:
        self._report = report

    def collect(self) -> Iterator[Metric]:
        """The calls, tokens and (priced) cost families, read from the store now."""
        try:
            report = self._report()
        except (IntentusNetError, OSError) as exc:
            # The service's own metrics still answer; these are left out.
            _log.warning("metrics: what caching saved cannot be read: %s", exc)
            return
        calls = CounterMetricFamily(
            "intentusnet_llm_calls",
            "LLM calls recorded in the store: made (miss) or answered from a "
            "record (hit).",
            labels=["provider", "model", "outcome"],
        )
        tokens = CounterMetricFamily(
            "intentusnet_llm_tokens",
            "LLM tokens spent by calls made (miss) and avoided by hits (hit).",
            labels=["provider", "model", "direction", "outcome"],
        )
        cost = CounterMetricFamily(
            "intentusnet_llm_cost",
            "Cost of the tokens spent (miss) and avoided (hit), by the price "
            "table's prices per million tokens.",
            labels=["provider", "model", "outcome", "currency"],
        )
        currency = report.currency
        for m in report.models:
            model = m.model or ""
            for outcome, count, used, paid in (
                ("miss", m.misses, m.input_tokens_spent, m.output_tokens_spent),
                ("hit", m.hits, m.input_tokens_avoided, m.output_tokens_avoided),
            ):
                calls.add_metric([m.provider, model, outcome], count)
                tokens.add_metric([m.provider, model, "input", outcome], used)
                tokens.add_metric([m.provider, model, "output", outcome], paid)
            if currency is not None and m.cost_spent is not None:
                cost.add_metric([m.provider, model, "miss", currency], m.cost_spent)
                cost.add_metric(
                    [m.provider, model, "hit", currency], m.cost_avoided or 0.0
                )
        yield calls
        yield tokens
        if currency is not None:
            yield cost


class DecisionCollector(Collector):
    """``intentusnet_operator_decisions_total``: read from the store per scrape."""

    def __init__(self, counts: Callable[[], Mapping[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        """The decisions the store counted, by action, read now."""
        try:
            counts = self._counts()
        except (IntentusNetError, OSError) as exc:
            _log.warning("metrics: operators' decisions cannot be read: %s", exc)
            return
        family = CounterMetricFamily(
            "intentusnet_operator_decisions",
            "Operators' decisions the store holds, by action (resolve, cancel, "
            "fork), made through any service, the CLI or Python.",
            labels=["action"],
        )
        for action, count in counts.items():
            family.add_metric([action], count)
        yield family


class _WorkerProcesses(Collector):
    """``process_*`` metrics of every live worker, labelled by ``pid``."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def _pids(self) -> list[int]:
        found = set()
        for path in self._directory.glob("*.db"):
            match = _VALUE_FILE.search(path.name)
            if match is not None:
                found.add(int(match.group(1)))
        return sorted(pid for pid in found if Path(f"/proc/{pid}").exists())

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for pid in self._pids():
            collector = ProcessCollector(pid=partial(int, pid), registry=None)
            for family in collector.collect():
                merged = families.setdefault(
                    family.name,
                    Metric(family.name, family.documentation, family.type),
                )
                for sample in family.samples:
                    merged.add_sample(
                        sample.name, {**sample.labels, "pid": str(pid)}, sample.value
                    )
        yield from families.values()
