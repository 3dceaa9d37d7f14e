"""Prometheus: a collector over the metric state, and the sink that serves and pushes it.

The collector holds no metric objects of its own: at each collection it reads a ``MetricsView`` and
builds families from the catalog's specs. ``exposition()`` is the one text every Prometheus path uses:
the HTTP endpoint serves it, the Pushgateway receives it, ``replay --format prometheus`` prints it. It
keeps each query's rendered lines until the query changes (``spark_state_observer.exporters.exposition``), so a
scrape after few changes only joins text. ``collect()`` gives the same samples as prometheus-client
metric families, for its WSGI app (``name[]`` filters, other methods) and for any registry user.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from spark_state_observer.exporters.endpoint import Endpoint, open_endpoint
from spark_state_observer.exporters.exposition import Created, Families, QueryLines, QueryLinesCache, family, join_parts
from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.exporters.openmetrics import openmetrics_text
from spark_state_observer.exporters.push import Pusher
from spark_state_observer.exporters.samples import render_app, render_self, render_state
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.selfmetrics import SelfSnapshot
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.metrics.view import MetricsView
from spark_state_observer.model.events import Event
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.settings import Settings

log = logging.getLogger("spark_state_observer")


class _Fixed(Collector):
    """Hands ``generate_latest`` metrics already built."""

    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return iter(self._metrics)


class StateCollector(Collector):
    """Collector over a ``MetricsView``; register it with any ``CollectorRegistry``.

    ``exposition()`` gives the same metrics as ``generate_latest`` over a registry holding only this
    collector, in text format 0.0.4, re-rendering only the queries that changed since its last call.
    """

    def __init__(self, view: MetricsView) -> None:
        self._view = view
        self._lines = QueryLinesCache(view.partition_top_k)

    def collect(self) -> Iterator[Metric]:
        families = Families()
        static = self._view.identity.static
        render_state(families, self._view)
        render_self(families, self._view.self_snapshot(), static)
        metrics = [family(spec).metric(samples) for spec, samples in families.samples.items()]
        return iter(metrics + histograms(self._view.self_snapshot(), static))

    def exposition(self) -> bytes:
        """This collector's metrics in text format 0.0.4 (what the endpoint serves and the Pushgateway gets)."""
        return b"".join(self.exposition_parts())

    def exposition_parts(self) -> Iterable[bytes]:
        """``exposition()`` one family at a time, for the endpoint to compress as the parts come.

        Query lines come from the cache; the application-wide and self-metrics, a few dozen lines that
        change at every event, are rendered each time.
        """
        keyed, app = self.application_lines()
        queries = [lines for _, lines in keyed]
        rest = Families()
        static = self._view.identity.static
        render_self(rest, self._view.self_snapshot(), static)
        yield from join_parts(queries, app + rest.lines())
        yield histogram_text(self._view.self_snapshot(), static)

    def application_lines(self) -> tuple[list[tuple[str, QueryLines]], QueryLines]:
        """The application's part of the exposition without the observer's own series: each query's id and
        lines (cached) and the application-wide lines (info, executors). The watcher joins those of every application."""
        rest = Families()
        render_app(rest, self._view)
        return self._lines.refresh_keyed(self._view), rest.lines()

    def created(self) -> Created:
        """When each query counter series was first rendered: its creation time in OpenMetrics."""
        return self._lines.created()

    @property
    def identity_labels(self) -> Labels:
        """The labels of the application this collector exports (static labels and ``app``)."""
        return self._view.identity.labels

    def prerender(self) -> None:
        """Render the queries that changed since the last render now, so a scrape only joins text.

        The worker calls this after each round of events (when the endpoint serves): the cost of
        rendering moves from the scrape to the worker, and a scrape after every query changed is as
        cheap as one after a single change.
        """
        self._lines.refresh(self._view)


def histograms(s: SelfSnapshot, static: Labels = ()) -> list[Metric]:
    """The observer's latency histograms, with the static labels."""
    out: list[Metric] = []
    for spec, (buckets, total) in ((catalog.CALLBACK_DURATION, s.callback), (catalog.PROCESSING_DURATION, s.processing)):
        h = HistogramMetricFamily(catalog.check(spec).prometheus_name, spec.help, labels=[name for name, _ in static])
        h.add_metric([value for _, value in static], buckets, total)
        out.append(h)
    return out


def histogram_text(s: SelfSnapshot, static: Labels = ()) -> bytes:
    """``histograms`` in text format 0.0.4."""
    return generate_latest(_Fixed(histograms(s, static)))


class PrometheusSink:
    """The Prometheus exporter as a pipeline sink: the endpoint (pull) and the Pushgateway (push).

    Events need no handling (the collector reads the metric state when asked); after each round of
    the worker it pre-renders the changed queries while the endpoint serves, and ``close`` pushes a
    last time and closes the endpoint.
    """

    name = "prometheus"

    def __init__(
        self,
        view: MetricsView,
        settings: Settings,
        on_push_failure: Callable[[], None] = lambda: None,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.collector = StateCollector(view)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._settings = settings
        self._on_push_failure = on_push_failure
        self._on_refused = on_refused
        self._endpoint = Endpoint()
        self.server: MetricsServer | None = None
        self.pusher: Pusher | None = None

    def exposition(self) -> bytes:
        return self.collector.exposition()

    def start(self, serve: bool) -> None:
        """Open the endpoint (``serve``) and start pushing (with a Pushgateway URL). Raises ``ExporterError``."""
        # the application's identity in the grouping key: concurrent jobs pushing to one gateway do not
        # replace each other's metrics (the key's labels equal the series' own, so none is overridden)
        self._endpoint = open_endpoint(
            self._settings,
            self.exposition,
            self.registry,
            serve=serve,
            grouping=dict(self.collector.identity_labels),
            render_parts=self.collector.exposition_parts,
            on_push_failure=self._on_push_failure,
            on_refused=self._on_refused,
            openmetrics=openmetrics_text(self.exposition, self.collector.created),
        )
        self.server, self.pusher = self._endpoint.server, self._endpoint.pusher
        if self.server is not None:
            log.info("spark-state-observer: metrics at %s", self.server.url)

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        """Nothing to do: the metric state the collector reads is already up to date."""

    def tick(self, processed: int) -> None:
        if processed and self.server is not None:
            self.collector.prerender()

    def flush(self) -> None:
        """Nothing is buffered; the endpoint's next GET shows every event processed so far (no rendering ahead of it)."""
        if self.server is not None:
            self.server.invalidate()

    def close(self) -> None:
        self._endpoint.stop()
