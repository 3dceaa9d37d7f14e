"""Placement of state partitions, on event logs recorded from real local-cluster runs (scripts/record_placement.py).

Each fixture's ``truth.json`` was read from the live driver's REST API while the run was alive (task by task,
which executor ran it), and names the executor the script killed; the tests hold the replayed event log
against it.
"""

from __future__ import annotations

import copy
import json
import os
import random
from itertools import pairwise
from typing import Any

import pytest

from conftest import FIXTURES
from spark_state_observer.metrics.catalog import COUNTER
from spark_state_observer.offline.task_events import read_events, replay_placement
from spark_state_observer.placement.tasks import BatchTasks, TaskEventReader
from spark_state_observer.placement.tracker import CAUSE_EXECUTOR_REMOVED as EXECUTOR_REMOVED
from spark_state_observer.placement.tracker import (
    CAUSES,
    COSTLIEST,
    LOCALITY_FALLBACK,
    PLACEMENT_METRICS,
    OperatorBatch,
    PartitionStat,
    PlacementTracker,
    advise,
)

PLACEMENT = os.path.join(FIXTURES, "placement")


def scenario(name: str) -> tuple[dict, str]:
    base = os.path.join(PLACEMENT, name)
    assert os.path.isdir(base), f"no fixture {base}; run scripts/record_placement.py {name}"
    with open(os.path.join(base, "truth.json")) as f:
        return json.load(f), os.path.join(base, "eventlog")


def truth_placement(truth: dict) -> dict[tuple[int, int], dict[int, str]]:
    """(batch, stage) -> partition -> executor of the last successful attempt, from the live REST reading."""
    out: dict[tuple[int, int], dict[int, tuple[float, str]]] = {}
    for stage in truth["stages"]:
        if stage["status"] != "COMPLETE":
            continue  # the truth was read while the last batch ran
        slot = out.setdefault((stage["batch_id"], stage["stage_id"]), {})
        for t in stage["tasks"]:
            if t["status"] == "SUCCESS":
                key = (stage["stage_attempt"], t["launch_time"])
                if t["partition_id"] not in slot or key >= slot[t["partition_id"]][0]:
                    slot[t["partition_id"]] = (key, t["executor_id"])  # type: ignore[assignment]
    return {k: {p: ex for p, (_, ex) in v.items()} for k, v in out.items()}


def replayed(eventlog: str) -> tuple[PlacementTracker, list[OperatorBatch], dict[tuple[int, int], int]]:
    """The replayed operator batches, and which stage each (batch, operator) ran in."""
    tracker, batches, errors = replay_placement([eventlog])
    assert errors == []
    stages: dict[tuple[int, int], int] = {}
    reader = TaskEventReader()
    items = [item for event in read_events([eventlog]) for item in reader.feed(event)] + reader.close()
    for item in items:
        if isinstance(item, BatchTasks):
            for run in item.runs:
                stages[(item.batch_id, run.operator)] = run.stage_id
    return tracker, batches, stages


@pytest.mark.parametrize("name", ["kill", "clean", "locality"])
def test_replayed_placement_equals_the_live_status_store(name: str) -> None:
    """Task partition id = state partition id, and every stateful task lands where the driver saw it run."""
    truth, eventlog = scenario(name)
    _, batches, stages = replayed(eventlog)
    expected = truth_placement(truth)
    by_stage = {(ob.batch_id, stages[(ob.batch_id, ob.operator)]): ob for ob in batches}
    # the truth was read just before the query stopped: the log may hold one batch more
    assert set(expected) <= set(by_stage) and len(by_stage) - len(expected) <= 2
    for key, placement in expected.items():
        assert by_stage[key].placement == placement, key
    for ob in batches:
        assert sorted(ob.placement) == list(range(truth["shuffle_partitions"]))


def test_migrated_partitions_are_exactly_those_the_killed_executor_held() -> None:
    truth, eventlog = scenario("kill")
    killed = truth["killed"]["executor_id"]
    _, batches, stages = replayed(eventlog)
    # truth names operators by the order of their stages within a batch; the replay by plan order
    position = {}
    for ob in batches:
        in_batch = sorted(s for (b, _), s in stages.items() if b == ob.batch_id)
        position[ob.operator] = in_batch.index(stages[(ob.batch_id, ob.operator)])
    held = {(op, p) for op, pos in position.items() for p in truth["held_by_killed"].get(str(pos), [])}
    assert held, "the killed executor held no partition: the run proves nothing"
    migrations = [m for ob in batches for m in ob.migrations]
    assert {(m.operator, m.partition) for m in migrations} == held
    assert all(m.from_executor == killed and m.cause == EXECUTOR_REMOVED for m in migrations)
    assert all(m.load_seconds is not None and m.load_seconds > 0 for m in migrations)
    assert all(m.to_executor != killed for m in migrations)


def test_every_store_loaded_from_the_checkpoint_after_the_first_batch_is_a_migration() -> None:
    """Spark 4.2+ counts loads from external storage per task: after batch 0, only migrated partitions load."""
    _, eventlog = scenario("kill")
    reader = TaskEventReader()
    runs = [r for e in read_events([eventlog]) for item in reader.feed(e) if isinstance(item, BatchTasks) for r in item.runs]
    loaded = {(r.batch_id, r.operator, r.partition) for r in runs if r.batch_id > 0 and (r.loads_from_dfs or 0) > 0}
    _, batches, _ = replayed(eventlog)
    migrated = {(ob.batch_id, m.operator, m.partition) for ob in batches for m in ob.migrations}
    assert loaded and loaded <= migrated


def test_the_kill_is_one_partition_migrated_fact_per_operator_with_its_cost() -> None:
    _, eventlog = scenario("kill")
    tracker, batches, _ = replayed(eventlog)
    facts = list(tracker.facts)
    moved = [ob for ob in batches if ob.migrations]
    assert [(f.attributes["batch_id"], f.attributes["operator_id"]) for f in facts] == [(ob.batch_id, ob.operator) for ob in moved]
    for fact, ob in zip(facts, moved):
        assert fact.kind == "partition_migrated"
        assert fact.attributes["migrated"] == len(ob.migrations)
        assert fact.attributes["causes"] == {EXECUTOR_REMOVED: len(ob.migrations)}
        assert fact.attributes["load_seconds"] == pytest.approx(sum(m.load_seconds or 0 for m in ob.migrations))
        assert fact.attributes["stickiness"] == pytest.approx(1 - len(ob.migrations) / len(ob.placement))
    samples = list(tracker.samples())
    removed = sum(
        v for spec, labels, v in samples if spec.name == "spark_state_partition_migrations" and labels["cause"] == EXECUTOR_REMOVED
    )
    assert removed == sum(len(ob.migrations) for ob in moved)


def test_nothing_migrates_in_a_clean_run() -> None:
    truth, eventlog = scenario("clean")
    assert truth["killed"]["executor_id"] is None
    tracker, batches, _ = replayed(eventlog)
    assert len({ob.batch_id for ob in batches}) >= 8
    assert all(ob.migrations == [] for ob in batches)
    assert all(ob.stickiness == 1.0 for ob in batches if ob.compared)
    assert list(tracker.facts) == []
    assert all(v == 0 for spec, _, v in tracker.samples() if spec.name == "spark_state_partition_migrations")


def test_locality_fallback_moves_partitions_while_both_executors_live() -> None:
    truth, eventlog = scenario("locality")
    assert truth["killed"]["executor_id"] is None
    _, batches, stages = replayed(eventlog)
    expected = truth_placement(truth)
    # independently from the live reading: partitions whose executor changed from one batch to the next
    moves = 0
    by_op: dict[int, list[OperatorBatch]] = {}
    for ob in batches:
        by_op.setdefault(ob.operator, []).append(ob)
    for obs in by_op.values():
        for prev, cur in pairwise(obs):
            before, after = (
                expected[(prev.batch_id, stages[(prev.batch_id, prev.operator)])],
                expected[(cur.batch_id, stages[(cur.batch_id, cur.operator)])],
            )
            changed = {p for p in after if p in before and before[p] != after[p]}
            assert {m.partition for m in cur.migrations} == changed
            moves += len(changed)
    assert moves > 0, "locality wait 0 moved nothing in this recording"
    assert {m.cause for ob in batches for m in ob.migrations} == {LOCALITY_FALLBACK}


# --- retries ---------------------------------------------------------------------------------------
def _events(eventlog: str) -> list[dict]:
    return [e for e in read_events([eventlog]) if isinstance(e, dict)]


def _retried(events: list[dict], failed_executor_of: Any, final_executor_of: Any) -> tuple[list[dict], tuple[int, int, str]]:
    """The recorded events with one stateful task of batch 3 retried: a failed attempt before the success.

    ``failed_executor_of(original)`` / ``final_executor_of(original)`` pick the executors of both attempts.
    """
    target = None
    batch_of_stage = {
        stage: int(e["Properties"]["streaming.sql.batchId"])
        for e in events
        if e.get("Event") == "SparkListenerJobStart" and "streaming.sql.batchId" in e.get("Properties", {})
        for stage in e["Stage IDs"]
    }
    out = []
    for e in events:
        stateful = e.get("Event") == "SparkListenerTaskEnd" and any(
            a.get("Name") == "number of state store instances" for a in e["Task Info"]["Accumulables"]
        )
        if target is None and stateful and batch_of_stage.get(e["Stage ID"]) == 3:
            original = e["Task Info"]["Executor ID"]
            failed = copy.deepcopy(e)
            failed["Task End Reason"] = {"Reason": "ExceptionFailure", "Class Name": "java.lang.RuntimeException", "Description": "boom"}
            failed["Task Info"].update({"Executor ID": failed_executor_of(original), "Failed": True, "Task ID": 10**9})
            success = copy.deepcopy(e)
            success["Task Info"].update({"Attempt": 1, "Executor ID": final_executor_of(original)})
            target = (e["Stage ID"], e["Task Info"]["Partition ID"], original)
            out += [failed, success]
            continue
        out.append(e)
    assert target is not None
    return out, target


def _replay_events(events: list[dict]) -> list[OperatorBatch]:
    reader, tracker, batches = TaskEventReader(), PlacementTracker(), []
    for e in events:
        for item in reader.feed(e):
            if isinstance(item, BatchTasks):
                batches.extend(tracker.on_batch(item))
            else:
                tracker.on_executor(item)
    return batches


def test_a_retry_that_succeeds_on_the_usual_executor_is_not_a_migration() -> None:
    _, eventlog = scenario("clean")
    other = {"0": "1", "1": "0"}
    events, (_, partition, original) = _retried(_events(eventlog), lambda ex: other[ex], lambda ex: ex)
    batches = _replay_events(events)
    assert all(ob.migrations == [] for ob in batches)
    batch3 = [ob for ob in batches if ob.batch_id == 3]
    assert any(ob.placement[partition] == original for ob in batch3)


def test_a_retry_whose_final_attempt_ran_elsewhere_is_a_migration() -> None:
    _, eventlog = scenario("clean")
    other = {"0": "1", "1": "0"}
    events, (_, partition, original) = _retried(_events(eventlog), lambda ex: ex, lambda ex: other[ex])
    batches = _replay_events(events)
    moved = [(ob.batch_id, m.partition, m.from_executor, m.to_executor, m.cause, m.attempt) for ob in batches for m in ob.migrations]
    # batch 3 moves it away, batch 4 (which ran where it always did) moves it back: two migrations, both named
    assert moved[0] == (3, partition, original, other[original], LOCALITY_FALLBACK, 1)
    assert [m[:2] for m in moved] == [(3, partition), (4, partition)]


# --- hostile input ---------------------------------------------------------------------------------
def test_hostile_task_events_never_raise_and_are_counted() -> None:
    _, eventlog = scenario("kill")
    events = _events(eventlog)
    rng = random.Random(14)
    junk: list[Any] = [
        None,
        1,
        "x",
        [],
        {"Event": "SparkListenerTaskEnd"},
        {"Event": "SparkListenerTaskEnd", "Task Info": []},
        {"Event": "SparkListenerJobStart", "Properties": {"sql.streaming.queryId": "q", "streaming.sql.batchId": "NaN"}},
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart", "executionId": "x", "sparkPlanInfo": 3},
        {"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent", "progress": []},
        {"Event": "SparkListenerExecutorRemoved", "Executor ID": 7},
    ]
    mutated = []
    for e in events:
        e = copy.deepcopy(e)
        if rng.random() < 0.3:
            _mutate(e, rng)
        mutated.append(e)
        if rng.random() < 0.05:
            mutated.append(rng.choice(junk))
    reader, tracker = TaskEventReader(), PlacementTracker()
    for e in mutated + junk:
        for item in reader.feed(e):
            if isinstance(item, BatchTasks):
                tracker.on_batch(item)
            else:
                tracker.on_executor(item)
    for item in reader.close():
        tracker.on_batch(item)
    assert sum(reader.problems.values()) > 0
    list(tracker.samples())  # still renders


def _mutate(obj: Any, rng: random.Random) -> None:
    """Replace, drop or retype one value somewhere inside a real event."""
    path = []
    node = obj
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append((node, key))
        node = node[key]
    if not path:
        return
    parent, key = path[-1]
    choice = rng.randrange(5)
    if choice == 0 and isinstance(parent, dict):
        del parent[key]
    else:
        parent[key] = [None, "NaN", -1, 10**30, {"x": []}][choice]


def test_a_damaged_log_yields_what_came_before_and_a_message(tmp_path) -> None:
    _, eventlog = scenario("kill")
    with open(next(os.path.join(r, f) for r, _, fs in os.walk(eventlog) for f in fs), "rb") as f:
        (tmp_path / "events_1_app.zstd").write_bytes(f.read()[:60_000])
    _, batches, errors = replay_placement([str(tmp_path)])
    assert errors and ("zstd" in errors[-1] or "unreadable" in errors[-1])
    assert len(batches) < 24


# --- metrics and advice ----------------------------------------------------------------------------
def test_metric_specs_are_one_tuple_with_prometheus_names() -> None:
    names = [s.prometheus_name for s in PLACEMENT_METRICS]
    assert len(set(names)) == len(names)
    for spec in PLACEMENT_METRICS:
        assert spec.name.startswith("spark_state_") and not spec.name.endswith("_total")
        assert (spec.kind == COUNTER) == spec.prometheus_name.endswith("_total")
        if spec.unit in ("seconds", "bytes"):
            assert spec.name.endswith("_" + spec.unit)
    _, eventlog = scenario("kill")
    tracker, _, _ = replayed(eventlog)
    assert {spec for spec, _, _ in tracker.samples()} <= set(PLACEMENT_METRICS)


def test_costliest_partitions_are_bounded_to_top_k() -> None:
    _, eventlog = scenario("kill")
    tracker, _, _ = replay_placement([eventlog], top_k=1)
    per_op: dict[str, int] = {}
    for spec, labels, _ in tracker.samples():
        if spec is COSTLIEST:
            per_op[labels["operator_index"]] = per_op.get(labels["operator_index"], 0) + 1
    assert per_op and max(per_op.values()) == 1
    assert set(CAUSES) == {labels["cause"] for spec, labels, _ in tracker.samples() if spec.name == "spark_state_partition_migrations"}


def test_advice_on_recorded_partition_sizes() -> None:
    _, eventlog = scenario("kill")
    _, batches, _ = replayed(eventlog)
    last = [ob for ob in batches if ob.batch_id == max(b.batch_id for b in batches)]
    assert last
    # sizes from the replay's last batch; restore measured on the partitions that migrated
    tracker_runs = [PartitionStat(p, memory_bytes=1.0 + p) for p in last[0].placement]
    slow = advise(tracker_runs, target_restore_seconds=1.0, restore_estimate_seconds=40.0, spark_version="4.3.0")
    assert slow.estimate and slow.message.startswith("Estimate.")
    assert slow.suggested_partitions is not None and slow.suggested_partitions > slow.current_partitions
    assert "4.2+" in slow.message
    fast = advise(tracker_runs, target_restore_seconds=100.0, restore_estimate_seconds=1.0, spark_version="3.5.1")
    assert fast.suggested_partitions is not None and fast.suggested_partitions < fast.current_partitions
    assert "new checkpoint" in fast.message
    skewed = advise([PartitionStat(0, memory_bytes=100.0), *[PartitionStat(i, memory_bytes=1.0) for i in range(1, 8)]], 1.0, 40.0)
    assert skewed.skewed and skewed.worst_partition == 0 and "hot key" in skewed.message
    assert advise([], 1.0).suggested_partitions is None


class RecordedSource:
    """The driver's REST answers recorded by scripts/record_placement.py, served to the poller as they came."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers = answers
        self.requests = 0

    def get_bytes(self, path: str) -> bytes | None:
        self.requests += 1
        assert path in self.answers, f"the poller asked for {path}, which the recording did not ask"
        answer = self.answers[path]
        return None if answer is None else answer.encode()

    def get(self, path: str) -> Any:
        body = self.get_bytes(path)
        return None if body is None else json.loads(body)

    def close(self) -> None:
        """Nothing to close."""


def test_the_poller_on_recorded_rest_answers_sees_the_replayed_placement() -> None:
    """The live path's parsing (SQL nodes -> stateful stages -> taskList) on the kill run's real REST answers."""
    from spark_state_observer.placement.task_poll import TaskPoller

    truth, eventlog = scenario("kill")
    first, end = truth["rest_batches"]
    source = RecordedSource(truth["rest"])
    poller = TaskPoller(source)  # type: ignore[arg-type]
    tracker = PlacementTracker()
    live: list[OperatorBatch] = []
    for batch_id in range(first, end):
        for batch in poller.poll(truth["query_id"], batch_id):
            live.extend(tracker.on_batch(batch, executors=poller.executors))
    assert poller.errors == 0
    _, batches, _ = replayed(eventlog)
    by_key = {(ob.batch_id, ob.operator): ob for ob in batches}
    assert {(ob.batch_id, ob.operator) for ob in live} == {k for k in by_key if first <= k[0] < end}
    for ob in live:
        assert ob.placement == by_key[(ob.batch_id, ob.operator)].placement
        if ob.batch_id > first:  # the poller's tracker starts at ``first``: from the next batch on, the same migrations
            expected = by_key[(ob.batch_id, ob.operator)].migrations
            assert [(m.partition, m.from_executor, m.to_executor, m.cause) for m in ob.migrations] == [
                (m.partition, m.from_executor, m.to_executor, m.cause) for m in expected
            ]
    assert any(ob.migrations for ob in live)
    assert source.requests / (end - first) < 8  # a handful of requests per batch, not one per task


def test_a_restart_is_not_compared_with_the_previous_run() -> None:
    """A new application reuses executor ids: placements of two runs say nothing about each other."""
    import dataclasses

    _, eventlog = scenario("clean")
    reader = TaskEventReader()
    closed = [i for e in read_events([eventlog]) for i in reader.feed(e) if isinstance(i, BatchTasks)]
    swap = {"0": "1", "1": "0"}
    last = closed[-1]
    restarted = BatchTasks(
        last.query_id,
        "another-run",
        last.batch_id + 1,
        [dataclasses.replace(r, run_id="another-run", batch_id=last.batch_id + 1, executor_id=swap[r.executor_id]) for r in last.runs],
    )
    tracker = PlacementTracker()
    for batch in closed:
        tracker.on_batch(batch)
    assert all(ob.migrations == [] and ob.compared == 0 for ob in tracker.on_batch(restarted))


def _progress_events(eventlog: str, batches: range) -> list[dict]:
    return [
        e["progress"]
        for e in read_events([eventlog])
        if e.get("Event", "").endswith("QueryProgressEvent") and e["progress"]["batchId"] in batches
    ]


@pytest.mark.parametrize("hint", [True, False])
def test_polling_every_other_batch_still_sees_the_kill(hint: bool) -> None:
    """every=2: batch 5 (odd) is polled only because its progress shows stores loaded from the checkpoint."""
    from spark_state_observer.model.parse import parse_event
    from spark_state_observer.placement.feed import PlacementFeed
    from spark_state_observer.placement.task_poll import PollingSource, TaskPoller
    from spark_state_observer.signals.facts import SignalFacts as Facts

    truth, eventlog = scenario("kill")
    first, end = truth["rest_batches"]
    assert first % 2 == 0, "this test reads the recording with every=2 from an even batch"
    source = PollingSource(TaskPoller(RecordedSource(truth["rest"])), every=2)  # type: ignore[arg-type]
    feed = PlacementFeed(source)
    for progress in _progress_events(eventlog, range(first, end)):
        if not hint:
            for op in progress["stateOperators"]:
                op["customMetrics"].update(rocksdbNumLoadedFromDfs=0, rocksdbNumReplayChangelogFiles=0)
        feed.on_progress(parse_event("progress", progress), Facts(), str, 0.0)  # type: ignore[arg-type]
    _, batches, _ = replayed(eventlog)
    killed = {(m.operator, m.partition) for ob in batches for m in ob.migrations}
    seen = {(m.operator, m.partition) for ob in feed.batches for m in ob.migrations}
    assert seen == killed
    moved_in = {ob.batch_id for ob in feed.batches if ob.migrations}
    assert moved_in == ({first + 1} if hint else {first + 2})
    assert source.skipped == (0 if hint else 1)
