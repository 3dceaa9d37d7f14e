"""Drivers stopped by a signal, recorded (``scripts/record_deploys.py``): a deploy is no crash, a kill is.

``deploy_sigterm``: four spark-submit drivers on one checkpoint, each sent SIGTERM (what Kubernetes sends for a
deploy) after five batches; the JVM's shutdown hook ends the application, and the event log ends with
``SparkListenerApplicationEnd`` (exit code 0) and no termination of the query. ``deploy_sigkill``: the same with
SIGKILL (the OOM killer): neither is logged. Replay and the watcher end a run still open at its application's end
with it, stopped; a run whose end was never seen stays a crash, and three restarts after such runs are a loop.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from test_watch_restarts import applications, follow_with_a_watcher_restart, from_history, linked, replayed

from bench import precision
from spark_state_observer.metrics import catalog
from spark_state_observer.model import query_lifecycle as life
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

SIGTERM = os.path.join(precision.INCIDENTS, "deploy_sigterm")
SIGKILL = os.path.join(precision.INCIDENTS, "deploy_sigkill")
# the same deploys, where one run's query thread failed under the stopped context and its termination (with the
# exception) reached the log after the application's end (kept from a refused recording: --adopt)
LATE = os.path.join(precision.INCIDENTS, "deploy_sigterm_late_termination")


def truth(scenario: str) -> dict[str, Any]:
    with open(os.path.join(scenario, "truth.json")) as f:
        return json.load(f)


def said(scenario: str, **settings: Any) -> tuple[list[Any], Any]:
    signals: list = []
    result = replay(
        [precision.recording(r) for r in precision.run_dirs(scenario)],
        Settings(http_enabled=False, placement="off", **settings),
        on_signal=signals.append,
    )
    (record,) = result.observer.tracker.snapshot()
    return signals, record


def test_rolling_deploys_by_sigterm_are_restarts_each_after_a_stop_with_the_application_not_a_crash_loop() -> None:
    facts = truth(SIGTERM)["run_facts"]
    assert all(f["app_end"] and f["exit_code"] == 0 and not f["query_terminated"] for f in facts)  # what the logs hold
    signals, record = said(SIGTERM)
    ends = [s for s in signals if s.kind == kinds.QUERY_TERMINATED]
    assert [s.run_id for s in ends] == [f["run_id"] for f in facts]
    assert all(
        s.attributes["outcome"] == "clean" and s.attributes["ended_with_application"] and s.attributes["exit_code"] == 0 for s in ends
    )
    # each ends at its application's end (the shutdown hook's stop), not before its last batch
    assert [s.timestamp for s in ends] == pytest.approx([f["app_end_timestamp"] for f in facts], abs=1e-3)
    assert [s.run_id for s in signals if s.kind == kinds.QUERY_RESTARTED] == [f["run_id"] for f in facts[1:]]
    assert kinds.CRASH_LOOP not in [s.kind for s in signals]
    assert record.signal_gauges[(catalog.QUERY_CRASH_LOOP, ())] == 0.0 and record.lifecycle == life.STOPPED


def test_drivers_killed_without_a_word_are_still_a_crash_loop_at_the_third_restart() -> None:
    facts = truth(SIGKILL)["run_facts"]
    assert not any(f["app_end"] or f["query_terminated"] for f in facts)
    signals, record = said(SIGKILL)
    assert kinds.QUERY_TERMINATED not in [s.kind for s in signals]
    (loop,) = [s for s in signals if s.kind == kinds.CRASH_LOOP]
    assert loop.run_id == facts[-1]["run_id"] and loop.attributes["restarts"] == 3
    assert record.signal_gauges[(catalog.QUERY_CRASH_LOOP, ())] == 1.0


def test_the_crash_loop_gauge_ends_once_the_loops_restarts_leave_the_window_while_batches_come() -> None:
    """The recorded restarts come 22-24 s apart and the last run's batches for 8 s after its start: with a 50 s window
    the loop begins at the third restart (the first 46.5 s before it) and ends at the batch 50 s after the first.
    The gauge was judged only at restarts and terminations, so a loop whose newest run kept running paged
    SparkStreamingQueryCrashLooping (critical) until the next restart, however healthy the query."""
    signals, record = said(SIGKILL, crash_loop_window_seconds=50.0)
    assert [s.attributes["restarts"] for s in signals if s.kind == kinds.CRASH_LOOP] == [3]
    assert record.signal_gauges[(catalog.QUERY_CRASH_LOOP, ())] == 0.0
    signals, record = said(SIGKILL, crash_loop_window_seconds=60.0)  # the last batch is 54.8 s after the first restart
    assert record.signal_gauges[(catalog.QUERY_CRASH_LOOP, ())] == 1.0


def test_a_query_termination_logged_after_its_applications_end_is_the_stops_echo_not_a_crash() -> None:
    t = truth(LATE)
    (late,) = [f for f in t["run_facts"] if f["run_dir"] in t["late_terminations"]]
    assert late["events_after_app_end"][-1] == "QueryTerminatedEvent"
    signals, record = said(LATE)
    ends = [s for s in signals if s.kind == kinds.QUERY_TERMINATED]
    assert [s.run_id for s in ends] == [f["run_id"] for f in t["run_facts"]]  # one each: the late one is left out
    assert all(s.attributes["outcome"] == "clean" and s.attributes["ended_with_application"] for s in ends)
    assert kinds.CRASH_LOOP not in [s.kind for s in signals] and record.lifecycle == life.STOPPED


@pytest.mark.parametrize("scenario", [SIGTERM, SIGKILL, LATE], ids=os.path.basename)
def test_the_watcher_restarted_between_the_deploys_says_what_replay_says(tmp_path: Any, scenario: str) -> None:
    """Followed as Spark writes the logs, the watcher stopped and started again after the second application:
    the same restarts, terminations (with their application) and crash loop, or none, as replay."""
    follow_with_a_watcher_restart(tmp_path, applications(scenario), 2)
    live = from_history(tmp_path)
    assert linked(live) == linked(replayed(scenario))
    ends = [a for kind, _, a in live if kind == kinds.QUERY_TERMINATED]
    assert len(ends) == (0 if scenario == SIGKILL else 4) and all(a.get("ended_with_application") for a in ends)
    assert [kind for kind, _, _ in live].count(kinds.CRASH_LOOP) == (1 if scenario == SIGKILL else 0)


def test_the_browser_says_the_last_deploy_stopped_the_query_with_its_application(tmp_path: Any) -> None:
    """The last run of the SIGTERM recording ended with its application: the browser says so (a stop from outside,
    not ``query.stop()``), and no crash loop; the killed drivers' recording reads as a crash loop."""
    from test_ui_verdict import facts_of

    from spark_state_observer.browser.verdict import verdicts

    for scenario, kind in ((SIGTERM, "stopped"), (SIGKILL, "crash_loop")):
        db = str(tmp_path / f"{os.path.basename(scenario)}.db")
        replay([precision.recording(r) for r in precision.run_dirs(scenario)], Settings(http_enabled=False, placement="off"), history=db)
        found = verdicts(
            facts_of(db, truth(scenario)["run_facts"][0]["query_id"], now=truth(scenario)["run_facts"][-1]["process_ended"] + 5)
        )
        assert kind in [v.kind for v in found], [v.text for v in found]
        if kind == "stopped":
            (stop,) = [v for v in found if v.kind == "stopped"]
            assert stop.text.startswith("Stopped with its application at ") and "SIGTERM" in stop.text
            assert "crash_loop" not in [v.kind for v in found]


@pytest.mark.parametrize(
    ("exit_code", "outcome"),
    [(1, "exception"), (137, "exception"), (-1, "exception"), ("1", "clean"), (True, "clean"), (2**40, "clean"), (None, "clean")],
)
def test_an_application_end_with_another_exit_code_fails_the_runs_it_ended(tmp_path: Any, exit_code: Any, outcome: str) -> None:
    """The recorded SIGTERM log with its ``ExitCode`` replaced: an integer other than 0 ends the open run as failed
    (class ``other``, the exit code in its text); a value that is no 32-bit integer, or none, is not read as one."""
    from bench.eventlog_writer import recorded_lines

    (run,) = precision.run_dirs(SIGTERM)[:1]
    lines = []
    for root, _, files in os.walk(precision.recording(run)):
        for name in sorted(files):
            for line in recorded_lines(os.path.join(root, name)):
                if line.startswith(b'{"Event":"SparkListenerApplicationEnd"'):
                    event = json.loads(line)
                    event.pop("ExitCode", None)
                    if exit_code is not None:
                        event["ExitCode"] = exit_code
                    line = json.dumps(event).encode() + b"\n"
                lines.append(line)
    path = tmp_path / "events_1_varied"
    path.write_bytes(b"".join(lines))
    signals: list = []
    replay([str(path)], Settings(http_enabled=False, placement="off"), on_signal=signals.append)
    (end,) = [s for s in signals if s.kind == kinds.QUERY_TERMINATED]
    assert end.attributes["outcome"] == outcome and end.attributes["ended_with_application"] is True
    if outcome == "exception":
        assert end.attributes["exit_code"] == exit_code and f"exit code {exit_code}" in end.attributes["root_cause"]
    else:
        assert end.attributes["exit_code"] in (None, 0)
