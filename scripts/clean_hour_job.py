"""One long clean application with several stateful queries, the observer attached: the clean-hour recording.

Started by ``scripts/record_clean_hour.py``. One Spark application (``local[2]``, RocksDB with changelog
checkpointing, Spark's event log on, zstd) runs one query per stateful operator kind from
``scripts/growth_queries.py``, each bounded by construction (a dedup with a watermark, sliding windows, a
stream-stream join with state cleanup, a transformWithStateInPandas with a TTL), for ``--duration``
seconds, on a machine other jobs keep busy. Nothing is done to the queries: whatever the observer fires
on this run is false. Writes into ``--out``: the event log, ``progress.jsonl`` (every query's progress),
``signals.jsonl`` (what the live observer derived) and ``run.json`` (per query: ids, batches, and the
machine's load average sampled each minute, so the recording says how busy it was).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

QUERIES = ("dedup_watermark", "sliding", "join_cleanup", "tws_ttl")


def load_average() -> float:
    """The one-minute load average (how many runnable processes shared the machine's cores)."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--checkpoints", required=True, help="a folder; each query gets its own checkpoint in it")
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--rows-per-second", type=int, default=50)
    ap.add_argument("--trigger-seconds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--name", default="clean_hour")
    args = ap.parse_args()

    import growth_queries
    import incident_queries
    from scenario_job import drain, record_signals, write_jsonl

    import spark_state_observer as observer
    from spark_state_observer.cli.demo import spark_session

    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    spark = spark_session(
        master="local[2]",
        provider="rocksdb",
        changelog=True,
        event_log_dir=os.path.join(args.out, "eventlog"),
        event_log_codec="zstd",
        extra={
            "spark.app.name": args.name,
            "spark.sql.shuffle.partitions": str(args.partitions),
            "spark.sql.streaming.numRecentProgressUpdates": "100000",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    handle = observer.attach(spark, http_port=0)
    signals = record_signals(handle)
    queries = []
    for name in QUERIES:
        ctx = incident_queries.Context(
            spark,
            os.path.join(args.checkpoints, name),
            args.rows_per_second,
            10,
            f"{args.name}_{name}",
            args.out,
            {"trigger": f"{args.trigger_seconds} seconds"},
        )
        queries.append(growth_queries.PIPELINES[name](ctx))
    load: list[tuple[float, float]] = []
    deadline = time.monotonic() + args.duration
    while time.monotonic() < deadline:
        dead = [q.name for q in queries if not q.isActive]
        if dead:
            raise SystemExit(f"queries stopped early: {dead}: {[str(q.exception()) for q in queries if not q.isActive]}")
        if not load or time.time() - load[-1][0] >= 60:
            load.append((time.time(), load_average()))
        time.sleep(1)
    ended = time.time()
    progress = [(p.json, p.timestamp) for q in queries for p in q.recentProgress]
    facts = {
        "spark_version": spark.version,
        "process_started": started,
        "process_ended": ended,
        "trigger_seconds": args.trigger_seconds,
        "rows_per_second": args.rows_per_second,
        "partitions": args.partitions,
        "load_average_per_minute": [{"at": at, "load1": value} for at, value in load],
        "queries": [],
    }
    for q in queries:
        batches = [json.loads(p.json) for p in q.recentProgress]
        facts["queries"].append(
            {
                "query_name": q.name,
                "query_id": str(q.id),
                "run_id": str(q.runId),
                "first_batch_id": batches[0]["batchId"] if batches else None,
                "last_batch_id": batches[-1]["batchId"] if batches else None,
                "batches": len(batches),
                "operators": sorted({op["operatorName"] for b in batches for op in b.get("stateOperators", [])}),
                "max_duration_ms": max((b["durationMs"].get("triggerExecution", 0) for b in batches), default=0),
                "exception": None,
            }
        )
    for q in queries:
        q.stop()
    drain(handle, len(queries))
    urllib.request.urlopen(handle.url, timeout=10).read()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "progress.jsonl"), [line for line, _ts in sorted(progress, key=lambda p: p[1])])
    write_jsonl(os.path.join(args.out, "signals.jsonl"), signals)
    with open(os.path.join(args.out, "run.json"), "w") as f:
        json.dump(facts, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
