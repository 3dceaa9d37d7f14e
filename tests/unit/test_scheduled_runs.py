"""A query that runs on a schedule (``Trigger.AvailableNow``): stopped between runs, not down, and no crash loop;
the same runs varied: a stream restarted for deploys, and drivers killed without a word after a clean run.

The recording ``tests/fixtures/incidents/scheduled_available_now`` (``scripts/record_incidents.py``) is five
runs of one availableNow query on one checkpoint, each a new process that starts ~25 s after the last one
ended, runs one batch (a few seconds) and stops cleanly. The same runs moved in time (every time the event log
holds shifted, so each run starts right after the one before and lasts longer than the pause) are a stream
stopped and started again for deploys: not a schedule.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
from typing import Any

import pytest
from test_signals import KILLED_LEAVE_OUT

from bench import precision
from bench.eventlog_writer import recorded_lines
from spark_state_observer.metrics import catalog
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

SCHEDULED = os.path.join(precision.INCIDENTS, "scheduled_available_now")
_MS_KEYS = ("Timestamp", "Submission Time", "Completion Time", "Launch Time", "Finish Time", "time")


def _logs(scenario: str) -> list[str]:
    return [precision.recording(r) for r in precision.run_dirs(scenario)]


def _scheduled_values(paths: list[str]) -> list[float]:
    """The query's ``spark_streaming_query_scheduled`` gauge as the replay left it: ``[value]``, or ``[]`` when never set."""
    seen: list[float] = []
    result = replay(paths, Settings(http_enabled=False, placement="off"))
    (record,) = result.observer.tracker.snapshot()
    value = record.signal_gauges.get((catalog.QUERY_SCHEDULED, ()))
    if value is not None:
        seen.append(value)
    return seen


def _shift(value: Any, seconds: float) -> Any:
    """``value`` (a progress or listener event, parsed) with every time in it moved by ``seconds``."""
    if isinstance(value, list):
        return [_shift(v, seconds) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, v in value.items():
        if key == "timestamp" and isinstance(v, str) and v.endswith("Z"):
            at = datetime.datetime.fromisoformat(v[:-1]).replace(tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
            out[key] = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
        elif key in _MS_KEYS and isinstance(v, int) and not isinstance(v, bool):
            out[key] = v + round(seconds * 1000)
        else:
            out[key] = _shift(v, seconds)
    return out


def _ms(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso[:-1]).replace(tzinfo=datetime.timezone.utc).timestamp() * 1000


def _pulled_together(tmp: str) -> list[str]:
    """The recorded runs, each moved so its query starts half a second after the previous run's last sign of
    life (its latest event time before its termination): runs longer than their pauses."""
    paths, end = [], None
    for n, folder in enumerate(_logs(SCHEDULED)):
        files = sorted(os.path.join(r, f) for r, _, names in os.walk(folder) for f in names if f.startswith("events_"))
        events = [json.loads(line) for path in files for line in recorded_lines(path)]
        started = next(_ms(e["timestamp"]) for e in events if e["Event"].endswith("QueryStartedEvent"))
        moved = [_shift(e, 0.0 if end is None else (end + 500 - started) / 1000.0) for e in events]
        before_end = moved[: next(i for i, e in enumerate(moved) if e["Event"].endswith("QueryTerminatedEvent"))]
        end = max(
            [e["Timestamp"] for e in before_end if isinstance(e.get("Timestamp"), int)]
            + [_ms(e["progress"]["timestamp"]) + e["progress"]["batchDuration"] for e in before_end if "progress" in e]
        )
        path = os.path.join(tmp, f"events_{n + 1}_moved")
        with open(path, "w") as f:
            f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in moved)
        paths.append(path)
    return paths


def test_a_job_run_by_a_schedule_is_said_to_be_one_from_its_third_run() -> None:
    logs = _logs(SCHEDULED)
    assert _scheduled_values(logs[:2]) == [0.0]  # one clean run and its pause: not yet a schedule
    assert _scheduled_values(logs[:3]) == [1.0]
    assert _scheduled_values(logs) == [1.0]


def test_runs_longer_than_their_pauses_are_a_stream_restarted_not_a_schedule(tmp_path: Any) -> None:
    moved = _pulled_together(str(tmp_path))
    signals: list = []
    replay(moved, Settings(http_enabled=False, placement="off"), on_signal=signals.append)
    restarts = [s for s in signals if s.kind == "query_restarted"]
    assert len(restarts) == 4 and all(s.attributes["gap_since_previous_run_seconds"] < 5 for s in restarts)
    assert _scheduled_values(moved) == [0.0]
    assert "crash_loop" not in [s.kind for s in signals]  # clean stops still


def test_a_crash_ends_the_schedule_and_one_restart_is_none() -> None:
    assert _scheduled_values(_logs(os.path.join(precision.INCIDENTS, "crash_loop_503"))) == [0.0]
    assert _scheduled_values(_logs(os.path.join(precision.INCIDENTS, "dedup_agg_restart_43"))) == [0.0]


def _killed_after_the_first(tmp: str, runs: int) -> list[str]:
    """The first ``runs`` recorded runs, the first as recorded (a clean stop), the others as drivers killed without
    a word leave their logs: without their query's termination and their application's end."""
    paths = []
    for n, folder in enumerate(_logs(SCHEDULED)[:runs]):
        if n == 0:
            paths.append(folder)
            continue
        files = sorted(os.path.join(r, f) for r, _, names in os.walk(folder) for f in names if f.startswith("events_"))
        path = os.path.join(tmp, f"events_{n + 1}_killed")
        with open(path, "wb") as out:
            out.writelines(line for f in files for line in recorded_lines(f) if not any(end in line for end in KILLED_LEAVE_OUT))
        paths.append(path)
    return paths


def test_a_deploy_whose_drivers_then_die_unseen_is_a_crash_loop_from_its_first_restart(tmp_path: Any) -> None:
    """After a clean run, three runs whose drivers die without a word: the restart into the first of them counts
    once the next run shows it never ended, so the third restart makes the loop (three within the window)."""
    signals: list = []
    replay(_killed_after_the_first(str(tmp_path), 4), Settings(http_enabled=False, placement="off"), on_signal=signals.append)
    restarts = [s for s in signals if s.kind == "query_restarted"]
    loops = [s for s in signals if s.kind == "crash_loop"]
    assert len(restarts) == 3 and [(s.run_id, s.attributes["restarts"]) for s in loops] == [(restarts[-1].run_id, 3)]


def test_a_schedules_interval_is_the_median_start_to_start_time_of_its_runs_and_its_latest_start_is_kept() -> None:
    """On the recording: from the third run on, each restart carries the median time from one run's start to the
    next over the runs so far (the gauge the overdue alert reads); the latest start is the fifth run's."""
    signals: list = []
    result = replay(_logs(SCHEDULED), Settings(http_enabled=False, placement="off"), on_signal=signals.append)
    starts = [s.timestamp for s in signals if s.kind == "query_started"]
    restarts = [s for s in signals if s.kind == "query_restarted"]
    assert len(starts) == 5 and [s.attributes["scheduled"] for s in restarts] == [False, True, True, True]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    expected = [None, *(round(statistics.median(gaps[:n]), 3) for n in (2, 3, 4))]
    assert [s.attributes["schedule_interval_seconds"] for s in restarts] == expected
    (record,) = result.observer.tracker.snapshot()
    assert record.signal_gauges[(catalog.QUERY_SCHEDULE_INTERVAL, ())] == pytest.approx(statistics.median(gaps))
    assert record.signal_gauges[(catalog.QUERY_LAST_START, ())] == starts[-1]


def test_restarts_that_are_no_schedule_carry_no_interval(tmp_path: Any) -> None:
    """A stream restarted for deploys (runs longer than their pauses) and drivers killed after a clean run: no
    restart carries an interval and the query ends with none (the overdue alert has nothing to judge)."""
    for logs in (_pulled_together(str(tmp_path)), _killed_after_the_first(str(tmp_path), 4)):
        signals: list = []
        result = replay(logs, Settings(http_enabled=False, placement="off"), on_signal=signals.append)
        restarts = [s for s in signals if s.kind == "query_restarted"]
        assert restarts and all(s.attributes["schedule_interval_seconds"] is None for s in restarts)
        (record,) = result.observer.tracker.snapshot()
        assert (catalog.QUERY_SCHEDULE_INTERVAL, ()) not in record.signal_gauges
