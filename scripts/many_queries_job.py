"""Ten concurrent stateful queries in one local-cluster session, with restarts and an executor loss.

Writes into ``--out``: ``progress/<query>.jsonl`` (every progress of every run of each query, in order),
``metrics.prom`` (the observer's endpoint after the last batch) and ``signals.jsonl``. The fault test
checks that every query's metrics equal its own progress: correct, and separate from the others'.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from executor_loss_job import executor_pid
from scenario_job import drain, record_signals, write_jsonl, write_outputs

QUERIES = 10
RESTARTED = ("q03", "q07")


def progress_of(query) -> list[str]:  # type: ignore[no-untyped-def]
    return [p.json if hasattr(p, "_jdict") else json.dumps(p) for p in query.recentProgress]


def wait_all(queries: dict, batches: int, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while any(len(q.recentProgress) < batches for q in queries.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every query reached {batches} batches in {timeout}s")
        for name, q in queries.items():
            if not q.isActive:
                raise RuntimeError(f"query {name} died: {q.exception()}")
        time.sleep(0.5)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import spark_state_observer as observer
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    os.makedirs(os.path.join(args.out, "progress"), exist_ok=True)
    spark = spark_session(master="local-cluster[2,1,1024]", extra={"spark.sql.shuffle.partitions": "1"})
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0, history_path=os.path.join(args.out, "history.db"))
    signals = record_signals(handle)
    checkpoints = {f"q{i:02d}": os.path.join(args.out, "checkpoints", f"q{i:02d}") for i in range(QUERIES)}

    def start(name: str):  # type: ignore[no-untyped-def]
        return dedup_window_query(spark, checkpoints[name], rows_per_second=5 + int(name[1:]), name=name, trigger_seconds=3)

    queries = {name: start(name) for name in checkpoints}
    history: dict[str, list[str]] = {name: [] for name in queries}
    wait_all(queries, 3)
    for name in RESTARTED:  # restart two queries from their checkpoints
        queries[name].stop()
        history[name] += progress_of(queries[name])
        queries[name] = start(name)
    wait_all(queries, 2)
    pid = executor_pid("1")
    if pid is None:
        raise SystemExit("no executor process with id 1 found")
    os.kill(pid, signal.SIGKILL)
    signals.append({"kind": "test_killed_executor", "timestamp": time.time(), "attributes": {"executor_id": "1"}})
    wait_all(queries, 5)
    for name, query in queries.items():
        query.stop()
        history[name] += progress_of(query)
    drain(handle, len(queries) + len(RESTARTED))
    metrics = urllib.request.urlopen(handle.url, timeout=10).read().decode()
    handle.stop()
    spark.stop()
    for name, lines in history.items():
        write_jsonl(os.path.join(args.out, "progress", f"{name}.jsonl"), lines)
    write_outputs(args.out, metrics, signals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
