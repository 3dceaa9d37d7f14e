"""``PrometheusObserver``: an ``Observer`` with its Prometheus exporter, as a job (and ``observer.Observer``) has it.

The pipeline builds no exporter (``spark_state_observer.pipeline.runtime``); this composition root gives it the
``prometheus`` sink of the one table (``spark_state_observer.assembly.sinks``), first of its sinks, and opens its
endpoint and Pushgateway when the observer starts. ``attach()`` and ``StateObserverListener`` use it, and
it stays the public ``observer.Observer``, so ``exposition()``, ``server`` and ``http_port`` read as before.
"""

from __future__ import annotations

from typing import Any, Sequence, cast

from spark_state_observer.assembly.sinks import sink_factory
from spark_state_observer.exporters.http import MetricsServer
from spark_state_observer.exporters.prometheus import PrometheusSink
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.pipeline.sink import SinkFactory
from spark_state_observer.settings import Settings


class PrometheusObserver(Observer):
    """An ``Observer`` whose first sink is ``prometheus`` (it serves when ``serve``, default ``http_enabled``;
    it pushes when a Pushgateway is set); other keyword arguments are the ``Observer``'s."""

    def __init__(
        self, settings: Settings | None = None, *, serve: bool | None = None, sinks: Sequence[SinkFactory] = (), **kwargs: Any
    ) -> None:
        super().__init__(settings, sinks=[sink_factory("prometheus"), *sinks], **kwargs)
        self.prometheus = cast(PrometheusSink, self._sinks[0])
        self._serve = self.settings.http_enabled if serve is None else serve

    def start(self) -> PrometheusObserver:
        """Open the endpoint and the Pushgateway, then start the worker. Raises ``ExporterError`` if the port is taken."""
        self.prometheus.start(self._serve)
        super().start()
        return self

    @property
    def server(self) -> MetricsServer | None:
        """The /metrics endpoint, while it serves."""
        return self.prometheus.server

    @property
    def http_port(self) -> int | None:
        return self.server.port if self.server else None

    def exposition(self) -> bytes:
        """The Prometheus text of the current state: what the endpoint serves and the Pushgateway gets."""
        return self.prometheus.exposition()
