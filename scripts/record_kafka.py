"""Record the Kafka fixtures from a real broker, a real producer and real Spark (never typed by hand).

    bash scripts/fetch_kafka.sh && python scripts/record_kafka.py     # writes tests/fixtures/kafka_restart/

A KRaft broker on loopback, a 3-partition topic, and a producer writing ``--rate`` records per second in
flushed bursts with known record timestamps. ``scripts/scenario_job.py --source kafka`` runs a windowed
count (RocksDB, watermark) for ``--batches`` batches and stops; the producer goes on for ``--gap`` seconds;
a second process restarts the query on the same checkpoint and runs until it caught up. Kept: both runs'
event logs, progress JSON lines, the observer's scrape and signals, and ``truth.json``: the producer's bursts
(time, record timestamp, offsets written per partition), the runs' start and end times, the broker's latest
offsets at the end and the jar versions used.
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


def run_job(checkpoint: str, out: str, bootstrap: str, topic: str, args: argparse.Namespace, *extra: str) -> dict[str, float]:
    """One run of the query in its own process; returns its start and end times (Unix seconds)."""
    cmd = [
        sys.executable,
        os.path.join(HERE, "scenario_job.py"),
        "--checkpoint",
        checkpoint,
        "--out",
        out,
        "--event-log",
        "--codec",
        "zstd",
        "--source",
        "kafka",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--name",
        "kafka_window_count",
        "--kafka-jars",
        ",".join(connector_jars()),
        "--trigger-seconds",
        str(args.trigger_seconds),
        "--max-offsets-per-trigger",
        str(args.max_offsets_per_trigger),
        *extra,
    ]
    print("+", " ".join(cmd), flush=True)
    started = time.time()
    proc = subprocess.run(cmd, check=False, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": ROOT})
    ended = time.time()
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.decode(errors="replace").splitlines() if not line.startswith("\tat ")][-30:]
        raise SystemExit(f"scenario_job.py exited with {proc.returncode}:\n" + "\n".join(tail))
    for root, _dirs, files in os.walk(out):
        for name in files:
            if name.endswith(".crc") or name.startswith("appstatus"):
                os.remove(os.path.join(root, name))
    return {"started": started, "ended": ended}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "kafka_restart"))
    ap.add_argument("--topic", default="events")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20.0, help="records per second, all partitions together")
    ap.add_argument("--trigger-seconds", type=float, default=2.0)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=120, help="so that a backlog takes several batches")
    ap.add_argument("--batches", type=int, default=16, help="batches of the first run")
    ap.add_argument("--lead", type=float, default=4.0, help="seconds the producer writes before the query starts")
    ap.add_argument("--gap", type=float, default=20.0, help="seconds the query stays stopped while the producer goes on")
    ap.add_argument("--grow-to", type=int, default=None, help="partitions the topic grows to while the query is stopped")
    args = ap.parse_args()

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    with tempfile.TemporaryDirectory(prefix="sso-record-kafka-") as tmp, KafkaBroker() as broker:
        broker.create_topic(args.topic, args.partitions)
        producer = BurstProducer(broker.bootstrap, args.topic, args.partitions, args.rate).start()
        producer_started = time.time()
        try:
            time.sleep(args.lead)
            checkpoint = os.path.join(tmp, "checkpoint")
            runs = [run_job(checkpoint, os.path.join(args.out, "run1"), broker.bootstrap, args.topic, args, "--batches", str(args.batches))]
            grown = None
            if args.grow_to:
                time.sleep(args.gap / 2)
                from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]

                admin = broker.admin()  # held until the futures are done: a client collected early cancels them
                for future in admin.create_partitions([NewPartitions(args.topic, args.grow_to)]).values():
                    future.result(60)
                producer.add_partitions(args.grow_to)
                grown = time.time()
                time.sleep(args.gap / 2)
            else:
                time.sleep(args.gap)
            runs.append(run_job(checkpoint, os.path.join(args.out, "run2"), broker.bootstrap, args.topic, args, "--until-caught-up"))
        finally:
            producer.stop()
        producer_stopped = time.time()
        broker_latest = broker.latest_offsets(args.topic)
        if broker_latest != producer.latest():
            raise SystemExit(f"the broker's latest offsets {broker_latest} are not what the producer wrote {producer.latest()}")
        truth = {
            "topic": args.topic,
            "partitions": args.partitions,
            "rate_per_second": args.rate,
            "burst_seconds": producer.burst_seconds,
            "trigger_seconds": args.trigger_seconds,
            "max_offsets_per_trigger": args.max_offsets_per_trigger,
            "runs": runs,
            "grown": {"to": args.grow_to, "at": grown} if args.grow_to else None,
            "producer": {"started": producer_started, "stopped": producer_stopped, "bursts": producer.bursts},
            "broker_latest_at_end": {str(p): o for p, o in broker_latest.items()},
            "versions": manifests(),
        }
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=None, separators=(",", ":"))
    print(
        f"recorded {args.out}: runs {[round(r['ended'] - r['started'], 1) for r in runs]} s, "
        f"{len(producer.bursts)} bursts, latest {broker_latest}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
