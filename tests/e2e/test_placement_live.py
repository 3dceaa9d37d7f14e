"""Placement read live from a real Spark run equals the replayed placement of the same run."""

from __future__ import annotations

import json
import os

import pytest

from spark_state_observer.offline.task_events import replay_placement
from spark_state_observer.placement.tracker import CAUSE_EXECUTOR_REMOVED as EXECUTOR_REMOVED


@pytest.mark.slow
def test_live_placement_equals_the_replayed_placement_of_the_same_run(executor_loss_run) -> None:
    """The kill scenario with the REST poller attached: what it saw live is what the event log says."""
    out = executor_loss_run
    with open(os.path.join(out, "live_placement.json")) as f:
        live = json.load(f)
    # a poll that timed out (the driver is busy around the kill) is retried at the next batch: coverage is what counts
    _, batches, errors = replay_placement([os.path.join(out, "eventlog")])
    assert errors == []
    replay = {(b.batch_id, b.operator): b for b in batches}
    seen = sorted({row["batch_id"] for row in live["batches"]})
    assert len(seen) >= 8 and seen == list(range(seen[0], seen[-1] + 1))  # no batch skipped: migrations compare neighbours
    for row in live["batches"]:
        ob = replay[(row["batch_id"], row["operator"])]
        assert {int(k): v for k, v in row["placement"].items()} == ob.placement
        assert sorted(map(tuple, row["migrations"])) == sorted(
            (m.partition, m.from_executor, m.to_executor, m.cause) for m in ob.migrations
        )
    moved = [m for row in live["batches"] for m in row["migrations"]]
    assert moved and all(m[1] == live["killed"]["executor_id"] and m[3] == EXECUTOR_REMOVED for m in moved)
    # attach() polled on its own (placement=auto, UI on): its partition_migrated signals are the product replay's
    from spark_state_observer.offline.replay import replay

    replayed_signals: list = []
    replay([os.path.join(out, "eventlog")], on_signal=replayed_signals.append)
    keys = ("batch_id", "operator_id", "migrated", "partitions", "causes", "from_executors", "to_executors")
    replayed_moves = [{k: s.attributes[k] for k in keys} for s in replayed_signals if s.kind == "partition_migrated"]
    assert [{k: a[k] for k in keys} for a in live["signals"]] == replayed_moves
