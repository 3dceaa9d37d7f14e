"""``spark-state-observer demo --watch``: two small applications and the event-log watcher following both.

Two Spark applications (two processes, ``local[1]`` each, the demo's stateful pipeline on the HDFS-backed
state store at a few rows a second) write their event logs into one temporary folder; nothing of the observer is attached to them.
The watcher (``spark_state_observer.fleet.runtime``) follows the folder and serves both on one endpoint,
told apart by their ``app`` label (``demo-orders`` and ``demo-payments``) next to the static labels
(``cluster=demo`` unless the ``labels`` setting says otherwise). Ctrl-C, SIGTERM or ``--duration`` stops
the applications (each by its own process id), then the watcher, and removes the folder.

``python -m spark_state_observer.cli.demo_watch --child NAME ...`` is one of the two applications.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from types import FrameType
from typing import Any

APPS = ("demo-orders", "demo-payments")
DEFAULT_LABELS = "cluster=demo,namespace=local"


def run(args: argparse.Namespace) -> int:
    """The parent: start both applications, watch their folder, stop everything in order."""
    from spark_state_observer.exporters.http import ExporterError
    from spark_state_observer.fleet.runtime import FleetObserver, WatchOptions
    from spark_state_observer.offline.local_process import stop_process
    from spark_state_observer.settings import Settings, SettingsError

    labels = None if os.environ.get("SPARK_STATE_OBSERVER_LABELS") else DEFAULT_LABELS
    given: dict[str, Any] = {"http_port": args.port, "http_host": args.host, "labels": labels}
    try:
        settings = Settings.from_env(**{k: v for k, v in given.items() if v is not None})
    except SettingsError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    root = tempfile.mkdtemp(prefix="spark-state-observer-demo-watch-")
    logs = os.path.join(root, "eventlogs")
    os.makedirs(logs)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    children: list[subprocess.Popen[bytes]] = []
    fleet: FleetObserver | None = None
    try:
        fleet = FleetObserver([logs], settings, WatchOptions(poll_interval=1.0, grace_seconds=30.0)).start()
        spark_log = os.path.join(root, "spark.log")
        with open(spark_log, "ab") as out:  # Spark's own chatter, out of the way of the demo's lines
            for name in APPS:
                children.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "spark_state_observer.cli.demo_watch",
                            "--child",
                            name,
                            "--event-log-dir",
                            logs,
                            "--checkpoint",
                            os.path.join(root, "checkpoints", name),
                            "--rows-per-second",
                            str(args.rows_per_second),
                        ],
                        stdout=out,
                        stderr=out,
                    )
                )
        print(
            f"spark-state-observer demo --watch: applications {', '.join(APPS)} (pids {', '.join(str(c.pid) for c in children)}) "
            f"write event logs into {logs} (Spark's output: {spark_log})",
            flush=True,
        )
        print(
            f"metrics: {fleet.server.url if fleet.server else '(not served)'}   both applications, told apart by the app label "
            "(Ctrl-C to stop)",
            flush=True,
        )
        deadline = None if args.duration is None else time.monotonic() + args.duration
        shown = ""
        while not stop.wait(0.5):
            if deadline is not None and time.monotonic() >= deadline:
                break
            line = _batches_line(fleet.exposition())
            if line != shown:
                print(line, flush=True)
                shown = line
            if all(c.poll() is not None for c in children):
                print("spark-state-observer demo --watch: both applications ended", flush=True)
                break
    except ExporterError as exc:
        print(f"spark-state-observer: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        for child in children:
            stop_process(child, 60.0)  # SIGTERM: the application stops its query and session, ending its log
        if fleet is not None:
            fleet.poll_once()  # the applications' last events
            fleet.stop()
        signal.signal(signal.SIGTERM, previous)
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _batches_line(exposition: bytes) -> str:
    """``demo-orders: 3 batches, demo-payments: 2 batches``: what the one endpoint says of each application."""
    from prometheus_client.parser import text_string_to_metric_families

    from spark_state_observer.metrics import catalog

    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition.decode()):
        for sample in family.samples:
            if sample.name == catalog.BATCHES.prometheus_name:
                app = sample.labels.get("app", "?")
                counts[app] = counts.get(app, 0) + sample.value
    return ", ".join(f"{app}: {n:.0f} batches" for app, n in sorted(counts.items())) or "waiting for the first batches..."


def child(argv: list[str]) -> int:
    """One application: the demo pipeline on ``local[1]``, event log on, until SIGTERM."""
    parser = argparse.ArgumentParser(prog="demo_watch --child")
    parser.add_argument("--child", required=True, help="application name")
    parser.add_argument("--event-log-dir", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--rows-per-second", type=int, default=5)
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)  # Ctrl-C reaches the whole process group: stop in order, like SIGTERM
    from spark_state_observer.cli.demo import dedup_window_query, spark_session

    spark = spark_session(
        master="local[1]",
        provider="hdfs",
        event_log_dir=args.event_log_dir,
        extra={"spark.app.name": args.child, "spark.driver.memory": "512m", "spark.ui.showConsoleProgress": "false"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    query = dedup_window_query(spark, args.checkpoint, args.rows_per_second, name=args.child.replace("-", "_"), trigger_seconds=2.0)
    try:
        while not stop.wait(0.5) and query.isActive:
            pass
    finally:
        query.stop()
        time.sleep(1.0)  # the terminated event reaches the event log asynchronously
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
