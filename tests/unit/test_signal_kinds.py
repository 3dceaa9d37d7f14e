"""Every signal kind on short synthetic event sequences: recorded events, mutated, through the real rules.

Each scenario feeds parsed model events to the signal engine and the tracker exactly as the worker
does (apply the event, derive facts, apply their values), with a clock the test moves. A scenario per
kind is required: ``test_every_kind_has_a_scenario`` fails when a new kind arrives without one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from test_kafka_signals import KAFKA_SCENARIOS
from test_restore_progress import RESTORE_PROGRESS_SCENARIOS
from test_state_skew import skew_scenario

from conftest import FIXTURES, fixture_runs, progress_lines
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.tracker import QueryTracker, operator_labels
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.events import QueryProgress
from spark_state_observer.model.parse import parse_event
from spark_state_observer.model.signal_kinds import SIGNAL_KINDS, SignalEvent
from spark_state_observer.placement.feed import PlacementFeed
from spark_state_observer.settings import Settings
from spark_state_observer.signals.engine import SignalEngine
from spark_state_observer.signals.restore import NOT_VISIBLE

RECORDED = progress_lines(fixture_runs("rocksdb_restart")[0])[-1]  # a real batch: dedupe + stateStoreSave on RocksDB
QUERY_ID = RECORDED["id"]
T0 = 1_800_000_000.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def batch(batch_id: int, t: float, run: str = "run-1", **fields: Any) -> dict[str, Any]:
    """The recorded progress as batch ``batch_id`` of run ``run`` at time ``t``, top-level ``fields`` replaced."""
    p = copy.deepcopy(RECORDED)
    p.update(runId=run, batchId=batch_id, timestamp=iso(t), **fields)
    return p


def with_operator(p: dict[str, Any], name: str, **fields: Any) -> dict[str, Any]:
    """``p`` with the named operator's fields (``customMetrics`` entries merged) replaced."""
    op = next(o for o in p["stateOperators"] if o["operatorName"] == name)
    custom = fields.pop("customMetrics", {})
    op.update(fields)
    op["customMetrics"].update(custom)
    return p


def lifecycle(run: str, t: float, **fields: Any) -> dict[str, Any]:
    return {"id": QUERY_ID, "runId": run, "name": RECORDED["name"], "timestamp": iso(t), **fields}


class Pipeline:
    """The worker's path from a parsed event to signals and metric state, minus the queue and sinks."""

    def __init__(self, live: bool = False, **settings: Any) -> None:
        self.now = T0
        self.tracker = QueryTracker()
        self.engine = SignalEngine(Settings(http_enabled=False, **settings), self.tracker.get, clock=lambda: self.now, live=live)
        self.signals: list[SignalEvent] = []
        self.placement: PlacementFeed | None = None  # as Observer.set_placement wires it

    def feed(self, kind: str, payload: dict[str, Any], at: float | None = None, executors: set[str] | None = None) -> list[str]:
        """Process one event received at ``at`` (default: its own timestamp); the kinds of the signals it caused."""
        event = parse_event(kind, json.dumps(payload))
        self.now = at if at is not None else (getattr(event, "timestamp", None) or self.now)
        record = self.tracker.apply(event)
        facts = self.engine.on_event(event, record, received_at=self.now, executors=executors)
        if self.placement is not None and isinstance(event, QueryProgress):
            self.placement.on_progress(event, facts, lambda q: self.tracker.get(q).label, self.now)  # type: ignore[union-attr]
        self.tracker.apply_updates(facts.updates)
        self.signals += facts.signals
        return [s.kind for s in facts.signals]

    def tick(self, at: float) -> list[str]:
        self.now = at
        facts = self.engine.tick()
        self.tracker.apply_updates(facts.updates)
        self.signals += facts.signals
        return [s.kind for s in facts.signals]

    def value(self, spec: MetricSpec, labels: tuple[tuple[str, str], ...] = ()) -> float | None:
        record = self.tracker.get(QUERY_ID)
        assert record is not None
        key = (spec, labels)
        return record.counters.get(key) if spec.kind == catalog.COUNTER else record.signal_gauges.get(key)

    def app_value(self, spec: MetricSpec, labels: tuple[tuple[str, str], ...] = ()) -> float | None:
        return next((v for s, lab, v in self.tracker.app_values() if s is spec and lab == labels), None)

    def last(self, kind: str) -> SignalEvent:
        return [s for s in self.signals if s.kind == kind][-1]


DEDUPE = operator_labels(1, "dedupe")
SAVE = operator_labels(0, "stateStoreSave")


# --- lifecycle ---------------------------------------------------------------------------------------
def started() -> Pipeline:
    p = Pipeline()
    assert p.feed("started", lifecycle("run-1", T0)) == [kinds.QUERY_STARTED]
    assert p.value(catalog.QUERY_RESTARTS) == 0.0  # exported from 0
    return p


def restarted() -> Pipeline:
    p = Pipeline()
    p.feed("started", lifecycle("run-1", T0))
    p.feed("progress", batch(0, T0 + 10, batchDuration=2000))
    assert p.feed("started", lifecycle("run-2", T0 + 42)) == [kinds.QUERY_STARTED, kinds.QUERY_RESTARTED]
    attrs = p.last(kinds.QUERY_RESTARTED).attributes
    # its end was not seen: the downtime is measured from the end of the last batch
    assert attrs["since_last_progress_seconds"] == 30.0 and attrs["gap_since_previous_run_seconds"] is None
    assert attrs["downtime_seconds"] == 30.0
    assert p.value(catalog.QUERY_RESTARTS) == 1.0 and p.value(catalog.QUERY_LAST_DOWNTIME) == 30.0
    assert p.value(catalog.QUERY_CRASH_LOOP) == 0.0
    # run 2 fails 20 s after its start; run 3 starts 5 s after that: down 5 s, 55 s after the last progress
    p.feed("terminated", {"id": QUERY_ID, "runId": "run-2", "exception": "RuntimeError: boom"}, at=T0 + 62)
    p.feed("started", lifecycle("run-3", T0 + 67))
    attrs = p.last(kinds.QUERY_RESTARTED).attributes
    assert (attrs["gap_since_previous_run_seconds"], attrs["since_last_progress_seconds"], attrs["downtime_seconds"]) == (5.0, 55.0, 5.0)
    assert p.value(catalog.QUERY_LAST_DOWNTIME) == 5.0
    return p


def restarted_from_a_checkpoint() -> Pipeline:
    """A first run seen at batch 5: the query ran before, from this checkpoint, in another process."""
    p = Pipeline()
    p.feed("started", lifecycle("run-1", T0))
    assert kinds.QUERY_RESTARTED in p.feed("progress", batch(5, T0))
    assert p.last(kinds.QUERY_RESTARTED).attributes["downtime_seconds"] is None  # no last sign of life known
    return p


def crash_loop() -> Pipeline:
    p = Pipeline(crash_loop_restarts=2, crash_loop_window_seconds=100)
    p.feed("started", lifecycle("run-1", T0))
    assert kinds.CRASH_LOOP not in p.feed("started", lifecycle("run-2", T0 + 10))
    assert kinds.CRASH_LOOP in p.feed("started", lifecycle("run-3", T0 + 20))
    assert p.last(kinds.CRASH_LOOP).attributes["restarts"] == 2 and p.value(catalog.QUERY_CRASH_LOOP) == 1.0
    assert kinds.CRASH_LOOP not in p.feed("started", lifecycle("run-4", T0 + 30))  # said once while it lasts
    p.feed("started", lifecycle("run-5", T0 + 500))  # the earlier restarts left the window
    assert p.value(catalog.QUERY_CRASH_LOOP) == 0.0
    return p


def idle() -> Pipeline:
    p = Pipeline()
    p.feed("progress", batch(0, T0))
    assert p.feed("idle", lifecycle("run-1", T0 + 5)) == [kinds.QUERY_IDLE]
    return p


def terminated() -> Pipeline:
    p = Pipeline()
    p.feed("progress", batch(0, T0))
    assert p.feed(
        "terminated", {"id": QUERY_ID, "runId": "run-1", "exception": "java.lang.OutOfMemoryError: Java heap space"}, at=T0 + 3
    ) == [kinds.QUERY_TERMINATED]
    attrs = p.last(kinds.QUERY_TERMINATED).attributes
    assert attrs["outcome"] == "exception" and attrs["exception_class"] == "out_of_memory"
    assert p.value(catalog.QUERY_TERMINATIONS_BY_CLASS, (("exception_class", "out_of_memory"),)) == 1.0
    return p


def stalled() -> Pipeline:
    p = Pipeline(live=True, stall_factor=6, stall_min_seconds=30)
    for i in range(4):
        p.feed("progress", batch(i, T0 + 10 * i))  # every 10 s: a stall after 60 s without progress
    assert p.tick(T0 + 30 + 59) == [] and p.value(catalog.QUERY_STALLED) == 0.0
    assert p.value(catalog.QUERY_SECONDS_SINCE_PROGRESS) == 59
    assert p.tick(T0 + 30 + 61) == [kinds.STALLED]
    assert p.last(kinds.STALLED).attributes == {
        "seconds_without_progress": 61.0,
        "limit_seconds": 60.0,
        "longest_recent_batch_seconds": round(RECORDED["batchDuration"] / 1000, 1),
        "next_batch_growth": round(max(1.0, RECORDED["inputRowsPerSecond"] / RECORDED["processedRowsPerSecond"]), 2),
    }
    assert p.value(catalog.QUERY_STALLED) == 1.0
    assert p.tick(T0 + 30 + 70) == []  # said once
    return p


def stall_recovered() -> Pipeline:
    p = stalled()
    assert kinds.STALL_RECOVERED in p.feed("progress", batch(4, T0 + 120))
    assert p.value(catalog.QUERY_STALLED) == 0.0
    return p


def query_lost() -> Pipeline:
    """The watcher's verdict: a run whose log (``silence``, seconds since it grew) says nothing past the limit; the
    recordings of killed drivers and a live idle query are in tests/unit/test_driver_lost.py."""
    p = Pipeline(live=True)
    silence = [0.0]
    p.engine.lifecycle.silence = lambda: silence[0]
    for i in range(4):
        p.feed("progress", batch(i, T0 + 10 * i))  # every 10 s: 6 intervals are 60 s, below the 2-minute floor
    assert p.engine.lifecycle.lost_limit(p.engine.lifecycle.state(QUERY_ID)) == 120.0
    silence[0] = 110.0
    assert kinds.QUERY_LOST not in p.tick(T0 + 150)  # a stall perhaps, not lost yet
    silence[0] = 121.0
    assert p.tick(T0 + 161) == [kinds.QUERY_LOST]
    assert p.value(catalog.QUERY_LOST) == 1.0 and p.value(catalog.QUERY_STALLED) == 0.0  # a dead driver is no stall
    assert p.tracker.get(QUERY_ID).lifecycle == "lost"  # type: ignore[union-attr]
    assert p.last(kinds.QUERY_LOST).attributes["limit_seconds"] == 120.0
    assert p.tick(T0 + 170) == []  # said once
    silence[0] = 1.0  # the log grew again: the driver lives, without progress: a stall
    assert p.tick(T0 + 171) == [kinds.STALLED] and p.value(catalog.QUERY_LOST) == 0.0
    silence[0] = 121.0
    return p


def not_lost_between_the_idle_events_of_a_long_trigger() -> None:
    """A live query on a 5-minute trigger with no input logs an idle event each trigger: its log is silent 5 minutes
    at a time, and the limit follows its cadence (6 of them), not the 2-minute floor."""
    p = Pipeline(live=True)
    silence = [0.0]
    p.engine.lifecycle.silence = lambda: silence[0]
    p.feed("progress", batch(0, T0))
    for i in range(1, 4):
        p.feed("idle", lifecycle("run-1", T0 + 300 * i))
    assert p.engine.lifecycle.lost_limit(p.engine.lifecycle.state(QUERY_ID)) == 1800.0
    silence[0] = 299.0
    assert kinds.QUERY_LOST not in p.tick(T0 + 1199)
    silence[0] = 1801.0
    assert kinds.QUERY_LOST in p.tick(T0 + 2701)


def not_stalled_when_idle_or_replayed() -> None:
    p = Pipeline(live=True, stall_min_seconds=1, stall_factor=1)
    p.feed("progress", batch(0, T0))
    p.feed("idle", lifecycle("run-1", T0 + 1))
    assert p.tick(T0 + 1000) == []  # an idle query waits for data; it is not stuck
    replayed = Pipeline(live=False, stall_min_seconds=1, stall_factor=1)
    replayed.feed("progress", batch(0, T0))
    assert replayed.tick(T0 + 1000) == []  # replay has no clock to judge by


# --- restore and reload ------------------------------------------------------------------------------
def restore() -> Pipeline:
    p = Pipeline(growth_min_batches=100)  # the flat recorded state's bounded verdict is judged with growth, not here
    p.feed("started", lifecycle("run-1", T0))
    for i in range(5):  # batch 0 (warm-up) stays out of the baseline: 4 steady batches of 1 s
        p.feed(
            "progress", batch(i, T0 + 10 * i, numInputRows=100, durationMs={**RECORDED["durationMs"], "addBatch": 9000 if i == 0 else 1000})
        )
    assert p.value(catalog.STATE_RESTORES, DEDUPE) == 0.0  # exported from 0
    p.feed("started", lifecycle("run-2", T0 + 100))
    first = batch(5, T0 + 110, run="run-2", numInputRows=100, durationMs={**RECORDED["durationMs"], "addBatch": 4000})
    with_operator(first, "dedupe", customMetrics={"rocksdbLoadLatencyMs": 700, "rocksdbNumReplayChangelogFiles": 4})
    with_operator(first, "stateStoreSave", customMetrics={"rocksdbLoadLatencyMs": 90})
    assert p.feed("progress", first) == [kinds.RESTORE, kinds.RESTORE]
    by_op = {s.attributes["operator"]: s.attributes for s in p.signals if s.kind == kinds.RESTORE}
    # dedupe loads once per task: Spark's load metric; the aggregation loads twice (its metric is the cheap
    # second load): what remains of the 3 s excess once the dedupe's 0.7 s are taken out
    dedupe, save = by_op["dedupe"], by_op["stateStoreSave"]
    assert (dedupe["method"], dedupe["confidence"], dedupe["duration_seconds"], dedupe["changelog_files"]) == (
        "load_metrics",
        "measured",
        0.7,
        4,
    )
    assert (save["method"], save["confidence"], save["duration_seconds"]) == ("residual_estimate", "estimated", 2.3)
    assert (save["excess_seconds"], save["explained_by_other_operators_seconds"], save["backlog_seconds"]) == (3.0, 0.7, 0.0)
    assert p.value(catalog.STATE_RESTORES, DEDUPE) == 1.0 and p.value(catalog.STATE_RESTORES, SAVE) == 1.0
    assert p.value(catalog.LAST_RESTORE_DURATION, DEDUPE + (("method", "load_metrics"), ("confidence", "measured"))) == 0.7
    assert p.value(catalog.LAST_RESTORE_CHANGELOG_FILES, DEDUPE) == 4
    assert kinds.RESTORE not in p.feed("progress", batch(6, T0 + 120, run="run-2"))  # only the first batch restores
    return p


def restore_backlog_and_bounds() -> None:
    """More input rows than usual are costed at the previous run's time per row; restores never exceed the batch."""
    p = Pipeline()
    p.feed("started", lifecycle("run-1", T0))
    for i, (rows, ms) in enumerate([(0, 9000), (100, 1000), (200, 1100), (100, 1000), (300, 1200), (100, 1000)]):
        p.feed("progress", batch(i, T0 + 10 * i, numInputRows=rows, durationMs={**RECORDED["durationMs"], "addBatch": ms}))
    p.feed("started", lifecycle("run-2", T0 + 100))
    no_metrics = batch(6, T0 + 110, run="run-2", numInputRows=10_100, durationMs={**RECORDED["durationMs"], "addBatch": 3000})
    for op in no_metrics["stateOperators"]:  # Spark 3.5/4.0: no load metrics at all
        op["customMetrics"] = {k: v for k, v in op["customMetrics"].items() if not k.startswith("rocksdb")}
    p.feed("progress", no_metrics)
    restores = [s.attributes for s in p.signals if s.kind == kinds.RESTORE]
    assert len(restores) == 2
    # 10,000 rows above the usual 100 at 1 ms per row explain more than the 2 s excess: nothing left to see, and
    # unsure; Spark measured nothing, so no duration (not 0 s), and why
    assert all(r["backlog_seconds"] == 10.0 and r["duration_seconds"] is None and r["confidence"] == "low" for r in restores)
    assert all(r["duration_unknown"] == NOT_VISIBLE for r in restores)
    p.feed("started", lifecycle("run-3", T0 + 200))
    huge = batch(7, T0 + 210, run="run-3", numInputRows=100, durationMs={**RECORDED["durationMs"], "addBatch": 2000})
    with_operator(huge, "dedupe", customMetrics={"rocksdbLoadLatencyMs": 8000})  # summed over stores loading in parallel
    p.feed("progress", huge)
    latest = [s.attributes for s in p.signals if s.kind == kinds.RESTORE][-2:]
    # the dedupe's 8 s, capped at the 2 s batch, explain all of its 1 s excess: the aggregation's restore is not seen
    assert next(r for r in latest if r["operator"] == "stateStoreSave")["duration_seconds"] is None
    dedupe = next(r for r in latest if r["operator"] == "dedupe")
    assert dedupe["duration_seconds"] == 2.0 and dedupe["capped_at_batch"] is True


def store_reload() -> Pipeline:
    p = Pipeline()
    p.feed("progress", batch(0, T0, run="run-1"))
    p.feed("progress", batch(1, T0 + 10, run="run-1"))
    assert p.value(catalog.STATE_STORE_RELOADS, DEDUPE) == 0.0
    moved = with_operator(batch(2, T0 + 20), "dedupe", customMetrics={"rocksdbNumLoadedFromDfs": 1, "rocksdbNumReplayChangelogFiles": 2})
    assert p.feed("progress", moved) == [kinds.STORE_RELOAD]
    assert p.last(kinds.STORE_RELOAD).attributes["evidence"] == "loaded_from_checkpoint,changelog_replay"
    assert p.value(catalog.STATE_STORE_RELOADS, DEDUPE) == 1.0 and p.value(catalog.STATE_STORE_RELOADS, SAVE) == 0.0
    return p


def reload_by_load_latency_and_snapshot_reset() -> None:
    p = Pipeline(restore_load_threshold_seconds=0.5)
    quiet = {
        "rocksdbLoadLatencyMs": 50,
        "rocksdbNumLoadedFromDfs": 0,
        "rocksdbNumReplayChangelogFiles": 0,
        "SnapshotLastUploaded.partition_0_default": 7,
        "SnapshotLastUploaded.partition_1_default": 7,
    }
    for i in range(4):
        p.feed("progress", with_operator(batch(i, T0 + 10 * i), "dedupe", customMetrics=quiet))
    slow = with_operator(
        batch(4, T0 + 40), "dedupe", customMetrics={**quiet, "rocksdbLoadLatencyMs": 900, "SnapshotLastUploaded.partition_1_default": -1}
    )
    assert p.feed("progress", slow) == [kinds.STORE_RELOAD]
    assert p.last(kinds.STORE_RELOAD).attributes["evidence"] == "load_latency,snapshot_reset"


def load_latency_anomaly() -> Pipeline:
    """A slow load with nothing else to say the store came from the checkpoint is no reload."""
    p = Pipeline(restore_load_threshold_seconds=0.5)
    quiet = {"rocksdbLoadLatencyMs": 50, "rocksdbNumLoadedFromDfs": 0, "rocksdbNumReplayChangelogFiles": 0}
    for i in range(4):
        p.feed("progress", with_operator(batch(i, T0 + 10 * i), "dedupe", customMetrics=quiet))
    slow = with_operator(batch(4, T0 + 40), "dedupe", customMetrics={**quiet, "rocksdbLoadLatencyMs": 900})
    assert p.feed("progress", slow) == [kinds.LOAD_LATENCY_ANOMALY]
    attrs = p.last(kinds.LOAD_LATENCY_ANOMALY).attributes
    assert (attrs["operator"], attrs["load_seconds"], attrs["usual_load_seconds"]) == ("dedupe", 0.9, 0.05)
    assert p.value(catalog.LOAD_LATENCY_ANOMALIES, DEDUPE) == 1.0 and p.value(catalog.STATE_STORE_RELOADS, DEDUPE) == 0.0
    return p


def aggregation_reload_after_executor_loss() -> None:
    """The aggregation's own metrics cannot show its reload: an executor removed + the dedupe's reload can."""
    p = Pipeline()
    p.feed("progress", batch(0, T0), executors={"1", "2"})
    p.feed("progress", batch(1, T0 + 10), executors={"1", "2"})
    moved = with_operator(batch(2, T0 + 20), "dedupe", customMetrics={"rocksdbNumLoadedFromDfs": 1, "rocksdbNumReplayChangelogFiles": 2})
    assert p.feed("progress", moved, executors={"2", "3"}) == [
        kinds.EXECUTOR_ADDED,
        kinds.EXECUTOR_REMOVED,
        kinds.STORE_RELOAD,
        kinds.STORE_RELOAD,
    ]
    reloads = {s.attributes["operator"]: s.attributes["evidence"] for s in p.signals if s.kind == kinds.STORE_RELOAD}
    assert reloads == {"dedupe": "loaded_from_checkpoint,changelog_replay", "stateStoreSave": "executor_removed,sibling_reload"}
    # no executor change: a sibling's reload alone (a task moved) says nothing about the aggregation's stores
    assert p.feed(
        "progress", with_operator(batch(3, T0 + 30), "dedupe", customMetrics={"rocksdbNumLoadedFromDfs": 1}), executors={"2", "3"}
    ) == [kinds.STORE_RELOAD]


# --- pace ------------------------------------------------------------------------------------------
def falling_behind() -> Pipeline:
    p = Pipeline(falling_behind_window_seconds=30, falling_behind_for_seconds=10)
    behind = {"numInputRows": 500, "inputRowsPerSecond": 100.0, "processedRowsPerSecond": 50.0}
    for i in range(4):  # the window fills at 30 s; behind since then, for 10 s
        assert p.feed("progress", batch(i, T0 + 10 * i, **behind)) == []
    assert p.value(catalog.FALLING_BEHIND) == 0.0
    assert p.feed("progress", batch(4, T0 + 40, **behind)) == [kinds.FALLING_BEHIND]
    assert p.last(kinds.FALLING_BEHIND).attributes == {
        "input_rows_per_second": 100.0,
        "processed_rows_per_second": 50.0,
        "window_seconds": 30,
        "behind_for_seconds": 10.0,
    }
    assert p.value(catalog.FALLING_BEHIND) == 1.0
    return p


def caught_up() -> Pipeline:
    p = falling_behind()
    fast = {"numInputRows": 500, "inputRowsPerSecond": 50.0, "processedRowsPerSecond": 200.0}
    seen = [p.feed("progress", batch(5 + i, T0 + 50 + 10 * i, **fast)) for i in range(4)]
    assert seen.count([kinds.CAUGHT_UP]) == 1 and seen[-1] == []
    assert p.value(catalog.FALLING_BEHIND) == 0.0
    return p


def falling_behind_with_fast_batches() -> None:
    """Batches every 100 ms fill the window with more batches than are kept: still judged."""
    p = Pipeline(falling_behind_window_seconds=300, falling_behind_for_seconds=10)
    behind = {"numInputRows": 50, "inputRowsPerSecond": 500.0, "processedRowsPerSecond": 250.0}
    for i in range(3200):
        p.feed("progress", batch(i, T0 + 0.1 * i, **behind))
    assert p.value(catalog.FALLING_BEHIND) == 1.0


def not_behind_on_a_small_difference() -> None:
    """Input 1% above processing for ten minutes is the noise of a query that keeps up, not falling behind."""
    p = Pipeline(falling_behind_window_seconds=60, falling_behind_for_seconds=30)
    for i in range(60):
        p.feed("progress", batch(i, T0 + 10 * i, numInputRows=1000, inputRowsPerSecond=101.0, processedRowsPerSecond=100.0))
    assert p.value(catalog.FALLING_BEHIND) == 0.0 and not [s for s in p.signals if s.kind == kinds.FALLING_BEHIND]


def watermark_lag() -> None:
    p = Pipeline()
    p.feed("progress", batch(0, T0, eventTime={"watermark": iso(T0 - 12.5)}))
    assert p.value(catalog.WATERMARK_LAG) == 12.5


# --- rows dropped by the watermark ---------------------------------------------------------------------
def _late(batch_id: int, t: float, dropped: float, watermark: float | None = None, rows: int = 1000) -> dict[str, Any]:
    """The recorded batch with ``rows`` input rows, its dedupe dropping ``dropped`` of them and storing the others (every
    input row reaches it, none a duplicate), the watermark 10 s behind."""
    p = batch(batch_id, t, numInputRows=rows, eventTime={"watermark": iso(T0 - 10 if watermark is None else watermark)})
    return with_operator(
        p, "dedupe", numRowsDroppedByWatermark=dropped, numRowsUpdated=max(0, rows - dropped), customMetrics={"numDroppedDuplicateRows": 0}
    )


def _feed_late(p: Pipeline, payload: dict[str, Any]) -> list[str]:
    """The late-row kinds a batch caused (other rules speak of the same batches too)."""
    return [k for k in p.feed("progress", payload) if k in (kinds.LATE_ROWS_DROPPED, kinds.LATE_ROWS_STOPPED)]


def late_rows_dropped() -> Pipeline:
    """0.8 % of the window's input dropped is not enough, 3.6 % is; the episode starts once, its gauges follow."""
    p = Pipeline()
    for i in range(5):
        assert _feed_late(p, _late(i, T0 + 10 * i, 0)) == []
    assert p.value(catalog.LATE_ROWS_SHARE) == 0.0 and p.value(catalog.LATE_ROWS_DROPPING) == 0.0
    assert _feed_late(p, _late(5, T0 + 50, 50)) == []  # 50 of 6,000 rows in the window
    assert _feed_late(p, _late(6, T0 + 60, 200)) == [kinds.LATE_ROWS_DROPPED]  # 250 of 7,000
    attrs = p.last(kinds.LATE_ROWS_DROPPED).attributes
    assert attrs["rows"] == 250.0 and attrs["input_rows"] == 7000.0 and attrs["share"] == round(250 / 7000, 4)
    assert attrs["operators"] == ["dedupe"] and attrs["batch_id"] == 6 and "watermark_ahead_seconds" not in attrs
    assert p.value(catalog.LATE_ROWS_DROPPING) == 1.0 and p.value(catalog.WATERMARK_AHEAD) == 0.0
    # a record from the future: the watermark an hour ahead of the trigger time, every row dropped; no second signal
    assert _feed_late(p, _late(7, T0 + 70, 1000, watermark=T0 + 3670)) == []
    assert p.value(catalog.WATERMARK_AHEAD) == 3600.0
    return p


def late_rows_stopped() -> Pipeline:
    """Once the window holds no dropped row the episode ends, with the rows it dropped in all."""
    p = Pipeline(late_rows_window_seconds=30.0)
    for i in range(3):
        _feed_late(p, _late(i, T0 + 10 * i, 0))
    assert _feed_late(p, _late(3, T0 + 30, 100)) == [kinds.LATE_ROWS_DROPPED]
    assert _feed_late(p, _late(4, T0 + 40, 40)) == []
    kinds_seen = [_feed_late(p, _late(5 + i, T0 + 50 + 10 * i, 0)) for i in range(4)]
    assert kinds_seen == [[], [], [], [kinds.LATE_ROWS_STOPPED]]  # batch 4 is 30 s old at T0 + 70, left the window at T0 + 80
    attrs = p.last(kinds.LATE_ROWS_STOPPED).attributes
    assert attrs["rows"] == 140.0 and attrs["dropping_seconds"] == 50.0 and attrs["share"] == 0.0
    assert p.value(catalog.LATE_ROWS_DROPPING) == 0.0
    return p


# --- executors and partitions ------------------------------------------------------------------------
def executor_added() -> Pipeline:
    p = Pipeline()
    p.feed("progress", batch(0, T0), executors={"1"})
    assert p.app_value(catalog.EXECUTORS) == 1.0
    assert p.feed("progress", batch(1, T0 + 10), executors={"1", "2"}) == [kinds.EXECUTOR_ADDED]
    assert p.last(kinds.EXECUTOR_ADDED).attributes == {"executor_id": "2"}
    assert p.app_value(catalog.EXECUTORS) == 2.0 and p.app_value(catalog.EXECUTOR_CHANGES, (("change", "added"),)) == 1.0
    return p


def executor_removed() -> Pipeline:
    p = executor_added()
    assert p.feed("progress", batch(2, T0 + 20), executors={"2"}) == [kinds.EXECUTOR_REMOVED]
    assert p.last(kinds.EXECUTOR_REMOVED).attributes == {"executor_id": "1"}
    assert p.app_value(catalog.EXECUTOR_CHANGES, (("change", "removed"),)) == 1.0
    return p


def partitions_changed() -> Pipeline:
    p = Pipeline()
    p.feed("progress", batch(0, T0))
    wider = with_operator(batch(1, T0 + 10), "dedupe", numShufflePartitions=4, numStateStoreInstances=4)
    assert p.feed("progress", wider) == [kinds.PARTITIONS_CHANGED]
    attrs = p.last(kinds.PARTITIONS_CHANGED).attributes
    assert (attrs["operator"], attrs["before"], attrs["after"], attrs["store_instances_after"]) == ("dedupe", 2.0, 4.0, 4.0)
    assert attrs["cause"] == "unexplained"  # within one run: not what an offline repartition looks like
    assert p.value(catalog.PARTITION_CHANGES, DEDUPE) == 1.0 and p.value(catalog.PARTITION_CHANGES, SAVE) == 0.0
    return p


def state_task_retry() -> Pipeline:
    """More store instances at the same partitions: retried tasks, counted apart; back to normal says nothing."""
    p = Pipeline()
    p.feed("progress", batch(0, T0))
    retried = with_operator(batch(1, T0 + 10), "dedupe", numStateStoreInstances=3)
    assert p.feed("progress", retried) == [kinds.STATE_TASK_RETRY]
    attrs = p.last(kinds.STATE_TASK_RETRY).attributes
    assert (attrs["store_instances"], attrs["usual_store_instances"], attrs["retried_store_instances"]) == (3.0, 2.0, 1.0)
    assert p.feed("progress", batch(2, T0 + 20)) == []
    assert p.value(catalog.STATE_TASK_RETRIES, DEDUPE) == 1.0 and p.value(catalog.PARTITION_CHANGES, DEDUPE) == 0.0
    return p


# --- growth ------------------------------------------------------------------------------------------
def growing(p: Pipeline, first: int, n: int, removed: int, rows_from: int | None = None) -> list[str]:
    """Batches ``first``.. of the dedupe growing 100 rows a batch (10 s apart), or flat from batch ``rows_from``."""
    out = []
    for i in range(first, first + n):
        grown = with_operator(
            batch(i, T0 + 10 * i),
            "dedupe",
            numRowsTotal=1000 + 100 * (i if rows_from is None else rows_from),
            numRowsUpdated=100,
            numRowsRemoved=removed,
            memoryUsedBytes=10_000 + 1000 * i,
        )
        out += p.feed("progress", grown)
    return out


def state_unbounded() -> Pipeline:
    """Rows rising over the window are unbounded even while the operator evicts (issue 25: no eviction is not growth)."""
    p = Pipeline(growth_window_seconds=40, growth_min_batches=4)
    assert kinds.STATE_UNBOUNDED not in growing(p, 0, 3, removed=50)  # too few batches to judge
    assert p.value(catalog.STATE_UNBOUNDED, DEDUPE) is None
    # rising from batch 3 (30 s of the 40 s window), but the watermark evicts: a swell until it lasts a second window
    assert kinds.STATE_UNBOUNDED not in growing(p, 3, 4, removed=50)
    assert kinds.STATE_UNBOUNDED in growing(p, 7, 1, removed=50)
    assert growing(p, 8, 1, removed=50) == []  # the same verdict is not said again
    attrs = p.last(kinds.STATE_UNBOUNDED).attributes
    assert attrs["operator"] == "dedupe" and attrs["rows_per_second"] == 10.0 and attrs["eviction_ratio"] == 0.5
    assert (attrs["rows_at_start"], attrs["rows_at_end"], attrs["window_seconds"], attrs["evicted"]) == (1300, 1700, 40.0, True)
    assert attrs["watermark"] is True and attrs["basis"] == "rows" and attrs["evidence"].startswith("rows 1,300 → 1,700 in 40 s")
    assert p.value(catalog.STATE_UNBOUNDED, DEDUPE) == 1.0
    assert p.value(catalog.ROWS_GROWTH_RATE, DEDUPE) == pytest.approx(10.0)
    assert p.value(catalog.MEMORY_GROWTH_RATE, DEDUPE) == pytest.approx(100.0)
    return p


def state_bounded() -> Pipeline:
    """Flat rows turn the verdict bounded, but only once a whole window is flat (hysteresis)."""
    p = state_unbounded()
    assert growing(p, 9, 1, removed=100, rows_from=8) == []  # a plateau within the window: no new evidence yet
    assert p.value(catalog.STATE_UNBOUNDED, DEDUPE) == 1.0
    assert kinds.STATE_BOUNDED in growing(p, 10, 3, removed=100, rows_from=8)  # a whole window flat at 1,800 rows
    assert p.value(catalog.STATE_UNBOUNDED, DEDUPE) == 0.0 and p.value(catalog.EVICTION_RATIO, DEDUPE) > 0
    assert p.last(kinds.STATE_BOUNDED).attributes["rows_at_start"] == p.last(kinds.STATE_BOUNDED).attributes["rows_at_end"] == 1800
    return p


def budgets() -> None:
    p = Pipeline(growth_window_seconds=40, growth_min_batches=4, state_rows_budget=3000, state_memory_budget_bytes=0)
    growing(p, 0, 5, removed=0)  # last: 1400 rows, growing 10 rows/s
    assert p.value(catalog.ROWS_BUDGET_ETA, DEDUPE) == pytest.approx(160.0)
    assert p.value(catalog.MEMORY_BUDGET_ETA, DEDUPE) is None  # no budget, no forecast


# --- placement ---------------------------------------------------------------------------------------
class _RecordedBatches:
    """A placement source handing out the kill run's recorded batches (tests/fixtures/placement/kill), as this query's."""

    name = "recorded"

    def __init__(self) -> None:
        from spark_state_observer.offline.task_events import read_events
        from spark_state_observer.placement.tasks import BatchTasks, TaskEventReader

        reader = TaskEventReader()
        self.items: dict[int, list[Any]] = {}  # batch id -> the executor changes before it, then the batch
        waiting: list[Any] = []
        for event in read_events([os.path.join(FIXTURES, "placement", "kill", "eventlog")]):
            for item in reader.feed(event):
                if isinstance(item, BatchTasks):
                    runs = [dataclasses.replace(r, query_id=QUERY_ID, run_id="run-1") for r in item.runs]
                    self.items[item.batch_id] = waiting + [dataclasses.replace(item, query_id=QUERY_ID, run_id="run-1", runs=runs)]
                    waiting = []
                else:
                    waiting.append(item)

    def take(self, progress: Any) -> list[Any]:
        return self.items.get(progress.batch_id, [])

    def executors(self) -> list[Any]:
        return []

    def close(self) -> None:
        """Nothing to release."""


def partition_migrated() -> Pipeline:
    """Executor 1 of the recorded kill run died after batch 4: its partitions moved in batch 5."""
    p = Pipeline()
    p.placement = PlacementFeed(_RecordedBatches())
    p.feed("started", lifecycle("run-1", T0))
    for b in range(5):
        assert kinds.PARTITION_MIGRATED not in p.feed("progress", batch(b, T0 + 10 * b))
    assert p.value(catalog.PARTITION_MIGRATIONS, SAVE + (("cause", "executor_removed"),)) == 0.0  # created at 0
    assert kinds.PARTITION_MIGRATED in p.feed("progress", batch(5, T0 + 50))
    attrs = p.last(kinds.PARTITION_MIGRATED).attributes
    assert attrs["causes"] == {"executor_removed": attrs["migrated"]} and attrs["from_executors"] == ["1"]
    assert p.value(catalog.PARTITION_MIGRATIONS, SAVE + (("cause", "executor_removed"),)) == 2.0
    assert p.value(catalog.PARTITION_STICKINESS, SAVE) == 0.5
    return p


def rocksdb_memory_implausible() -> Pipeline:
    """The recorded batch with the two bad reports Spark is known for, then bounded memory (SPARK-53002)."""
    from spark_state_observer.model.capacity import ROCKSDB_PREFIX, read_conf

    p = Pipeline()
    p.feed("started", lifecycle("run-1", T0))
    assert kinds.ROCKSDB_MEMORY_IMPLAUSIBLE not in p.feed("progress", batch(0, T0 + 10))
    assert next(o for o in RECORDED["stateOperators"] if o["operatorName"] == "stateStoreSave")["numRowsTotal"] > 0
    zero = with_operator(batch(1, T0 + 20), "stateStoreSave", memoryUsedBytes=0)
    assert p.feed("progress", zero) == [kinds.ROCKSDB_MEMORY_IMPLAUSIBLE]
    assert p.last(kinds.ROCKSDB_MEMORY_IMPLAUSIBLE).attributes["reason"] == "zero_with_rows"
    huge = with_operator(batch(2, T0 + 30), "dedupe", memoryUsedBytes=15_956_211_724_278)  # PR #46491's report
    assert p.feed("progress", huge) == [kinds.ROCKSDB_MEMORY_IMPLAUSIBLE]
    attrs = p.last(kinds.ROCKSDB_MEMORY_IMPLAUSIBLE).attributes
    assert attrs["reason"] == "above_budget" and attrs["operator_name"] == "dedupe" and attrs["budget_bytes"] == 384 * 1024 * 1024
    assert p.value(catalog.ROCKSDB_MEMORY_IMPLAUSIBLE, DEDUPE + (("reason", "above_budget"),)) == 1.0
    p.engine.capacity.conf = read_conf({ROCKSDB_PREFIX + "boundedMemoryUsage": "true"})
    told = p.feed("progress", batch(3, T0 + 40))
    assert told == [kinds.ROCKSDB_MEMORY_IMPLAUSIBLE] * 2  # once per operator of the run...
    assert kinds.ROCKSDB_MEMORY_IMPLAUSIBLE not in p.feed("progress", batch(4, T0 + 50))  # ...not every batch
    assert p.value(catalog.ROCKSDB_MEMORY_IMPLAUSIBLE, SAVE + (("reason", "bounded_division"),)) == 1.0
    return p


def snapshot_lagging() -> Pipeline:
    """The recorded 4.3 batch (no store has uploaded a snapshot: -1) as batches a second apart: normal is
    ``snapshot_lag_batches`` (20) plus a maintenance interval (60 s) of batches; beyond it, once per operator,
    until an upload brings the lag back. Judged at every batch (``evaluate_seconds`` 0): the gauges follow each one."""
    p = Pipeline(evaluate_seconds=0.0)
    p.feed("started", lifecycle("run-1", T0))
    for b in range(80):
        assert kinds.SNAPSHOT_LAGGING not in p.feed("progress", batch(b, T0 + b))
    assert p.feed("progress", batch(80, T0 + 80)) == [kinds.SNAPSHOT_LAGGING] * 2
    attrs = p.last(kinds.SNAPSHOT_LAGGING).attributes
    assert attrs["max_lag_batches"] == 81 and attrs["allowed_lag_batches"] == 80 and attrs["instances_never_uploaded"] == 2
    assert p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 81 and p.value(catalog.SNAPSHOT_INSTANCES_LAGGING, DEDUPE) == 2
    assert p.feed("progress", batch(81, T0 + 81)) == []  # told once
    uploaded = {f"SnapshotLastUploaded.partition_{i}_default": 80 for i in (0, 1)}
    fresh = batch(82, T0 + 82)
    for name in ("dedupe", "stateStoreSave"):
        fresh = with_operator(fresh, name, customMetrics=uploaded)
    assert p.feed("progress", fresh) == [] and p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 3
    # -1 again within the run is a reloaded store (store_reload), which loaded the upload at 80: not lagging
    assert kinds.SNAPSHOT_LAGGING not in p.feed("progress", batch(83, T0 + 83))
    assert p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 4
    for b in range(84, 160):
        assert kinds.SNAPSHOT_LAGGING not in p.feed("progress", batch(b, T0 + b))
    assert p.feed("progress", batch(160, T0 + 160)) == [kinds.SNAPSHOT_LAGGING] * 2  # lagging again, told again
    return p


SCENARIOS: dict[str, Callable[[], Any]] = {
    kinds.QUERY_STARTED: started,
    kinds.QUERY_RESTARTED: restarted,
    kinds.QUERY_TERMINATED: terminated,
    kinds.QUERY_IDLE: idle,
    kinds.CRASH_LOOP: crash_loop,
    kinds.STALLED: stalled,
    kinds.STALL_RECOVERED: stall_recovered,
    kinds.QUERY_LOST: query_lost,
    kinds.RESTORE: restore,
    kinds.STORE_RELOAD: store_reload,
    kinds.EXECUTOR_ADDED: executor_added,
    kinds.EXECUTOR_REMOVED: executor_removed,
    kinds.PARTITIONS_CHANGED: partitions_changed,
    kinds.LATE_ROWS_DROPPED: late_rows_dropped,
    kinds.LATE_ROWS_STOPPED: late_rows_stopped,
    kinds.STATE_UNBOUNDED: state_unbounded,
    kinds.STATE_BOUNDED: state_bounded,
    kinds.FALLING_BEHIND: falling_behind,
    kinds.CAUGHT_UP: caught_up,
    kinds.LOAD_LATENCY_ANOMALY: load_latency_anomaly,
    kinds.STATE_TASK_RETRY: state_task_retry,
    kinds.PARTITION_MIGRATED: partition_migrated,
    kinds.ROCKSDB_MEMORY_IMPLAUSIBLE: rocksdb_memory_implausible,
    kinds.SNAPSHOT_LAGGING: snapshot_lagging,
    kinds.STATE_SKEWED: skew_scenario,  # replayed from the recorded bytes-skew run (tests/unit/test_state_skew.py)
    **RESTORE_PROGRESS_SCENARIOS,  # replayed from the recorded restart's event log (tests/unit/test_restore_progress.py)
}


def test_every_kind_has_a_scenario() -> None:
    """Kafka kinds have theirs in tests/unit/test_kafka_signals.py (on a recorded Kafka batch)."""
    assert set(SCENARIOS) | set(KAFKA_SCENARIOS) == set(SIGNAL_KINDS) and not set(SCENARIOS) & set(KAFKA_SCENARIOS)


@pytest.mark.parametrize("kind", [k for k in SIGNAL_KINDS if k not in kinds.KAFKA_KINDS])
def test_signal_kind(kind: str) -> None:
    pipeline = SCENARIOS[kind]()
    emitted = [s for s in pipeline.signals if s.kind == kind]
    # a scenario replayed from a recording of its own names its query
    query_id, query = getattr(pipeline, "query_id", QUERY_ID), getattr(pipeline, "query", RECORDED["name"])
    assert emitted and all(s.query_id == query_id and s.query == query for s in emitted)


@pytest.mark.parametrize(
    "scenario",
    [
        restarted_from_a_checkpoint,
        not_stalled_when_idle_or_replayed,
        not_lost_between_the_idle_events_of_a_long_trigger,
        reload_by_load_latency_and_snapshot_reset,
        watermark_lag,
        budgets,
        restore_backlog_and_bounds,
        aggregation_reload_after_executor_loss,
        not_behind_on_a_small_difference,
        falling_behind_with_fast_batches,
    ],
)
def test_signal_rule(scenario: Callable[[], object]) -> None:
    scenario()


def test_snapshot_lag_judged_on_the_cadence() -> None:
    """With the default cadence (``evaluate_seconds``, 5 s of event time) the snapshot lag is judged at the run's
    first batch, then at the first batch 5 s after the last judgement, and at the run's end."""
    p = Pipeline()
    p.feed("started", lifecycle("run-1", T0))
    for b in range(83):
        p.feed("progress", batch(b, T0 + b))
    assert p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 81  # judged at batch 80, 5 s after batch 75
    assert p.feed("progress", batch(85, T0 + 85)) == [] and p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 86
    p.feed("progress", batch(86, T0 + 86))
    assert p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 86  # held back by the cadence
    p.feed("terminated", {"id": QUERY_ID, "runId": "run-1"}, at=T0 + 87)
    assert p.value(catalog.SNAPSHOT_MAX_LAG_BATCHES, DEDUPE) == 87  # the run's end judges what was held back
