"""The restore ETA calibrated from the checkpoint (spark_state_observer.model.checkpoint_work, spark_state_observer.placement.restore_progress).

tests/fixtures/restore_progress/checkpointed is a real restart (Spark 4.3, local[2], a dedupe then a count per
key, 16 partitions, 40 batches of changelog files and no snapshot) with the files its restore loaded: replayed
with that checkpoint, the ETA starts from the checkpoint's work and moves to the observed speed; replayed without
one, it is the observed rate alone, as before the checkpoint was read.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from conftest import FIXTURES
from spark_state_observer.model import checkpoint_work
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.checkpoint_work import ExpectedWork, expected_work
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.replay import replay
from spark_state_observer.placement.restore_eta import Stage, remaining_seconds
from spark_state_observer.placement.restore_progress import BASIS_BLEND, BASIS_ESTIMATE, BASIS_OBSERVED, RestoreProgress
from spark_state_observer.settings import Settings

FOLDER = os.path.join(FIXTURES, "restore_progress", "checkpointed")
CHECKPOINT = os.path.join(FOLDER, "checkpoint")
BATCH = 40  # the restart's first batch: it loads state version 40


RESTORES = os.path.join(FIXTURES, "restore_progress")
# every recorded 16-partition restart with the checkpoint its restore loaded (the folder's own, or the one it shares)
WITH_CHECKPOINT = {
    "checkpointed": CHECKPOINT,
    "restart_24": os.path.join(RESTORES, "restart_24", "checkpoint"),
    "restart_24_loaded": os.path.join(RESTORES, "restart_24", "checkpoint"),
}
# every recorded 16-partition restart whose executors all lived through the restore (kill_mid_restore lost one
# mid-way: its retries wait on a slot no rate foresees)
# (restart_32: held out, recorded after the rank weights were chosen; its checkpoint is rebuilt for the bench only)
WITHOUT_LOSS = [*WITH_CHECKPOINT, "large", "large_kill", "live_estimate", "restart_32"]


@functools.cache
def _replayed(checkpoint: str, folder: str = FOLDER) -> tuple[SignalEvent, ...]:
    signals: list[SignalEvent] = []
    replay([os.path.join(folder, "eventlog")], Settings(), on_signal=signals.append, checkpoint=lambda q, r: checkpoint)
    return tuple(s for s in signals if s.kind in kinds.RESTORE_PROGRESS_KINDS)


def by_operator(events: tuple[SignalEvent, ...]) -> dict[str, list[SignalEvent]]:
    out: dict[str, list[SignalEvent]] = {}
    for e in events:
        out.setdefault(e.attributes["operator"], []).append(e)
    return out


def error_at(stream: list[SignalEvent], point: float) -> float:
    """The factor between the ETA of the first progress at or past ``point`` of the partitions and what remained."""
    end = stream[-1]
    at = next(e for e in stream if e.kind == kinds.RESTORE_PROGRESS and e.attributes["partitions_done"] / 16 >= point)
    predicted, actual = at.attributes["eta_seconds"], end.timestamp - at.timestamp
    return float(max(predicted / actual, actual / predicted))


def test_the_checkpoint_lists_what_the_restore_loads() -> None:
    """Every changelog file of versions 1-40 of both operators, none after; priced per partition."""
    with open(os.path.join(FOLDER, "truth.json")) as f:
        truth = json.load(f)
    work, why = expected_work(CHECKPOINT, BATCH, slots=2)
    assert why is None and work is not None and work.version == BATCH
    assert sorted(work.operators) == [0, 1]  # state/0 stateStoreSave, state/1 dedupe: the progress' indexes
    assert sum(op.files for op in work.operators.values()) == truth["changelog_files"]
    for op in work.operators.values():
        assert sorted(op.seconds) == list(range(truth["partitions"])) and op.snapshot_bytes == 0
    # the dedupe's changelogs hold every new id (1,000 a partition), the aggregation's only the keys it updated
    assert work.operators[1].replay_bytes > 3 * work.operators[0].replay_bytes
    assert sum(work.operators[1].seconds.values()) > sum(work.operators[0].seconds.values())
    earlier, _ = expected_work(CHECKPOINT, 10)
    assert earlier is not None and sum(op.files for op in earlier.operators.values()) == 2 * 16 * 10


def test_the_eta_moves_from_the_estimate_to_the_observed_speed() -> None:
    """With the checkpoint: an ETA at the start (the estimate), blended as partitions finish; the aggregation's
    counts the dedupe's work below it. Without it: no ETA before the first finish, then the observed rate."""
    ops = by_operator(_replayed(CHECKPOINT))
    assert set(ops) == {"dedupe", "stateStoreSave"}
    for stream in ops.values():
        start, progress = stream[0], [e for e in stream if e.kind == kinds.RESTORE_PROGRESS]
        assert start.kind == kinds.RESTORE_STARTED and start.attributes["eta_basis"] == BASIS_ESTIMATE
        assert start.attributes["eta_seconds"] > 0 and start.attributes["expected_files"] == 16 * BATCH
        assert progress and all(e.attributes["eta_basis"] == BASIS_BLEND for e in progress)
        assert "eta_basis" not in stream[-1].attributes and "eta_seconds" not in stream[-1].attributes
    # the aggregation's partitions end after the dedupe's (a later stage): its first ETA is the longer
    assert ops["stateStoreSave"][0].attributes["eta_seconds"] > ops["dedupe"][0].attributes["eta_seconds"]
    # this recording: within the goal at a quarter and three quarters of the partitions
    for stream in ops.values():
        assert error_at(stream, 0.25) < 2.0 and error_at(stream, 0.75) < 1.3


def test_without_a_readable_checkpoint_the_eta_is_the_observed_rate(tmp_path: Path) -> None:
    """A checkpoint that is gone: no ETA at the start, then finished partitions per second since the first launch."""
    ops = by_operator(_replayed(str(tmp_path / "gone")))
    for stream in ops.values():
        assert "eta_seconds" not in stream[0].attributes and "expected_files" not in stream[0].attributes
        progress = [e for e in stream if e.kind == kinds.RESTORE_PROGRESS]
        assert progress and all(e.attributes["eta_basis"] == BASIS_OBSERVED for e in progress)
    # the same restore told with the checkpoint: same partitions at the same times, only the ETA differs
    with_checkpoint = by_operator(_replayed(CHECKPOINT))
    for name, stream in ops.items():
        assert [(e.kind, e.timestamp, e.attributes.get("partitions_done")) for e in stream] == [
            (e.kind, e.timestamp, e.attributes.get("partitions_done")) for e in with_checkpoint[name]
        ]


def test_the_listing_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 changelog files: listed once, priced; past a bound (stats, names) or with a file missing, no estimate
    and the reason, so the ETA waits for observed finishes."""
    folder = tmp_path / "state" / "0" / "0"
    folder.mkdir(parents=True)
    for v in range(1, 10_001):
        (folder / f"{v}.changelog").write_bytes(b"")
    work, why = expected_work(str(tmp_path), 10_000)
    assert why is None and work is not None and work.operators[0].files == 10_000
    monkeypatch.setattr(checkpoint_work, "MAX_STATS", 5_000)
    work, why = expected_work(str(tmp_path), 10_000)
    assert work is None and why is not None and "more than 5000 state files" in why
    monkeypatch.setattr(checkpoint_work, "MAX_NAMES", 1_000)
    work, why = expected_work(str(tmp_path), 10_000)
    assert work is None and why is not None and "more than 1000 names" in why
    monkeypatch.undo()
    (folder / "500.changelog").unlink()
    work, why = expected_work(str(tmp_path), 10_000)
    assert work is None and why is not None and "1 file(s) to replay up to version 10000 are missing" in why
    assert expected_work("s3a://bucket/checkpoint", 3) == (None, "s3a://bucket/checkpoint: not a local checkpoint")


def test_a_failing_hook_costs_the_estimate_only() -> None:
    """The hook raises: the restore is followed as without a checkpoint, the failure counted."""

    def broken(query_id: str, run_id: str | None, batch_id: int) -> ExpectedWork | None:
        raise OSError("gone")

    model = RestoreProgress(expected_work=broken)
    model.on_executor_cores("driver", 2)
    model.on_run_started("q", "r")
    model.on_job("q", "r", 3, 100.0, 4, {0: "StateStoreSave"})
    for p in range(4):
        model.on_task("q", 3, 0, "StateStoreSave", p, 101.0, 102.0 + p, {})
    notes = model.take()
    assert model.estimate_failures == 1
    assert "eta_seconds" not in notes[0].attributes
    # the schedule of finished partitions alone: one unit a partition at the pace the first task showed
    alone = remaining_seconds([Stage(dict.fromkeys(range(4), 1.0), {0: (101.0, 102.0)})], 2, 100.0, 102.0, None)
    assert notes[1].attributes["eta_seconds"] == alone and notes[1].attributes["eta_basis"] == BASIS_OBSERVED


def test_loads_from_the_checkpoint_are_summed_where_spark_counts_them() -> None:
    """4.2+ counts a store fetched from the checkpoint per task (``rocksdbNumLoadedFromDfs`` in the progress): every
    dedupe partition loaded from it; the aggregation's measured load reused the store its StateStoreRestore opened,
    and Spark leaves a zero out, so it has no figure rather than 0. 3.5 counts nothing: never a 0 either."""
    finished = {e.attributes["operator"]: e.attributes for e in _replayed(CHECKPOINT) if e.kind == kinds.RESTORE_FINISHED}
    assert finished["dedupe"]["loads_from_dfs"] == 16
    assert "loads_from_dfs" not in finished["stateStoreSave"]
    events: list[SignalEvent] = []
    replay([os.path.join(FIXTURES, "incidents", "dedup_agg_restart_35", "run2", "eventlog")], Settings(), on_signal=events.append)
    ends = [e for e in events if e.kind == kinds.RESTORE_FINISHED]
    assert len(ends) == 2 and not any("loads_from_dfs" in e.attributes for e in ends)


def test_a_job_attached_live_starts_from_the_estimate() -> None:
    """restore_progress/live_estimate: attach() in the restarted job (REST polling, resolvedCheckpointRoot,
    defaultParallelism) told an ETA at the start from the checkpoint's 83 versions, then blended."""
    folder = os.path.join(FIXTURES, "restore_progress", "live_estimate")
    with open(os.path.join(folder, "live_events.jsonl")) as f:
        told = [json.loads(line) for line in f if line.strip()]
    started = [e["attributes"] for e in told if e["kind"] == kinds.RESTORE_STARTED]
    assert {a["operator"] for a in started} == {"dedupe", "stateStoreSave"}
    assert all(a["eta_basis"] == BASIS_ESTIMATE and a["eta_seconds"] > 0 and a["expected_files"] == 16 * 83 for a in started)
    progress = [e["attributes"] for e in told if e["kind"] == kinds.RESTORE_PROGRESS]
    assert progress and all(a["eta_basis"] == BASIS_BLEND for a in progress)


def test_the_live_listing_prices_as_the_inspector(tmp_path: Path) -> None:
    """An HDFS store with a snapshot, and a stream-stream join's four stores per partition: the live listing loads
    what ``inspect`` says a restart loads, at the same price per store."""
    from test_inspector import HDFS, checkpoint, operator_metadata, write

    from spark_state_observer.offline.checkpoint import inspect_checkpoint

    root = checkpoint(tmp_path / "ck", HDFS, committed=4, planned=5)
    operator_metadata(root, 0, "stateStoreSave", ["default"])
    for v in range(1, 6):
        write(root / "state" / "0" / "0" / f"{v}.delta", b"d" * 100)
    write(root / "state" / "0" / "0" / "3.snapshot", b"s" * 1000)
    stores = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"]
    operator_metadata(root, 1, "symmetricHashJoin", stores)
    for store in stores:
        for v in range(1, 6):
            write(root / "state" / "1" / "0" / store / f"{v}.delta", b"j" * 30)
    report = inspect_checkpoint(str(root))  # a restart at batch 5 loads version 5
    work, why = expected_work(str(root), 5)
    assert why is None and work is not None
    saved, join = work.operators[0], work.operators[1]
    assert (saved.files, saved.replay_bytes, saved.snapshot_bytes) == (3, 200, 1000)  # 3.snapshot, then 4 and 5
    assert (join.files, join.replay_bytes, join.snapshot_bytes) == (4 * 5, 4 * 5 * 30, 0)
    assert report.estimate is not None
    assert saved.seconds[0] + join.seconds[0] == pytest.approx(report.estimate.seconds)


def test_watch_finds_the_checkpoint_in_the_plans_as_replay_does(tmp_path: Path) -> None:
    """The log followed by ``watch`` as Spark writes it, and replayed, with no checkpoint given: both find it where
    the restoring batch's plan says (``state info [ checkpoint = ...``) and start the same ETA from it. The log
    names the folder the recording ran in; here its plans name the fixture's copy instead, the only change."""
    from test_watch_restart_costs import applications, followed_and_replayed, of_kind

    ((app_id, lines),) = applications("restore_progress/checkpointed")
    recorded = b"file:/tmp/eta29-rec/checkpoint/state"
    assert any(recorded in line for line in lines)
    moved = [line.replace(recorded, f"file:{CHECKPOINT}/state".encode()) for line in lines]
    said = followed_and_replayed(tmp_path, [(app_id, moved)])
    # (the watcher also lists the checkpoint for snapshot health, which replay does only when given one)
    restores = {side: [s for s in said[side] if s[0] in kinds.RESTORE_PROGRESS_KINDS] for side in ("live", "replayed")}
    assert restores["live"] == restores["replayed"] and len(restores["live"]) > 20
    started = of_kind(said["live"], kinds.RESTORE_STARTED)
    assert len(started) == 2 and all(a["eta_basis"] == BASIS_ESTIMATE and a["expected_files"] == 16 * BATCH for a in started)
    replayed_here = {
        e.attributes["operator"]: e.attributes["eta_seconds"] for e in _replayed(CHECKPOINT) if e.kind == kinds.RESTORE_STARTED
    }
    assert {a["operator"]: a["eta_seconds"] for a in started} == replayed_here


def test_after_an_executor_loss_the_checkpoint_is_not_asked() -> None:
    """Only the lost executor's stores load after a loss, which no listing tells: the ETA is the observed rate."""
    asked: list[int] = []

    def hook(query_id: str, run_id: str | None, batch_id: int) -> ExpectedWork | None:
        asked.append(batch_id)
        return None

    model = RestoreProgress(expected_work=hook)
    model.on_executor_cores("1", 1)
    model.on_job("q", "r", 4, 100.0, 4, {0: "StateStoreSave"})  # a batch of a run already going: no restore
    model.on_executor_removed(105.0)
    model.on_job("q", "r", 5, 110.0, 4, {0: "StateStoreSave"})
    notes = model.take()
    assert [n.attributes["reason"] for n in notes] == ["executor_lost"] and asked == []
    model.on_run_started("q", "r2")
    model.on_job("q", "r2", 9, 200.0, 4, {0: "StateStoreSave"})
    assert asked == [9]


# the one miss of the goal among them: the loaded restart's aggregation sped up, then slowed in its last two waves
# (tasks of 0.6-1.1 s, then 1.3-1.5 s, the burners' share moving): at three quarters it said 2.0 s for 3.0 s
WITHIN_AT_75 = {("restart_24_loaded", "stateStoreSave"): 1.6}
# without a checkpoint, the one miss at a quarter: live_estimate's dedupe ran its second wave as slowly as its first
# (2.6 s a task, then 0.9-1.6 s): at a quarter the only later wave known said 16 s for 7.3 s
WITHOUT_AT_25 = {("live_estimate", "dedupe"): 2.3}
# without a checkpoint, the misses at three quarters: tasks that sped up (large's aggregation, 5 s then 2.7-3.7 s a
# task; large_kill's dedupe, 9-11 s then 6.6-8.5 s) or slowed (the loaded aggregation) in the last two waves
WITHOUT_AT_75 = {("large", "stateStoreSave"): 1.6, ("large_kill", "dedupe"): 1.45, ("restart_24_loaded", "stateStoreSave"): 1.65}


@pytest.mark.parametrize("recording", sorted(WITH_CHECKPOINT))
def test_with_the_checkpoint_the_eta_is_within_the_goal(recording: str) -> None:
    """Each recorded 16-partition restart replayed with its checkpoint, both operators: within 2x of what remained at
    a quarter of the partitions and 1.3x at three quarters, on a busy machine and with CPU burners beside it
    (``restart_24_loaded``; one miss, ``WITHIN_AT_75``). The first wave of each stage ran 1.5-2x slower a task
    than the rest: the speed is read from the later waves (``restore_eta.steady``), the latest weighed most."""
    ops = by_operator(_replayed(WITH_CHECKPOINT[recording], os.path.join(RESTORES, recording)))
    assert set(ops) == {"dedupe", "stateStoreSave"}
    for name, stream in ops.items():
        assert stream[-1].kind == kinds.RESTORE_FINISHED and stream[-1].attributes["complete"]
        assert all(e.attributes["eta_basis"] == BASIS_BLEND for e in stream if e.kind == kinds.RESTORE_PROGRESS)
        assert error_at(stream, 0.25) < 2.0
        assert error_at(stream, 0.75) <= WITHIN_AT_75.get((recording, name), 1.3)


@pytest.mark.parametrize("recording", sorted(WITHOUT_LOSS))
def test_without_the_checkpoint_the_observed_rate_is_within_the_goal(recording: str, tmp_path: Path) -> None:
    """The same restarts and three whose checkpoints were not kept, with no checkpoint readable: the observed rate
    (later waves, tasks in flight counted) is within 2x at a quarter of the partitions and 1.3x at three quarters
    for both operators, but for the misses above."""
    ops = by_operator(_replayed(str(tmp_path / "gone"), os.path.join(RESTORES, recording)))
    assert set(ops) == {"dedupe", "stateStoreSave"}
    for name, stream in ops.items():
        assert all(e.attributes["eta_basis"] == BASIS_OBSERVED for e in stream if e.kind == kinds.RESTORE_PROGRESS)
        assert error_at(stream, 0.25) < WITHOUT_AT_25.get((recording, name), 2.0)
        assert error_at(stream, 0.75) <= WITHOUT_AT_75.get((recording, name), 1.3)


def test_the_rate_is_read_from_the_later_waves() -> None:
    """Two slots, a first wave of 4 s a task, then 1 s a task: the schedule is played at the first wave's pace until
    a later wave finished, then at the later waves' (launched once a first-wave task was ending)."""
    model = RestoreProgress(interval_seconds=0.0)
    model.on_executor_cores("driver", 2)
    model.on_run_started("q", "r")
    model.on_job("q", "r", 3, 100.0, 8, {0: "StateStoreSave"})
    times = [(100.0, 104.0), (100.0, 104.0), (103.99, 105.0), (103.99, 105.0)]
    for p, (launch, finish) in enumerate(times):
        model.on_task("q", 3, 0, "StateStoreSave", p, launch, finish, {})
    notes = [n for n in model.take() if n.kind == kinds.RESTORE_PROGRESS]
    first, last = notes[0].attributes, notes[-1].attributes
    # one done at 104: partition 1 (launched at 100) is overdue, partition 2 just launched; 5 queued, 4 s each
    assert first["partitions_done"] == 1 and first["eta_seconds"] == pytest.approx(0.4 + 3 * 4.0, abs=1e-3)
    # four done at 105: two launched now and two queued, two waves of 1.01 s where the first wave's pace says 8 s
    assert last["partitions_done"] == 4 and last["eta_seconds"] == pytest.approx(2 * 1.01, abs=1e-3)


def test_the_slowest_partition_bounds_the_rest() -> None:
    """Spark's schedule played forward: the heaviest partition left, queued last, ends after the others' waves; and
    a stage above waits for the stage below (a shuffle between them) before its first wave."""
    work = {0: 1.0, 1: 1.0, 2: 1.0, 3: 5.0}
    assert remaining_seconds([Stage(work, {})], 2, 0.0, 0.0, 1.0) == pytest.approx(6.0)  # 0 and 1, then 2 and 3: 1 + 5
    assert remaining_seconds([Stage(work, {}), Stage(dict.fromkeys(range(4), 1.0), {})], 2, 0.0, 0.0, 1.0) == pytest.approx(8.0)
    assert remaining_seconds([Stage(work, {})], 2, 0.0, 0.0, None) is None  # no prior and nothing finished: no speed


def test_the_latest_waves_weigh_most() -> None:
    """Two slots, waves of 4 s, 3 s and 1 s a task: the second wave weighs 1, the third 2, so the two tasks just
    launched are taken to need (2 x 3 + 2 x 2 x 1) / 6 s each, not the later waves' plain mean of 2 s."""
    times = [(0.0, 4.0), (0.0, 4.0), (4.0, 7.0), (4.0, 7.0), (7.0, 8.0), (7.0, 8.0)]
    stage = Stage(dict.fromkeys(range(8), 1.0), dict(enumerate(times)))
    assert remaining_seconds([stage], 2, 0.0, 8.0, None) == pytest.approx(10 / 6, abs=1e-3)
