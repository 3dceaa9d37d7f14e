"""Metrics about the observer itself: what it received, dropped and failed, and what it cost.

Kept apart from the Spark metrics so that "the observer is losing events" can be alerted on separately.
Plain numbers behind one lock: the worker (and the signal bus) update them, exporters read a
``SelfSnapshot``. Their specs are in ``spark_state_observer.metrics.catalog`` (``SELF_METRICS``).
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from dataclasses import dataclass

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


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
        self.http_refused: dict[str, int] = defaultdict(int)  # by reason (spark_state_observer.exporters.metrics_app.REFUSAL_REASONS)
        self.failed = 0
        self.problems = 0
        self.callback_failures = 0
        self.callback = Histogram()
        self.processing = Histogram()

    def count(self, table: str, label: str, n: int = 1) -> None:
        with self.lock:
            getattr(self, table)[label] += n

    def incr(self, attr: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, attr, getattr(self, attr) + n)

    def snapshot(self, queue_events: int, queries: int) -> SelfSnapshot:
        """A consistent copy for one collection."""
        with self.lock:
            return SelfSnapshot(
                dict(self.received),
                dict(self.dropped),
                dict(self.export_failures),
                self.failed,
                self.problems,
                self.callback_failures,
                queue_events,
                queries,
                (self.callback.cumulative(), self.callback.sum),
                (self.processing.cumulative(), self.processing.sum),
                dict(self.http_refused),
            )


@dataclass(frozen=True)
class SelfSnapshot:
    """The observer's own figures at one moment; histograms as (cumulative buckets, sum)."""

    received: dict[str, int]
    dropped: dict[str, int]
    export_failures: dict[str, int]
    failed: int
    problems: int
    callback_failures: int
    queue_events: int
    queries: int
    callback: tuple[list[tuple[str, int]], float]
    processing: tuple[list[tuple[str, int]], float]
    http_refused: dict[str, int]
