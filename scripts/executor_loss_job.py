"""A real executor loss: local-cluster with two executors, one killed while a stateful query runs.

Writes ``signals.jsonl`` (what the observer derived live) and the Spark event log into ``--out``; the
end-to-end test checks both (live and replayed) for executor-removed and store-reload events. It also writes
``progress.jsonl`` and ``run.json`` (which executor it killed, when, and the batch ids around the kill) for
``scripts/record_incidents.py``. ``scripts/record_placement.py`` runs the same job with options: no kill (a
clean run), another locality wait, more shuffle partitions, the driver's UI on, and a hook called while the
application is still alive.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from scenario_job import record_signals, wait_batches, write_jsonl


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` was started (through any chain) by ``ancestor``: another job's executor on this
    machine may have the same id, and must not be killed."""
    for _ in range(64):
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid <= 1:
            return False
    return False


def executor_pid(executor_id: str) -> int | None:
    """The pid of this job's executor JVM with this id, from /proc (ps may cut long command lines)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if (
            any(a.endswith(b"CoarseGrainedExecutorBackend") for a in args)
            and b"--executor-id" in args
            and args[args.index(b"--executor-id") + 1] == executor_id.encode()
            and _descends_from(int(pid), os.getpid())
        ):
            return int(pid)
    return None


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-kill", action="store_true", help="a clean run: no executor is killed")
    ap.add_argument("--kill-executor", default="1")
    ap.add_argument("--batches-before", type=int, default=5, help="batches completed before the kill")
    ap.add_argument("--kill-delay", type=float, default=0.0, help="seconds to wait after those batches, to kill inside a batch")
    ap.add_argument("--batches-after", type=int, default=7, help="batches completed after the kill")
    ap.add_argument("--second-kill", default=None, help="an executor to kill too, --batches-between batches after the first")
    ap.add_argument("--batches-between", type=int, default=4, help="batches completed between the two kills")
    ap.add_argument("--shuffle-partitions", "--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    ap.add_argument("--codec", default="zstd", help="event log codec")
    ap.add_argument("--name", default="demo_dedup_window", help="query name")
    ap.add_argument("--locality-wait", default="1s")
    ap.add_argument("--rows-per-second", type=int, default=40)
    ap.add_argument("--ui", action="store_true", help="turn the driver's UI (and its REST API) on, on a free port")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="more Spark settings")
    ap.add_argument("--executors", type=int, default=2, help="executors of the local cluster (1 core, 1024 MB each)")
    return ap


def run(
    args: argparse.Namespace,
    attach_hook: Callable[[Any, Any], None] | None = None,
    before_stop: Callable[[Any, Any, dict], None] | None = None,
) -> dict:
    """Run the job; ``attach_hook(spark, handle)`` runs after attaching, ``before_stop(spark, query, kill)`` before stopping.

    Returns what was done to the cluster: the killed executor's id, pid and time (None in a clean run).
    """
    import spark_state_observer as observer
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    extra = {"spark.locality.wait": args.locality_wait, "spark.sql.shuffle.partitions": str(args.shuffle_partitions)}
    if args.ui:
        extra.update({"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.ui.showConsoleProgress": "false"})
    extra.update(kv.split("=", 1) for kv in args.conf)
    spark = spark_session(
        master=f"local-cluster[{args.executors},1,1024]",
        event_log_dir=os.path.join(args.out, "eventlog"),
        event_log_codec=None if args.codec == "none" else args.codec,
        extra=extra,
    )
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0)
    if attach_hook is not None:
        attach_hook(spark, handle)
    signals = record_signals(handle)
    query = dedup_window_query(spark, os.path.join(args.out, "checkpoint"), rows_per_second=args.rows_per_second, name=args.name)
    wait_batches(query, args.batches_before)
    kill: dict = {
        "executor_id": None,
        "pid": None,
        "timestamp": None,
        "last_batch_before": query.lastProgress["batchId"] if query.lastProgress else None,
    }
    if not args.no_kill:
        time.sleep(args.kill_delay)
        pid = executor_pid(args.kill_executor)
        if pid is None:
            raise SystemExit(f"no executor process with id {args.kill_executor} found")
        os.kill(pid, signal.SIGKILL)
        kill.update(executor_id=args.kill_executor, pid=pid, timestamp=time.time())
        signals.append(
            {"kind": "test_killed_executor", "timestamp": kill["timestamp"], "attributes": {"executor_id": args.kill_executor, "pid": pid}}
        )
    if args.second_kill is not None and not args.no_kill:
        wait_batches(query, args.batches_between)
        second = executor_pid(args.second_kill)
        if second is None:
            raise SystemExit(f"no executor process with id {args.second_kill} found")
        os.kill(second, signal.SIGKILL)
        kill["second"] = {"executor_id": args.second_kill, "pid": second, "timestamp": time.time()}
        kill["second"]["last_batch_before"] = query.lastProgress["batchId"] if query.lastProgress else None
        signals.append(
            {
                "kind": "test_killed_executor",
                "timestamp": kill["second"]["timestamp"],
                "attributes": {"executor_id": args.second_kill, "pid": second},
            }
        )
    wait_batches(query, args.batches_after)
    if before_stop is not None:
        before_stop(spark, query, kill)
    progress = [p.json if hasattr(p, "_jdict") else json.dumps(p) for p in query.recentProgress]
    facts = {
        "spark_version": spark.version,
        "query_name": query.name,
        "query_id": str(query.id),
        "run_id": str(query.runId),
        "process_started": started,
        "killed_executor_id": kill["executor_id"],
        "killed_pid": kill["pid"],
        "killed_at": kill["timestamp"],
        "last_batch_before_kill": kill["last_batch_before"],
        "second_kill": kill.get("second"),
        "last_batch_id": query.lastProgress["batchId"],
    }
    query.stop()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "signals.jsonl"), signals)
    write_jsonl(os.path.join(args.out, "progress.jsonl"), progress)
    facts["process_ended"] = time.time()
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(facts, f, indent=1)
    return kill


def main() -> int:
    run(parser().parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
