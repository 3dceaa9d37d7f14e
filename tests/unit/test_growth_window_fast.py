"""The growth trend read from running totals (issue 32) against the point-by-point reference, on every recorded run.

``GrowthWindow.trend`` finds the window's thirds by bisection and sums them as differences of running
totals; ``trend_listed`` reads every point as the trend did before. They must agree after every batch of
every recorded operator, over windows short enough to slide, and also around points the running totals
cannot take (a fractional, huge or NaN amount): read point by point while such a point is in the window,
from the totals again once it has left. Times that go back (each run repeated at the same times, a clock
stepped back) keep the window in time order (the later points leave), so the totals are read there too. The running totals' path reads the scatter through
``_scatter_mapped`` (C loops), the reference through ``_scatter``: the same float, bit for bit; and finds
each third's first point by a bisection on the times (``_third_start``), the index the bisection keyed by
the point's third finds.
"""

from __future__ import annotations

import glob
import json
import math
import os
import random
from bisect import bisect_left
from collections import deque

import pytest

from conftest import FIXTURES
from spark_state_observer.model.parse import parse_progress
from spark_state_observer.signals.growth_window import GrowthWindow, _exact, _scatter, _scatter_mapped, _third_start

Series = list[tuple[float, float, float, float, float]]


def _recorded() -> list[tuple[str, Series]]:
    """Per recorded run and operator: (time, rows, bytes, updated, removed) after each batch, as the growth rule adds them."""
    files = sorted(glob.glob(os.path.join(FIXTURES, "**", "progress.jsonl"), recursive=True))
    assert len(files) >= 20
    out = []
    for path in files:
        series: dict[int, Series] = {}
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                p = parse_progress(json.loads(line))
                for op in p.operators:
                    if op.rows_total is not None and p.timestamp is not None:
                        point = (p.timestamp, op.rows_total, op.memory_bytes or 0.0, op.rows_updated or 0.0, op.rows_removed or 0.0)
                        series.setdefault(op.index, []).append(point)
        out += [(f"{os.path.relpath(path, FIXTURES)}#{index}", s) for index, s in series.items() if len(s) >= 3]
    return out


RECORDED = _recorded()


def _odd(series: Series) -> Series:
    """The series with a step back in time early on (the point before it leaves), then points the totals cannot
    take: a fractional amount, a NaN, a huge one."""
    out = list(series)
    t, rows, memory, updated, removed = out[1]
    gap = (out[2][0] - t) / 4.0  # the odd points between the second and third, one a time
    out.insert(2, (t - 1.0, rows, memory, updated, removed))
    out.insert(3, (t + gap, rows + 0.5, memory, updated, removed))
    out.insert(4, (t + 2 * gap, rows, math.nan, updated, removed))
    out.insert(5, (t + 3 * gap, 2.0**45, memory, updated, removed))
    return out


def _restarted(series: Series, copies: int = 3) -> Series:
    """The series ``copies`` times at the same times (logs concatenated, a log replayed twice into one run, restarts
    that repeat the times of the run before), then once more with the clock stepped back 30 s halfway."""
    half = len(series) // 2
    stepped = series[:half] + [(p[0] - 30.0, *p[1:]) for p in series[half:]]
    return series * copies + stepped


def _compare(series: Series, window_seconds: float) -> int:
    """Add the points one by one; the trends agree after each. Returns how often the running totals were read."""
    w = GrowthWindow(window_seconds, min_points=3)
    fast = 0
    for point in series:
        w.add(*point)
        trend = w.trend()
        assert trend == w.trend_listed()
        assert w.rising() == (trend is not None and trend.shape == "rising")
        fast += not w._inexact
    return fast


@pytest.mark.parametrize("window_seconds", [4.0, 15.0, 60.0, 600.0])
def test_running_totals_equal_the_reference_on_every_recorded_operator(window_seconds: float) -> None:
    shapes = set()
    fast = 0
    for _name, series in RECORDED:
        fast += _compare(series, window_seconds)
        fast += _compare(_restarted(series), window_seconds)
        w = GrowthWindow(window_seconds, min_points=3)
        for point in series:
            w.add(*point)
            trend = w.trend()
            shapes.add(None if trend is None else trend.shape)
    assert fast > len(RECORDED)  # the running totals were read, not only the reference
    if window_seconds == 15.0:
        assert {"rising", "flat"} <= shapes  # the recordings hold both shapes at this window


def test_points_the_totals_cannot_take_are_read_one_by_one_until_they_leave() -> None:
    leaves = 0
    for name, series in RECORDED:
        if len(series) < 8:
            continue
        odd = _odd(series)
        w = GrowthWindow(4.0, min_points=3)
        for point in odd:
            w.add(*point)
            trend = w.trend()
            assert trend == w.trend_listed(), name
            assert w.rising() == (trend is not None and trend.shape == "rising"), name
        leaves += not w._inexact
    assert leaves  # the odd points left some windows, which were read from their totals again


def _same_float(a: float, b: float) -> bool:
    return a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("points", [5, 40, 400])
def test_scatter_in_c_loops_is_the_same_float_on_every_recorded_window(points: int) -> None:
    compared = 0
    for name, series in RECORDED:
        for end in range(3, len(series) + 1, max(1, len(series) // 25)):
            window = series[max(0, end - points) : end]
            t0 = window[0][0]
            ts = [p[0] - t0 for p in window]
            for column in (1, 2):
                ys = [p[column] for p in window]
                assert _same_float(_scatter_mapped(ts, ys), _scatter(ts, ys)), (name, end, column)
                compared += 1
    assert compared > 1000


def test_scatter_in_c_loops_is_the_same_float_on_odd_amounts() -> None:
    """Fractions, NaN, infinities, huge and negative amounts, one point, a window without time: as the reference."""
    odd = [0.1, -3.0, 2.0**60, 1e-300, math.nan, math.inf, 7.0, 1.0 / 3.0]
    for name, series in RECORDED[:20]:
        window = series[:12]
        ts = [p[0] - window[0][0] for p in window]
        for i, y in enumerate(odd):
            ys = [p[1] for p in window]
            ys[i % len(ys)] = y
            assert _same_float(_scatter_mapped(ts, ys), _scatter(ts, ys)), (name, y)
    for ts, ys in (([0.0], [5.0]), ([0.0, 0.0, 0.0], [1.0, 2.0, 4.0]), ([0.0, 1.0], [1.0, 1.0])):
        assert _same_float(_scatter_mapped(ts, ys), _scatter(ts, ys))


def _third_start_keyed(pts: deque, third: int, lo: int, t0: float, span: float) -> int:
    """The bisection ``_third_start`` replaces: keyed by each point's third."""
    return bisect_left(pts, third, lo, key=lambda p: min(2, int(3.0 * (p[0] - t0) / span)))


def test_thirds_found_on_the_times_are_the_keyed_bisections_on_every_recorded_window() -> None:
    rng = random.Random(32)
    windows = [series[max(0, end - n) : end] for _name, series in RECORDED for n in (4, 30, 300) for end in range(4, len(series) + 1, 7)]
    # times that share a point with a third's bound, repeat, or crowd one end
    windows += [
        [(t, 0.0, 0.0, 0.0, 0.0) for t in ts] for ts in ([0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 1.0, 1.0, 1.0, 3.0], [0.0, 2.9, 2.95, 3.0])
    ]
    windows += [[(t, 0.0, 0.0, 0.0, 0.0) for t in sorted(rng.uniform(0, 10) for _ in range(rng.randint(3, 40)))] for _ in range(300)]
    compared = 0
    for window in windows:
        pts = deque(window)
        for start in range(0, len(pts) - 2, max(1, len(pts) // 5)):
            t0, span = pts[start][0], pts[-1][0] - pts[start][0]
            if span <= 0:
                continue
            one = _third_start(pts, 1, start, t0, span)
            assert one == _third_start_keyed(pts, 1, start, t0, span)
            assert _third_start(pts, 2, one, t0, span) == _third_start_keyed(pts, 2, one, t0, span)
            compared += 1
    assert compared > 1000


class _ReferenceAdd(GrowthWindow):
    """``add``, ``_drop_oldest`` and ``rates`` as they were before issue 32's session 9: the sums through ``_apply``
    (sign 1.0 or -1.0), ``_eta`` a function; with the points at or after a point's time leaving when it is not after the newest (issue 47)."""

    def add(self, t: float, rows: float, memory: float, added: float, removed: float) -> None:
        if self._t0 is None:
            self._t0 = t
        self.stepped_back += bool(self.points) and t < self.points[-1][0]
        while self.points and t <= self.points[-1][0]:  # not after the newest: the points at or after its time leave
            newest = self.points.pop()
            self._totals.pop()
            if not (_exact(newest[1]) and _exact(newest[2])):
                self._inexact -= 1
                if not self._inexact:
                    self._retotal()
            self._apply(newest, -1.0)
            if self.points:
                self._added -= newest[3]
                self._removed -= newest[4]
        if len(self.points) == self.points.maxlen:
            self._drop_oldest()
        point = (t, rows, memory, added, removed)
        if not (_exact(rows) and _exact(memory)):
            self._inexact += 1
        self.points.append(point)
        before = self._totals[-1] if self._totals else (0.0, 0.0, 0)
        self._totals.append((before[0] + rows, before[1] + memory, before[2] + (rows > 0)))
        self._apply(point, 1.0)
        if len(self.points) > 1:
            self._added += added
            self._removed += removed
        while self.points and t - self.points[0][0] > self.window:
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
                self._retotal()
        self._apply(old, -1.0)
        if self.points:
            self._added -= self.points[0][3]
            self._removed -= self.points[0][4]

    def rates(self, rows_budget: float = 0.0, bytes_budget: float = 0.0) -> tuple[float, float, float, float | None, float | None]:
        def eta(current: float, rate: float, budget: float) -> float | None:
            if budget <= 0 or rate <= 0:
                return None
            return max(0.0, (budget - current) / rate)

        n, st, stt, sr, str_, sb, stb, _ = self._sums
        denominator = n * stt - st * st
        if n < 2 or denominator <= 1e-12 * max(1.0, n * stt):
            rows_rate = bytes_rate = 0.0
        else:
            rows_rate = (n * str_ - st * sr) / denominator
            bytes_rate = (n * stb - st * sb) / denominator
        ratio = self._removed / self._added if self._added > 0 else 0.0
        rows = memory = 0.0
        if self.points:
            rows, memory = self.points[-1][1], self.points[-1][2]
        return rows_rate, bytes_rate, ratio, eta(rows, rows_rate, rows_budget), eta(memory, bytes_rate, bytes_budget)


def _same(a: object, b: object) -> bool:
    """Equal, NaN included (the odd series carry one): compared by their reprs, bit for bit as printed."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("window_seconds", [4.0, 60.0])
def test_inlined_add_and_rates_equal_the_reference_on_every_recorded_operator(window_seconds: float) -> None:
    """The inlined ``add`` and ``_drop_oldest`` keep the same sums, totals and counts, and ``rates`` the same floats, after every point of
    every recorded operator (and its odd variant), with and without budgets, and over 2,500 points (re-summed twice)."""
    many = [(t * 0.5, 1e9 + (t % 7) * 3.0 + t, 7.0 * t, 3.0, float(t % 2)) for t in range(2500)]
    compared = 0
    for series in [s for _, s in RECORDED] + [_odd(s) for _, s in RECORDED[:20]] + [_restarted(s) for _, s in RECORDED[:20]] + [many]:
        fast, reference = GrowthWindow(window_seconds, 3, max_points=50), _ReferenceAdd(window_seconds, 3, max_points=50)
        for point in series:
            fast.add(*point)
            reference.add(*point)
            state = (fast._sums, list(fast._totals), list(fast.points), fast._added, fast._removed, fast.stepped_back, fast._inexact)
            want = (reference._sums, list(reference._totals), list(reference.points))
            assert _same(state, want + (reference._added, reference._removed, reference.stepped_back, reference._inexact))
            for budgets in ((0.0, 0.0), (1e6, 1e9), (1.0, 1.0)):
                assert _same(fast.rates(*budgets), reference.rates(*budgets))
            compared += 1
    assert compared > 4000
