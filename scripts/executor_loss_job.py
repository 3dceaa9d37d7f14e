"""A real executor loss: local-cluster with two executors, one killed while a stateful query runs.

Writes ``signals.jsonl`` (what the observer derived live) and the Spark event log into ``--out``; the
end-to-end test checks both (live and replayed) for executor-removed and store-reload events. It also writes
``progress.jsonl`` and ``run.json`` (which executor it killed, when, and the batch ids around the kill) for
``scripts/record_incidents.py``.
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    ap.add_argument("--codec", default="zstd")
    ap.add_argument("--name", default="demo_dedup_window")
    ap.add_argument("--batches-after", type=int, default=2, help="batches to wait for after the kill")
    args = ap.parse_args()
    import observer
    from observer.cli.demo import dedup_window_query, spark_session

    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    spark = spark_session(master="local-cluster[2,1,1024]", event_log_dir=os.path.join(args.out, "eventlog"), event_log_codec=args.codec,
                          extra={"spark.locality.wait": "1s", "spark.sql.shuffle.partitions": str(args.partitions)})
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0)
    signals = record_signals(handle)
    query = dedup_window_query(spark, os.path.join(args.out, "checkpoint"), rows_per_second=40, name=args.name)
    wait_batches(query, 5)
    before = query.lastProgress["batchId"]
    pid = executor_pid("1")
    if pid is None:
        raise SystemExit("no executor process with id 1 found")
    os.kill(pid, signal.SIGKILL)
    killed_at = time.time()
    signals.append({"kind": "test_killed_executor", "timestamp": killed_at, "attributes": {"executor_id": "1", "pid": pid}})
    wait_batches(query, 5 + args.batches_after)
    progress = [p.json if hasattr(p, "_jdict") else json.dumps(p) for p in query.recentProgress]
    facts = {"spark_version": spark.version, "query_name": query.name, "query_id": str(query.id), "run_id": str(query.runId),
             "process_started": started, "killed_executor_id": "1", "killed_pid": pid, "killed_at": killed_at,
             "last_batch_before_kill": before, "last_batch_id": query.lastProgress["batchId"]}
    query.stop()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "signals.jsonl"), signals)
    write_jsonl(os.path.join(args.out, "progress.jsonl"), progress)
    facts["process_ended"] = time.time()
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(facts, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
