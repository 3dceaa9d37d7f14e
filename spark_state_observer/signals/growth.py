"""State growth and eviction over a sliding window: the unbounded/bounded verdict from the state's trend.

A state is unbounded when its rows (or, where Spark does not count rows, its bytes) keep rising over a
window long enough to tell; not when nothing is evicted. A session window whose sessions stay open, or a
count over 100 fixed keys, never evicts and is bounded: it is flat. A state that evicts and still rises is
unbounded. "Keeps rising" is judged on the window's thirds (by time): each third's mean above the one
before by more than the state's own scatter about its trend (at least one row), so a saw-tooth of windows
opening and closing is flat, and a ramp that reached its plateau (the first batches filling 100 keys) is
neither until the plateau fills a window. "Long enough to tell" is half the growth window and several
batches; with a watermark and nothing evicted yet, also the watermark's delay plus a whole growth window
(an operator's window or gap shorter than ``growth_window_seconds`` has filled by then). A state the
watermark, a TTL or a timeout does evict must rise for a second whole window: on a busy machine its
batches slow down, the watermark lags (or a batch holds more processing time before a TTL expires it) and
the state swells for a minute or two (the 30-minute clean recording; a transformWithStateInPandas with a
3 s TTL in the clean hour, called unbounded 5 times in an hour before this applied to TTLs), then shrinks.
Bounded needs the whole window, or its second half alone, not above where it was (flat or falling).

A state's rows can stay flat while it still grows: a fixed set of keys whose values keep what they saw (every
row of a key in a ``GroupState`` list, a ``ListState`` appended to without a TTL). Where Spark reports the
state's own size, a size window is kept beside the rows': the HDFS-backed map's current version
(``stateOnCurrentVersionSizeBytes``, exact), a point every ``SIZE_EVERY`` of the growth window so it costs
little; RocksDB's SST bytes (``rocksdbSstFileSize``) only in a batch that compacted
(``rocksdbTotalBytesWrittenByCompaction``): between compactions they hold every version written since (a fixed
set of keys updated each batch piles up SST files, then a compaction drops them: 7 KB to 12 KB in 14 s with the
rows flat, ``kafka_restart``), after one they are close to the live data. A state whose rows are flat and whose
size has risen for a second whole window is unbounded on its size (``basis=size``), and stays so until its size
is flat again. A RocksDB store that compacts less than three times a window is not judged on its size.

The verdict has hysteresis: it changes only when the evidence does (a rising window turns it unbounded, a
flat one bounded, anything in between keeps it), so it never flips back and forth. Each verdict carries
its evidence (rows at the window's start and end, rate, evicted or not, watermark) and a confidence; the
signal, the ``spark_state_unbounded`` gauge behind the alert and the browser's text (``describe``) all
come from it.

The rates keep running sums, so the fit costs O(1) per batch; so do the trend's thirds (running totals,
``GrowthWindow``), and the window's points (a few hundred at most) are read only when the state's scatter
decides the verdict. A window stays in time order whatever the order of the times it is given (a point
earlier than the newest drops the points at or after its time), so this holds for logs concatenated or replayed twice
and for a clock stepped back too; a rise or a first sighting said to be later than the newest batch then
counts from that batch.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping
from itertools import islice, repeat
from operator import itemgetter, mul, sub
from typing import Any, NamedTuple

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.events import OperatorProgress, QueryProgress
from spark_state_observer.model.fields import HDFS_CURRENT_VERSION_SIZE, ROCKSDB_COMPACTION_WRITTEN, ROCKSDB_SST_BYTES
from spark_state_observer.model.plan_eviction import EvictionLocator
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts
from spark_state_observer.signals.rule import Context, Rule

RISING, FLAT = "rising", "flat"
WATERMARK = "watermark"  # ``evicted_by`` of a verdict on a state the plan says the watermark evicts by key
SIZE = "size"  # the basis of a verdict on the state's own size in bytes, its rows flat
SIZE_EVERY = 1.0 / 24  # of the growth window: the size window's points are at least this far apart (5 s of 120 s)
# points a size trend needs, one a third: RocksDB's come at compactions, every 4 snapshots (40 batches at Spark's
# default of a snapshot every 10)
SIZE_MIN_POINTS = 3


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
        if not (_exact(old[1]) and _exact(old[2])):
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


def describe(attributes: Mapping[str, Any]) -> str:
    """The verdict's evidence in words: the signal carries it, the browser shows it (one text for both)."""
    basis = attributes.get("basis", "rows")
    start, end = attributes.get(f"{basis}_at_start"), attributes.get(f"{basis}_at_end")
    rate = attributes.get(f"{basis}_per_second")
    if start is None or end is None:
        return ""
    span = float(attributes.get("window_seconds") or 0.0)
    moved = f"{basis} {_number(start)} → {_number(end)} in {span:.0f} s" + (f" ({float(rate):+,.1f}/s)" if rate is not None else "")
    if basis == SIZE:  # the rows stayed flat: say so beside the size
        moved = f"state size {_number(start)} → {_number(end)} bytes in {span:.0f} s" + (
            f" ({float(rate):+,.1f} B/s)" if rate is not None else ""
        )
        moved += f" while rows stayed at {_number(attributes.get('rows_at_end') or 0)}"
    removed = float(attributes.get("rows_removed") or 0.0)
    evicted = f"{_number(removed)} rows evicted" if removed else "nothing evicted"
    delay = attributes.get("watermark_delay_seconds")
    # the watermark's distance behind the newest event: the withWatermark delay while it advances, growing while it is stuck
    watermark = (
        f"watermark {float(delay):.0f} s behind the newest event"
        if delay is not None
        else ("watermark" if attributes.get("watermark") else "no watermark")
    )
    if attributes.get("evicted_by") == WATERMARK:  # the plan's state key holds the watermarked event time
        watermark += ", which evicts its state by the event time (the plan says so) and keeps pace"
    return f"{moved}, {evicted}, {watermark}; confidence {attributes.get('confidence', 'medium')}"


def _number(value: Any) -> str:
    return f"{float(value):,.0f}"


OperatorKey = tuple[str, int, str]  # query id, operator index, operator name


class _Operator:
    """One operator's window, verdict so far, and what its watermark and evictions showed since it was first seen."""

    __slots__ = (
        "delay",
        "ever_evicted",
        "first_seen",
        "labels",
        "least_delay",
        "on_size",
        "rising_since",
        "size",
        "size_rising_since",
        "unbounded",
        "window",
    )

    def __init__(self, window: GrowthWindow, first_seen: float, labels: Labels) -> None:
        self.window = window
        self.labels = labels  # ``operator_labels`` of its index and name: the key it is kept under
        self.unbounded: bool | None = None
        self.first_seen = first_seen
        self.ever_evicted = False
        self.rising_since: float | None = None  # since when every window has shown a rise
        self.size: GrowthWindow | None = None  # the state's own size in bytes, sampled (``SIZE_EVERY``), where Spark reports it
        self.size_rising_since: float | None = None  # since when every size window has shown a rise
        self.on_size = False  # the verdict is unbounded on the size, the rows flat
        self.delay: float | None = None  # the watermark's distance behind the newest event, latest batch that had both
        self.least_delay: float | None = None  # its least since first seen: the ``withWatermark`` delay, or near it

    def watch_delay(self, delay: float | None) -> None:
        if delay is not None:
            self.delay = delay
            self.least_delay = delay if self.least_delay is None else min(self.least_delay, delay)

    def keeps_pace(self, slack: float) -> bool:
        """The watermark follows the newest events as closely as it ever did, within ``slack`` seconds: a state
        evicted by it holds a bounded span of event time. A watermark that stopped (an input gone quiet, under
        ``multipleWatermarkPolicy=min``) or falls behind draws away from the newest events."""
        return self.delay is not None and self.least_delay is not None and self.delay - self.least_delay <= slack


class Growth(Rule):
    """Per operator: growth rates, eviction ratio, budget forecasts and the unbounded/bounded verdict.

    ``eviction`` (the plans, ``spark_state_observer.model.plan_eviction``: the event log's, or the live run's for the listener)
    tells an operator whose state the watermark evicts by its key: while that watermark keeps pace, neither its rows
    nor its size rising is growth (its windows or session gaps may be longer than the growth window: a count per
    user and hour fills for an hour). Without it (Spark Connect, progress lines alone, placement off) every operator
    is judged on its trend alone."""

    def __init__(self, settings: Settings, eviction: EvictionLocator | None = None) -> None:
        self.s = settings
        self.eviction = eviction
        self._operators: dict[OperatorKey, _Operator] = {}
        # per query, its operators' states as shared with the runs before and after (``RunState.carried``)
        self._carried: dict[str, dict[tuple[int, str], _Operator]] = {}

    def forget(self, query_id: str) -> None:
        for key in [k for k in self._operators if k[0] == query_id]:
            del self._operators[key]
        self._carried.pop(query_id, None)

    def forget_operator(self, key: OperatorKey) -> None:
        """An operator (name) the query's label budget dropped."""
        self._operators.pop(key, None)
        self._carried.get(key[0], {}).pop(key[1:], None)

    def on_operator(self, ctx: Context, op: OperatorProgress, labels: Labels) -> None:
        assert ctx.progress is not None
        self.operator(ctx.record, ctx.progress, op, ctx.ts, ctx.facts)

    def new_run(self, query_id: str, carried: dict[str, Any]) -> None:
        self.carry(query_id, carried)

    def carry(self, query_id: str, carried: dict[str, Any]) -> None:
        """Keep ``query_id``'s operator states in ``carried`` (``RunState.carried``): a run in another application
        that takes the query over judges its state's growth over the runs before it too, as one observer of all
        of them (a replay of their logs) does; the state itself outlives the runs in the checkpoint."""
        shared: dict[tuple[int, str], _Operator] = carried.setdefault("growth", {})
        self._carried[query_id] = shared
        for (qid, index, name), state in self._operators.items():
            if qid == query_id:
                shared.setdefault((index, name), state)
        for (index, name), state in shared.items():
            self._operators[(query_id, index, name)] = state

    def operator(self, record: QueryRecord, p: QueryProgress, op: OperatorProgress, ts: float, facts: SignalFacts) -> None:
        if op.rows_total is None:
            return
        key = (record.query_id, op.index, op.name)
        state = self._operators.get(key)
        if state is None:
            window = GrowthWindow(self.s.growth_window_seconds, self.s.growth_min_batches)
            state = self._operators[key] = _Operator(window, ts, operator_labels(op.index, op.name))
            shared = self._carried.get(record.query_id)
            if shared is not None:
                shared[(op.index, op.name)] = state
        state.window.add(ts, op.rows_total, op.memory_bytes or 0.0, op.rows_updated or 0.0, op.rows_removed or 0.0)
        if ts < state.first_seen or (state.rising_since is not None and ts < state.rising_since):
            # time went back (the window dropped what came after): the state was seen, and rose, from here on
            state.first_seen = min(state.first_seen, ts)
            state.rising_since = None if state.rising_since is None else ts
        state.ever_evicted = state.ever_evicted or bool(op.rows_removed)
        window = state.window
        rows_rate, bytes_rate, ratio, rows_eta, bytes_eta = window.rates(self.s.state_rows_budget, self.s.state_memory_budget_bytes)
        labels = state.labels
        facts.set_many(
            record,
            labels,
            (
                (catalog.ROWS_GROWTH_RATE, rows_rate),
                (catalog.MEMORY_GROWTH_RATE, bytes_rate),
                (catalog.EVICTION_RATIO, ratio),
                (catalog.ROWS_BUDGET_ETA, rows_eta),
                (catalog.MEMORY_BUDGET_ETA, bytes_eta),
            ),
        )
        watermark, delay = p.watermark is not None, _watermark_delay(p)
        state.watch_delay(delay)
        trend: Trend | None = None
        if state.unbounded is False:
            # a bounded state changes only on a rising window, and flat or in between reads alike below (falsy,
            # then no change): ask only whether it rises, which rarely needs the scatter or the second half
            unbounded: bool | None = True if window.rising() else None
        else:
            trend = window.trend()
            unbounded = None if trend is None or trend.shape is None else trend.shape == RISING
        state.rising_since = (ts if state.rising_since is None else state.rising_since) if unbounded else None
        rising_for = 0.0 if state.rising_since is None else ts - state.rising_since
        by_watermark = watermark and self._evicted_by_watermark(state, p, op)
        if by_watermark:
            # bounded by construction while the watermark keeps pace, however long its windows (sessions) fill: said
            # once the window can tell anything, whatever its trend
            if state.unbounded is not False and trend is None:
                trend = window.trend()
            unbounded = False if trend is not None else None
        elif (
            unbounded
            and watermark
            and not state.ever_evicted
            and ts - state.first_seen < (state.least_delay or 0.0) + self.s.growth_window_seconds
        ):
            unbounded = None  # a watermarked state still filling its first windows: too early to tell
        elif unbounded and state.ever_evicted and rising_for < self.s.growth_window_seconds:
            # a state that evicts (a watermark, a TTL, a timeout) swells while batches slow down (the watermark
            # lags, more event or processing time is held before eviction): growth only when the rise lasts a
            # second whole window
            unbounded = None
        size_trend = self._size(state, op, ts)
        if unbounded is not True and not by_watermark and (state.unbounded is False or unbounded is False or state.on_size):
            # rows flat (or a bounded verdict that no rising window changed): the size decides while it rises, for a
            # second whole window (SST files come and go with compactions)
            rising_for = ts - state.size_rising_since if state.size_rising_since is not None else 0.0
            if size_trend is not None and size_trend.shape == RISING and rising_for >= self.s.growth_window_seconds:
                unbounded, trend = True, size_trend
            elif state.on_size:  # unbounded on its size until its size is flat
                unbounded = False if size_trend is not None and size_trend.shape == FLAT else None
        if unbounded is None or unbounded == state.unbounded:
            if state.unbounded is not None:
                facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if state.unbounded else 0.0)
            return  # hysteresis: only new evidence changes the verdict
        if trend is None:
            trend = window.trend()
        if trend is None:  # never: a verdict comes from a trend
            return
        state.unbounded, state.on_size = unbounded, trend.basis == SIZE
        facts.set(record, catalog.STATE_UNBOUNDED, labels, 1.0 if unbounded else 0.0)
        last = window.points[-1]
        first = next(p for p in window.points if p[0] >= last[0] - trend.span_seconds - 1e-9)  # where the judged span starts
        evidence: dict[str, Any] = {
            "basis": trend.basis,
            "rows_at_start": first[1],
            "rows_at_end": last[1],
            "bytes_at_start": first[2],
            "bytes_at_end": last[2],
            "window_seconds": round(trend.span_seconds, 1),
            "batches": trend.batches,
            "rows_per_second": round(rows_rate, 3),
            "bytes_per_second": round(bytes_rate, 3),
            "evicted": window.removed > 0,
            "rows_removed": window.removed,
            "eviction_ratio": round(ratio, 3),
            "watermark": watermark,
            "watermark_delay_seconds": None if delay is None else round(delay, 1),
            "confidence": self._confidence(trend),
        }
        if by_watermark:
            evidence["evicted_by"] = WATERMARK
        if trend.basis == SIZE:
            evidence.update(
                size_at_start=trend.start,
                size_at_end=trend.end,
                size_per_second=round((trend.end - trend.start) / trend.span_seconds, 3),
            )
        facts.signal(
            kinds.STATE_UNBOUNDED if unbounded else kinds.STATE_BOUNDED,
            record,
            p.run_id,
            ts,
            operator=op.name,
            operator_index=op.index,
            rows=op.rows_total,
            **evidence,
            evidence=describe(evidence),
        )

    def _evicted_by_watermark(self, state: _Operator, p: QueryProgress, op: OperatorProgress) -> bool:
        """The plan says the watermark evicts this operator's state by its key, and the watermark keeps pace (within
        half a growth window of the least delay it had)."""
        if self.eviction is None or not self.eviction(p.query_id, p.run_id, op.index, op.name):
            return False
        return state.keeps_pace(self.s.growth_window_seconds / 2)

    def _size(self, state: _Operator, op: OperatorProgress, ts: float) -> Trend | None:
        """The state's size window, fed a point when one is due: its trend (basis ``size``), or None where Spark
        reports no size or the window cannot tell yet; ``size_rising_since`` follows it as ``rising_since`` does."""
        custom = op.custom
        size = custom.get(HDFS_CURRENT_VERSION_SIZE)
        sampled = size is not None
        if size is None and (custom.get(ROCKSDB_COMPACTION_WRITTEN) or 0) > 0:
            size = custom.get(ROCKSDB_SST_BYTES)  # just compacted: close to the live data
        if size is None or not math.isfinite(size) or size < 0:
            return None
        window = state.size
        if window is None:
            window = state.size = GrowthWindow(self.s.growth_window_seconds, SIZE_MIN_POINTS)
        points = window.points
        if sampled and points and 0.0 <= ts - points[-1][0] < self.s.growth_window_seconds * SIZE_EVERY:
            return None  # judged when a point is added (at once when time went back: the window drops what came after)
        window.add(ts, float(size), 0.0, 0.0, 0.0)
        if state.size_rising_since is not None and ts < state.size_rising_since:
            state.size_rising_since = ts
        trend = window.trend()
        if trend is None:
            return None
        if trend.shape == RISING:
            state.size_rising_since = ts if state.size_rising_since is None else state.size_rising_since
        else:
            state.size_rising_since = None
        return Trend(trend.shape, SIZE, *trend[2:])

    def _confidence(self, trend: Trend) -> str:
        """high: twice the span and batches a verdict needs, on rows; low: on bytes (RocksDB's include caches)."""
        if trend.basis == "bytes":
            return "low"
        if trend.basis == SIZE:
            return "medium"  # a size that rose for two windows; its rows tell nothing
        if trend.span_seconds >= self.s.growth_window_seconds and trend.batches >= 2 * self.s.growth_min_batches:
            return "high"
        return "medium"


def _watermark_delay(p: QueryProgress) -> float | None:
    """The watermark's distance behind the batch's newest event time: its delay (plus up to a trigger)."""
    watermark, newest = p.event_time.get("watermark"), p.event_time.get("max")
    if watermark is None or newest is None or watermark <= 0:
        return None
    return max(0.0, newest - watermark)
