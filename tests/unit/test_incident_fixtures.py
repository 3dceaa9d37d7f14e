"""The incident corpus (tests/fixtures/incidents, recorded by scripts/record_incidents.py) is what it claims.

These checks do not depend on the signal logic: each recording replays without a problem, and its
``truth.json`` agrees with what the event log itself shows (runs, run ids, restarts, the killed executor,
the injected exception). The signal tests judge the observer against this corpus; this file makes sure
the corpus is worth judging against.
"""

from __future__ import annotations

import glob
import io
import json
import os
import re
from typing import Any

import pytest

from conftest import FIXTURES
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.offline.eventlog import expand, read_records
from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

INCIDENTS = os.path.join(FIXTURES, "incidents")
SCENARIOS = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(INCIDENTS, "*", "truth.json")))
RECORDED_BY_SPARK = [s for s in SCENARIOS if os.path.isdir(os.path.join(INCIDENTS, s, "run1", "eventlog"))]
# one query per run (the clean hour's application runs four: tests/unit/test_precision.py checks it)
ONE_QUERY = [s for s in RECORDED_BY_SPARK if "queries" not in json.load(open(os.path.join(INCIDENTS, s, "truth.json")))]
# drivers ended by a signal (scripts/record_deploys.py): the Python driver dies with its JVM, a run keeps its event log only
SIGNALLED = [s for s in ONE_QUERY if "signal" in json.load(open(os.path.join(INCIDENTS, s, "truth.json")))]
# ...of which those killed and never started again (a driver lost: its log stays as the kill left it)
LOST = [s for s in SIGNALLED if "drivers_lost" in json.load(open(os.path.join(INCIDENTS, s, "truth.json")))]


def truth(scenario: str) -> dict[str, Any]:
    with open(os.path.join(INCIDENTS, scenario, "truth.json")) as f:
        return json.load(f)


def run_dirs(scenario: str) -> list[str]:
    return sorted(glob.glob(os.path.join(INCIDENTS, scenario, "run*")), key=lambda p: int(p.rsplit("run", 1)[1]))


def recording(run_dir: str) -> str:
    """The run's event log folder, or its progress lines where only those were kept (the 30-minute run)."""
    eventlog = os.path.join(run_dir, "eventlog")
    if os.path.isdir(eventlog):
        return eventlog
    return next(p for p in glob.glob(os.path.join(run_dir, "progress.jsonl*")))


def listener_events(run_dir: str) -> list[tuple[str, Any]]:
    return [(r.kind, r.payload) for r in read_records([recording(run_dir)]) if not isinstance(r, Exception)]


def raw_events(run_dir: str, name: str) -> list[dict[str, Any]]:
    """Every event of one Spark type (task, stage, executor events that replay skips)."""
    needle = f'{{"Event":"{name}"'.encode()
    found = []
    for path in expand([os.path.join(run_dir, "eventlog")]):
        with io.BufferedReader(open_decompressed(path)) as stream:
            found += [json.loads(line) for line in stream if line.startswith(needle)]
    return found


def test_the_corpus_is_there() -> None:
    """Every kind of incident of issue 12 has a recording (clean, restart, executor loss, crash loop, failures)."""
    assert {"clean_busy_90s", "dedup_agg_restart_43", "dedup_agg_restart_41", "executor_loss", "crash_loop_503", "join_restart"} <= set(
        SCENARIOS
    )
    classes = {truth(s)["failure"]["expected_class"] for s in SCENARIOS if "failure" in truth(s)}
    assert {"user_code", "sink", "source", "configuration", "python_dependency", "checkpoint_corruption"} <= classes


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_recording_replays_without_a_problem(scenario: str) -> None:
    runs = run_dirs(scenario)
    assert len(runs) == truth(scenario)["runs"]
    result = replay([recording(r) for r in runs])
    assert result.errors == []
    assert result.events > 0


@pytest.mark.parametrize("scenario", ONE_QUERY)
def test_one_run_id_per_recorded_run(scenario: str) -> None:
    facts = truth(scenario)
    started = [p["runId"] for r in run_dirs(scenario) for kind, p in listener_events(r) if kind == "started"]
    assert len(set(started)) == len(started) == facts["runs"]
    assert started == [f["run_id"] for f in facts["run_facts"]]
    # one query: every run continues the same checkpoint
    ids = {p["id"] for r in run_dirs(scenario) for kind, p in listener_events(r) if kind == "started"}
    assert len(ids) == 1


@pytest.mark.parametrize("scenario", [s for s in ONE_QUERY if s not in SIGNALLED])
def test_progress_lines_are_the_logged_batches(scenario: str) -> None:
    """The progress JSON lines kept next to each log are that run's batches (the 'recentProgress' of the run):
    consecutive logged batches, the last ones, or the first ones when Spark finished one more batch while the
    job stopped (3.5: its progress reached the event log after the job had written its lines)."""
    for run_dir in run_dirs(scenario):
        logged = [p["batchId"] for kind, p in listener_events(run_dir) if kind == "progress"]
        (path,) = glob.glob(os.path.join(run_dir, "progress.jsonl*"))  # .zstd where a long run's lines are compressed
        with open_decompressed(path) as f:
            kept = [json.loads(line)["batchId"] for line in f.read().splitlines() if line.strip()]
        # an idle query's no-data reports (its next batch id, again and again) are in its recent progress; the log has idle
        # events instead
        kept = [b for b in kept if kept.count(b) == 1]
        assert kept in (logged[len(logged) - len(kept) :], logged[: len(kept)])
        assert len(logged) - len(kept) <= 1 or kept == logged[len(logged) - len(kept) :]


@pytest.mark.parametrize("scenario", LOST)
def test_a_driver_killed_and_never_restarted_leaves_a_log_without_an_end(scenario: str) -> None:
    """SIGKILL (the OOM killer) to a driver's JVM, nothing started again: neither the application's end nor the
    query's termination is logged, the log is left in progress (a single file keeps ``.inprogress``), and it holds
    the run's batches and ids; nothing but the event log is kept."""
    facts = truth(scenario)
    (run,) = facts["run_facts"]
    assert facts["signal"] == "SIGKILL" and facts["runs"] == 1 and not facts["restarts"]
    assert [d["run_id"] for d in facts["drivers_lost"]] == [run["run_id"]] and facts["drivers_lost"][0]["killed_at"] == run["signalled_at"]
    (run_dir,) = run_dirs(scenario)
    assert os.listdir(run_dir) == ["eventlog"] and run["process_started"] < run["signalled_at"] <= run["process_ended"]
    (log,) = os.listdir(os.path.join(run_dir, "eventlog"))
    assert log.startswith("eventlog_v2_") if facts["rolling"] else log.endswith(".inprogress")
    events = listener_events(run_dir)
    assert "terminated" not in [kind for kind, _ in events] and not raw_events(run_dir, "SparkListenerApplicationEnd")
    assert not run["app_end"] and not run["query_terminated"]
    progress = [p for kind, p in events if kind == "progress"]
    assert len(progress) == run["batches"] >= 5 and {p["runId"] for p in progress} == {run["run_id"]}


@pytest.mark.parametrize("scenario", [s for s in SIGNALLED if s not in LOST])
def test_a_signalled_driver_leaves_the_log_its_truth_describes(scenario: str) -> None:
    """SIGTERM (a deploy): the JVM's shutdown hook logs the application's end, exit code 0, never the query's
    termination; SIGKILL (the OOM killer): neither. Each run's batches and ids are its log's, every run of the
    recording within the crash-loop window, and nothing but the event log kept. Where the truth names runs whose
    query termination reached the log after the application's end (a SIGTERM's race), theirs is logged there and
    only there; a recording kept without the recorder's own times has its applications' start and end."""
    facts = truth(scenario)
    term = facts["signal"] == "SIGTERM"
    assert facts["signal"] in ("SIGTERM", "SIGKILL") and facts["crash_loop"] is not term
    assert len(facts["restarts"]) == facts["runs"] - 1 >= Settings().crash_loop_restarts
    assert facts["runs_within_seconds"] <= Settings().crash_loop_window_seconds
    for run_dir, run in zip(run_dirs(scenario), facts["run_facts"], strict=True):
        assert os.listdir(run_dir) == ["eventlog"] and run["run_dir"] == os.path.basename(run_dir)
        assert run["process_started"] < run.get("signalled_at", run["process_ended"]) <= run["process_ended"]
        events = listener_events(run_dir)
        late = run["run_dir"] in facts.get("late_terminations", [])
        assert [kind for kind, _ in events].count("terminated") == int(late) and run["query_terminated"] is late
        assert (run["events_after_app_end"][-1:] == ["QueryTerminatedEvent"]) is late
        ends = raw_events(run_dir, "SparkListenerApplicationEnd")
        assert len(ends) == int(term) and run["app_end"] is term
        # Spark 3.5's SparkListenerApplicationEnd has no ExitCode (4.0 added it): a deploy's end there says none
        code = 0 if int(run["spark_version"].split(".")[0]) >= 4 else None
        assert [e.get("ExitCode") for e in ends] == ([code] if term else []) and run["exit_code"] == (code if term else None)
        progress = [p for kind, p in events if kind == "progress"]
        assert len(progress) == run["batches"] >= 5
        assert (progress[0]["batchId"], progress[-1]["batchId"]) == (run["first_batch_id"], run["last_batch_id"])
        assert {p["runId"] for p in progress} == {run["run_id"]}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if truth(s).get("restarts")])
def test_restarts_are_where_truth_says(scenario: str) -> None:
    runs = {os.path.basename(r): r for r in run_dirs(scenario)}
    for restart in truth(scenario)["restarts"]:
        assert restart["downtime_seconds"] > 0
        after = [p for kind, p in listener_events(runs[restart["run"]]) if kind == "progress"]
        before = [p for kind, p in listener_events(runs[restart["previous_run"]]) if kind == "progress"]
        if after:  # a restart that fails at once has no batch
            assert after[0]["batchId"] == restart["first_batch_id"]
            assert after[0]["runId"] == restart["run_id"]
        if before:
            assert before[-1]["batchId"] == restart["previous_last_batch_id"]


# the growth corpus's bounded runs are clean too; their own facts are checked in tests/unit/test_growth_verdict.py,
# the pace corpus's clean runs (scripts/record_pace.py) and the clean hour in tests/unit/test_precision.py
@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if truth(s).get("clean") and not {"growth", "queries", "options", "idle"} & set(truth(s))]
)
def test_clean_runs_are_clean(scenario: str) -> None:
    """One run, no executor change, no exception, the partitions it was asked for on every batch."""
    facts = truth(scenario)
    assert facts["runs"] == 1 and facts["run_facts"][0]["exception"] is None
    events = listener_events(run_dirs(scenario)[0])
    assert not [k for k, _ in events if k == "executor_removed"]
    progress = [p for kind, p in events if kind == "progress"]
    assert len(progress) > 10
    assert {o["numStateStoreInstances"] for p in progress for o in p["stateOperators"]} == {facts["partitions"]}
    assert all(p.get("exception") is None for kind, p in events if kind == "terminated")


def test_executor_loss_kills_the_executor_truth_names() -> None:
    facts = truth("executor_loss")
    run_dir = run_dirs("executor_loss")[0]
    removed = raw_events(run_dir, "SparkListenerExecutorRemoved")
    assert [e["Executor ID"] for e in removed] == [facts["killed_executor_id"]]
    # Spark notices the loss after the kill, within its heartbeat/RPC timeouts
    assert 0 <= removed[0]["Timestamp"] / 1000 - facts["killed_at"] < 180
    batches = [p["batchId"] for kind, p in listener_events(run_dir) if kind == "progress"]
    assert facts["last_batch_before_kill"] in batches and facts["first_batch_after_kill"] in batches
    # the full log: per-task state metrics, on both executors, for every partition
    ends = raw_events(run_dir, "SparkListenerTaskEnd")
    state_tasks = [e for e in ends if any("state" in str(a.get("Name", "")) for a in e["Task Info"].get("Accumulables", []))]
    assert {e["Task Info"]["Executor ID"] for e in state_tasks} >= {"0", "1"}
    assert {e["Task Info"]["Partition ID"] for e in state_tasks} >= set(range(facts["partitions"]))
    # the placement truth: partitions the killed executor held moved to another one right after the kill
    moved_off = [m for m in facts["partition_moves"] if m["from_executor"] == facts["killed_executor_id"]]
    assert moved_off and min(m["batch_id"] for m in moved_off) in (facts["first_batch_after_kill"], facts["first_batch_after_kill"] + 1)
    assert all(m["batch_id"] in batches for m in facts["partition_moves"])


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if "failure" in truth(s)])
def test_failing_runs_terminate_with_the_injected_exception(scenario: str) -> None:
    facts = truth(scenario)
    failure = facts["failure"]
    failing = failure.get("failing_runs") or [failure.get("failing_run")]
    runs = run_dirs(scenario) if failure["every_run"] else [os.path.join(INCIDENTS, scenario, run) for run in failing]
    for run_dir in runs:
        terminated = [p for kind, p in listener_events(run_dir) if kind == "terminated"]
        assert len(terminated) == 1
        text = terminated[0].get("exception") or ""
        assert failure["expected_root_cause"] in text, run_dir
    if "raised_type" in failure:
        # what we raised is the last exception line of the Python traceback Spark carried
        lines = [line for line in text.splitlines() if re.match(r"^[\w.]*(Error|Exception)\b", line)]
        assert lines and lines[-1].startswith(failure["raised_type"])


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _dropped(progress: dict[str, Any]) -> dict[str, int]:
    return {o["operatorName"]: o.get("numRowsDroppedByWatermark", 0) for o in progress.get("stateOperators", [])}


def _input_rows(progress: dict[str, Any]) -> int:
    return sum(s.get("numInputRows", 0) for s in progress.get("sources", []))


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.startswith("late_")])
def test_late_rows_are_where_truth_says(scenario: str) -> None:
    """Rows dropped as late (scripts/record_incidents.py ``late_rows``): the logged progress agrees with the truth
    (first dropping batch and its time, the last batch, the operators, the watermark's lead); a clean one drops none,
    or a trickle (``late_trickle``: counted batch by batch, well under a half percent of the input rows)."""
    facts = truth(scenario)
    (run_dir,) = run_dirs(scenario)
    progress = [p for kind, p in listener_events(run_dir) if kind == "progress"]
    dropping = [p for p in progress if any(_dropped(p).values())]
    if facts["clean"] and "late_trickle" in facts:
        trickle = facts["late_trickle"]
        assert dropping and "late_rows" not in facts and facts["expected_events"] == []
        assert (trickle["first_batch_id"], trickle["last_batch_id"]) == (dropping[0]["batchId"], progress[-1]["batchId"])
        # the event log's progress has no numInputRows of its own: its sources' sum
        assert [(b["batch_id"], b["input_rows"], b["dropped"]) for b in trickle["per_batch"]] == [
            (p["batchId"], _input_rows(p), sum(_dropped(p).values())) for p in progress
        ]
        since = [p for p in progress if p["batchId"] >= trickle["first_batch_id"]]
        assert trickle["rows_dropped"] == sum(sum(_dropped(p).values()) for p in since)
        assert trickle["rows_dropped"] < 0.005 * sum(_input_rows(p) for p in since)
        return
    if facts["clean"]:
        assert dropping == [] and "late_rows" not in facts and facts["expected_events"] == []
        return
    (late,) = facts["late_rows"]
    first = dropping[0]
    assert (late["first_batch_id"], late["from"]) == (first["batchId"], _epoch(first["timestamp"]))
    assert (late["last_batch_id"], late["until"]) == (progress[-1]["batchId"], _epoch(progress[-1]["timestamp"]))
    assert late["operators"] == sorted({op for p in dropping for op, n in _dropped(p).items() if n})
    assert late["watermark_ahead_seconds"] == _epoch(first["eventTime"]["watermark"]) - _epoch(first["timestamp"])
    assert late["rows_dropped"] == sum(sum(_dropped(p).values()) for p in progress if p["batchId"] >= first["batchId"])
