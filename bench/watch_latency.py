"""Latency of the watcher: a progress event written by Spark until it is visible on ``/metrics``.

    python bench/watch_latency.py [--duration 90] [--poll 1.0] [--codec zstd|lz4|snappy|none] [--trigger 2]

A real Spark application (its own process, ``local[1]``, the demo's stateful pipeline, event log on with
``--codec``) runs next to the ``watch`` command's runtime (this process, serving /metrics on a free port,
polling every ``--poll`` seconds). A scraper reads /metrics every 50 ms; each time a new batch id shows, the
latency is the scrape's time minus the moment Spark finished the batch (its trigger time plus its duration,
both read from the same exposition: ``spark_streaming_last_progress_timestamp_seconds`` and
``spark_streaming_batch_duration_seconds``). Spark writes the progress event to its log right after that
moment (the event-logging listener flushes it: zstd ends a frame, snappy a chunk; lz4 writes nothing until
its 32 KiB block is full, so lz4 logs show events late by up to that much log). Goal: one poll interval + 1 s.
Spark and the watcher share this machine's clock; the 50 ms scrape period is part of each figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from prometheus_client.parser import text_string_to_metric_families

from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
from spark_state_observer.settings import Settings

_WANTED = ("spark_streaming_batch_id", "spark_streaming_last_progress_timestamp_seconds", "spark_streaming_batch_duration_seconds")


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in _WANTED:
                out[s.name] = s.value
    return out


def child(args: argparse.Namespace) -> None:
    """The Spark application: the demo pipeline with its event log, until SIGTERM."""
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    stopped = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopped.append(signum))
    codec = None if args.codec == "none" else args.codec
    spark = spark_session(
        master="local[1]", event_log_dir=args.event_log_dir, event_log_codec=codec, extra={"spark.app.name": "latency-bench"}
    )
    spark.sparkContext.setLogLevel("ERROR")
    query = dedup_window_query(spark, args.checkpoint, 10, name="latency", trigger_seconds=args.trigger)
    while not stopped and query.isActive:
        time.sleep(0.2)
    query.stop()
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=90.0, help="seconds of measurement after the first batch shows")
    parser.add_argument("--poll", type=float, default=1.0, help="the watcher's poll interval")
    parser.add_argument("--codec", default="zstd", choices=["zstd", "lz4", "snappy", "none"])
    parser.add_argument("--trigger", type=float, default=2.0, help="the application's trigger interval, seconds")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--event-log-dir", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    root = tempfile.mkdtemp(prefix="sso-watch-latency-")
    logs = os.path.join(root, "logs")
    os.makedirs(logs)
    fleet = FleetObserver(
        [logs], Settings.from_env(http_port=0, labels="cluster=bench", history_enabled=False), WatchOptions(poll_interval=args.poll)
    ).start()
    assert fleet.server is not None
    url = fleet.server.url
    app = subprocess.Popen(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            "--event-log-dir",
            logs,
            "--checkpoint",
            os.path.join(root, "ckpt"),
            "--codec",
            args.codec,
            "--trigger",
            str(args.trigger),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    latencies: list[float] = []
    try:
        last_batch = None
        deadline = time.monotonic() + 600.0
        started = None
        while time.monotonic() < deadline:
            seen = _scrape(url)
            now = time.time()
            batch = seen.get("spark_streaming_batch_id")
            if batch is not None and batch != last_batch:
                if last_batch is not None:  # the first one showing may be old: the watcher found the log then
                    done = seen["spark_streaming_last_progress_timestamp_seconds"] + seen.get("spark_streaming_batch_duration_seconds", 0.0)
                    latencies.append(now - done)
                last_batch = batch
                if started is None:
                    started = time.monotonic()
                    deadline = started + args.duration
            time.sleep(0.05)
    finally:
        app.send_signal(signal.SIGTERM)
        try:
            app.wait(120)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait(10)
        fleet.stop()
        shutil.rmtree(root, ignore_errors=True)
    if not latencies:
        print("no batch showed on /metrics: is Java installed?")
        sys.exit(1)
    lat = sorted(latencies)
    print(
        f"codec {args.codec}, trigger {args.trigger} s, poll {args.poll} s, {len(lat)} batches "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    print(
        f"  Spark finished the batch -> visible on /metrics: median {statistics.median(lat):.2f} s, max {lat[-1]:.2f} s, "
        f"min {lat[0]:.2f} s (goal: poll + 1 s = {args.poll + 1:.1f} s)"
    )


if __name__ == "__main__":
    main()
