"""Observable OpenTelemetry instruments over the tracker: the Prometheus metrics, read the same way.

Like the Prometheus collector, nothing is computed or stored when an event arrives: at each collection
(the SDK's periodic reader thread) the samples are enumerated once from a ``MetricsView`` by
``spark_state_observer.exporters.samples`` and every instrument's callback reads its own from that table.
Counters are observable counters (cumulative monotonic sums), gauges observable gauges.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from spark_state_observer.exporters.otel.naming import COUNTER, METRICS, OtelMetric, attributes
from spark_state_observer.exporters.samples import render_self, render_state
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.metrics.view import MetricsView

Table = dict[MetricSpec, list[tuple[Labels, float]]]


class _SampleTable:
    """One collection's samples by metric (a ``SampleSink``)."""

    def __init__(self) -> None:
        self.samples: Table = {}

    def add(self, spec: MetricSpec, labels: Labels, value: float) -> None:
        self.samples.setdefault(spec, []).append((labels, value))


class TrackerInstruments:
    """Registers one observable instrument per catalog metric on ``meter``.

    The SDK calls each instrument's callback once per collection. The table is rebuilt when a callback
    finds its instrument already served from the current table, i.e. at the first callback of the next
    collection, whatever order the SDK calls them in.
    """

    def __init__(self, meter: Meter, view: MetricsView) -> None:
        self._view = view
        self._lock = threading.Lock()
        self._table: Table | None = None
        self._served: set[MetricSpec] = set()
        for metric in METRICS.values():
            create = meter.create_observable_counter if metric.instrument == COUNTER else meter.create_observable_gauge
            create(metric.name, callbacks=[self._callback(metric)], unit=metric.unit, description=metric.description)

    def _callback(self, metric: OtelMetric) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, attributes(labels)) for labels, value in self._samples(metric.spec)]

        return observe

    def _samples(self, spec: MetricSpec) -> list[tuple[Labels, float]]:
        with self._lock:
            if self._table is None or spec in self._served:
                self._table = self._collect()
                self._served = set()
            self._served.add(spec)
            return self._table.get(spec, [])

    def _collect(self) -> Table:
        table = _SampleTable()
        render_state(table, self._view)
        render_self(table, self._view.self_snapshot(), self._view.identity.static)
        return table.samples
