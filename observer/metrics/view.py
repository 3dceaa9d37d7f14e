"""The read-only interface exporters read metric state through, whatever runs the pipeline.

Prometheus (pull and push) and OpenTelemetry collect from a ``MetricsView``: copies of the query
records, the application-wide values and the observer's own figures. They never see the ``Observer``,
its queue or its signals, so an exporter can be built, tested and replaced on its own.
"""

from __future__ import annotations

from typing import Callable

from observer.metrics.catalog import MetricSpec
from observer.metrics.selfmetrics import SelfMetrics, SelfSnapshot
from observer.metrics.tracker import QueryRecord, QueryTracker
from observer.metrics.updates import Labels


class MetricsView:
    """What every exporter reads: one tracker, the self-metrics and the queue's length."""

    def __init__(self, tracker: QueryTracker, self_metrics: SelfMetrics, queue_len: Callable[[], int] = lambda: 0,
                 partition_top_k: int = 10) -> None:
        self._tracker = tracker
        self._self = self_metrics
        self._queue_len = queue_len
        self.partition_top_k = partition_top_k

    def records(self) -> list[QueryRecord]:
        """Copies of every query's record."""
        return self._tracker.snapshot()

    def changed_since(self, known: dict[str, int]) -> tuple[list[tuple[str, int]], dict[str, QueryRecord]]:
        """Query versions in order and copies of the records that changed (see ``QueryTracker.changed_since``)."""
        return self._tracker.changed_since(known)

    def app_values(self) -> list[tuple[MetricSpec, Labels, float]]:
        """The application-wide series."""
        return self._tracker.app_values()

    def self_snapshot(self) -> SelfSnapshot:
        """The observer's own figures, with the queue length and the number of queries kept now."""
        return self._self.snapshot(self._queue_len(), len(self._tracker))
