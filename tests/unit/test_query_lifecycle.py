"""A query's lifecycle across applications (issue 26 point 1), on recorded incidents.

Replay and the watcher derive one state per query (``spark_state_observer.model.query_lifecycle``) from the recorded event
logs of real jobs (``tests/fixtures/incidents``); the watcher keeps a failed or crash-looping query after its
application is forgotten, a watcher started again on the same history restores it, and only a later run of the
query or ``spark-state-observer retire`` ends it. The lasting states stay bounded (a cap and a retention).
"""

from __future__ import annotations

import json
import os
import time
from contextlib import closing
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_watch_restarts import applications

from bench import precision
from bench.eventlog_writer import ProgressiveLog
from spark_state_observer.cli.main import main
from spark_state_observer.fleet.query_statuses import QueryStatuses
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.history import query_status
from spark_state_observer.history.backend import open_backend
from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.tracker import QueryLife
from spark_state_observer.model import query_lifecycle as life
from spark_state_observer.model.identity import AppContext
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

LIFECYCLE = "spark_streaming_query_lifecycle"


def states(text: str) -> dict[str, set[str]]:
    """The states each query id is in (value 1) in an exposition."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == LIFECYCLE:
                out.setdefault(s.labels["query_id"], set())
                if s.value == 1:
                    out[s.labels["query_id"]].add(s.labels["state"])
    return out


def truth(scenario: str) -> dict[str, Any]:
    with open(os.path.join(precision.INCIDENTS, scenario, "truth.json")) as f:
        return json.load(f)


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("fail_udf_value_error", life.FAILED),
        ("fail_sink_path_is_file", life.FAILED),
        ("crash_loop_503", life.CRASH_LOOPING),
        ("restart_fail_at_start", life.CRASH_LOOPING),
        ("clean_busy_90s", None),  # whatever its last run did, it did not fail
    ],
)
def test_replay_derives_the_state_of_each_recorded_incident(scenario: str, expected: str | None) -> None:
    runs = precision.run_dirs(os.path.join(precision.INCIDENTS, scenario))
    result = replay([precision.recording(r) for r in runs], Settings(http_enabled=False, placement="off"))
    (query_id,) = {r["query_id"] for r in truth(scenario)["run_facts"]}
    (state,) = states(result.exposition())[query_id]
    if expected is None:
        assert state not in life.LASTING
    else:
        assert state == expected


def watcher(tmp_path: Any, serve: bool = False, history: str | None = None, **settings: Any) -> FleetObserver:
    """A watcher that forgets an application as soon as it ended, with its positions in ``tmp_path`` and its history
    there too unless ``history`` names one (``serve``: with its endpoint, as ``settings`` say)."""
    history = history or str(tmp_path / "history.db")
    s = Settings(**{"http_enabled": False, "placement": "off", "history_path": history, **settings})
    options = WatchOptions(history=True, state_path=str(tmp_path / "positions.json"), grace_seconds=0)
    return FleetObserver([str(tmp_path / "logs")], s, options, serve=serve)


def follow(tmp_path: Any, fleet: FleetObserver, apps: list[tuple[str, list[bytes], str]]) -> None:
    """Write each application's whole log, then let the watcher read it to its end and forget it."""
    fleet.poll_once()  # the watcher is running before the logs appear (a log finished before its first poll is skipped)
    for app_id, lines, _ in apps:
        log = ProgressiveLog(str(tmp_path / "logs"), app_id, "zstd")
        for _ in log.steps(lines):
            pass
        log.finish()
        fleet.poll_once()
        fleet.poll_once()
    assert fleet.applications() == {}  # every application forgotten: what is left is the lasting state


QUERY = "53ab9ab1-a234-4963-93d8-04a84eab7062"  # restart_fail_at_start's query: four applications, one query id


def test_a_crash_loop_outlives_its_applications_and_a_restarted_watcher_restores_it(tmp_path: Any) -> None:
    (tmp_path / "logs").mkdir()
    first = watcher(tmp_path)
    follow(tmp_path, first, applications())
    assert states(first.exposition().decode()) == {QUERY: {life.CRASH_LOOPING}}
    first.stop()
    second = watcher(tmp_path)  # the logs are done: only the history says the query still loops
    second.poll_once()
    assert states(second.exposition().decode()) == {QUERY: {life.CRASH_LOOPING}}
    second.stop()


def test_a_failure_lasts_until_a_later_run_of_the_query_runs(tmp_path: Any) -> None:
    (tmp_path / "logs").mkdir()
    good, failing = applications()[:2]
    fleet = watcher(tmp_path)
    follow(tmp_path, fleet, [failing])  # failed before its first batch; its application forgotten
    assert states(fleet.exposition().decode()) == {QUERY: {life.FAILED}}
    follow(tmp_path, fleet, [good])  # the same query (id, checkpoint) runs four batches in a new application
    assert states(fleet.exposition().decode()) == {}
    fleet.stop()
    again = watcher(tmp_path)
    again.poll_once()
    assert states(again.exposition().decode()) == {}  # the history knows it ran again
    again.stop()


def test_retire_ends_the_lasting_state_of_a_running_watcher_and_of_the_history(tmp_path: Any, capsys: Any) -> None:
    (tmp_path / "logs").mkdir()
    fleet = watcher(tmp_path)
    follow(tmp_path, fleet, applications())
    db = str(tmp_path / "history.db")
    assert main(["retire", "restart_fail_at_start", "--history", db]) == 0
    assert "it was crash_looping" in capsys.readouterr().out
    fleet.statuses.sync_seconds = 0  # the running watcher reads retirements at its next sync
    fleet.poll_once()
    assert states(fleet.exposition().decode()) == {}
    fleet.stop()
    again = watcher(tmp_path)
    again.poll_once()
    assert states(again.exposition().decode()) == {}
    again.stop()
    assert main(["retire", QUERY, "--history", db]) == 1  # nothing lasting left to retire
    backend = open_backend(db)
    try:
        (row,) = query_status.load(backend)
    finally:
        backend.close()
    assert (row.status, row.retired_run) == (life.RETIRED, truth("restart_fail_at_start")["run_facts"][-1]["run_id"])


def test_retire_wins_over_a_state_written_by_a_watcher_whose_clock_runs_fast(tmp_path: Any, capsys: Any) -> None:
    """Issue 48: the failed row's ``updated`` is an hour ahead of the command's clock. The retirement is written as
    newer than it, the command says so only once the history holds it, and that watcher stops exporting the query."""
    db = str(tmp_path / "history.db")
    fast = QueryStatuses(retention_seconds=86400, max_queries=10, history=db, clock=lambda: time.time() + 3600)
    fast.observe(AppContext("nightly", (), "app-1"), [QueryLife("q-fast", "fast query", "run-1", life.FAILED)])
    fast.round()
    assert [r.query_id for r in fast.exported] == ["q-fast"]
    assert main(["retire", "fast query", "--history", db]) == 0
    assert "retired fast query (q-fast) of nightly: it was failed" in capsys.readouterr().out
    with closing(open_backend(db)) as backend:
        (row,) = query_status.load(backend)
    assert (row.status, row.retired_run) == (life.RETIRED, "run-1")
    fast.sync_seconds = 0
    fast.round()
    assert fast.exported == ()  # the fast watcher took the retirement
    fast.close()
    assert main(["retire", "q-fast", "--history", db]) == 1  # nothing lasting left


def test_a_state_whose_since_is_in_the_future_still_expires(tmp_path: Any) -> None:
    """Issue 48: a writer whose clock is far ahead wrote ``since``; a watcher takes it as its own now, so the state
    expires one retention later, in its memory and in the history, instead of never."""
    db = str(tmp_path / "history.db")
    ahead = QueryStatuses(retention_seconds=3600, max_queries=10, history=db, clock=lambda: 1e12)
    ahead.observe(AppContext("nightly", (), "app-1"), [QueryLife("q-ahead", "ahead", "run-1", life.FAILED)])
    ahead.close()
    now = [1000.0]
    book = QueryStatuses(retention_seconds=3600, max_queries=10, history=db, clock=lambda: now[0])
    book.sync_seconds = 0  # every round syncs (and expires)
    book.restore()
    book.round()
    assert [(r.query_id, r.since) for r in book.exported] == [("q-ahead", 1000.0)]
    with closing(open_backend(db)) as backend:
        assert [r.since for r in query_status.load(backend)] == [1000.0]  # written back: any reader expires it now
    now[0] += 3599
    book.round()
    assert [r.query_id for r in book.exported] == ["q-ahead"]
    now[0] += 2
    book.round()
    assert book.exported == ()
    with closing(open_backend(db)) as backend:
        assert query_status.load(backend) == []
    book.close()


def test_the_browser_reads_the_lasting_state_and_retires_it(tmp_path: Any, monkeypatch: Any) -> None:
    """The drilldown says the state lasts and its button retires it (in the history, as the command does): a
    running watcher stops reporting it, and the Queries table's health and count say retired."""
    from test_ui import app, frames, texts

    (tmp_path / "logs").mkdir()
    fleet = watcher(tmp_path)
    follow(tmp_path, fleet, applications())
    db = str(tmp_path / "history.db")
    drilldown = app(monkeypatch, db, page="Query drilldown", query_id=QUERY)
    assert "crash looping across applications" in texts(drilldown)
    drilldown.button(key="retire_query").click().run()
    assert not drilldown.exception and "Retired." in [s.value for s in drilldown.success]
    fleet.statuses.sync_seconds = 0
    fleet.poll_once()
    assert states(fleet.exposition().decode()) == {}  # the running watcher read the browser's retirement
    fleet.stop()
    at = app(monkeypatch, db)
    (row,) = frames(at)[0].itertuples()
    assert row.health.endswith("retired") and "1 retired" in texts(at) and "failed" not in texts(at).split("Click")[0]


def test_lasting_states_are_bounded_by_a_cap_and_a_retention(tmp_path: Any) -> None:
    now = [1000.0]
    book = QueryStatuses(retention_seconds=3600, max_queries=3, history=str(tmp_path / "history.db"), clock=lambda: now[0])
    app = AppContext("nightly", (("cluster", "a"),), "app-1")
    for i in range(10):
        now[0] += 1
        book.observe(app, [QueryLife(f"q{i}", f"query {i}", f"run-{i}", life.FAILED)])
    book.round()
    assert sorted(r.query_id for r in book.exported) == ["q7", "q8", "q9"] and book.dropped == 7
    now[0] += 3598.5  # q7 failed over 3600 s ago (at 1008), q8 and q9 since less
    book.round()
    assert sorted(r.query_id for r in book.exported) == ["q8", "q9"]
    book.close()
    restored = QueryStatuses(retention_seconds=3600, max_queries=1, history=str(tmp_path / "history.db"), clock=lambda: now[0])
    restored.restore()
    assert [r.query_id for r in restored.exported] == ["q9"]
    restored.close()


def test_rows_written_by_anyone_are_read_safely(tmp_path: Any) -> None:
    """SQLite keeps whatever a hand or another tool writes: a row whose times are not numbers is left out, damaged
    labels cost the labels, and control characters (but newlines, escaped by every exposition) never reach a series."""
    import sqlite3

    db = str(tmp_path / "history.db")
    book = QueryStatuses(retention_seconds=3600, max_queries=10, history=db, clock=lambda: 1000.0)
    book.observe(AppContext("nightly", (), "app-1"), [QueryLife("good", "good", "run-1", life.FAILED)])
    book.close()
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO query_status VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                ("no-time", "x", "a", "[]", "", life.FAILED, "soon", 1000.0, "r", None, None, None),
                ("bad\nid", "q\x00\x1b[31m", "app\r", "{not json", "", life.FAILED, 999.0, 999.0, "r", None, None, None),
                ("sched", "s", "a", "[]", "", life.SCHEDULED, 999.0, 999.0, "r", None, "yesterday", float("inf")),
            ],
        )
    restored = QueryStatuses(retention_seconds=3600, max_queries=10, history=db, clock=lambda: 1000.0)
    restored.restore()
    assert sorted(r.query_id for r in restored.exported) == ["bad\nid", "good", "sched"]  # a newline is escaped where shown
    damaged = next(r for r in restored.exported if r.query_id == "bad\nid")
    assert damaged.static == () and not any(ch in damaged.app + (damaged.name or "") for ch in "\x00\x1b\r")
    scheduled = next(r for r in restored.exported if r.query_id == "sched")
    assert scheduled.run_start is None and scheduled.schedule_seconds is None  # not numbers: no series, the state kept
    restored.close()


def test_a_history_that_cannot_be_written_is_counted_and_the_states_still_last(tmp_path: Any) -> None:
    """The history is the watcher's own disk or network: a failure costs a counted failure and a retry, never the
    state or the watcher's round."""
    (tmp_path / "file").write_text("not a folder")
    failures: list[int] = []
    book = QueryStatuses(3600, 10, history=str(tmp_path / "file" / "history.db"), on_failure=lambda: failures.append(1))
    book.restore()
    book.observe(AppContext("nightly", (), "app-1"), [QueryLife("q", "q", "run-1", life.FAILED)])
    book.round()
    book.round()  # retried: the row is still unsaved
    assert [r.query_id for r in book.exported] == ["q"] and len(failures) == 3
    book.close()


SCHEDULED_QUERY = "d0225b8a-f856-403a-beae-0be8afba3852"  # scheduled_available_now's query: five applications, one query id


def gauges(text: str, name: str) -> dict[str, float]:
    """The value of the query-level gauge ``name`` by query id in an exposition."""
    return {s.labels["query_id"]: s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == name}


def test_a_query_on_a_schedule_waits_for_its_next_run_after_its_applications_are_forgotten(tmp_path: Any) -> None:
    """Five availableNow runs, each its own application, forgotten once it ended: from the third run on the query is
    on a schedule, and between runs the watcher keeps it ``scheduled`` with the latest start and the interval (what
    the overdue alert reads), also after a restart of the watcher on the same history; a later run runs: the
    lasting state ends. After two runs (no schedule yet) it is only stopped, and nothing of it lasts."""
    (tmp_path / "logs").mkdir()
    apps = applications(os.path.join(precision.INCIDENTS, "scheduled_available_now"))
    fleet = watcher(tmp_path)
    follow(tmp_path, fleet, apps[:2])
    assert states(fleet.exposition().decode()) == {}  # stopped twice: not yet a schedule, and stopped does not last
    follow(tmp_path, fleet, apps[2:])
    text = fleet.exposition().decode()
    assert states(text) == {SCHEDULED_QUERY: {life.SCHEDULED}}
    replayed = replay([precision.recording(r) for r in precision.run_dirs(os.path.join(precision.INCIDENTS, "scheduled_available_now"))])
    (record,) = replayed.observer.tracker.snapshot()
    starts = [record.signal_gauges[(catalog.QUERY_LAST_START, ())]]
    interval = record.signal_gauges[(catalog.QUERY_SCHEDULE_INTERVAL, ())]
    assert gauges(text, catalog.QUERY_LAST_START.name) == {SCHEDULED_QUERY: starts[0]}
    assert gauges(text, catalog.QUERY_SCHEDULE_INTERVAL.name) == {SCHEDULED_QUERY: pytest.approx(interval)}
    fleet.stop()
    again = watcher(tmp_path)
    again.poll_once()  # the logs are done: the history keeps the schedule
    text = again.exposition().decode()
    assert states(text) == {SCHEDULED_QUERY: {life.SCHEDULED}}
    assert gauges(text, catalog.QUERY_LAST_START.name) == {SCHEDULED_QUERY: starts[0]}
    assert gauges(text, catalog.QUERY_SCHEDULE_INTERVAL.name) == {SCHEDULED_QUERY: pytest.approx(interval)}
    again.stop()


def test_the_scheduled_state_lasts_only_for_a_query_on_a_schedule() -> None:
    """Every recorded incident replayed: the scheduled job (one recording per Spark it was recorded with, its truth's
    trigger ``availableNow``) ends ``scheduled``; none of the others (restarts, deploys, failures, crash loops, clean
    runs) does, nor has a schedule interval."""
    scheduled, on_a_schedule = [], []
    for scenario in sorted(os.listdir(precision.INCIDENTS)):
        runs = precision.run_dirs(os.path.join(precision.INCIDENTS, scenario))
        if not runs:
            continue
        if truth(scenario).get("trigger") == "availableNow":
            on_a_schedule.append((scenario, life.SCHEDULED, True))
        result = replay([precision.recording(r) for r in runs], Settings(http_enabled=False, placement="off"))
        for record in result.observer.tracker.snapshot():
            life_ = record.life
            if life_.state == life.SCHEDULED or life_.schedule_seconds is not None:
                scheduled.append((scenario, life_.state, life_.schedule_seconds is not None))
    assert ("scheduled_available_now", life.SCHEDULED, True) in on_a_schedule
    assert scheduled == on_a_schedule
