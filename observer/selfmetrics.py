"""Metrics about the observer itself: what it received, dropped and failed, and what it cost.

Kept apart from the Spark metrics so that "the observer is losing events" can be alerted on separately.
Plain numbers behind one lock: the worker updates them, the collector reads them.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

from observer.registry import COUNTER, GAUGE, MetricSpec

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

SELF_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("", "spark_state_observer_events_received", COUNTER, "", "Listener events received (label kind).", "observer"),
    MetricSpec("", "spark_state_observer_events_dropped", COUNTER, "", "Events lost (label reason: queue_full, malformed, capture_error, too_many_queries).", "observer"),
    MetricSpec("", "spark_state_observer_events_failed", COUNTER, "", "Events whose processing raised inside the observer (logged; the job is unaffected).", "observer"),
    MetricSpec("", "spark_state_observer_event_problems", COUNTER, "", "Fields ignored in otherwise usable events (wrong type, non-finite, truncated maps).", "observer"),
    MetricSpec("", "spark_state_observer_queue_events", GAUGE, "", "Events waiting between the Spark callback and the worker.", "observer"),
    MetricSpec("", "spark_state_observer_queries", GAUGE, "", "Queries the observer currently keeps in memory.", "observer"),
    MetricSpec("", "spark_state_observer_callback_failures", COUNTER, "", "User signal callbacks that raised (logged; never reaches Spark).", "observer"),
    MetricSpec("", "spark_state_observer_export_failures", COUNTER, "", "Failed exports (label exporter: pushgateway, ...).", "observer"),
    MetricSpec("", "spark_state_observer_callback_duration_seconds", "histogram", "seconds", "Time the Spark listener callback took (runs on Spark's listener-bus thread).", "observer"),
    MetricSpec("", "spark_state_observer_processing_duration_seconds", "histogram", "seconds", "Time the worker took to process one event (parse, signals, export).", "observer"),
)


class Histogram:
    """Cumulative-bucket histogram for Prometheus exposition; cheap enough for the worker thread."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip(self.buckets, self.counts):
            running += count
            out.append((repr(bound), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


class SelfMetrics:
    """The observer's own counters and latency histograms."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: dict[str, int] = defaultdict(int)
        self.dropped: dict[str, int] = defaultdict(int)
        self.export_failures: dict[str, int] = defaultdict(int)
        self.failed = 0
        self.problems = 0
        self.callback = Histogram()
        self.processing = Histogram()

    def count(self, table: str, label: str, n: int = 1) -> None:
        with self.lock:
            getattr(self, table)[label] += n

    def incr(self, attr: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, attr, getattr(self, attr) + n)
