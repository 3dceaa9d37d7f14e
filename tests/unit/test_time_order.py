"""Times that go back cost the signal rules no more than times going forward (issue 47): counted, not timed.

A query restarted again and again whose runs repeat the same times (logs concatenated, a log replayed twice
into one run, a driver clock stepped back) once made the growth windows keep every point (up to their cap of
5,000) and read them all at every batch: 7x the cost of the same events with times going forward after 300
restarts. Every windowed rule now ends its window at a batch that is not after the window's newest (the points
at or after its time leave), so its windows stay in time order, within their seconds, no longer than after one
pass. Here recorded runs are fed again and again at the same times and the points the windows keep are counted
(``bench/time_order.py`` times it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from recorded_progress import recorded_runs

from spark_state_observer.metrics.tracker import QueryTracker
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.settings import Settings
from spark_state_observer.signals.engine import SignalEngine
from spark_state_observer.signals.growth_window import GrowthWindow

RECORDED = dict(recorded_runs())
Point = tuple[float, float, float, float, float]


def _series() -> list[tuple[str, list[Point]]]:
    """Per recorded run and operator: the points the growth rule adds, as ``test_growth_window_fast.py`` reads them."""
    out = []
    for name, events in RECORDED.items():
        series: dict[int, list[Point]] = {}
        for p in events:
            for op in p.operators:
                if op.rows_total is not None and p.timestamp is not None:
                    point = (p.timestamp, op.rows_total, op.memory_bytes or 0.0, op.rows_updated or 0.0, op.rows_removed or 0.0)
                    series.setdefault(op.index, []).append(point)
        out += [(f"{name}#{index}", s) for index, s in series.items() if len(s) >= 3]
    return out


@pytest.mark.parametrize("window_seconds", [15.0, 120.0])
def test_a_growth_window_fed_the_same_times_again_keeps_no_more_than_one_pass(window_seconds: float) -> None:
    copies = 20
    stepped = 0
    for name, series in _series():
        once = GrowthWindow(window_seconds, 3)
        most = 0
        for point in series:
            once.add(*point)
            most = max(most, len(once.points))
        window = GrowthWindow(window_seconds, 3)
        for _ in range(copies):
            for point in series:
                window.add(*point)
                assert len(window.points) <= most, name
            times = [p[0] for p in window.points]
            assert times == sorted(set(times)), name  # in time order, one point a time
            assert times[-1] - times[0] <= window_seconds, name
            assert list(window.points) == list(once.points), name  # as after one pass: the trend is the same
            assert not window._inexact, name  # read from the running totals, not point by point
        assert window.stepped_back == copies - 1, name
        stepped += window.stepped_back
    assert stepped > 1000


def _restarts(events: list[QueryProgress], restarts: int, back: bool) -> Iterator[QueryProgress]:
    """``events`` (one recorded run) as ``restarts`` runs of the query: each at the recorded times again (``back``) or
    after the one before; run ids new, batch ids going on."""
    timed = [(p, p.timestamp) for p in events if p.timestamp is not None]
    span = timed[-1][1] - timed[0][1] + 1.0
    for c in range(restarts):
        shift = 0.0 if back else c * span
        for p, ts in timed:
            yield dataclasses.replace(p, run_id=f"run-{c}", batch_id=p.batch_id + c * len(timed), timestamp=ts + shift)


def _kept(engine: SignalEngine) -> dict[str, int]:
    """The most points each windowed rule keeps for one query or operator now."""
    growth = [w for state in engine.growth._operators.values() for w in (state.window, state.size) if w is not None]
    trackers = [src.tracker for sources in engine.kafka._queries.values() for src in sources.values()]
    return {
        "growth": max((len(w.points) for w in growth), default=0),
        "pace": max((len(q.batches) for q in engine.pace._queries.values()), default=0),
        "late_rows": max((len(q.batches) for q in engine.late_rows._queries.values()), default=0),
        "kafka_lag": max((len(w) for t in trackers for w in t._window.values()), default=0),
        "kafka_offsets": max((len(h.points) for t in trackers for h in t.histories.values()), default=0),
        "restarts": max((len(q.restarts) for q in engine.lifecycle.queries.values()), default=0),
    }


def _replayed(events: list[QueryProgress], restarts: int, back: bool) -> tuple[dict[str, int], int]:
    """The most points each rule kept after any event of the restarts, and the problems counted."""
    tracker = QueryTracker()
    engine = SignalEngine(Settings(http_enabled=False), tracker.get, live=False)
    most: dict[str, int] = {}
    problems = 0
    for p in _restarts(events, restarts, back):
        facts = engine.on_event(p, tracker.apply(p), received_at=p.timestamp)
        tracker.apply_updates(facts.updates)
        problems += facts.problems
        for rule, kept in _kept(engine).items():
            most[rule] = max(most.get(rule, 0), kept)
    return most, problems


@pytest.mark.parametrize("run", ["incidents/clean_busy_90s/run1", "kafka_restart/run2", "incidents/kafka_lag_growing/run1"])
def test_restarts_repeating_the_same_times_keep_every_window_as_short_as_times_going_forward(run: str) -> None:
    restarts = 100
    events = RECORDED[f"{run}/progress.jsonl"]
    forward, no_problems = _replayed(events, restarts, back=False)
    back, problems = _replayed(events, restarts, back=True)
    assert no_problems == 0
    assert problems == restarts - 1  # each run after the first went back in time once
    assert forward["growth"] > 0
    for rule, kept in back.items():
        assert kept <= forward[rule], (rule, back, forward)
