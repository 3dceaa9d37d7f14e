"""What the live restore poll costs the driver and the observer at 200 state partitions.

    python bench/restore_poll_cost.py [--partitions 200] [--batches 10] [--rounds 10] [--passes 5] [--checkpoint DIR]

A real restart: ``scripts/record_restore.py --phase build`` writes a checkpoint (a dedupe then a count per key,
RocksDB, ``--partitions`` shuffle partitions, no snapshot, ``--batches`` batches) in a process of its own; this
process restarts the query from it (local[2], UI on, its REST API answering first) with ``attach()``, whose
worker polls the restoring batch's stateful tasks (``spark_state_observer.placement.restore_poll``) once a second.

Reported for the live restore: polls, requests and answer bytes per poll (the task lists dominate), the
worker's wall and CPU time per poll. Then the driver JVM's CPU per poll, measured once the query stopped by
replaying the polls' requests against the status store, which still holds the batch: each round sends every
poll's requests (``--passes`` times) as the poller sent them (``new``: each task list from the first task not yet ended, as many
tasks as the live answer had) or as the poller before it did (``old``: every success of the stage so far,
``status=SUCCESS``), and is paired with an idle window of the same length right after it; JVM CPU from /proc
(user + system), busy minus idle, divided by the polls. ``old task lists`` / ``new task lists``: the same polls
with their task lists alone (what the two ways differ in; the rest is the same requests). Rounds take the
styles in turn; medians over rounds. ``--checkpoint``: restart from a checkpoint this bench built before
(each restart adds its batches to it) instead of building one.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))

from placement_poll import jvm_seconds  # noqa: E402  (bench/ is not a package)

_TASK_LIST = re.compile(r"^/stages/(\d+)/(\d+)/taskList\?")


@dataclass
class Poll:
    """One restore poll as the worker made it: its requests (path, answer bytes, tasks and successes in a task list)."""

    requests: list[tuple[str, int, int, int]] = field(default_factory=list)
    wall: float = 0.0
    cpu: float = 0.0


def instrument(poller: Any) -> list[Poll]:
    """Record every restore poll of ``poller`` (``RestorePoller``): its requests, their answers' sizes, its time."""
    from spark_state_observer.placement.task_poll import _decode_tasks

    polls: list[Poll] = []
    current: list[Poll | None] = [None]
    source = poller.source
    get_bytes = source.get_bytes

    def recording_get_bytes(path: str) -> bytes | None:
        body = get_bytes(path)
        poll = current[0]
        if poll is not None and threading.current_thread().name == "spark-state-observer-worker":
            listed = _decode_tasks(body) if body is not None and _TASK_LIST.match(path) else []
            successes = sum(t["status"] == "SUCCESS" for t in listed)
            poll.requests.append((path, len(body) if body is not None else 0, len(listed), successes))
        return body

    def timed(method: Any) -> Any:
        def run(*args: Any) -> Any:
            poll = Poll()
            current[0] = poll
            c, t = time.thread_time(), time.perf_counter()
            try:
                return method(*args)
            finally:
                poll.wall, poll.cpu = time.perf_counter() - t, time.thread_time() - c
                current[0] = None
                if poll.requests:
                    polls.append(poll)

        return run

    source.get_bytes = recording_get_bytes
    poller._poll = timed(poller._poll)
    poller.done = timed(poller.done)
    return polls


def old_style(polls: list[Poll]) -> list[list[str]]:
    """The same polls as the poller before the offset sent them: each task list as every success of the stage so far."""
    successes: dict[tuple[str, str], int] = {}
    out = []
    for poll in polls:
        paths = []
        for path, _, _, succeeded in poll.requests:
            m = _TASK_LIST.match(path)
            if m is None:
                paths.append(path)
                continue
            key = (m.group(1), m.group(2))
            successes[key] = successes.get(key, 0) + succeeded
            paths.append(f"/stages/{key[0]}/{key[1]}/taskList?length={successes[key]}&status=SUCCESS")
        out.append(paths)
    return out


def new_style(polls: list[Poll]) -> list[list[str]]:
    """The polls as sent, each task list cut to the tasks its live answer had (all have ended since); one that had
    none asks past the end (Spark refuses ``length=0``)."""
    out = []
    for poll in polls:
        paths = []
        for path, _, tasks, _ in poll.requests:
            if _TASK_LIST.match(path):
                path = (
                    re.sub(r"length=\d+", f"length={tasks}", path)
                    if tasks
                    else re.sub(r"offset=\d+&length=\d+", "offset=1000000&length=1", path)
                )
            paths.append(path)
        out.append(paths)
    return out


def task_lists(polls: list[list[str]]) -> list[list[str]]:
    """Only the task lists of each poll: what the two ways differ in."""
    return [[p for p in paths if _TASK_LIST.match(p)] for paths in polls]


def replay_round(source: Any, polls: list[list[str]], pid: int, passes: int) -> tuple[float, float, int, float]:
    """Send every poll's requests ``passes`` times, then stay idle as long: (JVM CPU busy, JVM CPU idle, bytes, Python
    CPU), per pass. /proc counts CPU in clock ticks (10 ms): a round must last many of them."""
    from spark_state_observer.placement.task_poll import _decode_tasks

    size, cpu = 0, 0.0
    start_cpu, t = jvm_seconds(pid) or 0.0, time.perf_counter()
    for paths in polls * passes:
        for path in paths:
            c = time.thread_time()
            body = source.get_bytes(path) or b""
            if _TASK_LIST.match(path):
                _decode_tasks(body)
            cpu += time.thread_time() - c
            size += len(body)
    busy_wall = time.perf_counter() - t
    busy = (jvm_seconds(pid) or 0.0) - start_cpu
    idle_start = jvm_seconds(pid) or 0.0
    time.sleep(busy_wall)
    idle = (jvm_seconds(pid) or 0.0) - idle_start
    return busy / passes, idle / passes, size // passes, cpu / passes


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10, help="replay rounds per style")
    ap.add_argument("--passes", type=int, default=5, help="times a round sends the polls")
    ap.add_argument("--checkpoint", help="restart from this checkpoint (one this bench built before) instead of building one")
    args = ap.parse_args()

    from record_restore import session, start
    from scenario_job import wait_batches, wait_rest

    import spark_state_observer as observer
    from spark_state_observer.placement.task_poll import RestSource

    checkpoint = args.checkpoint or os.path.join(tempfile.mkdtemp(prefix="bench-restore-poll-"), "checkpoint")
    if not args.checkpoint:
        recorder = os.path.join(HERE, "..", "scripts", "record_restore.py")
        common = ["--checkpoint", checkpoint, "--partitions", str(args.partitions), "--batches", str(args.batches)]
        subprocess.run([sys.executable, recorder, "--phase", "build", *common], check=True)

    spark = session("local[2]", args.partitions, ui=True, event_log=None)
    wait_rest(spark)
    handle = observer.attach(spark, http_port=0, history_enabled=False)
    poller = handle.observer.placement.source.restores
    assert poller is not None, "no live restore poll: is the UI on?"
    polls = instrument(poller)
    finished: list[dict[str, Any]] = []
    handle.on("restore_finished", lambda e: finished.append(e.attributes))
    query = start(spark, checkpoint, 1.0)
    try:
        wait_batches(query, 2, timeout=3600)
        query.stop()
        handle.flush()
        pid = spark.sparkContext._gateway.proc.pid
        source = RestSource(spark.sparkContext.uiWebUrl, spark.sparkContext.applicationId, timeout=60)
        source.get("")
        old, new = old_style(polls), new_style(polls)
        styles = {"old": old, "new": new, "old task lists": task_lists(old), "new task lists": task_lists(new)}
        for paths in styles.values():  # warm the JIT on both before measuring
            replay_round(source, paths, pid, 1)
        per_poll: dict[str, list[float]] = {style: [] for style in styles}
        sizes: dict[str, int] = {}
        python_cpu: dict[str, list[float]] = {style: [] for style in styles}
        for _ in range(args.rounds):
            for style, paths in styles.items():
                busy, idle, size, cpu = replay_round(source, paths, pid, args.passes)
                per_poll[style].append(max(0.0, busy - idle) / len(paths))
                sizes[style] = size
                python_cpu[style].append(cpu / len(paths))
    finally:
        handle.stop()
        spark.stop()

    requests = [len(p.requests) for p in polls]
    answer = [sum(r[1] for r in p.requests) for p in polls]
    tasks = [sum(r[2] for r in p.requests) for p in polls]
    print(f"restore poll at {args.partitions} state partitions (2 operators), local[2], restarted from {checkpoint}")
    for a in finished:
        print(
            f"  restore {a['operator']}: {a['partitions_done']}/{a['partitions_total']} partitions, "
            f"{a['duration_seconds']:.1f} s, complete={a['complete']}"
        )
    print(
        f"  live polls that read the restore: {len(polls)}; requests per poll median {statistics.median(requests):.0f}, max {max(requests)}"
    )
    print(
        f"  live answer per poll: median {statistics.median(answer) / 1024:.1f} KiB, max {max(answer) / 1024:.1f} KiB, total {sum(answer) / 1024:.0f} KiB"
    )
    print(f"  live tasks read per poll: median {statistics.median(tasks):.0f}, max {max(tasks)}, total {sum(tasks)}")
    print(f"  live worker per poll: wall {ms([p.wall for p in polls])}; CPU {ms([p.cpu for p in polls])}")
    for style in styles:
        print(
            f"  replay {style}: driver JVM CPU per poll {ms(per_poll[style])}; Python CPU per poll {ms(python_cpu[style])}; "
            f"answers {sizes[style] / 1024:.0f} KiB per restore ({sizes[style] / 1024 / len(polls):.1f} KiB per poll)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
