"""A growth window: one operator's recent (time, rows, bytes, added, removed) points and the trend they show.

It keeps running sums, so the rates cost O(1) a batch, and running totals, so the trend's thirds cost
O(log n); the points are read only when the state's scatter decides the verdict (``signals.growth``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from itertools import islice, repeat
from operator import itemgetter, mul, sub
from typing import NamedTuple

RISING, FLAT = "rising", "flat"


class Trend(NamedTuple):
    """What the window shows: ``RISING``, ``FLAT`` or ``None`` (too short, or in between), and on what."""

    shape: str | None
    basis: str  # "rows", or "bytes" where Spark reports no rows (RocksDB without trackTotalNumberOfRows)
    start: float  # the basis at the window's first and last batch
    end: float
    span_seconds: float
    batches: int


_EXACT = 2.0**40  # integral amounts below this add up exactly in floats over any window (5,000 points plus 1,000 adds)


def _exact(value: float) -> bool:
    return -_EXACT < value < _EXACT and value == value // 1


class GrowthWindow:
    """Bounded history of (time, rows, bytes, added, removed) for one operator, with running sums.

    The window is the ``window_seconds`` up to its newest point, and it is kept in time order with one point
    a time: a point earlier than the newest (a driver clock stepped back, logs concatenated, a log replayed
    twice into one run, a restart that repeats the times of the run before) drops the points at or after its
    time first, and a point at the newest's time takes its place. The points after it are no longer within
    the window that ends at it, and a window of two timelines interleaved fits no trend: a log replayed twice
    shows each state twice at each time, a restart repeating the times would add one more point at its first
    time each time. So every point enters and leaves once, and the window holds no more points than the times
    of one pass over the window, and at most ``max_points``, whatever the order of the times.

    The trend's thirds are read from running totals too: in time order each third is a run of points found
    by bisection, and its sum a difference of two running totals, exact (the same float as adding the third
    point by point) while the amounts are integers, as Spark's counts of rows and bytes are. A window with an
    amount that is not such an integer is read point by point (``_shape_listed``, the reference the running
    totals are tested against), at most ``max_points`` of them.
    """

    _RESUM_EVERY = 1000  # recompute the sums from the points now and then, so rounding cannot drift

    def __init__(self, window_seconds: float, min_points: int, max_points: int = 5000) -> None:
        self.window = window_seconds
        self.min_points = min_points
        self.points: deque[tuple[float, float, float, float, float]] = deque(maxlen=max_points)
        self._t0: float | None = None
        self._sums = [0.0] * 8  # n, St, Stt, Sr, Str, Sb, Stb, (unused)
        self._added = self._removed = 0.0
        self._adds = 0
        self._totals: deque[tuple[float, float, int]] = deque()  # per point: rows, bytes and points with rows > 0, up to it
        self.stepped_back = 0  # points earlier than the newest before them: each dropped the points at or after its time
        self._inexact = 0  # points whose rows or bytes are not integers below _EXACT

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
        """One batch's point. ``_apply``'s sums inlined with its sign of 1.0 left out (a product by 1.0 is exact,
        so the sums are the same floats; held equal in ``tests/unit/test_growth_window_fast.py``)."""
        points = self.points
        if self._t0 is None:
            self._t0 = t
        if points and t <= points[-1][0]:  # not after the newest: it takes the place of the points at or after its time
            self.stepped_back += t < points[-1][0]
            while points and t <= points[-1][0]:
                self._drop_newest()
        if len(points) == points.maxlen:
            self._drop_oldest()
        if not (-_EXACT < rows < _EXACT and rows == rows // 1 and -_EXACT < memory < _EXACT and memory == memory // 1):
            self._inexact += 1  # ``_exact(rows) and _exact(memory)``, inlined
        points.append((t, rows, memory, added, removed))
        totals = self._totals
        before = totals[-1] if totals else (0.0, 0.0, 0)
        totals.append((before[0] + rows, before[1] + memory, before[2] + (rows > 0)))
        x = t - (self._t0 or 0.0)
        sums = self._sums
        sums[0] += 1.0
        sums[1] += x
        sums[2] += x * x
        sums[3] += rows
        sums[4] += x * rows
        sums[5] += memory
        sums[6] += x * memory
        if len(points) > 1:  # the first point's amounts happened before the window began
            self._added += added
            self._removed += removed
        window = self.window
        while points and t - points[0][0] > window:
            self._drop_oldest()
        self._adds += 1
        if self._adds % self._RESUM_EVERY == 0:
            self._resum()

    def _drop_oldest(self) -> None:
        old = self.points.popleft()
        self._totals.popleft()
        rows, memory = old[1], old[2]
        if not (-_EXACT < rows < _EXACT and rows == rows // 1 and -_EXACT < memory < _EXACT and memory == memory // 1):
            self._inexact -= 1
            if not self._inexact:
                self._retotal()  # the totals still carry the inexact amount: start them afresh
        x = old[0] - (self._t0 or 0.0)  # ``_apply(old, -1.0)`` inlined: adding a product by -1.0 is subtracting
        sums = self._sums
        sums[0] -= 1.0
        sums[1] -= x
        sums[2] -= x * x
        sums[3] -= old[1]
        sums[4] -= x * old[1]
        sums[5] -= old[2]
        sums[6] -= x * old[2]
        if self.points:  # the new first point no longer counts as inside the window
            self._added -= self.points[0][3]
            self._removed -= self.points[0][4]

    def _drop_newest(self) -> None:
        """The newest point leaves (a point not after it came): ``_drop_oldest`` from the other end."""
        old = self.points.pop()
        self._totals.pop()  # the totals up to the points before it never held it
        if not (_exact(old[1]) and _exact(old[2])):
            self._inexact -= 1
            if not self._inexact:
                self._retotal()  # an inexact point that left from the other end may still be in the totals
        x = old[0] - (self._t0 or 0.0)
        sums = self._sums
        sums[0] -= 1.0
        sums[1] -= x
        sums[2] -= x * x
        sums[3] -= old[1]
        sums[4] -= x * old[1]
        sums[5] -= old[2]
        sums[6] -= x * old[2]
        if self.points:  # it counted as inside the window, as every point but the first does
            self._added -= old[3]
            self._removed -= old[4]

    def _retotal(self) -> None:
        self._totals.clear()
        rows = memory = 0.0
        positive = 0
        for p in self.points:
            rows, memory, positive = rows + p[1], memory + p[2], positive + (p[1] > 0)
            self._totals.append((rows, memory, positive))

    def _resum(self) -> None:
        self._sums = [0.0] * 8
        for p in self.points:
            self._apply(p, 1.0)
        pts = list(self.points)[1:]
        self._added = sum(p[3] for p in pts)
        self._removed = sum(p[4] for p in pts)
        self._retotal()  # from the window's first point again, so the totals stay far below 2**53

    def trend(self) -> Trend | None:
        """Rising, flat or neither; ``None`` before half a window and ``min_points`` batches.

        Rising is judged on the whole window; flat (the last third not above the first two) on the whole
        window, or else on its second half alone: a state that filled up early and stays flat (100 keys
        all seen in the first seconds) is bounded half a window after it stopped rising."""
        if self._inexact:
            return self.trend_listed()
        whole = self._shape_from(0, self.window * 0.5)
        if whole is not None and whole.shape is not None:
            return whole
        start = bisect_left(self.points, self.points[-1][0] - self.window * 0.5, key=_time) if self.points else 0
        half = self._shape_from(start, self.window * 0.4)
        return half if half is not None and half.shape == FLAT else whole

    def trend_listed(self) -> Trend | None:
        """``trend`` read point by point: any window (any amounts, even out of time order), the reference."""
        pts = list(self.points)
        whole = self._shape_listed(pts, self.window * 0.5)
        if whole is not None and whole.shape is not None:
            return whole
        late = [p for p in pts if pts and p[0] >= pts[-1][0] - self.window * 0.5]
        half = self._shape_listed(late, self.window * 0.4)
        return half if half is not None and half.shape == FLAT else whole

    def _shape_listed(self, pts: list[tuple[float, float, float, float, float]], min_span: float) -> Trend | None:
        """The thirds test on ``pts``: each third's mean above the one before by more than the scatter is rising."""
        if len(pts) < max(self.min_points, 3):
            return None
        t0, span = pts[0][0], pts[-1][0] - pts[0][0]
        if span < min_span or span <= 0:
            return None
        column, basis = (1, "rows") if any(p[1] > 0 for p in pts) else (2, "bytes")
        ts = [p[0] - t0 for p in pts]
        ys = [p[column] for p in pts]
        thirds: list[list[float]] = [[], [], []]
        for t, y in zip(ts, ys):
            thirds[min(2, int(3.0 * t / span))].append(y)
        trend = Trend(None, basis, ys[0], ys[-1], span, len(pts))
        if not all(thirds):
            return trend
        m1, m2, m3 = (sum(third) / len(third) for third in thirds)
        return _decide(trend, m1, m2, m3, lambda: _scatter(ts, ys))

    def _shape_from(self, start: int, min_span: float) -> Trend | None:
        """``_shape_listed`` of the points from ``start`` on, in time order with exact amounts: O(log n)
        but for the scatter, which is computed only when the answer depends on it."""
        pts, totals = self.points, self._totals
        n = len(pts) - start
        if n < max(self.min_points, 3):
            return None
        first, last = pts[start], pts[-1]
        t0, span = first[0], last[0] - first[0]
        if span < min_span or span <= 0:
            return None
        column, basis = (1, "rows") if totals[-1][2] - totals[start][2] + (first[1] > 0) else (2, "bytes")

        trend = Trend(None, basis, first[column], last[column], span, n)
        one = _third_start(pts, 1, start, t0, span)
        two = _third_start(pts, 2, one, t0, span)
        if not (start < one < two < len(pts)):
            return trend
        c = column - 1

        def total(i: int, j: int) -> float:  # points i..j-1
            return totals[j - 1][c] - (totals[i][c] - pts[i][column])

        m1, m2, m3 = total(start, one) / (one - start), total(one, two) / (two - one), total(two, len(pts)) / (len(pts) - two)

        def scatter() -> float:
            window = list(islice(pts, start, None))
            return _scatter_mapped(list(map(sub, map(_time, window), repeat(t0))), list(map(itemgetter(column), window)))

        return _decide(trend, m1, m2, m3, scatter)

    def rising(self) -> bool:
        """Whether ``trend()`` is rising, without what it needs only to tell flat from in between.

        ``trend`` returns the whole window's shape when it has one, and otherwise the second half's only when
        flat: so it is rising exactly when the whole window is. The whole window is rising only when each third
        is a row above the one before and the state ended above where it started (``_decide``'s ``may_rise``),
        so a window that is not asks for no scatter and no second half; ``_rises`` answers that alone, with no
        ``Trend`` built. Held equal to ``trend().shape == RISING`` after every batch of every recorded operator
        (``tests/unit/test_growth_window_fast.py``)."""
        if self._inexact:
            whole = self.trend_listed()
            return whole is not None and whole.shape == RISING
        return self._rises(self.window * 0.5)

    def _rises(self, min_span: float) -> bool:
        """Whether ``_shape_from(0, min_span)`` is rising: its tests in its order, as a bool, returning as soon as
        ``_decide``'s ``may_rise`` is false (then it is not rising, and the scatter is not computed).

        With ``may_rise`` true (each third a row above the one before, the end above the start), ``_decide``
        says rising exactly when each third is above the one before by more than ``max(1.0, scatter)``."""
        pts, totals = self.points, self._totals
        n = len(pts)
        if n < max(self.min_points, 3):
            return False
        first, last = pts[0], pts[-1]
        t0, span = first[0], last[0] - first[0]
        if span < min_span or span <= 0:
            return False
        column = 1 if totals[-1][2] - totals[0][2] + (first[1] > 0) else 2
        if not last[column] > first[column]:
            return False
        one = _third_start(pts, 1, 0, t0, span)
        two = _third_start(pts, 2, one, t0, span)
        if not (0 < one < two < n):
            return False
        c = column - 1
        start_total = totals[0][c] - first[column]
        one_total, two_total = totals[one - 1][c], totals[two - 1][c]
        m1 = (one_total - start_total) / one
        m2 = (two_total - (totals[one][c] - pts[one][column])) / (two - one)
        m3 = (totals[-1][c] - (totals[two][c] - pts[two][column])) / (n - two)
        if not (m2 - m1 > 1.0 and m3 - m2 > 1.0):
            return False
        window = list(pts)
        tolerance = max(1.0, _scatter_mapped(list(map(sub, map(_time, window), repeat(t0))), list(map(itemgetter(column), window))))
        return m2 - m1 > tolerance and m3 - m2 > tolerance

    def rates(self, rows_budget: float = 0.0, bytes_budget: float = 0.0) -> tuple[float, float, float, float | None, float | None]:
        """The window's O(1) part: rows and bytes a second (least squares), eviction ratio, and the
        seconds until each budget; the growth rule reads these every batch and the trend only when its
        answer can matter."""
        n, st, stt, sr, str_, sb, stb, _ = self._sums
        denominator = n * stt - st * st
        if n < 2 or denominator <= 1e-12 * max(1.0, n * stt):  # the least-squares slopes of rows and bytes over time
            rows_rate = bytes_rate = 0.0
        else:
            rows_rate = (n * str_ - st * sr) / denominator
            bytes_rate = (n * stb - st * sb) / denominator
        ratio = self._removed / self._added if self._added > 0 else 0.0
        rows = memory = 0.0
        if self.points:
            last = self.points[-1]
            rows, memory = last[1], last[2]
        # the seconds until each budget at this rate (none without a budget or a rise)
        rows_eta = None if rows_budget <= 0 or rows_rate <= 0 else max(0.0, (rows_budget - rows) / rows_rate)
        bytes_eta = None if bytes_budget <= 0 or bytes_rate <= 0 else max(0.0, (bytes_budget - memory) / bytes_rate)
        return rows_rate, bytes_rate, ratio, rows_eta, bytes_eta

    @property
    def removed(self) -> float:
        """Rows removed within the window."""
        return self._removed


_time = itemgetter(0)  # a point's time


def _third_start(pts: deque[tuple[float, float, float, float, float]], third: int, lo: int, t0: float, span: float) -> int:
    """The first index from ``lo`` on whose point is in ``third`` (0, 1, 2) or later, a point at ``t`` being in
    ``min(2, int(3.0 * (t - t0) / span))``: ``bisect_left`` with that as its key, in time order.

    The point is in ``third`` or later exactly when ``3.0 * (t - t0) / span >= third``, which only grows with
    ``t``; a bisection on the times (a C key) lands at or next to that first point, and the steps from there
    test the exact condition, so the index is the keyed bisection's."""

    def reached(i: int) -> bool:
        return 3.0 * (pts[i][0] - t0) / span >= third

    i = bisect_left(pts, t0 + span * third / 3.0, lo, key=_time)
    while i > lo and reached(i - 1):
        i -= 1
    while i < len(pts) and not reached(i):
        i += 1
    return i


def _decide(trend: Trend, m1: float, m2: float, m3: float, scatter: Callable[[], float]) -> Trend:
    """Rising when each third's mean is above the one before by more than the scatter (at least a row),
    flat when the last third is not above the others by more than that.

    The scatter (one pass over the window) is asked for only when the answer depends on it: thirds within
    a row of each other are flat, and a third not a row above the one before is not rising, whatever it is."""
    may_rise = m2 - m1 > 1.0 and m3 - m2 > 1.0 and trend.end > trend.start
    if not may_rise and m3 - m1 <= 1.0 and m3 - m2 <= 1.0:
        return Trend(FLAT, *trend[1:])
    tolerance = max(1.0, scatter())
    if may_rise and m2 - m1 > tolerance and m3 - m2 > tolerance:
        return Trend(RISING, *trend[1:])
    if m3 - m1 <= tolerance and m3 - m2 <= tolerance:  # not above where it was: flat, or falling back
        return Trend(FLAT, *trend[1:])
    return trend


def _scatter(ts: list[float], ys: list[float]) -> float:
    """Standard deviation of ``ys`` about their least-squares line over ``ts``: the state's own noise.

    Each deviation is computed once and the sums run in the points' order, as the textbook formula's
    passes would (the same floats, bit for bit), in list comprehensions rather than generators."""
    n = len(ts)
    mt, my = sum(ts) / n, sum(ys) / n
    dts = [t - mt for t in ts]
    dys = [y - my for y in ys]
    stt = sum([d**2 for d in dts])
    slope = sum([dt * dy for dt, dy in zip(dts, dys)]) / stt if stt > 0 else 0.0
    return math.sqrt(sum([(dy - slope * dt) ** 2 for dt, dy in zip(dts, dys)]) / n)


def _scatter_mapped(ts: list[float], ys: list[float]) -> float:
    """``_scatter`` with each pass a C loop (``map`` over ``operator`` functions) instead of a comprehension:
    the same float operations on the same operands in the same order, so the same float, bit for bit
    (``tests/unit/test_growth_window_fast.py``); the running totals' path reads its window's scatter here."""
    n = len(ts)
    mt, my = sum(ts) / n, sum(ys) / n
    dts = list(map(sub, ts, repeat(mt)))
    dys = list(map(sub, ys, repeat(my)))
    stt = sum(map(pow, dts, repeat(2)))
    slope = sum(map(mul, dts, dys)) / stt if stt > 0 else 0.0
    return math.sqrt(sum(map(pow, map(sub, dys, map(mul, repeat(slope), dts)), repeat(2))) / n)
