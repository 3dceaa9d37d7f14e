"""Stateful real-time mode (Spark 4.3, issue 30) on recorded real runs.

``tests/fixtures/realtime`` (``scripts/record_realtime.py``: a real KRaft broker, a producer, PySpark 4.3 under
``trigger(realTime=...)`` writing to Kafka): ``clean`` (a dedup, one run), ``restart`` (a count per key, stopped
and restarted on its checkpoint as a new application), ``slow`` (the dedup behind a UDF costing 200 ms a
record: half the producer's rate), ``long_interval`` (the dedup under a 75 s interval). Each ``truth.json`` holds the trigger interval and the
runs' times as the script measured them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from conftest import FIXTURES, eventlog_dir, progress_lines
from spark_state_observer.metrics import catalog
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.replay import ReplayResult, replay
from spark_state_observer.settings import Settings

HERE = os.path.join(FIXTURES, "realtime")
CLEAN, RESTART, SLOW, LONG = (os.path.join(HERE, s) for s in ("clean", "restart", "slow", "long_interval"))


def _truth(scenario: str) -> dict[str, Any]:
    with open(os.path.join(scenario, "truth.json")) as f:
        return json.load(f)


def _replay(paths: list[str], settings: Settings | None = None, tick_until: float | None = None) -> tuple[ReplayResult, list[SignalEvent]]:
    """Replay as if live: the clock follows the events and the observer ticks every second between them
    (and after the last one until ``tick_until`` seconds past it), as the live worker does."""
    got: list[SignalEvent] = []
    clock = [0.0]

    def before(observer: Any, at: float) -> None:
        while clock[0] and clock[0] + 1.0 < at:
            clock[0] += 1.0
            observer.tick()
        clock[0] = max(clock[0], at)

    result = replay(paths, settings or Settings(http_enabled=False), clock=lambda: clock[0], before_event=before, on_signal=got.append)
    end = clock[0] + (tick_until or 0.0)
    while clock[0] < end:
        clock[0] += 1.0
        result.observer.tick()
    return result, got


def _gauge(result: ReplayResult, spec: catalog.MetricSpec) -> float | None:
    (record,) = result.observer.tracker.snapshot()
    return record.signal_gauges.get((spec, ()))


def test_a_real_time_run_is_told_from_its_progress_with_its_checkpoint_interval_and_boundary_pause() -> None:
    interval = _truth(CLEAN)["real_time_seconds"]
    result, _ = _replay([eventlog_dir(os.path.join(CLEAN, "run1"))])
    assert _gauge(result, catalog.REAL_TIME_MODE) == 1.0
    measured = _gauge(result, catalog.REAL_TIME_CHECKPOINT_INTERVAL)
    assert measured is not None and interval <= measured < 3 * interval  # each batch lasts the interval, plus its commits
    last = progress_lines(os.path.join(CLEAN, "run1"))[-1]
    pause = (last["durationMs"]["triggerExecution"] - last["durationMs"]["addBatch"]) / 1000.0
    assert _gauge(result, catalog.REAL_TIME_BOUNDARY_PAUSE) == pause
    assert _gauge(result, catalog.REAL_TIME_BOUNDARY_BACKLOG) == float(last["sources"][0]["metrics"]["maxOffsetsBehindLatest"])


def test_a_micro_batch_kafka_query_is_not_real_time() -> None:
    result, _ = _replay([eventlog_dir(os.path.join(FIXTURES, "kafka_restart", "run1"))])
    assert _gauge(result, catalog.REAL_TIME_MODE) is None  # no series: the query was never seen in real-time mode
    assert _gauge(result, catalog.REAL_TIME_CHECKPOINT_INTERVAL) is None


def test_a_clean_real_time_run_signals_nothing_but_its_start_and_end() -> None:
    """Batches that last a whole checkpoint interval are neither a stall nor falling behind."""
    result, signals = _replay([eventlog_dir(os.path.join(CLEAN, "run1"))])
    assert [s.kind for s in signals] == [kinds.QUERY_STARTED, kinds.QUERY_TERMINATED]
    assert _gauge(result, catalog.QUERY_STALLED) == 0.0 and _gauge(result, catalog.FALLING_BEHIND) == 0.0


def test_a_real_time_query_that_stops_reporting_stalls_after_stall_factor_checkpoint_intervals() -> None:
    """The clean run's progress without its termination, as if its trigger hung after the last batch."""
    settings = Settings(http_enabled=False, stall_min_seconds=1.0)
    result, signals = _replay([os.path.join(CLEAN, "run1", "progress.jsonl")], settings, tick_until=120.0)
    (stalled,) = [s for s in signals if s.kind == kinds.STALLED]
    interval = _gauge(result, catalog.REAL_TIME_CHECKPOINT_INTERVAL)
    assert interval is not None
    assert stalled.attributes["limit_seconds"] >= settings.stall_factor * interval - 0.1
    assert stalled.attributes["seconds_without_progress"] > stalled.attributes["limit_seconds"]


def _restart_checks(signals: list[SignalEvent], truth: dict[str, Any], run2: str) -> None:
    (restart,) = [s for s in signals if s.kind == kinds.QUERY_RESTARTED]
    (restore,) = [s for s in signals if s.kind == kinds.RESTORE]
    first = progress_lines(run2)[0]
    assert restart.run_id == restore.run_id == first["runId"]
    op = first["stateOperators"][0]
    a = restore.attributes
    # the aggregation of real-time mode (StatefulStreamlineAggregate) loads its store once: its restore is measured
    assert a["operator"] == op["operatorName"] and a["batch_id"] == first["batchId"]
    assert a["method"] == "load_metrics" and a["confidence"] == "measured"
    assert a["duration_seconds"] == op["customMetrics"]["rocksdbLoadLatencyMs"] / 1000.0
    assert a["changelog_files"] == op["customMetrics"]["rocksdbNumReplayChangelogFiles"]
    assert not [s for s in signals if s.kind in (kinds.STALLED, kinds.FALLING_BEHIND, kinds.STORE_RELOAD)]


def test_a_restarted_real_time_query_is_a_restart_with_a_measured_restore() -> None:
    truth = _truth(RESTART)
    run1, run2 = (os.path.join(RESTART, r) for r in ("run1", "run2"))
    _, signals = _replay([eventlog_dir(run1), eventlog_dir(run2)])
    _restart_checks(signals, truth, run2)
    with open(os.path.join(run2, "signals.jsonl")) as f:
        live = [json.loads(line)["kind"] for line in f]
    assert [k for k in live if k in (kinds.QUERY_RESTARTED, kinds.RESTORE)] == [kinds.QUERY_RESTARTED, kinds.RESTORE]  # the listener's too
    (restart,) = [s for s in signals if s.kind == kinds.QUERY_RESTARTED]
    # down from the first run's end to the second's start: the script's gap between the processes lies within
    (downtime,) = truth["downtime_seconds"]
    assert downtime <= restart.attributes["downtime_seconds"] <= truth["runs"][1]["ended"] - truth["runs"][0]["started"]


def test_a_real_time_restart_seen_only_by_the_new_application_is_found_too() -> None:
    truth = _truth(RESTART)
    run2 = os.path.join(RESTART, "run2")
    _, signals = _replay([eventlog_dir(run2)])
    _restart_checks(signals, truth, run2)


def test_a_real_time_query_slower_than_its_input_falls_behind_by_its_boundary_backlog() -> None:
    run = os.path.join(SLOW, "run1")
    settings = Settings(http_enabled=False)
    result, signals = _replay([eventlog_dir(run)], settings)
    (behind,) = [s for s in signals if s.kind == kinds.FALLING_BEHIND]
    a = behind.attributes
    assert a["mode"] == "real_time" and a["backlog_records"] > a["read_records"]
    assert a["behind_for_seconds"] >= settings.falling_behind_for_seconds
    batch = next(p for p in progress_lines(run) if p["runId"] == behind.run_id and p["numInputRows"] == a["read_records"])
    assert a["backlog_records"] == float(batch["sources"][0]["metrics"]["maxOffsetsBehindLatest"])
    assert _gauge(result, catalog.FALLING_BEHIND) == 1.0
    # its rates could not have told: over the run, rows in over rows processed stays below the rule's ratio
    lines = [p for p in progress_lines(run) if p["numInputRows"] and p["inputRowsPerSecond"] and p["processedRowsPerSecond"]]
    arriving = sum(p["numInputRows"] / p["inputRowsPerSecond"] for p in lines)
    processing = sum(p["numInputRows"] / p["processedRowsPerSecond"] for p in lines)
    assert processing / arriving < settings.falling_behind_ratio


def test_a_real_time_interval_longer_than_the_stall_rule_default_is_no_stall() -> None:
    """75 s batches: before the run's second progress the rule has no gap to go by; the first batch (real-time by its
    source's backlog) lasted at least an interval, so it waits for that rather than its 60 s default."""
    truth = _truth(LONG)
    settings = Settings(http_enabled=False)
    assert settings.stall_factor * settings.trigger_interval_seconds < truth["real_time_seconds"]
    result, signals = _replay([eventlog_dir(os.path.join(LONG, "run1"))], settings)
    assert [s.kind for s in signals] == [kinds.QUERY_STARTED, kinds.QUERY_TERMINATED]
    measured = _gauge(result, catalog.REAL_TIME_CHECKPOINT_INTERVAL)
    assert measured is not None and measured >= truth["real_time_seconds"]
