"""State growth and eviction over a sliding window: unbounded state versus bounded windowed state.

Kafka Streams operators learned to watch for stores that only ever grow because nothing evicts them
(no watermark, no TTL). Here: over ``window`` seconds of batches, fit rows and bytes against time
(least squares), sum rows removed against rows added. A state that grew with no removal at all is
unbounded; a state that removes rows, or does not grow, is bounded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class GrowthVerdict:
    rows_per_second: float
    bytes_per_second: float
    eviction_ratio: float
    unbounded: bool | None  # None until enough batches
    rows_eta_seconds: float | None
    bytes_eta_seconds: float | None


class GrowthWindow:
    """Bounded history of (time, rows, bytes, added, removed) for one operator."""

    def __init__(self, window_seconds: float, min_points: int, max_points: int = 2000) -> None:
        self.window = window_seconds
        self.min_points = min_points
        self.points: deque[tuple[float, float, float, float, float]] = deque(maxlen=max_points)

    def add(self, t: float, rows: float, memory: float, added: float, removed: float) -> None:
        self.points.append((t, rows, memory, added, removed))
        while self.points and t - self.points[0][0] > self.window:
            self.points.popleft()

    def verdict(self, rows_budget: float = 0.0, bytes_budget: float = 0.0) -> GrowthVerdict:
        pts = list(self.points)
        rows_rate = _slope([(p[0], p[1]) for p in pts])
        bytes_rate = _slope([(p[0], p[2]) for p in pts])
        added = sum(p[3] for p in pts[1:])
        removed = sum(p[4] for p in pts[1:])
        ratio = removed / added if added > 0 else 0.0
        unbounded: bool | None = None
        span = pts[-1][0] - pts[0][0] if pts else 0.0
        if len(pts) >= self.min_points and span >= self.window * 0.5:
            grew = pts[-1][1] > pts[0][1]
            unbounded = bool(grew and rows_rate > 0 and removed == 0)
        last_rows = pts[-1][1] if pts else 0.0
        last_bytes = pts[-1][2] if pts else 0.0
        return GrowthVerdict(
            rows_per_second=rows_rate, bytes_per_second=bytes_rate, eviction_ratio=ratio, unbounded=unbounded,
            rows_eta_seconds=_eta(last_rows, rows_rate, rows_budget),
            bytes_eta_seconds=_eta(last_bytes, bytes_rate, bytes_budget),
        )


def _slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(p[0] for p in points) / n
    mean_v = sum(p[1] for p in points) / n
    var = sum((p[0] - mean_t) ** 2 for p in points)
    if var == 0:
        return 0.0
    return sum((p[0] - mean_t) * (p[1] - mean_v) for p in points) / var


def _eta(current: float, rate: float, budget: float) -> float | None:
    if budget <= 0 or rate <= 0:
        return None
    return max(0.0, (budget - current) / rate)
