"""The restore listener object (spark_state_observer.signals.restore_listener) on recorded restarts.

The restore events are those replay derives from real Spark event logs (tests/fixtures/rocksdb_restart:
Spark 4.3, two runs on one checkpoint; tests/fixtures/restore_progress/large: 16 partitions); they go
through the observer's own signal bus, whose subscribers the listener's methods are.
"""

from __future__ import annotations

import os

from conftest import FIXTURES
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings
from spark_state_observer.signals.bus import SignalBus
from spark_state_observer.signals.restore_listener import RestoreListener, RestoreUpdate, subscribe_restore_listener

RESTART = [os.path.join(FIXTURES, "rocksdb_restart", run, "eventlog") for run in ("run1", "run2")]
LARGE = [os.path.join(FIXTURES, "restore_progress", "large", "eventlog")]


class Recording(RestoreListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, RestoreUpdate]] = []

    def on_restore_start(self, restore: RestoreUpdate) -> None:
        self.calls.append(("start", restore))

    def on_restore_end(self, restore: RestoreUpdate) -> None:
        self.calls.append(("end", restore))  # progress left to the default: a listener overrides only what it needs


def restore_events(paths: list[str]) -> list[SignalEvent]:
    signals: list[SignalEvent] = []
    replay(paths, Settings(), on_signal=signals.append)
    return [s for s in signals if s.kind in kinds.RESTORE_PROGRESS_KINDS]


def delivered(events: list[SignalEvent], listener: RestoreListener) -> SignalBus:
    bus = SignalBus()
    subscribe_restore_listener(bus.subscribe, listener)
    bus.publish(events)
    return bus


def test_each_operator_is_started_then_ended_with_the_events_figures() -> None:
    events = restore_events(RESTART)
    listener = Recording()
    delivered(events, listener)
    expected = [("start" if e.kind == kinds.RESTORE_STARTED else "end", e) for e in events if e.kind != kinds.RESTORE_PROGRESS]
    assert [(m, r.event) for m, r in listener.calls] == expected
    operators = {r.operator for _, r in listener.calls}
    assert len(operators) == 2  # dedupe and the aggregation's save
    for method, r in listener.calls:
        assert r.query_id == r.event.query_id and r.batch_id == 6 and r.reason == "restart"
        if method == "end":
            assert r.complete is True and r.duration_seconds is not None and r.duration_seconds > 0
            assert r.partitions_done == r.partitions_total
            assert r.eta_seconds is None
        else:
            assert r.duration_seconds is None and r.complete is None


def test_progress_reaches_a_listener_that_wants_it_with_partitions_rising() -> None:
    events = restore_events(LARGE)
    seen: dict[str, list[int]] = {}

    class Progress(RestoreListener):
        def on_restore_progress(self, restore: RestoreUpdate) -> None:
            seen.setdefault(restore.operator, []).append(restore.partitions_done or 0)

    delivered(events, Progress())
    assert seen and len(seen) == sum(1 for e in events if e.kind == kinds.RESTORE_STARTED)
    for done in seen.values():
        assert done == sorted(done) and done[0] > 0 and done[-1] <= 16


def test_a_listener_that_raises_is_counted_not_propagated() -> None:
    failures: list[int] = []

    class Broken(RestoreListener):
        def on_restore_start(self, restore: RestoreUpdate) -> None:
            raise RuntimeError("the user's bug")

    bus = SignalBus(on_callback_failure=lambda: failures.append(1))
    subscribe_restore_listener(bus.subscribe, Broken())
    events = restore_events(RESTART)
    bus.publish(events)
    assert len(failures) == sum(1 for e in events if e.kind == kinds.RESTORE_STARTED) == 2
    assert list(bus.recent) == events


def test_an_executor_lost_mid_restore_reaches_the_listeners_end() -> None:
    """The recorded kill mid-restore (local-cluster, executor 1 SIGKILLed while the dedupe loaded): the end
    names the lost executor and the partitions loaded again, as the event's attributes do."""
    events = restore_events([os.path.join(FIXTURES, "restore_progress", "kill_mid_restore", "eventlog")])
    listener = Recording()
    delivered(events, listener)
    ends = {r.operator: r for method, r in listener.calls if method == "end"}
    assert set(ends) == {"dedupe", "stateStoreSave"}
    for r in ends.values():
        assert r.executors_lost == tuple(r.event.attributes["executors_lost"]) == ("1",)
        assert r.partitions_retried == r.event.attributes["partitions_retried"]
        assert r.complete is True and r.partitions_done == r.partitions_total == 16
    assert ends["dedupe"].partitions_retried == 2
