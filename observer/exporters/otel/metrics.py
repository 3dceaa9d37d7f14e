"""Observable OpenTelemetry instruments over the tracker: the Prometheus metrics, read the same way.

Like the Prometheus collector, nothing is computed or stored when an event arrives: at each collection
(the SDK's periodic reader thread) the samples are enumerated once from ``QueryTracker.snapshot()`` by
``observer.exporters.samples`` and every instrument's callback reads its own from that table.
Counters are observable counters (cumulative monotonic sums), gauges observable gauges.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from observer.exporters.otel.naming import COUNTER, METRICS, OtelMetric, attributes
from observer.exporters.samples import render_self, render_state
from observer.selfmetrics import SelfMetrics
from observer.signals.engine import SignalEngine
from observer.tracker import Labels, QueryTracker


class _SampleTable:
    """One collection's samples by metric name (a ``SampleSink``)."""

    def __init__(self) -> None:
        self.samples: dict[str, list[tuple[Labels, float]]] = {}

    def add(self, name: str, labels: Labels, value: float) -> None:
        self.samples.setdefault(name, []).append((labels, value))


class TrackerInstruments:
    """Registers one observable instrument per registry metric on ``meter``.

    The SDK calls each instrument's callback once per collection. The table is rebuilt when a callback
    finds its instrument already served from the current table, i.e. at the first callback of the next
    collection, whatever order the SDK calls them in.
    """

    def __init__(self, meter: Meter, tracker: QueryTracker, self_metrics: SelfMetrics, signals: SignalEngine,
                 queue_len: Callable[[], int], top_k: int) -> None:
        self._tracker, self._self, self._signals = tracker, self_metrics, signals
        self._queue_len, self._top_k = queue_len, top_k
        self._lock = threading.Lock()
        self._table: dict[str, list[tuple[Labels, float]]] | None = None
        self._served: set[str] = set()
        for metric in METRICS.values():
            create = meter.create_observable_counter if metric.instrument == COUNTER else meter.create_observable_gauge
            create(metric.name, callbacks=[self._callback(metric)], unit=metric.unit, description=metric.description)

    def _callback(self, metric: OtelMetric) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, attributes(labels)) for labels, value in self._samples(metric.prometheus_name)]

        return observe

    def _samples(self, name: str) -> list[tuple[Labels, float]]:
        with self._lock:
            if self._table is None or name in self._served:
                self._table = self._collect()
                self._served = set()
            self._served.add(name)
            return self._table.get(name, [])

    def _collect(self) -> dict[str, list[tuple[Labels, float]]]:
        table = _SampleTable()
        n_queries = render_state(table, self._tracker, self._signals, self._top_k)
        render_self(table, self._self, self._signals, self._queue_len(), n_queries)
        return table.samples
