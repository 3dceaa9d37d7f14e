"""A prometheus-client collector that renders the latest state of every query and operator.

It holds no metric objects of its own: at each scrape it reads a copy of the tracker and the
observer's self-metrics and builds metric families from the registry's specs. Exposition (HTTP server,
Pushgateway) lives in ``observer.exporters.http``, as prometheus/client_python keeps the two apart.
Which samples exist is decided in ``observer.exporters.samples``, shared with the OpenTelemetry reader;
how families are named and typed, and the cached text the HTTP endpoint serves, in
``observer.exporters.exposition``.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client import generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from observer.exporters.exposition import Families, QueryLinesCache, family, join
from observer.exporters.samples import render_app, render_self, render_state
from observer.selfmetrics import SELF_METRICS, SelfMetrics
from observer.signals.engine import SignalEngine
from observer.tracker import QueryTracker

_HELP = {s.prometheus_name: s.help for s in SELF_METRICS}


class _Fixed(Collector):
    """Hands ``generate_latest`` metrics already built."""

    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics)


class StateCollector(Collector):
    """Collector over a ``QueryTracker``; register it with any ``CollectorRegistry``.

    ``exposition()`` gives the same metrics as ``generate_latest`` over a registry holding only this
    collector, in text format 0.0.4, re-rendering only the queries that changed since its last call.
    """

    def __init__(self, tracker: QueryTracker, self_metrics: SelfMetrics, signals: SignalEngine,
                 queue_len: Callable[[], int] = lambda: 0, partition_top_k: int = 10) -> None:
        self._tracker = tracker
        self._signals = signals
        self._self = self_metrics
        self._queue_len = queue_len
        self._top_k = partition_top_k
        self._lines = QueryLinesCache(partition_top_k)

    def collect(self) -> Iterator[Metric]:
        families = Families()
        n_queries = render_state(families, self._tracker, self._signals, self._top_k)
        render_self(families, self._self, self._signals, self._queue_len(), n_queries)
        metrics = [family(name).metric(samples) for name, samples in families.samples.items()]
        return iter(metrics + self._histograms())

    def exposition(self) -> bytes:
        """This collector's metrics in text format 0.0.4 (what the HTTP endpoint serves).

        Query lines come from the cache; the application-wide and self-metrics, a few dozen lines that
        change at every event, are rendered each time.
        """
        queries = self._lines.refresh(self._tracker)
        rest = Families()
        render_app(rest, self._signals)
        render_self(rest, self._self, self._signals, self._queue_len(), len(queries))
        return join(queries, rest.lines()) + generate_latest(_Fixed(self._histograms()))

    def prerender(self) -> None:
        """Render the queries that changed since the last render now, so a scrape only joins text.

        The observer's worker calls this after each round of events (when it serves HTTP): the cost of
        rendering moves from the scrape to the worker, and a scrape after every query changed is as
        cheap as one after a single change.
        """
        self._lines.refresh(self._tracker)

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
