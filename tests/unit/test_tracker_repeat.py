"""``QueryTracker.apply_updates`` applies a list that sets the same gauges as an earlier list at once
(``_repeat``). The general loop is the reference: an iterator of updates always takes it. Both must leave the
same gauges, in the same order, and draw the same versions, on recorded runs and on the edge cases of a list."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES, eventlog_dir
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.batch_plan import operator_labels
from spark_state_observer.metrics.tracker import QueryTracker
from spark_state_observer.metrics.updates import Update
from spark_state_observer.offline.replay import replay


def _calls(run: str) -> list[tuple[str, object]]:
    """What a replay of the recorded run hands the tracker, in order."""
    calls: list[tuple[str, object]] = []
    apply, apply_updates = QueryTracker.apply, QueryTracker.apply_updates

    def spy_apply(self, event):  # type: ignore[no-untyped-def]
        calls.append(("apply", event))
        return apply(self, event)

    def spy_updates(self, updates):  # type: ignore[no-untyped-def]
        updates = list(updates)
        calls.append(("updates", updates))
        return apply_updates(self, updates)

    QueryTracker.apply, QueryTracker.apply_updates = spy_apply, spy_updates  # type: ignore[method-assign]
    try:
        folder = eventlog_dir(os.path.join(FIXTURES, run))
        replay([os.path.join(folder, f) for f in sorted(os.listdir(folder))])
    finally:
        QueryTracker.apply, QueryTracker.apply_updates = apply, apply_updates  # type: ignore[method-assign]
    return calls


def _state(tracker: QueryTracker) -> list[tuple[str, int, int, list[object], list[object]]]:
    return [(r.query_id, r.version, r.state_version, list(r.signal_gauges.items()), list(r.counters.items())) for r in tracker.snapshot()]


@pytest.mark.parametrize("run", ["rocksdb_restart/run1", "incidents/clean_busy_90s/run1"])
def test_lists_applied_at_once_leave_what_the_loop_leaves(run: str) -> None:
    calls = _calls(run)
    fast, loop = QueryTracker(), QueryTracker()
    for kind, arg in calls:
        if kind == "apply":
            fast.apply(arg)  # type: ignore[arg-type]
            loop.apply(arg)  # type: ignore[arg-type]
        else:
            updates = list(arg)  # type: ignore[call-overload]
            fast.apply_updates(updates)
            loop.apply_updates(iter(updates))
            assert _state(fast) == _state(loop)
    memo = [r._updates for r in fast._queries.values()]
    assert any(memo), "no list of updates was remembered: the recorded runs no longer exercise the fast path"


def _tracker() -> tuple[QueryTracker, QueryTracker, str]:
    """Two trackers that have seen the same recorded first batch."""
    from conftest import progress_lines
    from spark_state_observer.model.parse import parse_progress

    first = progress_lines(os.path.join(FIXTURES, "rocksdb_restart", "run1"))[0]
    a, b = QueryTracker(), QueryTracker()
    query_id = a.apply(parse_progress(first)).query_id
    b.apply(parse_progress(first))
    return a, b, query_id


def test_a_series_set_twice_in_one_list_ends_as_the_loop_leaves_it() -> None:
    fast, loop, q = _tracker()
    labels = operator_labels(0, "stateStoreSave")
    lists = [
        [Update(catalog.ROWS_GROWTH_RATE, labels, 1.0, q), Update(catalog.EVICTION_RATIO, labels, 0.5, q)],
        [Update(catalog.ROWS_GROWTH_RATE, labels, None, q), Update(catalog.ROWS_GROWTH_RATE, labels, 2.0, q)],
        [Update(catalog.ROWS_GROWTH_RATE, labels, None, q), Update(catalog.ROWS_GROWTH_RATE, labels, 3.0, q)],
        [Update(catalog.ROWS_GROWTH_RATE, labels, 1.0, q), Update(catalog.EVICTION_RATIO, labels, None, q)],
        [Update(catalog.ROWS_GROWTH_RATE, labels, 1, q), Update(catalog.EVICTION_RATIO, labels, None, q)],
        [Update(catalog.ROWS_GROWTH_RATE, labels, 1, q), Update(catalog.EVICTION_RATIO, labels, None, q)],
    ]
    for updates in lists * 2:
        fast.apply_updates(list(updates))
        loop.apply_updates(iter(updates))
        assert _state(fast) == _state(loop)
