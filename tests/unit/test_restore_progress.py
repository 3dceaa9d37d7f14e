"""A restore while it runs (spark_state_observer.placement.restore_progress), replayed from recorded restarts and a recorded kill.

The recordings keep real Spark event logs: tests/fixtures/rocksdb_restart (Spark 4.3, two runs on one
checkpoint), tests/fixtures/incidents/dedup_agg_restart_35 (Spark 3.5) and tests/fixtures/placement/kill
(local-cluster[2,1,1024], executor 1 killed). What the events must say is read here from the same logs another
way: the restoring batch's job submission, its stateful stages' task count and the finish time of their tasks.
"""

from __future__ import annotations

import functools
import io
import json
import os
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import FIXTURES
from spark_state_observer.metrics import catalog
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.eventlog import expand, open_decompressed
from spark_state_observer.offline.replay import replay
from spark_state_observer.placement.feed import PlacementFeed
from spark_state_observer.placement.restore_eta import eta
from spark_state_observer.placement.restore_progress import MAX_NOTES, MAX_RESTORES, STEPS, RestoreProgress
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.settings import Settings
from spark_state_observer.signals.facts import SignalFacts

RESTART = [os.path.join(FIXTURES, "rocksdb_restart", run, "eventlog") for run in ("run1", "run2")]
RESTART_35 = [os.path.join(FIXTURES, "incidents", "dedup_agg_restart_35", "run2", "eventlog")]  # the restart's log alone
LARGE = os.path.join(FIXTURES, "restore_progress", "large", "eventlog")
KILL = [os.path.join(FIXTURES, "placement", "kill", "eventlog")]
STATE_METRIC = "number of total state rows"


def replayed(paths: list[str]) -> list[SignalEvent]:
    return list(_replayed(tuple(paths)))


@functools.cache
def _replayed(paths: tuple[str, ...]) -> tuple[SignalEvent, ...]:
    signals: list[SignalEvent] = []
    replay(list(paths), Settings(), on_signal=signals.append)
    return tuple(s for s in signals if s.kind in kinds.RESTORE_PROGRESS_KINDS)


def log_truth(paths: list[str], batch: int) -> dict[str, Any]:
    """From the raw log: the batch's first job submission (s), and per stateful stage its task count and last finish (s)."""
    submitted = None
    stages: dict[int, int] = {}
    finishes: dict[int, list[float]] = defaultdict(list)
    for path in expand(paths):
        with io.BufferedReader(open_decompressed(path)) as stream:
            for line in stream:
                event = json.loads(line)
                if event["Event"] == "SparkListenerJobStart" and event["Properties"].get("streaming.sql.batchId") == str(batch):
                    submitted = submitted or event["Submission Time"] / 1000.0
                    stages.update({s["Stage ID"]: s["Number of Tasks"] for s in event["Stage Infos"]})
                elif event["Event"] == "SparkListenerTaskEnd" and event["Stage ID"] in stages:
                    names = {a["Name"] for a in event["Task Info"]["Accumulables"]}
                    if STATE_METRIC in names and event["Task End Reason"]["Reason"] == "Success":
                        finishes[event["Stage ID"]].append(event["Task Info"]["Finish Time"] / 1000.0)
    return {"submitted": submitted, "tasks": {s: stages[s] for s in finishes}, "last_finish": {s: max(f) for s, f in finishes.items()}}


def by_operator(events: list[SignalEvent]) -> dict[str, list[SignalEvent]]:
    out: dict[str, list[SignalEvent]] = defaultdict(list)
    for e in events:
        out[e.attributes["operator"]].append(e)
    return out


def test_a_restart_is_told_while_it_runs() -> None:
    """Spark 4.3 restart (2 partitions, dedupe then aggregation): started at the job, finished at each stage's last task."""
    events = replayed(RESTART)
    first = {e.attributes["batch_id"] for e in events}
    assert first == {6}  # the second run's first batch; the first run (from batch 0) restores nothing
    truth = log_truth(RESTART, 6)
    ops = by_operator(events)
    assert set(ops) == {"dedupe", "stateStoreSave"}  # named as the first run's progress events name them
    finished_at = sorted(truth["last_finish"].values())
    for stream in ops.values():
        kinds_seen = [e.kind for e in stream]
        assert kinds_seen[0] == kinds.RESTORE_STARTED and kinds_seen[-1] == kinds.RESTORE_FINISHED
        assert kinds_seen.count(kinds.RESTORE_STARTED) == kinds_seen.count(kinds.RESTORE_FINISHED) == 1
        assert [e.timestamp for e in stream] == sorted(e.timestamp for e in stream)
        start, end = stream[0], stream[-1]
        assert start.timestamp == pytest.approx(truth["submitted"]) and start.attributes["partitions_total"] == 2
        assert end.attributes["complete"] is True and end.attributes["partitions_done"] == 2
        assert end.attributes["duration_seconds"] == pytest.approx(end.timestamp - truth["submitted"], abs=0.002)
        progress = [e for e in stream if e.kind == kinds.RESTORE_PROGRESS]
        assert [p.attributes["partitions_done"] for p in progress] == [1]
        assert progress[0].attributes["eta_seconds"] > 0
        assert progress[0].attributes["elapsed_seconds"] == pytest.approx(progress[0].timestamp - truth["submitted"], abs=0.002)
    # the dedupe's stage ends first, then the aggregation's: each finished at its own stage's last task
    assert ops["dedupe"][-1].timestamp == pytest.approx(finished_at[0])
    assert ops["stateStoreSave"][-1].timestamp == pytest.approx(finished_at[1])
    assert set(truth["tasks"].values()) == {2}
    # 4.3 reports the load per task: the dedupe replayed changelog files
    assert ops["dedupe"][-1].attributes["changelog_files"] > 0 and ops["dedupe"][-1].attributes["load_seconds"] > 0


def test_a_large_restore_counts_every_changelog_file_the_build_wrote() -> None:
    """scripts/record_restore.py: 16 partitions, 80 batches, no snapshot. The dedupe's tasks replay every file
    its partitions wrote; the aggregation's first load (StateStoreRestore) reports nothing, its second none."""
    folder = os.path.join(FIXTURES, "restore_progress", "large")
    with open(os.path.join(folder, "truth.json")) as f:
        truth = json.load(f)
    events = replayed([LARGE])
    finished = {e.attributes["operator_node"]: e.attributes for e in events if e.kind == kinds.RESTORE_FINISHED}
    assert set(finished) == {"StreamingDeduplicate", "StateStoreSave"}
    assert all(a["complete"] and a["partitions_done"] == a["partitions_total"] == truth["partitions"] for a in finished.values())
    assert (
        finished["StreamingDeduplicate"]["changelog_files"]
        == truth["changelog_files"] // 2
        == truth["partitions"] * truth["batches_before_restart"]
    )
    assert finished["StateStoreSave"]["changelog_files"] == 0  # aggregations double-load: the measured load is the cheap one
    progress = [e for e in events if e.kind == kinds.RESTORE_PROGRESS]
    assert all(e.attributes["eta_seconds"] > 0 for e in progress if e.attributes["partitions_done"] < truth["partitions"])
    per_operator = {n: sum(e.attributes["operator_node"] == n for e in progress) for n in finished}
    assert all(n <= STEPS for n in per_operator.values())  # bounded: at most one per tenth of the partitions


def test_spark_35_has_progress_without_load_figures() -> None:
    """3.5 reports no load metrics per task: partitions and the ETA are told, files and load time are not."""
    events = replayed(RESTART_35)
    truth = log_truth(RESTART_35, 8)
    finished = [e for e in events if e.kind == kinds.RESTORE_FINISHED]
    assert len(finished) == 2 and all(e.attributes["partitions_done"] == e.attributes["partitions_total"] == 4 for e in finished)
    assert sorted(e.timestamp for e in finished) == pytest.approx(sorted(truth["last_finish"].values()))
    assert not any("changelog_files" in e.attributes or "load_seconds" in e.attributes for e in events)
    progress = [e for e in events if e.kind == kinds.RESTORE_PROGRESS]
    assert progress and all(e.attributes["eta_seconds"] is not None for e in progress)


def test_a_batch_the_previous_run_died_in_is_the_one_restored() -> None:
    """Spark 4.3: the first run was stopped inside batch 8, which the second run runs again, restoring first."""
    folder = os.path.join(FIXTURES, "incidents", "dedup_agg_restart_43")
    with open(os.path.join(folder, "truth.json")) as f:
        first = json.load(f)["restarts"][0]["first_batch_id"]
    events = replayed([os.path.join(folder, run, "eventlog") for run in ("run1", "run2")])
    assert {e.attributes["batch_id"] for e in events} == {first}
    assert [e.kind for e in events].count(kinds.RESTORE_FINISHED) == 2
    assert all(e.attributes["complete"] for e in events if e.kind == kinds.RESTORE_FINISHED)


def test_live_callbacks_match_the_log() -> None:
    """The recorder's restart with the observer attached (the driver's REST API polled; local-cluster[2,1,1024],
    executor 1 killed before the restoring batch): each partition the callbacks told is one the log has, at the
    time its task ended there, and the restores finish where the log's stages end."""
    folder = os.path.join(FIXTURES, "restore_progress", "large_kill")
    with open(os.path.join(folder, "live_events.jsonl")) as f:
        live = [json.loads(line) for line in f if line.strip()]
    logged = replayed([os.path.join(folder, "eventlog")])
    restart = {e.attributes["batch_id"] for e in logged if e.attributes["reason"] == "restart"}
    assert {e["attributes"]["batch_id"] for e in live} == restart  # the live path judges the same batch
    truth = log_truth([os.path.join(folder, "eventlog")], restart.pop())
    finishes = sorted(truth["last_finish"].values())
    told = [e for e in live if e["kind"] == kinds.RESTORE_PROGRESS]
    assert len(told) >= 10 and all(e["attributes"]["partitions_total"] == 16 for e in told)
    assert all(e["received"] >= e["timestamp"] for e in live)  # told after it happened, never before
    last = {e["attributes"]["operator"]: e["timestamp"] for e in live if e["kind"] == kinds.RESTORE_PROGRESS}
    assert all(t <= finishes[-1] + 0.01 for t in last.values())


def test_executor_loss_restores_the_next_batch() -> None:
    """The kill recording: after executor 1 is removed, the next batch reloads its partitions on executor 0."""
    events = replayed(KILL)
    assert {e.attributes["reason"] for e in events} == {"executor_lost"}
    (batch,) = {e.attributes["batch_id"] for e in events}
    truth = log_truth(KILL, batch)
    finished = [e for e in events if e.kind == kinds.RESTORE_FINISHED]
    assert sorted(e.timestamp for e in finished) == pytest.approx(sorted(truth["last_finish"].values()))
    assert all(e.attributes["partitions_total"] == 4 for e in finished)


def test_progress_is_bounded_and_the_eta_follows_the_rate() -> None:
    """Many partitions: at most one progress event per tenth (or per interval); the ETA is the observed rate's."""
    model = RestoreProgress(interval_seconds=1e9)
    model.on_run_started("q", "r")
    model.on_job("q", "r", 3, 100.0, 1000, {0: "StateStoreSave"})
    for p in range(1000):  # two tasks a second, from t=101
        model.on_task("q", 3, 0, "StateStoreSave", p, 101.0, 101.0 + (p + 1) / 2.0, {})
    notes = model.take()
    progress = [n for n in notes if n.kind == kinds.RESTORE_PROGRESS]
    assert notes[0].kind == kinds.RESTORE_STARTED and notes[-1].kind == kinds.RESTORE_FINISHED
    assert len(progress) == STEPS - 1  # 10 %, ..., 90 %; 100 % is the finish
    half = next(n for n in progress if n.attributes["partitions_done"] == 500)
    assert half.attributes["eta_seconds"] == pytest.approx(250.0)  # 500 left at 2 a second
    assert notes[-1].attributes["duration_seconds"] == pytest.approx(101.0 + 500.0 - 100.0)
    assert eta(10, 0, 1.0, 5.0) is None and eta(None, 3, 1.0, 5.0) is None


def test_memory_is_bounded() -> None:
    """More restores than kept: the oldest is finished as incomplete; notes nobody takes are dropped, counted."""
    model = RestoreProgress()
    for q in range(MAX_RESTORES + 5):
        model.on_run_started(f"q{q}", "r")
        model.on_job(f"q{q}", "r", 1, float(q), 4, {0: "StateStoreSave"})
    assert len(model.active()) == MAX_RESTORES
    finished = [n for n in model.take() if n.kind == kinds.RESTORE_FINISHED]
    assert len(finished) == 5 and not any(n.attributes["complete"] for n in finished)
    for q in range(MAX_NOTES):
        model.on_run_started(f"x{q}", "r")
        model.on_job(f"x{q}", "r", 1, 1.0, 4, {0: "StateStoreSave"})
    assert len(model.notes) == MAX_NOTES and model.dropped > 0


def restart_scenario(kind: str) -> SimpleNamespace:
    """``kind``'s events on the recorded 4.3 restart, as tests/unit/test_signal_kinds.py reads a scenario."""
    return SimpleNamespace(signals=[e for e in replayed(RESTART) if e.kind == kind])


RESTORE_PROGRESS_SCENARIOS = {kind: functools.partial(restart_scenario, kind) for kind in kinds.RESTORE_PROGRESS_KINDS}


def test_gauges_follow_the_log_line_by_line() -> None:
    """As ``watch`` feeds a log (lines as they come, a tick between): the restore's gauges rise and go."""
    feed = PlacementFeed(EventLogSource())
    source = feed.source
    assert isinstance(source, EventLogSource)
    seen: list[tuple[str, float | None]] = []  # (metric, value) of the dedupe (named as its progress will name it), in order
    for path in expand([LARGE]):
        with io.BufferedReader(open_decompressed(path)) as stream:
            for line in stream:
                source.feed_line(line.rstrip(b"\n"))
                facts = SignalFacts()
                feed.tick(facts, lambda q: q)
                seen += [(u.spec.name, u.value) for u in facts.updates if dict(u.labels).get("operator") == "dedupe"]
    remaining = [v for name, v in seen if name == catalog.RESTORE_PARTITIONS_REMAINING.name]
    assert remaining[0] == 16.0 and remaining[-1] is None  # started with every partition left; gone at the finish
    left = remaining[1:-1]
    assert left and all(a > b for a, b in zip(left, left[1:])) and left[0] < 16.0 and left[-1] >= 1.0
    running = [v for name, v in seen if name == catalog.RESTORE_IN_PROGRESS.name]
    assert running == [1.0] * (len(running) - 1) + [None]
    etas = [v for name, v in seen if name == catalog.RESTORE_ETA.name]
    assert etas[0] is None and all(v is not None and v > 0 for v in etas[1:-1]) and etas[-1] is None


RESTORES = sorted(
    name
    for name in os.listdir(os.path.join(FIXTURES, "incidents"))
    if name.startswith("restore_") and os.path.isdir(os.path.join(FIXTURES, "incidents", name, "run2", "eventlog"))
)


@pytest.mark.parametrize("name", RESTORES)
def test_a_restore_names_its_operator_as_the_progress_does(name: str) -> None:
    """A restore is told before the run's first progress, by its plan node; the name it gives must be the one the
    progress events then give that operator (``spark_events.WRITER_OPERATOR_NAMES``), or its events and the
    operator's metrics are two series (Spark 4.1+ names the Python transformWithState's node
    ``TransformWithStateInPySpark``, its progress ``transformWithStateInPandasExec``)."""
    run2 = os.path.join(FIXTURES, "incidents", name, "run2")
    with io.BufferedReader(open_decompressed(os.path.join(run2, "progress.jsonl"))) as stream:
        progress_names = {(i, op["operatorName"]) for line in stream for i, op in enumerate(json.loads(line)["stateOperators"])}
    told = {(e.attributes["operator_index"], e.attributes["operator"]) for e in replayed([os.path.join(run2, "eventlog")])}
    assert told, f"{name}: no restore told"
    assert told <= progress_names, f"{name}: restores name {sorted(told - progress_names)}, the progress {sorted(progress_names)}"


@pytest.mark.parametrize("name", ["restore_session_35", "restore_tws"])
def test_watch_names_a_restored_operator_as_replay_does(tmp_path: Any, name: str) -> None:
    """The watcher knows the application's Spark from its identity, replay from the log's start: both name the
    restoring operator as that Spark's progress does (3.5's session window ``defaultName``, 4.3's Python
    transformWithState ``transformWithStateInPandasExec``)."""
    from test_watch_restart_costs import applications, followed_and_replayed, of_kind

    run2 = os.path.join("incidents", name, "run2")
    said = followed_and_replayed(tmp_path, applications(run2))
    with io.BufferedReader(open_decompressed(os.path.join(FIXTURES, run2, "progress.jsonl"))) as stream:
        progress_names = {op["operatorName"] for line in stream for op in json.loads(line)["stateOperators"]}
    for side in ("live", "replayed"):
        started = of_kind(said[side], kinds.RESTORE_STARTED)
        assert started and {a["operator"] for a in started} <= progress_names, (side, started)
