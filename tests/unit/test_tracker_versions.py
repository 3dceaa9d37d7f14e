"""``QueryTracker.apply_updates`` draws one version per record and call: the exporters re-render a record
whose version differs, and only its signal gauges when its state version did not move, so a change must move
them as it did when each changed series drew one, and a call that changes nothing must move neither."""

from __future__ import annotations

import json
import os

from conftest import FIXTURES
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryTracker
from spark_state_observer.metrics.updates import Update
from spark_state_observer.model.parse import parse_progress


def _tracker() -> tuple[QueryTracker, str, str]:
    """A tracker that has seen two recorded queries' first batch."""
    tracker = QueryTracker()
    ids = []
    for run in ("rocksdb_restart", "kafka_restart"):
        with open(os.path.join(FIXTURES, run, "run1", "progress.jsonl")) as f:
            ids.append(tracker.apply(parse_progress(json.loads(f.readline()))).query_id)
    return tracker, ids[0], ids[1]


def _versions(tracker: QueryTracker, query_id: str) -> tuple[int, int]:
    record = tracker.get(query_id)
    assert record is not None
    return record.version, record.state_version


def test_a_gauge_change_moves_the_version_a_counter_both_and_a_repeat_neither() -> None:
    tracker, a, b = _tracker()
    gauge, counter = catalog.QUERY_STALLED, catalog.QUERY_RESTARTS
    assert gauge.kind != counter.kind == catalog.COUNTER
    start_a, start_b = _versions(tracker, a), _versions(tracker, b)
    tracker.apply_updates([Update(gauge, (), 1.0, a), Update(gauge, (), 2.0, a)])
    after_gauge = _versions(tracker, a)
    assert after_gauge[0] > max(start_a + start_b) and after_gauge[1] == start_a[1] and _versions(tracker, b) == start_b
    tracker.apply_updates([Update(gauge, (), 2.0, a), Update(counter, (), 0.0, b)])  # same value; a zero creates b's counter
    assert _versions(tracker, a) == after_gauge
    after_counter = _versions(tracker, b)
    assert after_counter[0] == after_counter[1] > after_gauge[0]
    tracker.apply_updates([Update(counter, (), 0.0, b), Update(gauge, (), 2, a)])  # a zero adds nothing; an int is a change
    assert _versions(tracker, b) == after_counter and _versions(tracker, a)[0] > after_counter[0]
    tracker.apply_updates([Update(gauge, (), None, a), Update(counter, (), 1.0, b), Update(gauge, (), 3.0, a)])  # interleaved
    va, vb = _versions(tracker, a), _versions(tracker, b)
    assert va[0] != vb[0] and vb[0] == vb[1] and va[1] == after_gauge[1]
    record = tracker.get(a)
    assert record is not None and record.signal_gauges[(gauge, ())] == 3.0
