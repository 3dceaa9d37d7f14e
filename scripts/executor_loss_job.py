"""A real executor loss: local-cluster with two executors, one killed while a stateful query runs.

Writes ``signals.jsonl`` (what the observer derived live) and the Spark event log into ``--out``; the
end-to-end test checks both (live and replayed) for executor-removed and store-reload events.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def executor_pid(executor_id: str) -> int | None:
    """The pid of the executor JVM with this id, from /proc (ps may cut long command lines)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"CoarseGrainedExecutorBackend") for a in args) and b"--executor-id" in args:
            if args[args.index(b"--executor-id") + 1] == executor_id.encode():
                return int(pid)
    return None


def wait_batches(query, n: int, timeout: float = 240) -> None:  # type: ignore[no-untyped-def]
    start = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = query.lastProgress
        if last is not None:
            start = last["batchId"] if start is None else start
            if last["batchId"] - start >= n:
                return
        time.sleep(0.2)
    raise TimeoutError(f"fewer than {n} batches in {timeout}s")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import observer
    from observer.demo import dedup_window_query, spark_session

    os.makedirs(args.out, exist_ok=True)
    spark = spark_session(master="local-cluster[2,1,1024]", event_log_dir=os.path.join(args.out, "eventlog"),
                          extra={"spark.locality.wait": "1s"})
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0)
    signals: list[dict] = []
    handle.on("*", lambda e: signals.append({"kind": e.kind, "timestamp": e.timestamp, "attributes": e.attributes}))
    query = dedup_window_query(spark, os.path.join(args.out, "checkpoint"), rows_per_second=40)
    wait_batches(query, 4)
    pid = executor_pid("1")
    if pid is None:
        raise SystemExit("no executor process with id 1 found")
    os.kill(pid, signal.SIGKILL)
    signals.append({"kind": "test_killed_executor", "timestamp": time.time(), "attributes": {"executor_id": "1", "pid": pid}})
    wait_batches(query, 6)
    query.stop()
    handle.stop()
    spark.stop()
    with open(os.path.join(args.out, "signals.jsonl"), "w") as f:
        for s in signals:
            f.write(json.dumps(s) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
