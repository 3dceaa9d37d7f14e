"""A prometheus-client collector that renders the latest state of every query and operator.

It holds no metric objects of its own: at each scrape it reads a copy of the tracker and the
observer's self-metrics and builds metric families from the registry's specs. Exposition (HTTP server,
Pushgateway) lives in ``observer.exporters.http``, as prometheus/client_python keeps the two apart.
Which samples exist is decided in ``observer.exporters.samples``, shared with the OpenTelemetry reader.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from observer import registry
from observer.exporters.samples import render_self, render_state
from observer.selfmetrics import SELF_METRICS, SelfMetrics
from observer.signals.engine import SignalEngine
from observer.tracker import QueryTracker

_HELP = {s.prometheus_name: s.help for s in registry.CATALOG + SELF_METRICS}
_TYPE = {s.prometheus_name: s.prometheus_type for s in registry.CATALOG + SELF_METRICS}


class _Families:
    """Builds one metric family per name, with the label names of its first sample."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        family = self._families.get(name)
        if family is None:
            help_text = _HELP.get(name, name)
            names = [k for k, _ in labels]
            if _TYPE.get(name) == "counter":
                family = CounterMetricFamily(name, help_text, labels=names)
            else:
                family = GaugeMetricFamily(name, help_text, labels=names)
            self._families[name] = family
        family.add_metric([v for _, v in labels], value)

    def extend(self, metrics: list[Metric]) -> None:
        for metric in metrics:
            self._families[metric.name] = metric

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


class StateCollector(Collector):
    """Collector over a ``QueryTracker``; register it with any ``CollectorRegistry``."""

    def __init__(self, tracker: QueryTracker, self_metrics: SelfMetrics, signals: SignalEngine,
                 queue_len: Callable[[], int] = lambda: 0, partition_top_k: int = 10) -> None:
        self._tracker = tracker
        self._signals = signals
        self._self = self_metrics
        self._queue_len = queue_len
        self._top_k = partition_top_k

    def collect(self) -> Iterator[Metric]:
        families = _Families()
        n_queries = render_state(families, self._tracker, self._signals, self._top_k)
        render_self(families, self._self, self._signals, self._queue_len(), n_queries)
        families.extend(self._histograms())
        return iter(families)

    def _histograms(self) -> list[Metric]:
        s = self._self
        with s.lock:
            hists = {"spark_state_observer_callback_duration_seconds": (s.callback.cumulative(), s.callback.sum),
                     "spark_state_observer_processing_duration_seconds": (s.processing.cumulative(), s.processing.sum)}
        out: list[Metric] = []
        for name, (buckets, total) in hists.items():
            h = HistogramMetricFamily(name, _HELP[name])
            h.add_metric([], buckets, total)
            out.append(h)
        return out
