"""A driver killed without a word is ``lost`` within the query's cadence, never a live idle query (issue 50 item 1).

The recordings are real (``scripts/record_deploys.py``, ``scripts/record_incidents.py``): drivers SIGKILLed as the
OOM killer kills them and never started again, their logs left as Spark left them (a rolling folder and a single
``.inprogress`` file, both zstd; also cut inside the last frame, as a kill during a write leaves it), and a restart
after such a kill. The watcher follows
them on a simulated clock (``bench.watch_paced``), so minutes of silence take no minutes here.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

import pytest
from test_watch_stall_clock import values

from bench import precision
from bench.watch_paced import Log, PacedWatch, _copy_as_left
from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.mixin.rules import LOST_RECENT_SECONDS
from spark_state_observer.model.spark_time import no_data_progress_seconds
from spark_state_observer.settings import Settings

KILLED = ["driver_killed", "driver_killed_single_file"]
STEP = 2.0  # the watcher's default poll interval


def truth(name: str) -> dict[str, Any]:
    with open(os.path.join(precision.INCIDENTS, name, "truth.json")) as f:
        return json.load(f)


def paced_watch(tmp_path: Any, start: float, **settings: Any) -> PacedWatch:
    (tmp_path / "logs").mkdir(exist_ok=True)
    s = Settings(**{"http_enabled": False, "placement": "off", "history_path": str(tmp_path / "history.db"), **settings})

    def make(clock: Any) -> FleetObserver:
        return FleetObserver([str(tmp_path / "logs")], s, WatchOptions(history=True), serve=False, clock=clock)

    return PacedWatch(str(tmp_path / "logs"), make, start, STEP)


def lifecycle(fleet: FleetObserver, query: str) -> dict[str, float]:
    series = fleet.exposition()
    states = ("running", "idle", "lost", "crash_looping", "failed", "stopped")
    return {s: v for s in states for v in values(series, "spark_streaming_query_lifecycle", query=query, state=s) if v}


def browser_verdicts(tmp_path: Any, query_id: str, now: float) -> list[Any]:
    """The state browser's verdicts on the query, from the watcher's history (as ``test_ui_verdict.facts_of``)."""
    pytest.importorskip("streamlit")
    from test_ui_verdict import facts_of

    from spark_state_observer.browser.verdict import verdicts

    return verdicts(facts_of(str(tmp_path / "history.db"), query_id, now=now))


def signals(tmp_path: Any) -> list[tuple[str, str, dict[str, Any]]]:
    with sqlite3.connect(tmp_path / "history.db") as conn:
        rows = conn.execute("SELECT kind, run_id, attributes FROM events ORDER BY ts").fetchall()
    return [(kind, run_id, json.loads(attrs or "{}")) for kind, run_id, attrs in rows]


@pytest.mark.parametrize(
    ("name", "paced", "cut"),
    [("driver_killed", False, 0), ("driver_killed_single_file", False, 0), ("driver_killed", False, 40), ("driver_killed", True, 0)],
    ids=["as_left", "single_file", "mid_frame", "paced"],
)
def test_a_killed_driver_never_restarted_is_lost_within_two_minutes_of_its_log_s_last_write(
    tmp_path: Any, name: str, paced: bool, cut: int
) -> None:
    """The log as the killed driver left it, copied in at once (also with its last frame cut: killed while it wrote);
    or written at the pace the driver wrote it, the watcher following it live from its first line until the kill."""
    log = Log.of(os.path.join(precision.INCIDENTS, name, "run1", "eventlog"), paced=paced)
    log.cut = cut
    watch = paced_watch(tmp_path, (log.start if paced else log.end) - 10)
    watch.add(log)
    states: list[tuple[float, dict[str, float]]] = []
    watch.run(log.end + 240, lambda now: states.append((now - log.end, lifecycle(watch.fleet, name))))
    watch.fleet.stop()

    running = [t for t, s in states if s == {"running": 1.0}]
    lost = [t for t, s in states if s == {"lost": 1.0}]
    # running from the log's arrival until 2 minutes of silence, then lost for good (the log never grows again)
    assert running and lost and max(running) < min(lost), states
    assert 120.0 < min(lost) <= 120.0 + 2 * STEP, states
    assert all(t in lost for t, _ in states if t >= min(lost))
    found = [(kind, attrs) for kind, run_id, attrs in signals(tmp_path) if kind == "query_lost"]
    assert len(found) == 1 and found[0][1]["limit_seconds"] == 120.0 and found[0][1]["seconds_silent"] > 120.0, found
    assert not [k for k, _, _ in signals(tmp_path) if k in ("stall_recovered", "query_terminated")]
    # the browser, reading the watcher's history: the driver lost, not a stall, with its runbook section
    found = browser_verdicts(tmp_path, truth(name)["run_facts"][0]["query_id"], log.end + 240)
    assert found[0].kind == "lost" and found[0].text.startswith("Driver lost at "), found
    assert found[0].runbook("runbook.md") == "runbook.md#sparkstreamingquerylost"
    assert "stalled" not in [v.kind for v in found]


def test_a_live_idle_query_is_never_lost(tmp_path: Any) -> None:
    """A real idle query (two batches, then no input for over two minutes: an idle event every 10 s), its log
    written at its pace: idle, never lost, then stopped; and the watcher keeps following it 3 minutes after its end."""
    log = Log.of(os.path.join(precision.INCIDENTS, "idle_query", "run1", "eventlog"), paced=True)
    watch = paced_watch(tmp_path, log.start - 10)
    watch.add(log)
    states: list[tuple[float, dict[str, float]]] = []
    watch.run(log.end + 180, lambda now: states.append((now, lifecycle(watch.fleet, "idle_query"))))
    watch.fleet.stop()
    idle = [t for t, s in states if s == {"idle": 1.0}]
    assert idle and max(idle) - min(idle) > 120.0, states  # idle for longer than the lost limit
    assert not [s for _, s in states if "lost" in s]
    assert not [k for k, _, _ in signals(tmp_path) if k in ("query_lost", "stalled")]


def test_a_lost_query_lasts_after_its_application_is_forgotten(tmp_path: Any) -> None:
    log = Log.of(os.path.join(precision.INCIDENTS, "driver_killed", "run1", "eventlog"), paced=False)
    watch = paced_watch(tmp_path, log.end - 10)
    watch.fleet.watcher.lost_after_seconds, watch.fleet.watcher.grace_seconds = 200.0, 10.0
    watch.add(log)
    watch.run(log.end + 260)
    apps = watch.fleet.applications()
    states = lifecycle(watch.fleet, "driver_killed")
    watch.fleet.stop()
    assert apps == {}  # the application is forgotten (lost at 200 s, grace 10 s)
    assert states == {"lost": 1.0}


def test_a_later_application_of_the_query_takes_a_lost_one_over_as_a_restart_with_its_downtime(tmp_path: Any) -> None:
    t = truth("deploy_sigkill")
    first, second = (Log.of(os.path.join(precision.INCIDENTS, "deploy_sigkill", run, "eventlog"), paced=False) for run in ("run1", "run2"))
    watch = paced_watch(tmp_path, first.end - 10)
    watch.add(first)
    watch.run(first.end + 130)
    lost = lifecycle(watch.fleet, "deploy_sigkill")
    second.end = watch.now  # started again after the verdict: its log (killed too) arrives now
    watch.add(second)
    watch.run(watch.now + 20)
    after = lifecycle(watch.fleet, "deploy_sigkill")
    watch.fleet.stop()

    assert lost == {"lost": 1.0}
    assert after == {"running": 1.0}
    restart = t["restarts"][0]
    found = [attrs for kind, run_id, attrs in signals(tmp_path) if kind == "query_restarted" and run_id == restart["run_id"]]
    assert len(found) == 1
    # the downtime from the lost run's last batch to the new run's start, on the drivers' own clocks
    recorded = json.loads(open(os.path.join(precision.INCIDENTS, "deploy_sigkill", "truth.json")).read())["run_facts"]
    assert 0 < found[0]["downtime_seconds"] < recorded[1]["process_started"] - recorded[0]["signalled_at"] + 30


MONTH = 30 * 86400.0
LOST_BOUND = 120.0  # lost_min_seconds: the bound these recordings' queries get


@pytest.mark.parametrize("name", KILLED)
def test_a_driver_killed_a_month_before_the_watcher_started_is_lost_since_its_last_event_and_pages_no_one(tmp_path: Any, name: str) -> None:
    """The killed driver's log as it was left, its files dated at its last event, found by a watcher started 30 days
    later: lost once the watcher saw it silent for the query's bound (its own clock judges, so no file server's or
    driver's clock can make a live one lost), dated at the log's last sign of life, not at the watcher's start; its
    since is what the lost alert reads to page only for a recent loss."""
    log = Log.of(os.path.join(precision.INCIDENTS, name, "run1", "eventlog"), paced=False)
    start = log.end + MONTH
    watch = paced_watch(tmp_path, start)
    _copy_as_left(log, str(tmp_path / "logs"))
    for folder, _, files in os.walk(tmp_path / "logs"):
        for f in files:
            os.utime(os.path.join(folder, f), (log.end, log.end))  # as the killed driver left them
    states: list[tuple[float, dict[str, float], list[float]]] = []
    stalled: list[list[float]] = []

    def seen(now: float) -> None:
        series = watch.fleet.exposition()
        since = values(series, "spark_streaming_query_lost_since_timestamp_seconds", query=name)
        states.append((now - start, lifecycle(watch.fleet, name), since))
        stalled.append(values(series, "spark_streaming_query_stalled", query=name))

    watch.run(start + 240, seen)
    watch.fleet.stop()

    lost = [t for t, s, _ in states if s == {"lost": 1.0}]
    # lost once this watcher saw it silent for the query's bound (two minutes by default), and dated a month back
    assert lost and min(lost) <= LOST_BOUND + 3 * STEP and all(t in lost for t, _, _ in states if t >= min(lost)), states
    found = [(run_id, attrs) for kind, run_id, attrs in signals(tmp_path) if kind == "query_lost"]
    assert len(found) == 1 and found[0][1]["seconds_silent"] > MONTH, found
    with sqlite3.connect(tmp_path / "history.db") as conn:
        (ts,) = conn.execute("SELECT ts FROM events WHERE kind = 'query_lost'").fetchone()
    assert log.end <= ts < log.end + 5.0, (ts, log.end)  # its last event, not the watcher's start
    # a stall may be said while the watcher waits out the bound; the loss replaces it (a dead driver is no stall)
    assert stalled[-1] in ([], [0.0]), stalled[-1]
    # the exported since is the same time, older than the alert's recent window: no fresh-loss condition
    since = [v for _, s, v in states if s == {"lost": 1.0} and v]
    assert since and all(v == [since[0][0]] and abs(v[0] - ts) < 1e-3 for v in since), since
    assert since[0][0] < start - LOST_RECENT_SECONDS


def test_the_no_data_interval_of_the_application_sets_the_lost_bound() -> None:
    """Spark's time settings as its timeConf reads them: a bare number is milliseconds."""
    assert no_data_progress_seconds({}) == 10.0
    assert no_data_progress_seconds({"spark.sql.streaming.noDataProgressEventInterval": "90s"}) == 90.0
    assert no_data_progress_seconds({"spark.sql.streaming.noDataProgressEventInterval": "120000"}) == 120.0
    assert no_data_progress_seconds({"spark.sql.streaming.noDataProgressEventInterval": "2min"}) == 120.0
    assert no_data_progress_seconds({"spark.sql.streaming.noDataProgressEventInterval": "soon"}) == 10.0
