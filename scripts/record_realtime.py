"""Record stateful real-time-mode runs (Spark 4.3) on a real Kafka broker (never typed by hand).

    bash scripts/fetch_kafka.sh && python scripts/record_realtime.py     # writes tests/fixtures/realtime/

A KRaft broker on loopback, a 2-partition topic and a producer writing ``--rate`` records per second;
``scripts/realtime_job.py`` runs the query under ``trigger(realTime=...)`` (each "batch" lasts the
interval: a checkpoint interval, not a latency) and writes its output to another topic. Scenarios:

- ``clean``: ``dropDuplicates`` for ``--batches`` batches, one run: nothing may be signalled but its start.
- ``long_interval``: ``dropDuplicates`` under a 75 s interval for 3 batches, one run: no stall either.
- ``slow``: the dedup behind an expression summing 5 million numbers per record, slower than the producer, for
  16 batches of 10 s: the incident is falling behind (the backlog at every batch boundary grows).
- ``restart``: a count per key for ``--batches`` batches, stopped for ``--gap`` seconds while the producer
  goes on, restarted on the same checkpoint as a new application: the incident is the restart and the
  restore of the state by the restarted run's first batch.

Each scenario keeps the runs' progress JSON, event logs, the observer's signals and scrape (``run*/``),
the checkpoint's logs and state listing as the last run left it (``checkpoint/``, no ``.crc`` files), and
``truth.json``: the interval, each run's start and end, the restart's downtime as the script made it and
the producer's record counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from spark_state_observer.offline.kafka_local import BurstProducer, KafkaBroker, connector_jars, manifests  # noqa: E402

# scenario -> (query, query name, trigger interval (None: --interval), batches (None: --batches))
QUERIES: dict[str, tuple[str, str, float | None, int | None]] = {
    "clean": ("dedup", "realtime_dedup", None, None),
    "restart": ("aggregation", "realtime_count", None, None),
    # an interval above the stall rule's default limit (6 x trigger_interval_seconds): only the real-time branch
    # keeps the second batch, an interval after the first, from looking stalled
    "long_interval": ("dedup", "realtime_dedup_long", 75.0, 3),
    # summing 5 million numbers per record on 2 source partitions reads fewer records than the producer writes
    "slow": ("slow_dedup", "realtime_slow_dedup", 10.0, 16),
}


def run_job(checkpoint: str, out: str, bootstrap: str, scenario: str, args: argparse.Namespace) -> dict[str, float]:
    """One run of the real-time query in its own process; its start and end (Unix seconds)."""
    query, name, interval, batches = QUERIES[scenario]
    cmd = [
        sys.executable,
        os.path.join(HERE, "realtime_job.py"),
        "--checkpoint",
        checkpoint,
        "--out",
        out,
        "--bootstrap",
        bootstrap,
        "--topic",
        "events",
        "--sink-topic",
        f"out_{scenario}",
        "--kafka-jars",
        ",".join(connector_jars()),
        "--query",
        query,
        "--name",
        name,
        "--real-time-seconds",
        str(interval or args.interval),
        "--batches",
        str(batches or args.batches),
    ]
    print("+", " ".join(cmd), flush=True)
    started = time.time()
    proc = subprocess.run(cmd, check=False, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": ROOT})
    ended = time.time()
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.decode(errors="replace").splitlines() if not line.startswith("\tat ")][-30:]
        raise SystemExit(f"realtime_job.py exited with {proc.returncode}:\n" + "\n".join(tail))
    return {"started": started, "ended": ended}


def keep_checkpoint(checkpoint: str, target: str) -> None:
    """The checkpoint's logs and state files as the last run left them, Hadoop's ``.crc`` files left out."""
    shutil.copytree(checkpoint, target, ignore=shutil.ignore_patterns("*.crc"))


def clean_outputs(folder: str) -> None:
    for root, _dirs, files in os.walk(folder):
        for name in files:
            if "appstatus" in name:
                os.remove(os.path.join(root, name))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "realtime"))
    ap.add_argument("--rate", type=float, default=20.0, help="records per second, all partitions together")
    ap.add_argument("--interval", type=float, default=5.0, help="the real-time trigger's interval, seconds")
    ap.add_argument("--batches", type=int, default=6, help="batches of each run")
    ap.add_argument("--gap", type=float, default=15.0, help="seconds the restarted query stays stopped")
    ap.add_argument("scenarios", nargs="*", default=list(QUERIES))
    args = ap.parse_args()

    with KafkaBroker() as broker:
        broker.create_topic("events", 2)
        producer = BurstProducer(broker.bootstrap, "events", 2, args.rate).start()
        try:
            for scenario in args.scenarios:
                target = os.path.join(args.out, scenario)
                shutil.rmtree(target, ignore_errors=True)
                os.makedirs(target)
                broker.create_topic(f"out_{scenario}", 1)
                with tempfile.TemporaryDirectory(prefix="sso-record-realtime-") as tmp:
                    checkpoint = os.path.join(tmp, "checkpoint")
                    runs = [run_job(checkpoint, os.path.join(target, "run1"), broker.bootstrap, scenario, args)]
                    if scenario == "restart":
                        time.sleep(args.gap)
                        runs.append(run_job(checkpoint, os.path.join(target, "run2"), broker.bootstrap, scenario, args))
                    keep_checkpoint(checkpoint, os.path.join(target, "checkpoint"))
                clean_outputs(target)
                truth = {
                    "scenario": scenario,
                    "query": QUERIES[scenario][0],
                    "query_name": QUERIES[scenario][1],
                    "real_time_seconds": QUERIES[scenario][2] or args.interval,
                    "batches_per_run": QUERIES[scenario][3] or args.batches,
                    "runs": runs,
                    "restarts": len(runs) - 1,
                    "downtime_seconds": [b["started"] - a["ended"] for a, b in zip(runs, runs[1:])],
                    "rate_per_second": args.rate,
                    "versions": manifests(),
                }
                with open(os.path.join(target, "truth.json"), "w") as f:
                    json.dump(truth, f, indent=1)
                print(f"recorded {target}: runs {[round(r['ended'] - r['started'], 1) for r in runs]} s", flush=True)
        finally:
            producer.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
