"""Record a large restore from a real restart: the fixture of tests/fixtures/restore_progress and the live measurement.

    python scripts/record_restore.py [--out DIR] [--partitions 16] [--batches 80] [--kill]

Two processes on one checkpoint, each a fresh JVM:

1. ``build``: a dedupe on ids and a count per key (RocksDB, changelog checkpointing, no snapshot before
   ``minDeltasForSnapshot`` = 100000 versions, so a restore replays every changelog file), ``--partitions``
   state partitions, ``--batches`` batches of the deterministic ``rate-micro-batch`` source: 2 operators x
   partitions x batches changelog files;
2. ``restart``: the same query from that checkpoint with the driver's UI on (so ``attach()`` polls its REST
   API) and the event log on; every restore event the observer delivers is written with the time its
   callback ran (``live_events.jsonl``), so the delay between a partition's task ending and the observer
   knowing can be measured, and the event log becomes the fixture replayed by the tests and
   ``bench/restore_eta.py``. With ``--kill`` the restart runs on local-cluster[2,1,1024] and executor 1 is
   killed (SIGKILL) as soon as the observer reports the first restored partition (or 15 s after the query
   started, if no report came by then): the rest of the restore and its retries run on executor 0.

``truth.json``: what was done (partitions, batches, changelog files written, Spark version, the kill).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "restore_progress")
ROWS_PER_BATCH = 16_000
KEYS = 4_000
KILL_AFTER_SECONDS = 15.0


def session(master: str, partitions: int, ui: bool, event_log: str | None):  # type: ignore[no-untyped-def]
    from observer.cli.demo import spark_session

    extra = {
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100000",  # no snapshot: the restore replays every changelog file
        "spark.ui.enabled": str(ui).lower(),
        "spark.ui.port": "0",
        "spark.ui.showConsoleProgress": "false",
    }
    spark = spark_session(master=master, event_log_dir=event_log, extra=extra)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start(spark, checkpoint: str, trigger_seconds: float):  # type: ignore[no-untyped-def]
    """Dedupe on the id, then a count per key: two state writers on every partition."""
    from pyspark.sql import functions as F

    rows = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS_PER_BATCH).load()
    counts = rows.dropDuplicates(["value"]).groupBy((F.col("value") % KEYS).alias("key")).count()
    return (
        counts.writeStream.format("noop")
        .outputMode("update")
        .queryName("restore_large")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .start()
    )


def build(args: argparse.Namespace) -> None:
    from scenario_job import wait_batches

    spark = session("local[2]", args.partitions, ui=False, event_log=None)
    query = start(spark, args.checkpoint, 0.0)
    wait_batches(query, args.batches, timeout=3600)
    query.stop()
    spark.stop()


def restart(args: argparse.Namespace) -> None:
    from executor_loss_job import executor_pid
    from scenario_job import wait_batches, write_jsonl

    import observer

    os.makedirs(args.out, exist_ok=True)
    master = "local-cluster[2,1,1024]" if args.kill else "local[2]"
    spark = session(master, args.partitions, ui=True, event_log=os.path.join(args.out, "eventlog"))
    if args.kill:  # both executors registered before the query starts
        deadline = time.monotonic() + 120
        while spark.sparkContext._jsc.sc().getExecutorIds().size() < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    handle = observer.attach(spark, http_port=0)
    events: list[dict] = []
    killed: dict[str, float] = {}
    lock = threading.Lock()

    def on_restore(e) -> None:  # type: ignore[no-untyped-def]
        with lock:
            events.append({"received": time.time(), **e.to_json()})
            if args.kill and not killed and e.kind == "restore_progress":
                pid = executor_pid("1")
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    killed["at"] = time.time()

    def kill_late() -> None:  # the callbacks come only once the driver's REST API answers: not later than this
        time.sleep(KILL_AFTER_SECONDS)
        with lock:
            pid = executor_pid("1")
            if not killed and pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed["at"] = time.time()

    for kind in ("restore_started", "restore_progress", "restore_finished"):
        handle.on(kind, on_restore)
    query = start(spark, args.checkpoint, 1.0)
    if args.kill:
        threading.Thread(target=kill_late, daemon=True).start()
    wait_batches(query, 3, timeout=3600)
    version = spark.version
    query.stop()
    handle.flush()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "live_events.jsonl"), events)
    with open(os.path.join(args.out, "restart.json"), "w") as f:
        json.dump(
            {"spark_version": version, "master": master, "killed_executor": "1" if killed else None, "killed_at": killed.get("at")}, f
        )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=("build", "restart"), help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(FIXTURES, "large"))
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--batches", type=int, default=80)
    ap.add_argument("--kill", action="store_true", help="restart on local-cluster[2,1,1024] and kill executor 1 mid-restore")
    args = ap.parse_args()
    if args.phase == "build":
        build(args)
        return 0
    if args.phase == "restart":
        restart(args)
        return 0
    work = tempfile.mkdtemp(prefix="restore-record-")
    checkpoint = os.path.join(work, "checkpoint")
    common = ["--checkpoint", checkpoint, "--partitions", str(args.partitions), "--batches", str(args.batches)]
    started = time.time()
    subprocess.run([sys.executable, __file__, "--phase", "build", *common], check=True)
    built = time.time()
    files = len(glob.glob(os.path.join(checkpoint, "state", "*", "*", "*.changelog")))
    shutil.rmtree(args.out, ignore_errors=True)
    live = os.path.join(work, "restart")
    subprocess.run([sys.executable, __file__, "--phase", "restart", "--out", live, *common, *(["--kill"] if args.kill else [])], check=True)
    os.makedirs(args.out, exist_ok=True)
    shutil.copytree(os.path.join(live, "eventlog"), os.path.join(args.out, "eventlog"))
    shutil.copy(os.path.join(live, "live_events.jsonl"), args.out)
    with open(os.path.join(live, "restart.json")) as f:
        restart_facts = json.load(f)
    truth = {
        "recorded_by": "scripts/record_restore.py",
        "partitions": args.partitions,
        "batches_before_restart": args.batches,
        "rows_per_batch": ROWS_PER_BATCH,
        "changelog_files": files,
        "build_seconds": round(built - started, 1),
        **restart_facts,
    }
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(truth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
