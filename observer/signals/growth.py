"""State growth and eviction over a sliding window: unbounded state versus bounded windowed state.

Kafka Streams operators learned to watch for stores that only ever grow because nothing evicts them
(no watermark, no TTL). Here: over ``window`` seconds of batches, fit rows and bytes against time
(least squares), sum rows removed against rows added. A state that grew with no removal at all is
unbounded; a state that removes rows, or does not grow, is bounded.

The fit keeps running sums, so each batch costs O(1) however many batches the window holds.
``Growth`` applies a window per operator and turns its verdicts into metric values and signals.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from observer.metrics import catalog
from observer.metrics.tracker import QueryRecord, operator_labels
from observer.model.events import OperatorProgress, QueryProgress
from observer.settings import Settings
from observer.signals import kinds
from observer.signals.facts import Facts


class GrowthVerdict(NamedTuple):  # one per operator and batch: a tuple is built faster than a frozen dataclass
    rows_per_second: float
    bytes_per_second: float
    eviction_ratio: float
    unbounded: bool | None  # None until enough batches
    rows_eta_seconds: float | None
    bytes_eta_seconds: float | None


class GrowthWindow:
    """Bounded history of (time, rows, bytes, added, removed) for one operator, with running sums."""

    _RESUM_EVERY = 1000  # recompute the sums from the points now and then, so rounding cannot drift

    def __init__(self, window_seconds: float, min_points: int, max_points: int = 5000) -> None:
        self.window = window_seconds
        self.min_points = min_points
        self.points: deque[tuple[float, float, float, float, float]] = deque(maxlen=max_points)
        self._t0: float | None = None
        self._sums = [0.0] * 8  # n, St, Stt, Sr, Str, Sb, Stb, (unused)
        self._added = self._removed = 0.0
        self._adds = 0

    def _apply(self, point: tuple[float, float, float, float, float], sign: float) -> None:
        t, rows, memory = point[0] - (self._t0 or 0.0), point[1], point[2]
        s = self._sums
        s[0] += sign
        s[1] += sign * t
        s[2] += sign * t * t
        s[3] += sign * rows
        s[4] += sign * t * rows
        s[5] += sign * memory
        s[6] += sign * t * memory

    def add(self, t: float, rows: float, memory: float, added: float, removed: float) -> None:
        if self._t0 is None:
            self._t0 = t
        if len(self.points) == self.points.maxlen:
            self._drop_oldest()
        point = (t, rows, memory, added, removed)
        self.points.append(point)
        self._apply(point, 1.0)
        if len(self.points) > 1:  # the first point's amounts happened before the window began
            self._added += added
            self._removed += removed
        while self.points and t - self.points[0][0] > self.window:
            self._drop_oldest()
        self._adds += 1
        if self._adds % self._RESUM_EVERY == 0:
            self._resum()

    def _drop_oldest(self) -> None:
        old = self.points.popleft()
        self._apply(old, -1.0)
        if self.points:  # the new first point no longer counts as inside the window
            self._added -= self.points[0][3]
            self._removed -= self.points[0][4]

    def _resum(self) -> None:
        self._sums = [0.0] * 8
        for p in self.points:
            self._apply(p, 1.0)
        pts = list(self.points)[1:]
        self._added = sum(p[3] for p in pts)
        self._removed = sum(p[4] for p in pts)

    def verdict(self, rows_budget: float = 0.0, bytes_budget: float = 0.0) -> GrowthVerdict:
        n, st, stt, sr, str_, sb, stb, _ = self._sums
        denominator = n * stt - st * st
        if n < 2 or denominator <= 1e-12 * max(1.0, n * stt):  # the least-squares slopes of rows and bytes over time
            rows_rate = bytes_rate = 0.0
        else:
            rows_rate = (n * str_ - st * sr) / denominator
            bytes_rate = (n * stb - st * sb) / denominator
        ratio = self._removed / self._added if self._added > 0 else 0.0
        unbounded: bool | None = None
        rows = memory = 0.0
        if self.points:
            first, last = self.points[0], self.points[-1]
            rows, memory = last[1], last[2]
            if len(self.points) >= self.min_points and last[0] - first[0] >= self.window * 0.5:
                unbounded = bool(last[1] > first[1] and rows_rate > 0 and self._removed == 0)
        return GrowthVerdict(
            rows_per_second=rows_rate,
            bytes_per_second=bytes_rate,
            eviction_ratio=ratio,
            unbounded=unbounded,
            rows_eta_seconds=_eta(rows, rows_rate, rows_budget),
            bytes_eta_seconds=_eta(memory, bytes_rate, bytes_budget),
        )


def _eta(current: float, rate: float, budget: float) -> float | None:
    if budget <= 0 or rate <= 0:
        return None
    return max(0.0, (budget - current) / rate)


OperatorKey = tuple[str, int, str]  # query id, operator index, operator name


class Growth:
    """Per operator: growth rates, eviction ratio, budget forecasts and the unbounded/bounded verdict."""

    def __init__(self, settings: Settings) -> None:
        self.s = settings
        self._windows: dict[OperatorKey, GrowthWindow] = {}
        self._unbounded: dict[OperatorKey, bool | None] = {}

    def forget(self, query_id: str) -> None:
        for key in [k for k in self._windows if k[0] == query_id]:
            del self._windows[key]
            self._unbounded.pop(key, None)

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._windows.pop(key, None)
        self._unbounded.pop(key, None)

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: Facts) -> None:
        if op.rows_total is None:
            return
        key = (record.query_id, op.index, op.name)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = GrowthWindow(self.s.growth_window_seconds, self.s.growth_min_batches)
        window.add(ts, op.rows_total, op.memory_bytes or 0.0, op.rows_updated or 0.0, op.rows_removed or 0.0)
        v = window.verdict(self.s.state_rows_budget, self.s.state_memory_budget_bytes)
        labels = operator_labels(op.index, op.name)
        facts.set(record, catalog.ROWS_GROWTH_RATE, labels, v.rows_per_second)
        facts.set(record, catalog.MEMORY_GROWTH_RATE, labels, v.bytes_per_second)
        facts.set(record, catalog.EVICTION_RATIO, labels, v.eviction_ratio)
        facts.set(record, catalog.ROWS_BUDGET_ETA, labels, v.rows_eta_seconds)
        facts.set(record, catalog.MEMORY_BUDGET_ETA, labels, v.bytes_eta_seconds)
        if v.unbounded is None:
            return
        facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if v.unbounded else 0.0)
        if v.unbounded != self._unbounded.get(key):
            kind = kinds.STATE_UNBOUNDED if v.unbounded else kinds.STATE_BOUNDED
            facts.signal(
                kind,
                record,
                p.run_id,
                ts,
                operator=op.name,
                operator_index=op.index,
                rows=op.rows_total,
                rows_per_second=round(v.rows_per_second, 3),
                eviction_ratio=round(v.eviction_ratio, 3),
            )
        self._unbounded[key] = v.unbounded
