"""The read-only interface exporters read metric state through, whatever runs the pipeline.

Prometheus (pull and push) and OpenTelemetry collect from a ``MetricsView``: copies of the query
records, the application-wide values and the observer's own figures. They never see the ``Observer``,
its queue or its signals, so an exporter can be built, tested and replaced on its own.
"""

from __future__ import annotations

from typing import Callable

from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.selfmetrics import SelfMetrics, SelfSnapshot
from spark_state_observer.metrics.tracker import QueryLife, QueryRecord, QueryTracker
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model.identity import AppContext


class MetricsView:
    """What every exporter reads: one tracker, the self-metrics, the queue's length and whose they are.

    ``identity`` is the application the tracker's queries belong to: exporters put its labels (static
    labels and ``app``) on every query and application series, the static labels alone on the
    observer's own series, and write its info series.
    """

    def __init__(
        self,
        tracker: QueryTracker,
        self_metrics: SelfMetrics,
        queue_len: Callable[[], int] = lambda: 0,
        partition_top_k: int = 10,
        identity: AppContext | None = None,
    ) -> None:
        self._tracker = tracker
        self._self = self_metrics
        self._queue_len = queue_len
        self.partition_top_k = partition_top_k
        self.identity = identity or AppContext()

    def records(self) -> list[QueryRecord]:
        """Copies of every query's record."""
        return self._tracker.snapshot()

    def lifecycles(self) -> list[QueryLife]:
        """Every query's lifecycle state (``QueryTracker.lifecycles``)."""
        return self._tracker.lifecycles()

    def changed_since(self, known: dict[str, int]) -> tuple[list[tuple[str, int]], dict[str, QueryRecord]]:
        """Query versions in order and copies of the records that changed (see ``QueryTracker.changed_since``)."""
        return self._tracker.changed_since(known)

    def app_values(self) -> list[tuple[MetricSpec, Labels, float]]:
        """The application-wide series."""
        return self._tracker.app_values()

    def query_count(self) -> int:
        """Queries the tracker keeps now."""
        return len(self._tracker)

    def self_snapshot(self) -> SelfSnapshot:
        """The observer's own figures, with the queue length and the number of queries kept now."""
        return self._self.snapshot(self._queue_len(), len(self._tracker))
