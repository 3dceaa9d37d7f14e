"""The browser's pure parts: root-cause lines, verdicts over replayed real signals, formatting, charts."""

from __future__ import annotations

import os
import sqlite3
import statistics
import time

import pandas as pd
import pytest

from conftest import ROOT, eventlog_dir, fixture_runs, incidents_copy, progress_lines
from incident_truth import expected, runbook_anchors, screenshots_module
from ui_text import as_shown

pytest.importorskip("streamlit")

from spark_state_observer.browser import charts, fmt
from spark_state_observer.browser.config import DEFAULT_RUNBOOK_URL
from spark_state_observer.browser.health import typical_interval
from spark_state_observer.browser.rootcause import TRACEBACK_HEADER, from_text, root_cause
from spark_state_observer.browser.verdict import ANCHORS, ATTENTION_UP_TO, NO_RUNBOOK, SEVERITY, Facts, Verdict, verdict, verdicts
from spark_state_observer.history.browse import UNKNOWN_APP, load_query_apps, load_recent_events, load_run_stats
from spark_state_observer.history.loaders import load_batch_series, load_operator_series, load_partition_lag, load_span
from spark_state_observer.model.signal_kinds import SIGNAL_KINDS
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import DEFAULT_CRASH_LOOP_RESTARTS as CRASH_LOOP_RESTARTS
from spark_state_observer.settings import DEFAULT_CRASH_LOOP_WINDOW_SECONDS as CRASH_LOOP_WINDOW_SECONDS
from spark_state_observer.settings import Settings

RESTART = fixture_runs("rocksdb_restart")
FAILURE = fixture_runs("schema_failure")


def recorded_exception() -> str:
    """The exception text Spark wrote for the recorded failed restart."""
    from spark_state_observer.offline.eventlog import read_records

    return next(
        r.payload["exception"]
        for r in read_records([eventlog_dir(FAILURE[1])])
        if getattr(r, "kind", None) == "terminated" and r.payload.get("exception")
    )


# --- root cause -------------------------------------------------------------------------------------
PY4J = (
    "py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
    '  File "/usr/lib/python3/dist-packages/py4j/clientserver.py", line 617, in _call_proxy\n'
    "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
    '  File "/job/sink.py", line 41, in write_batch\n'
    '    raise RuntimeError("downstream warehouse rejected the write (HTTP 503)")\n'
    "RuntimeError: downstream warehouse rejected the write (HTTP 503)\n\n"
    "\tat py4j.Protocol.getReturnValue(Protocol.java:476)\n"
)
JVM = (
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 7.0 failed 4 times\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)\n"
    "Caused by: org.apache.spark.SparkException: Exception thrown in awaitResult\n\tat x.y(Z.scala:1)\n"
    "Caused by: java.io.FileNotFoundException: /ckpt/state/0/3/41.changelog does not exist\n\tat a.b(C.java:2)\n\t... 12 more\n"
)


def test_root_cause_picks_the_users_python_error_inside_py4j() -> None:
    assert from_text(PY4J) == "RuntimeError: downstream warehouse rejected the write (HTTP 503)"


def test_root_cause_picks_the_innermost_jvm_cause() -> None:
    assert from_text(JVM) == "FileNotFoundException: /ckpt/state/0/3/41.changelog does not exist"  # the class without its package


def test_root_cause_of_the_recorded_spark_exception_is_its_first_line() -> None:
    text = recorded_exception()
    assert root_cause({}, text) == text.splitlines()[0].removeprefix("org.apache.spark.")


def test_root_cause_attribute_of_the_signals_wins_and_a_header_is_never_the_answer() -> None:
    assert root_cause({"root_cause": "KafkaException: broker down", "message": PY4J}, PY4J) == "KafkaException: broker down"
    assert root_cause({"message": TRACEBACK_HEADER}, None) is None
    assert root_cause({"root_cause": TRACEBACK_HEADER}, TRACEBACK_HEADER + '\n  File "x"\nValueError: bad row') == "ValueError: bad row"
    assert root_cause({"message": PY4J.splitlines()[0]}, None) != TRACEBACK_HEADER


# --- verdicts over replayed real runs -----------------------------------------------------------------
@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("verdict") / "all.db")
    replay([eventlog_dir(r) for r in RESTART + FAILURE], history=path)
    return path


def facts_of(db: str, query_id: str, now: float | None = None) -> Facts:
    runs = load_run_stats(db, query_id)
    events = load_recent_events(db, query_id)
    batches = load_batch_series(db, query_id)
    return Facts(
        events.to_dict("records"),
        runs.to_dict("records"),
        float(batches.ts.max()) if len(batches) else None,
        typical_interval(batches.ts.tolist()),
        now,
    )


def test_failed_restart_reads_failed_at_start_with_its_spark_error(db) -> None:
    qid = progress_lines(FAILURE[0])[0]["id"]
    v = verdict(facts_of(db, qid))
    assert v.kind == "failed_at_start"
    assert v.text.startswith("Failed at start at ") and "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in v.text
    assert TRACEBACK_HEADER not in v.text
    assert v.trace and recorded_exception().startswith(v.trace)  # what the history keeps of it (the model caps the text)
    assert v.runbook(DEFAULT_RUNBOOK_URL) == "./runbook?section=sparkstreamingqueryfailed"  # the browser's own page


def test_failed_at_start_with_no_batch_at_all(tmp_path) -> None:
    only = str(tmp_path / "only.db")
    replay([eventlog_dir(FAILURE[1])], history=only)
    qid = progress_lines(FAILURE[0])[0]["id"]
    assert load_span(only, qid)["batches"] == 0
    assert verdict(facts_of(only, qid)).kind == "failed_at_start"


def test_restarted_query_names_downtime_and_restore_summed_over_operators(db) -> None:
    qid = progress_lines(RESTART[0])[0]["id"]
    found = verdicts(facts_of(db, qid))
    kinds = [v.kind for v in found]
    assert kinds[0] == "restarted" and "stopped" not in kinds[:1]
    events = load_recent_events(db, qid)
    restore = sum(a["duration_seconds"] for a in events[events.kind == "restore"].attributes)
    assert f"restore {fmt.duration(restore)}" in found[0].text and " down" in found[0].text


def test_a_query_on_a_schedule_between_its_runs_is_stopped_on_its_schedule_not_restarted(tmp_path) -> None:
    """The recorded availableNow job (five clean runs, each a new application): its latest restart is a scheduled
    run's start, no incident; between runs it is stopped on its schedule (the first two restarts still show as restarts)."""
    runs = fixture_runs("incidents/scheduled_available_now")
    qid = progress_lines(runs[0])[0]["id"]
    every, first_two = str(tmp_path / "all.db"), str(tmp_path / "two.db")
    replay([eventlog_dir(r) for r in runs], history=every)
    replay([eventlog_dir(r) for r in runs[:2]], history=first_two)
    found = verdicts(facts_of(every, qid))
    # its first run's only batch lost its 2,000 rows to the watermark (rows stamped from 0, the first watermark 0): said too
    assert [v.kind for v in found] == ["late_rows", "stopped"] and found[1].text.startswith(
        "On a schedule: its last run stopped cleanly at"
    )
    assert found[0].text.startswith("Dropped late rows: from 07:19:37 the watermark dropped input by dedupe as too late;")
    assert [v.kind for v in verdicts(facts_of(first_two, qid))] == ["late_rows", "restarted", "stopped"]


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory) -> tuple[str, str, str]:
    """The recorded availableNow job replayed: (query id, history of its five runs, history of its first two)."""
    runs = fixture_runs("incidents/scheduled_available_now")
    where = tmp_path_factory.mktemp("scheduled")
    every, first_two = str(where / "all.db"), str(where / "two.db")
    replay([eventlog_dir(r) for r in runs], history=every)
    replay([eventlog_dir(r) for r in runs[:2]], history=first_two)
    return progress_lines(runs[0])[0]["id"], every, first_two


def test_a_scheduled_run_is_overdue_once_its_interval_and_the_lateness_have_passed_since_the_last_start(scheduled) -> None:
    """The recorded job runs about every 31 s; its next run is due 31 s after its last start and overdue once
    max(31 s * 25 %, 300 s) later: a few seconds after its last run it is stopped on its schedule, at 299 s
    late still so, at 301 s late overdue (a warning in the attention list, with the time it was due)."""
    qid, every, _ = scheduled
    runs = load_run_stats(every, qid)
    assert list(runs.outcome) == ["clean"] * 5
    starts = runs.started.tolist()
    interval = statistics.median(b - a for a, b in zip(starts, starts[1:]))  # start to start, as the observer takes it
    assert 29.0 < interval < 33.0
    last_start, last_end = starts[-1], float(runs.ended.iloc[-1])
    due = last_start + interval
    assert fmt.clock(due) == "07:22:11" and fmt.clock(last_end) == "07:21:45"

    soon = verdicts(facts_of(every, qid, now=last_end + 5.0))  # (and the first run's rows the watermark dropped)
    assert [v.kind for v in soon] == ["late_rows", "stopped"] and soon[1].text.startswith("On a schedule: its last run stopped cleanly at")
    assert [v.kind for v in verdicts(facts_of(every, qid, now=due + 299.0))] == ["late_rows", "stopped"]  # the least lateness is 300 s

    late = verdicts(facts_of(every, qid, now=due + 301.0))
    assert [v.kind for v in late] == ["overdue", "late_rows"]  # and not also stopped
    top = late[0]
    assert top.since == pytest.approx(due, abs=0.01)
    assert top.text == (
        f"Overdue: a run every {fmt.duration(interval)} was due at 07:22:11, none has started in the 5 min 1 s since "
        "(its last run stopped cleanly at 07:21:45)"
    )
    assert top.level == "warning" and top.severity <= ATTENTION_UP_TO and top.icon == ":material/warning:"
    assert top.runbook(DEFAULT_RUNBOOK_URL) == "./runbook?section=sparkstreamingscheduledrunoverdue"
    hours = verdict(facts_of(every, qid, now=due + 6 * 3600.0))
    assert hours.kind == "overdue" and "none has started in the 6.0 h since" in hours.text


def test_two_clean_runs_are_not_yet_a_schedule_and_never_overdue(scheduled) -> None:
    qid, _, first_two = scheduled
    last_start = float(load_run_stats(first_two, qid).started.iloc[-1])
    for late in (60.0, 600.0, 6 * 3600.0, 30 * 86400.0):
        assert "overdue" not in [v.kind for v in verdicts(facts_of(first_two, qid, now=last_start + late))], late


@pytest.mark.parametrize("scenario", ["dedup_agg_restart_43", "join_restart", "clean_busy_90s"])
def test_a_query_that_stopped_cleanly_off_a_schedule_is_never_overdue(tmp_path, scenario) -> None:
    runs = fixture_runs(f"incidents/{scenario}")
    qid = progress_lines(runs[0])[0]["id"]
    path = str(tmp_path / "one.db")
    replay([eventlog_dir(r) for r in runs], history=path)
    last = load_run_stats(path, qid).iloc[-1]
    assert last.outcome == "clean"
    for late in (60.0, 600.0, 6 * 3600.0, 30 * 86400.0):
        kinds = [v.kind for v in verdicts(facts_of(path, qid, now=float(last.ended) + late))]
        assert "overdue" not in kinds and ("stopped" in kinds or "restarted" in kinds), (late, kinds)


def signal(kind: str, ts: float, run: str = "r2", **attributes) -> dict:
    return {"kind": kind, "ts": ts, "run_id": run, "attributes": attributes}


RUNS = [
    {"run_id": "r1", "started": 0.0, "ended": 100.0, "outcome": "clean", "exception": None, "batches": 10},
    {"run_id": "r2", "started": 160.0, "ended": None, "outcome": None, "exception": None, "batches": 50},
]


SCHEDULED_RUNS = [
    {"run_id": "r1", "started": 0.0, "ended": 600.0, "outcome": "clean", "exception": None, "batches": 3},
    {"run_id": "r2", "started": 3600.0, "ended": 4200.0, "outcome": "clean", "exception": None, "batches": 3},
]


def test_a_long_interval_is_overdue_a_share_of_it_late_and_only_with_its_interval_and_a_clean_end() -> None:
    """An hourly run may be 25 % (15 min) late before it is overdue; a restart signal of a history written before
    it carried the interval, a run still open or failed, or no clock: no overdue verdict."""
    hourly = [signal("query_restarted", 3600.0, scheduled=True, schedule_interval_seconds=3600.0)]
    due = 3600.0 + 3600.0
    assert verdict(Facts(hourly, SCHEDULED_RUNS, last_batch_ts=4100.0, now=due + 899.0)).kind == "stopped"
    v = verdict(Facts(hourly, SCHEDULED_RUNS, last_batch_ts=4100.0, now=due + 901.0))
    assert (v.kind, v.since) == ("overdue", due) and v.text.startswith("Overdue: a run every 1.0 h was due at 02:00:00, ")
    for interval in (None, "3600", float("nan"), 0.0, True):
        old = [signal("query_restarted", 3600.0, scheduled=True, schedule_interval_seconds=interval)]
        assert verdict(Facts(old, SCHEDULED_RUNS, last_batch_ts=4100.0, now=due + 9000.0)).kind == "stopped", interval
    unscheduled = [signal("query_restarted", 3600.0, scheduled=False, schedule_interval_seconds=3600.0)]
    assert verdict(Facts(unscheduled, SCHEDULED_RUNS, last_batch_ts=4100.0, now=due + 9000.0)).kind != "overdue"
    assert verdict(Facts(hourly, SCHEDULED_RUNS, last_batch_ts=4100.0, now=None)).kind == "stopped"
    open_run = [SCHEDULED_RUNS[0], {**SCHEDULED_RUNS[1], "ended": None, "outcome": None}]
    assert "overdue" not in [v.kind for v in verdicts(Facts(hourly, open_run, last_batch_ts=4100.0, now=due + 9000.0))]
    failed_run = [SCHEDULED_RUNS[0], {**SCHEDULED_RUNS[1], "outcome": "exception", "exception": PY4J}]
    assert verdict(Facts(hourly, failed_run, last_batch_ts=4100.0, now=due + 9000.0)).kind == "failed"


def test_state_unbounded_names_operator_rate_and_evictions_and_clears_when_bounded() -> None:
    events = [signal("state_unbounded", 300.0, operator="dedupe", operator_index=1, rows=9000, rows_per_second=400.2, eviction_ratio=0.0)]
    v = verdict(Facts(events, RUNS, last_batch_ts=400.0, interval=10.0, now=405.0))
    assert (v.kind, v.text, v.since) == ("state_unbounded", "State unbounded: dedupe +400 rows/s, no evictions", 300.0)
    bounded = events + [signal("state_bounded", 350.0, operator="dedupe", operator_index=1)]
    assert verdict(Facts(bounded, RUNS, last_batch_ts=400.0, interval=10.0, now=405.0)).kind == "healthy"


def test_executor_lost_then_restore() -> None:
    events = [
        signal("executor_removed", 81090.0, executor_id="0"),
        signal("store_reload", 81100.0, operator="dedupe", operator_index=1, load_seconds=0.6),
    ]
    v = verdict(Facts(events, RUNS, last_batch_ts=81200.0, interval=10.0, now=81205.0))
    assert v.kind == "executor_lost" and v.text == "Executor 0 lost at 22:31:30; restore 600 ms"


def test_an_executor_lost_on_spark_4_0_says_its_stores_reloaded_without_a_time(tmp_path) -> None:
    """executor_loss_40 (PySpark 4.0.5): Spark reports no load time before 4.1, the reloads are told from the
    tasks' placement (partitions that ran elsewhere once their executor was removed). The browser says the stores
    reloaded, not "restore 0 ms" (a time nobody measured) nor "no restore seen"."""
    runs = fixture_runs("incidents/executor_loss_40")
    db = str(tmp_path / "history.db")
    replay([eventlog_dir(r) for r in runs], history=db)
    truth = SHOTS.incident_truths()["executor_loss_40"]
    qid = truth["run_facts"][0]["query_id"]
    events = load_recent_events(db, qid)
    reloads = events[events.kind == "store_reload"].attributes.tolist()
    assert reloads and all(a["evidence"] == "executor_removed,partition_migrated" and a["load_seconds"] is None for a in reloads)
    lost = [v for v in verdicts(facts_of(db, qid)) if v.kind == "executor_lost"]
    assert len(lost) == 1
    assert lost[0].text.endswith("; its state stores reloaded on other executors (this Spark reports no load time)"), lost[0].text


def test_two_executor_losses_each_name_their_own_time_and_reload() -> None:
    """Two losses 13 s apart, each followed by its own reload: a verdict each, neither with the other's cost."""
    events = [
        signal("executor_removed", 81090.0, executor_id="1"),
        signal("store_reload", 81089.5, operator="dedupe", operator_index=1, load_seconds=0.6),  # reported before the loss is
        signal("executor_removed", 81103.0, executor_id="2"),
        signal("store_reload", 81110.0, operator="dedupe", operator_index=1, load_seconds=2.5),
        signal("store_reload", 81110.0, operator="stateStoreSave", operator_index=0, load_seconds=0.5),
    ]
    found = [v for v in verdicts(Facts(events, RUNS, last_batch_ts=81200.0, interval=10.0, now=81205.0)) if v.kind == "executor_lost"]
    assert [(v.text, v.since) for v in found] == [
        ("Executor 1 lost at 22:31:30; restore 600 ms", 81090.0),
        ("Executor 2 lost at 22:31:43; restore 3.0 s", 81103.0),
    ]


def test_stalled_and_falling_behind_and_crash_loop_order() -> None:
    quiet = Facts([], RUNS, last_batch_ts=1000.0, interval=10.0, now=1200.0)
    assert verdict(quiet).kind == "stalled" and "no batch for 3 min 20 s" in verdict(quiet).text
    behind = Facts(
        [signal("falling_behind", 900.0, input_rows_per_second=1200.0, processed_rows_per_second=800.0)],
        RUNS,
        last_batch_ts=1000.0,
        interval=10.0,
        now=1001.0,
    )
    assert verdict(behind).text == "Falling behind: input 1,200 rows/s, processed 800 rows/s"
    loop_runs = [
        {"run_id": f"r{i}", "started": 30.0 * i, "ended": 30.0 * i + 1, "outcome": "exception", "exception": PY4J, "batches": 0}
        for i in range(5)
    ]
    loop = [signal("query_restarted", 30.0 * i, f"r{i}") for i in range(1, 5)] + [signal("crash_loop", 90.0, "r3", restarts=3)]
    v = verdict(Facts(loop, loop_runs, now=200.0))
    assert v.kind == "crash_loop"
    assert v.text == "Crash loop: 4 restarts in 1 min 30 s; last error RuntimeError: downstream warehouse rejected the write (HTTP 503)"
    assert [x.kind for x in verdicts(Facts(loop, loop_runs, now=200.0))].count("failed_at_start") == 0  # the loop says it


@pytest.fixture(scope="module")
def deploys(tmp_path_factory) -> dict[str, tuple[str, str, dict]]:
    """The recorded deploys replayed, by scenario: (query id, history, truth). ``deploy_sigkill``: four drivers on one
    checkpoint, each killed (SIGKILL, as the OOM killer kills) after five or so batches; ``deploy_sigterm``: the same
    stopped by SIGTERM, as a deploy stops them (each run ends with its application, cleanly)."""
    where = tmp_path_factory.mktemp("deploys")
    found = {}
    for scenario in ("deploy_sigkill", "deploy_sigterm"):
        runs = fixture_runs(f"incidents/{scenario}")
        path = str(where / f"{scenario}.db")
        replay([eventlog_dir(r) for r in runs], history=path)
        truth = SHOTS.incident_truths()[scenario]
        found[scenario] = (truth["run_facts"][0]["query_id"], path, truth)
    return found


def restarts_of(db: str, query_id: str) -> list[float]:
    events = load_recent_events(db, query_id)
    return events[events.kind == "query_restarted"].ts.tolist()


def test_killed_drivers_are_a_crash_loop_just_after_their_last_restart_with_the_newest_run_up(deploys) -> None:
    """SparkStreamingQueryCrashLooping's rule (the lifecycle's gauge): 3 restarts after runs whose end was never seen,
    within 15 min. Just after the last restart, its run processing batches, the browser says crash loop too (not just
    "Restarted"), with how long the newest run has been up, and still does one second before the window has passed
    over the third-last restart."""
    qid, db, truth = deploys["deploy_sigkill"]
    restarts = restarts_of(db, qid)
    assert len(restarts) == len(truth["restarts"]) == CRASH_LOOP_RESTARTS
    newest = load_run_stats(db, qid).iloc[-1]
    assert fmt.missing(newest.outcome) and newest.batches > 0  # up and processing when it was killed, unseen

    at = truth["run_facts"][-1]["process_ended"]  # the recording's end: 10 s after the last restart
    v = verdict(facts_of(db, qid, now=at))
    assert v.kind == "crash_loop" and v.since == restarts[0], v
    assert v.text == (
        f"Crash loop: 3 restarts in {fmt.duration(restarts[-1] - restarts[0])}; no run ended with an exception: the runs "
        "before the restarts were never seen ending (a driver killed, as the OOM killer does); the newest run has been up "
        f"{fmt.duration(at - float(newest.started))} ({fmt.plural(int(newest.batches), 'batch', 'batches')})"
    )
    assert [x.kind for x in verdicts(facts_of(db, qid, now=at))].count("restarted") == 0  # the loop says it
    assert verdict(facts_of(db, qid, now=restarts[0] + CRASH_LOOP_WINDOW_SECONDS - 1.0)).kind == "crash_loop"


def test_killed_drivers_loop_is_over_once_the_window_has_passed_with_the_newest_run_up(deploys) -> None:
    """One second after the window has passed over the third-last restart, fewer than 3 restarts lie within it: the
    loop is over (as the lifecycle's gauge and the alert say), and the other rules say the rest (restarted). So a
    recording hours or days old reads as no crash loop."""
    qid, db, truth = deploys["deploy_sigkill"]
    restarts = restarts_of(db, qid)
    over = restarts[0] + CRASH_LOOP_WINDOW_SECONDS + 1.0
    assert "crash_loop" not in [x.kind for x in verdicts(facts_of(db, qid, now=over))]
    later = verdicts(facts_of(db, qid, now=restarts[-1] + CRASH_LOOP_WINDOW_SECONDS + 1.0))
    assert "crash_loop" not in [x.kind for x in later] and "restarted" in [x.kind for x in later]
    end = truth["run_facts"][-1]["process_ended"]
    for days in (1.0, 30.0):
        assert "crash_loop" not in [x.kind for x in verdicts(facts_of(db, qid, now=end + days * 86400.0))]


@pytest.mark.parametrize("least", [2, 4])
def test_the_crash_loop_verdict_counts_the_restarts_the_observer_was_configured_with(tmp_path, least) -> None:
    """An observer run with ``crash_loop_restarts`` other than the default: the browser's loop is the alert's, so
    it holds from that many restarts. With 2, the killed drivers are a loop from their second restart (the
    default 3 would say "Restarted" there); with 4 the three restarts never make one (the default would)."""
    runs = fixture_runs("incidents/deploy_sigkill")
    db = str(tmp_path / "history.db")
    replay([eventlog_dir(r) for r in runs], settings=Settings(crash_loop_restarts=least), history=db)
    qid = SHOTS.incident_truths()["deploy_sigkill"]["run_facts"][0]["query_id"]
    restarts = restarts_of(db, qid)
    assert len(restarts) == 3
    at_second = [v.kind for v in verdicts(facts_of(db, qid, now=restarts[1] + 1.0))]
    at_end = [v.kind for v in verdicts(facts_of(db, qid, now=restarts[-1] + 1.0))]
    if least == 2:
        assert "crash_loop" in at_second and "crash_loop" in at_end
    else:
        assert "crash_loop" not in at_second and "crash_loop" not in at_end
        assert load_recent_events(db, qid).kind.tolist().count("crash_loop") == 0  # nor did the observer say one


def test_rolling_deploys_by_sigterm_are_never_a_crash_loop(deploys) -> None:
    """Each run ended with its application (``ended_with_application``, clean): restarts after clean stops do not count."""
    qid, db, truth = deploys["deploy_sigterm"]
    restarts = restarts_of(db, qid)
    assert len(restarts) == len(truth["restarts"]) == CRASH_LOOP_RESTARTS
    events = load_recent_events(db, qid)
    ends = events[events.kind == "query_terminated"].attributes.tolist()
    assert len(ends) == truth["runs"] and all(a["outcome"] == "clean" and a["ended_with_application"] for a in ends)
    end = truth["run_facts"][-1]["process_ended"]
    for now in [None, *restarts, *(r + 1.0 for r in restarts), end, restarts[-1] + CRASH_LOOP_WINDOW_SECONDS + 1.0, end + 86400.0]:
        kinds = [v.kind for v in verdicts(facts_of(db, qid, now=now))]
        assert "crash_loop" not in kinds, (now, kinds)


def test_a_loop_whose_newest_run_failed_lasts_as_the_lifecycles_crash_looping_state(incidents_db) -> None:
    """crash_loop_503: every run fails, the newest too. Like the lifecycle's lasting ``crash_looping`` state (and so
    the alert), the loop is not over when its window has passed: no run has run since."""
    want = expected("crash_loop_503", TRUTHS["crash_loop_503"])
    end = TRUTHS["crash_loop_503"]["run_facts"][-1]["process_ended"]
    at_end, days_later = (verdict(facts_of(incidents_db, want.query_id, now=now)) for now in (end, end + 86400.0))
    assert at_end.kind == days_later.kind == "crash_loop" and at_end.text == days_later.text
    assert at_end.text.startswith("Crash loop: 4 restarts in 1 min 51 s; last error ") and "has been up" not in at_end.text


def test_every_verdict_links_a_runbook_section_that_exists() -> None:
    """Every kind of verdict but 'healthy' and 'no data' has a runbook section (executor loss included)."""
    anchors = runbook_anchors()
    assert "executor-lost" in anchors and ANCHORS["executor_lost"] == "executor-lost"
    for kind in SEVERITY:
        if kind in NO_RUNBOOK:
            assert kind not in ANCHORS
        else:
            assert ANCHORS.get(kind) in anchors, kind


# --- the recorded incident corpus (tests/fixtures/incidents), judged against its truth.json -----------
SHOTS = screenshots_module()
TRUTHS = SHOTS.incident_truths()


@pytest.fixture(scope="module")
def incidents_db(incidents_history: str, tmp_path_factory) -> str:
    return incidents_copy(incidents_history, tmp_path_factory.mktemp("incidents"))


def terminated_attributes(db: str, query_id: str, run_id: str) -> dict:
    events = load_recent_events(db, query_id)
    mine = events[(events.kind == "query_terminated") & (events.run_id == run_id)]
    assert len(mine) == 1, (query_id, run_id)
    return mine.attributes.iloc[0]


@pytest.mark.parametrize("scenario", sorted(TRUTHS))
def test_each_recorded_incident_gets_its_verdict_root_cause_and_runbook(incidents_db, scenario) -> None:
    want = expected(scenario, TRUTHS[scenario])
    # on the clock, but a loop of killed drivers at its recording's end: hours later its window has long passed
    now = TRUTHS[scenario]["run_facts"][-1]["process_ended"] if want.at_end else time.time()
    found = verdicts(facts_of(incidents_db, want.query_id, now=now))
    top = found[0]
    anchors = runbook_anchors()
    if not want.alarming:
        assert top.severity >= SEVERITY["stopped"], top
    if want.kind is not None:
        assert top.kind == want.kind, top
        assert all(p in top.text for p in want.phrases), (top.text, want.phrases)
        assert TRACEBACK_HEADER not in top.text and "Py4JException" not in top.text
        assert top.anchor in anchors
    if want.among is not None:
        other = next(v for v in found if v.kind == want.among)
        assert all(p in other.text for p in want.among_phrases), (other.text, want.among_phrases)
        assert other.anchor in anchors
    if want.root_cause is not None:
        # the history keeps the signals' root cause, and the verdict shows it as the signals wrote it
        attributes = terminated_attributes(incidents_db, want.query_id, want.failing_run_id)
        assert want.root_cause in attributes["root_cause"]
        shown = root_cause({"root_cause": attributes["root_cause"]})  # one line, at most MAX_CHARS
        assert shown is not None and top.root_cause == shown and shown in top.text


# Every page of a query, for every recorded incident, rendered by Streamlit's own script runner (the same
# app.py the server runs): the headless-Chromium walk (tests/integration/test_ui_browser.py) opens one incident
# of each verdict's shape; this one opens every incident and every query page, so a value that only one
# recording holds cannot break a page unseen.
QUERY_PAGES = ("Query drilldown", "Runs", "Restores", "Partitions", "Placement")
ALERTS = ("error", "warning", "info", "success")


@pytest.fixture(scope="module")
def incident_app(incidents_db):
    """One script runner over the incidents' history, run page after page (a new runner scans every installed
    package for Streamlit components first: ~0.7 s each, most of a page's time)."""
    from streamlit.testing.v1 import AppTest

    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_STATE_OBSERVER_UI_HISTORY", incidents_db)
        env.setenv("SPARK_STATE_OBSERVER_UI_CHECKPOINT_ROOTS", "")
        yield AppTest.from_file(os.path.join(ROOT, "spark_state_observer", "browser", "app.py"), default_timeout=120)


def shown(at, kinds: tuple[str, ...]) -> list[str]:
    """The values of the page's elements of these kinds, in page order."""
    return [str(e.value) for kind in kinds for e in at.get(kind)]


@pytest.mark.parametrize("scenario", sorted(TRUTHS))
def test_every_query_page_of_each_recorded_incident_renders_with_its_verdict(incident_app, scenario) -> None:
    want = expected(scenario, TRUTHS[scenario])
    at = incident_app
    for page in QUERY_PAGES:
        at.query_params.clear()
        at.query_params["page"] = page  # the older ?page=Title link form, redirected to the page's path
        at.query_params["query"] = want.query_id
        at.run()
        assert not at.exception, (scenario, page, [e.value for e in at.exception])
        assert at.session_state["page"] == page, scenario
        text = as_shown("\n".join(shown(at, ALERTS + ("markdown", "caption", "header", "subheader"))))
        assert "Traceback" not in text and "StreamlitAPIException" not in text, (scenario, page)
        if want.batches and page in ("Query drilldown", "Runs", "Restores"):
            assert "no batches" not in text.lower(), (scenario, page)
        if page != "Query drilldown":
            continue
        alerts = [as_shown(a) for a in shown(at, ALERTS)]
        if want.kind is not None and not want.at_end:
            banner = next((a for a in alerts if all(p in a for p in want.phrases)), None)
            assert banner is not None, (scenario, alerts, want.phrases)
            assert "[runbook](" in banner, (scenario, banner)
        if want.among is not None:
            assert all(p in text for p in want.among_phrases), (scenario, want.among_phrases)
        if not want.alarming:
            assert not at.error and not at.warning, (scenario, alerts)


def test_an_old_history_without_the_root_cause_attribute_falls_back_to_the_exception_text(incidents_db, tmp_path) -> None:
    """Histories written before the signals carried ``root_cause``: the verdict still names the user's error."""
    want = expected("crash_loop_503", TRUTHS["crash_loop_503"])
    old = str(tmp_path / "old.db")
    with sqlite3.connect(incidents_db) as src, sqlite3.connect(old) as dst:
        src.backup(dst)
        dst.execute("UPDATE events SET attributes = json_remove(attributes, '$.root_cause') WHERE kind = 'query_terminated'")
    assert "root_cause" not in terminated_attributes(old, want.query_id, want.failing_run_id)
    top = verdict(facts_of(old, want.query_id, now=time.time()))
    assert top.kind == "crash_loop" and want.root_cause in top.text and TRACEBACK_HEADER not in top.text


# --- history reads ------------------------------------------------------------------------------------
def test_bucketed_series_and_partition_lag_are_read_when_rows_exceed_the_buckets(db) -> None:
    """More rows than buckets: the GROUP BY's parameters follow the WHERE's (they used to be swapped,
    comparing query_id with a float and returning nothing)."""
    qid = progress_lines(RESTART[0])[0]["id"]
    n = load_span(db, qid)["batches"]
    series = load_batch_series(db, qid, max_points=3)
    assert 0 < len(series) <= 3 and series.batches.sum() == n
    ops = load_operator_series(db, qid, max_points=3)
    assert 0 < len(ops) <= 2 * 3
    lag = load_partition_lag(db, qid, buckets=2)
    assert len(lag) > 0 and lag.groupby(["op_index", "partition", "store"]).size().max() <= 2


def test_the_application_of_each_query_is_read_and_unknown_ones_are_grouped(db, tmp_path) -> None:
    # replay names each query's application from its log's application start (issue 25), as a live observer does
    assert set(load_query_apps(db).app) == {"spark-state-observer-demo"}
    copy = str(tmp_path / "with_app.db")
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
        qid = progress_lines(RESTART[0])[0]["id"]
        dst.execute("UPDATE queries SET app = NULL WHERE query_id != ?", (qid,))  # as a history of progress lines has them
        dst.execute("UPDATE queries SET app = 'orders', app_labels = '{\"cluster\": \"prod\"}' WHERE query_id = ?", (qid,))
    apps = load_query_apps(copy).set_index("query_id")
    assert apps.loc[qid, "app"] == "orders" and apps.loc[qid, "labels"] == {"cluster": "prod"}
    assert (apps.drop(index=qid).app == UNKNOWN_APP).all()


# --- formatting and charts ----------------------------------------------------------------------------
def test_formatting() -> None:
    assert fmt.plural(1, "query", "queries") == "1 query" and fmt.plural(2, "query", "queries") == "2 queries"
    assert fmt.number(7191.0) == "7,191" and fmt.number(59200) == "59,200" and fmt.number(None) == "-"
    assert fmt.number(float("nan")) == "-" and fmt.number(2.5, 1) == "2.5"
    assert fmt.duration(0.35) == "350 ms" and fmt.duration(6.44) == "6.4 s" and fmt.duration(125) == "2 min 5 s"
    assert fmt.size(10_000_000) == "9.5 MB"
    assert fmt.when(0) == "1970-01-01 00:00:00" and fmt.clock(81090) == "22:31:30"
    assert fmt.kind("store_reload") == "state reload" and "_" not in fmt.kind("executor_removed")
    assert fmt.short_id("4a081a44-0307-4917-8d59-5040e10918fb") == "4a081a44"
    assert fmt.code("a`b") == "`` a`b ``" and fmt.md("[x](y)") == "\\[x\\]\\(y\\)"


def test_events_at_one_instant_share_one_tooltip_and_kinds_have_their_own_colours() -> None:
    events = pd.DataFrame(
        {
            "ts": [10.0, 10.0, 20.0],
            "kind": ["restore", "restore", "query_restarted"],
            "detail": ["dedupe 0.3 s", "stateStoreSave 6.4 s", ""],
        }
    )
    drawn = charts.event_frame(events)
    assert len(drawn) == 2
    assert drawn.detail.iloc[0] == "restore (dedupe 0.3 s); restore (stateStoreSave 6.4 s)" and drawn.label.iloc[1] == "restart"
    assert drawn["at"].iloc[0] == "1970-01-01 00:00:10"  # tooltips carry seconds
    assert len(set(charts.EVENT_COLORS.values())) == len(charts.EVENT_COLORS)
    assert set(fmt.KIND_LABELS) == set(charts.EVENT_COLORS) == set(SIGNAL_KINDS)


def test_units_are_chosen_from_the_values() -> None:
    assert charts.scale_unit(pd.Series([10_000_000.0]), "bytes") == (float(1 << 20), "MB")
    assert charts.scale_unit(pd.Series([90_000.0]), "ms") == (60_000.0, "min")
    assert charts.scale_unit(pd.Series([350.0]), "ms") == (1.0, "ms")
    assert charts.scale_unit(pd.Series([5.0]), "rows") == (1.0, "rows")


def test_each_verdict_is_shown_at_its_level() -> None:
    """The banner of the most severe verdict: lost input is an error like a failure, a bad run a warning, a
    recovery or a stop information, a healthy query none of these."""
    level = {kind: Verdict(kind, "").level for kind in SEVERITY}
    assert {k for k, v in level.items() if v == "error"} == {"crash_loop", "failed_at_start", "failed", "lost", "kafka_data_loss"}
    assert {k for k, v in level.items() if v == "warning"} == {
        "stalled",
        "overdue",
        "late_rows",
        "state_unbounded",
        "falling_behind",
        "kafka_lag",
        "snapshot_lagging",
        "state_skewed",
    }
    assert {k for k, v in level.items() if v == "info"} == {"executor_lost", "restarted", "stopped"}
    assert {k for k, v in level.items() if v == "success"} == {"healthy", "no_data"}
    assert {Verdict(kind, "").icon for kind in ("stalled", "overdue", "late_rows", "state_unbounded", "falling_behind")} == {
        ":material/warning:"
    }
    assert (Verdict("executor_lost", "").icon, Verdict("stopped", "").icon) == (":material/info:", ":material/stop_circle:")
    assert all(Verdict(kind, "").icon.startswith(":material/") for kind in SEVERITY)  # every kind has an icon
