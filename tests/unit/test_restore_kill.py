"""An executor killed in the middle of a restore, replayed from a real recording (scripts/record_restore.py --kill).

tests/fixtures/restore_progress/kill_mid_restore: a restart on local-cluster[2,1,1024] whose executor 1 was
killed (SIGKILL) while the restoring batch's first stateful stage ran tasks on it, one partition of that stage
already done (truth.json says which stage attempt and partitions). Spark ran the partitions executor 1 held
again in the same batch, on the executors left: the one running failed (``ExecutorLostFailure``), the finished
one of a shuffle map stage was ``Resubmitted``, and the fetch failures that followed made a second attempt of
the stage. What the observer must say, from the event log (replay) and from the callbacks recorded live (the
driver's REST API polled): one restore per operator, reason ``restart`` (the restart is why every partition
loads), naming the lost executor and counting the partitions loaded again, finished complete when the stage's
last partition really ended, and no ``executor_lost`` restore in the next batch, which loaded nothing from the
checkpoint (its progress event says so).
"""

from __future__ import annotations

import functools
import io
import json
import os
from collections import defaultdict
from typing import Any

import pytest
from test_restore_progress import replayed

from conftest import FIXTURES
from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.offline.eventlog import expand, open_decompressed

FOLDER = os.path.join(FIXTURES, "restore_progress", "kill_mid_restore")
EVENTLOG = os.path.join(FOLDER, "eventlog")
STATE_METRIC = "number of total state rows"
LOST = ("ExecutorLostFailure", "Resubmitted")


def truth() -> dict[str, Any]:
    with open(os.path.join(FOLDER, "truth.json")) as f:
        return json.load(f)


@functools.cache
def log_facts(batch: int) -> dict[str, Any]:
    """From the raw log: per stateful stage of ``batch`` (all attempts), its partitions that succeeded, the last
    success's finish (s) and the partitions whose task was lost with its executor; the executors removed; and
    the next batch's load figures from its progress event."""
    stages: set[int] = set()
    succeeded: dict[int, set[int]] = defaultdict(set)
    last: dict[int, float] = {}
    lost: dict[int, set[int]] = defaultdict(set)
    removed: list[str] = []
    loaded_next: list[float] = []
    replayed_files = None
    for path in expand([EVENTLOG]):
        with io.BufferedReader(open_decompressed(path)) as stream:
            for line in stream:
                event = json.loads(line)
                kind = event["Event"]
                if kind == "SparkListenerJobStart" and event["Properties"].get("streaming.sql.batchId") == str(batch):
                    stages.update(s["Stage ID"] for s in event["Stage Infos"])
                elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stages:
                    info, reason = event["Task Info"], event["Task End Reason"]["Reason"]
                    stage, partition = event["Stage ID"], info["Partition ID"]
                    if reason in LOST:
                        lost[stage].add(partition)
                    elif reason == "Success" and STATE_METRIC in {a["Name"] for a in info["Accumulables"]}:
                        succeeded[stage].add(partition)
                        last[stage] = max(last.get(stage, 0.0), info["Finish Time"] / 1000.0)
                elif kind == "SparkListenerExecutorRemoved":
                    removed.append(event["Executor ID"])
                elif kind.endswith("QueryProgressEvent"):
                    progress = event["progress"]
                    metrics = [op["customMetrics"] for op in progress["stateOperators"]]
                    if progress["batchId"] == batch:
                        replayed_files = sum(m.get("rocksdbNumReplayChangelogFiles", 0) for m in metrics)
                    elif progress["batchId"] == batch + 1:
                        loaded_next = [m.get("rocksdbNumLoadedFromDfs", 0) + m.get("rocksdbNumReplayChangelogFiles", 0) for m in metrics]
    stateful = set(succeeded)
    return {
        "succeeded": dict(succeeded),
        "last_finish": last,
        "lost": {s: p for s, p in lost.items() if s in stateful},
        "removed": removed,
        "loaded_next": loaded_next,
        "replayed_files": replayed_files,
    }


def live_events() -> list[dict[str, Any]]:
    with open(os.path.join(FOLDER, "live_events.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_the_kill_landed_mid_restore() -> None:
    """The recording is what it claims: executor 1 died with a partition of the restoring stage in hand, after
    another partition of it was done, and its lost partitions ran again on the executors left."""
    t = truth()
    facts = log_facts(t["killed_batch"])
    assert t["killed_executor"] == "1" and facts["removed"] == ["1"]
    assert t["partitions_done_at_kill"] >= 1 and t["partitions_running_on_killed"]
    assert facts["lost"] and set(facts["lost"]) <= set(facts["succeeded"])
    for stage, partitions in facts["lost"].items():
        assert partitions <= facts["succeeded"][stage]  # every lost partition succeeded in the end
    assert all(len(done) == t["partitions"] for done in facts["succeeded"].values())


def test_the_log_tells_one_restart_restore_that_took_the_loss_in() -> None:
    """Replay: the restoring batch's restores keep reason ``restart``, name executor 1, count the partitions lost
    with it, and finish complete at their stage's last success; the next batch, which loaded nothing, is no restore."""
    t = truth()
    batch = t["killed_batch"]
    facts = log_facts(batch)
    events = replayed([EVENTLOG])
    assert {e.attributes["batch_id"] for e in events} == {batch}
    assert {e.attributes["reason"] for e in events} == {"restart"}
    assert facts["loaded_next"] and not any(facts["loaded_next"])  # Spark's own figure: the next batch loaded no store
    finished = [e for e in events if e.kind == kinds.RESTORE_FINISHED]
    assert len(finished) == len(facts["succeeded"]) == 2
    for e in finished:
        a = e.attributes
        assert a["complete"] is True and a["partitions_done"] == a["partitions_total"] == t["partitions"]
        assert a["executors_lost"] == ["1"]
    assert sorted(e.timestamp for e in finished) == pytest.approx(sorted(facts["last_finish"].values()))
    assert sum(e.attributes["partitions_retried"] for e in finished) == sum(len(p) for p in facts["lost"].values())
    # every load the tasks reported, the lost one's included, is Spark's count for the batch
    assert sum(e.attributes["changelog_files"] for e in finished) == facts["replayed_files"]
    # told while it ran: progress before the executor died and after, with partitions done never above the total
    killed_at = t["killed_at"]
    progress = [e for e in events if e.kind == kinds.RESTORE_PROGRESS]
    assert any(e.timestamp < killed_at for e in progress) and any(e.timestamp > killed_at for e in progress)
    assert all(e.attributes["partitions_done"] < t["partitions"] for e in progress)


def test_the_live_callbacks_say_what_the_log_says() -> None:
    """The callbacks recorded live (REST polls, no executor removal seen): the same restores, the same loss, the
    same retried partitions, finished complete where the log's stages end."""
    t = truth()
    live = live_events()
    logged = {(e.kind, e.attributes["operator"]): e for e in replayed([EVENTLOG]) if e.kind == kinds.RESTORE_FINISHED}
    assert {e["attributes"]["batch_id"] for e in live} == {t["killed_batch"]}
    assert {e["attributes"]["reason"] for e in live} == {"restart"}
    assert all(e["received"] >= e["timestamp"] for e in live)  # told after it happened, never before
    finished = [e for e in live if e["kind"] == kinds.RESTORE_FINISHED]
    assert len(finished) == len(logged) == 2
    for e in finished:
        a, log = e["attributes"], logged[(kinds.RESTORE_FINISHED, e["attributes"]["operator"])].attributes
        assert a["complete"] is True and a["partitions_done"] == a["partitions_total"] == t["partitions"]
        assert a["executors_lost"] == log["executors_lost"] == ["1"]
        assert a["partitions_retried"] == log["partitions_retried"]
        assert a["duration_seconds"] == pytest.approx(log["duration_seconds"], abs=0.002)
    assert any(e["kind"] == kinds.RESTORE_PROGRESS and e["timestamp"] > t["killed_at"] for e in live)
