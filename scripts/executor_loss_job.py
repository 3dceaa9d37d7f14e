"""A real executor loss: local-cluster with two executors, one killed while a stateful query runs.

Writes ``signals.jsonl`` (what the observer derived live) and the Spark event log into ``--out``; the
end-to-end test checks both (live and replayed) for executor-removed and store-reload events.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from scenario_job import record_signals, wait_batches, write_jsonl


def executor_pid(executor_id: str) -> int | None:
    """The pid of the executor JVM with this id, from /proc (ps may cut long command lines)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if (any(a.endswith(b"CoarseGrainedExecutorBackend") for a in args) and b"--executor-id" in args
                and args[args.index(b"--executor-id") + 1] == executor_id.encode()):
            return int(pid)
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import observer
    from observer.cli.demo import dedup_window_query, spark_session

    os.makedirs(args.out, exist_ok=True)
    spark = spark_session(master="local-cluster[2,1,1024]", event_log_dir=os.path.join(args.out, "eventlog"),
                          extra={"spark.locality.wait": "1s"})
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0)
    signals = record_signals(handle)
    query = dedup_window_query(spark, os.path.join(args.out, "checkpoint"), rows_per_second=40)
    wait_batches(query, 5)
    pid = executor_pid("1")
    if pid is None:
        raise SystemExit("no executor process with id 1 found")
    os.kill(pid, signal.SIGKILL)
    signals.append({"kind": "test_killed_executor", "timestamp": time.time(), "attributes": {"executor_id": "1", "pid": pid}})
    wait_batches(query, 7)
    query.stop()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "signals.jsonl"), signals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
