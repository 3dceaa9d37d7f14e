"""Record the placement fixtures from real runs: where each state partition ran, batch by batch.

    python scripts/record_placement.py [kill] [clean] [locality]     # writes tests/fixtures/placement/<name>/

Each scenario runs ``executor_loss_job.run`` (local-cluster[2,1,1024], the demo's dedup + window query,
RocksDB with changelog checkpointing, 4 shuffle partitions) in a fresh process with the driver's UI on, and
keeps the full event log plus ``truth.json``: what was done (the killed executor and when) and, read from
the live driver's REST API while the application still runs, which executor ran every task of every
stage of every batch. That is independent of the event log the tests replay: the tests compare the two.
``truth.json`` also keeps, verbatim, the REST answers the live poller (``spark_state_observer.placement.task_poll``) reads
for three batches around the kill, so a fast test can run the poller on them.

Scenarios: ``kill`` (executor 1 SIGKILLed 0.7 s after 5 batches; meant to land inside the next batch, it
landed between two in every run so far), ``clean`` (no kill: nothing may migrate), ``locality`` (no kill,
spark.locality.wait=0 and a busier query: tasks may move while both executors live; 2 moves in 14 batches
in the recorded run, not guaranteed). ``--live-check --out DIR`` runs the kill scenario with the poller attached
(the slow test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "placement")
SHUFFLE_PARTITIONS = 4
COMMON = ["--shuffle-partitions", str(SHUFFLE_PARTITIONS), "--ui"]
SCENARIOS: dict[str, list[str]] = {
    "kill": [*COMMON, "--locality-wait", "10s", "--batches-before", "5", "--kill-delay", "0.7", "--batches-after", "6"],
    "clean": [*COMMON, "--no-kill", "--locality-wait", "10s", "--batches-before", "5", "--batches-after", "5"],
    "locality": [*COMMON, "--no-kill", "--locality-wait", "0", "--rows-per-second", "400", "--batches-before", "6", "--batches-after", "6"],
}
_BATCH = re.compile(r"\bbatch = (\d+)")
_QUERY = re.compile(r"\bid = ([0-9a-f-]{36})")


def rest(base: str, path: str) -> Any:
    """One GET of the driver's REST API; None for a 404 (an id that does not exist)."""
    try:
        with urllib.request.urlopen(base + "/api/v1" + path, timeout=30) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def live_placement(spark: Any) -> dict:
    """Every task of every stage of every streaming job, as the live driver's status store has them.

    A stage counts as stateful here by its shape alone (as many tasks as shuffle partitions): this reading
    knows nothing of accumulables, so it checks the event-log parser rather than repeating it.
    """
    base = spark.sparkContext.uiWebUrl.rstrip("/")
    app = spark.sparkContext.applicationId
    jobs = rest(base, f"/applications/{app}/jobs") or []
    stages_out = []
    for job in sorted(jobs, key=lambda j: j["jobId"]):
        desc = job.get("description") or ""
        batch, query = _BATCH.search(desc), _QUERY.search(desc)
        if batch is None:
            continue
        for stage_id in sorted(job.get("stageIds", [])):
            for attempt in rest(base, f"/applications/{app}/stages/{stage_id}?details=false") or []:
                if attempt.get("status") == "SKIPPED" or attempt.get("numTasks") != SHUFFLE_PARTITIONS:
                    continue
                tasks = rest(base, f"/applications/{app}/stages/{stage_id}/{attempt['attemptId']}/taskList?length=100000") or []
                stages_out.append(
                    {
                        "job_id": job["jobId"],
                        "query_id": query.group(1) if query else None,
                        "batch_id": int(batch.group(1)),
                        "stage_id": stage_id,
                        "stage_attempt": attempt["attemptId"],
                        "status": attempt.get("status"),
                        "tasks": [
                            {
                                "index": t["index"],
                                "partition_id": t.get("partitionId", t["index"]),
                                "attempt": t["attempt"],
                                "executor_id": t["executorId"],
                                "host": t["host"],
                                "status": t["status"],
                                "speculative": t.get("speculative", False),
                                "launch_time": t.get("launchTime"),
                                "duration_ms": t.get("duration"),
                            }
                            for t in tasks
                        ],
                    }
                )
    return {"app_id": app, "stages": stages_out}


def held_at(stages: list[dict], executor_id: str, before_ms: float) -> dict[str, list[int]]:
    """Per stateful stage position in its batch, the partitions whose latest successful task before ``before_ms`` ran on ``executor_id``."""
    from datetime import datetime

    def ms(stamp: str) -> float:
        return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000

    latest: dict[tuple[int, int], tuple[float, str]] = {}
    for position, stage_list in _by_position(stages).items():
        for stage in stage_list:
            for t in stage["tasks"]:
                if t["status"] != "SUCCESS" or t["launch_time"] is None:
                    continue
                end = ms(t["launch_time"]) + (t["duration_ms"] or 0)
                key = (position, t["partition_id"])
                if end < before_ms and (key not in latest or end >= latest[key][0]):
                    latest[key] = (end, t["executor_id"])
    held: dict[str, list[int]] = {}
    for (position, partition), (_end, ex) in sorted(latest.items()):
        if ex == executor_id:
            held.setdefault(str(position), []).append(partition)
    return held


def _by_position(stages: list[dict]) -> dict[int, list[dict]]:
    """Stateful stages grouped by their order within their batch (0 = the first stateful stage)."""
    batches: dict[int, list[int]] = {}
    for s in stages:
        ids = batches.setdefault(s["batch_id"], [])
        if s["stage_id"] not in ids:
            ids.append(s["stage_id"])
    out: dict[int, list[dict]] = {}
    for s in stages:
        position = sorted(batches[s["batch_id"]]).index(s["stage_id"])
        out.setdefault(position, []).append(s)
    return out


class RecordingSource:
    """Wraps ``task_poll.RestSource``: keeps every answer, so a fast test can replay the poller on real REST data."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.answers: dict[str, str | None] = {}
        self.requests = 0

    def get(self, path: str) -> Any:
        body = self.get_bytes(path)
        return None if body is None else json.loads(body)

    def get_bytes(self, path: str) -> bytes | None:
        body = self.inner.get_bytes(path)
        self.answers[path] = None if body is None else body.decode()
        return body

    def close(self) -> None:
        self.inner.close()


def rest_answers(spark: Any, query_id: str, batches: range) -> dict[str, str | None]:
    """The REST answers the live poller reads for ``batches`` (and the executor list), verbatim."""
    from spark_state_observer.placement.task_poll import RestSource, TaskPoller

    source = RecordingSource(RestSource(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId, timeout=30))
    poller = TaskPoller(source)  # type: ignore[arg-type]
    for batch in batches:
        poller.poll(query_id, batch)
    poller.executors()
    return source.answers


def child(name: str, out: str) -> None:
    """One scenario in this process: run the job, read the truth from the live driver before it stops."""
    import executor_loss_job

    args = executor_loss_job.parser().parse_args(["--out", out, *SCENARIOS[name]])
    truth: dict = {"scenario": name, "shuffle_partitions": SHUFFLE_PARTITIONS, "argv": SCENARIOS[name]}

    def before_stop(spark: Any, query: Any, kill: dict) -> None:
        truth.update(live_placement(spark))
        truth["query_id"] = str(query.id)
        truth["last_batch"] = query.lastProgress["batchId"]
        if kill["last_batch_before"] is not None:  # the batch before the kill, the one after, and one more
            first = kill["last_batch_before"]
            truth["rest_batches"] = [first, first + 3]
            truth["rest"] = rest_answers(spark, str(query.id), range(first, first + 3))

    kill = executor_loss_job.run(args, before_stop=before_stop)
    truth["killed"] = kill
    if kill["executor_id"] is not None:
        truth["held_by_killed"] = held_at(truth["stages"], kill["executor_id"], kill["timestamp"] * 1000)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)


def live_check(out: str) -> None:
    """The kill scenario with the live poll path attached: writes ``live_placement.json`` beside the event log.

    The slow test replays that event log and compares its placement with what the poller saw live.
    """
    import executor_loss_job

    from spark_state_observer.placement.task_poll import PollingSource

    args = executor_loss_job.parser().parse_args(["--out", out, *SCENARIOS["kill"]])
    feeds: list = []
    signals: list = []

    def attach_hook(spark: Any, handle: Any) -> None:
        feed = handle.observer.placement  # attach() added it: placement=auto and the UI is on
        if feed is None or not isinstance(feed.source, PollingSource):
            raise SystemExit("attach() did not poll the driver's status store (is the UI off?)")
        feeds.append(feed)
        handle.on("partition_migrated", lambda s: signals.append(s.attributes))

    def before_stop(spark: Any, query: Any, kill: dict) -> None:
        time.sleep(3)  # the progress events of the last batches reach the worker
        feed = feeds[0]
        rows = [
            {
                "batch_id": b.batch_id,
                "operator": b.operator,
                "operator_name": b.operator_name,
                "placement": {str(k): v for k, v in sorted(b.placement.items())},
                "migrations": [[m.partition, m.from_executor, m.to_executor, m.cause] for m in b.migrations],
            }
            for b in list(feed.batches)
        ]
        poller = feed.source.poller
        with open(os.path.join(out, "live_placement.json"), "w") as f:
            json.dump(
                {
                    "batches": rows,
                    "signals": list(signals),
                    "poll_seconds": poller.seconds,
                    "requests": poller.source.requests,
                    "errors": poller.errors,
                    "killed": kill,
                },
                f,
                indent=1,
            )

    executor_loss_job.run(args, attach_hook=attach_hook, before_stop=before_stop)


def record(name: str) -> None:
    target = os.path.join(FIXTURES, name)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, name)
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--out", out]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": os.path.join(HERE, "..")})
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        shutil.copy(os.path.join(out, "truth.json"), target)
        shutil.copytree(
            os.path.join(out, "eventlog"), os.path.join(target, "eventlog"), ignore=shutil.ignore_patterns("*.crc", "appstatus*")
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=list(SCENARIOS))
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--live-check", action="store_true", help="run the kill scenario with the live poller into --out")
    args = ap.parse_args()
    if args.live_check:
        live_check(args.out)
        return 0
    if args.child:
        child(args.child, args.out)
        return 0
    for name in args.scenarios:
        record(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
