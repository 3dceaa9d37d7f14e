"""Record a large restore from a real restart: the fixture of tests/fixtures/restore_progress and the live measurement.

    python scripts/record_restore.py [--out DIR] [--partitions 16] [--batches 80] [--kill] [--burners N]

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
   killed (SIGKILL) mid-restore: once the restoring batch's first stateful stage (its task count is the state
   partitions) has finished a partition and runs tasks on executor 1, as the driver's REST API says
   (``/stages?status=active`` and the stage's running ``taskList``); the rest of the restore and the lost
   tasks' retries run on executor 0 (the standalone worker starts a new executor later).

``--burners N`` runs N CPU burners (``nice -n 5``, a Python busy loop each) through the restart: a restore on a
loaded machine, the case where the checkpoint's rates (one machine's, at one load) are furthest off.
To keep a checkpoint for a replay with its prior, run the phases by hand (``--phase build --checkpoint CK``,
then ``--phase restart --checkpoint`` on a copy of CK), as for ``restore_progress/restart_24``.

``truth.json``: what was done (partitions, batches, changelog files written, Spark version, the kill: which
stage attempt, its partitions done and those running on executor 1 when it died).
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
import urllib.request
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "restore_progress")
ROWS_PER_BATCH = 16_000
KEYS = 4_000
KILL_WAIT_SECONDS = 900.0  # the restoring batch's stage must come by then, or the recording fails


def session(master: str, partitions: int, ui: bool, event_log: str | None):  # type: ignore[no-untyped-def]
    from spark_state_observer.cli.demo import spark_session

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
    os.makedirs(args.out, exist_ok=True)
    master = "local-cluster[2,1,1024]" if args.kill else "local[2]"
    spark = session(master, args.partitions, ui=True, event_log=os.path.join(args.out, "eventlog"))
    if args.kill:  # both executors registered before the query starts
        deadline = time.monotonic() + 120
        while spark.sparkContext._jsc.sc().getExecutorIds().size() < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
    burners = [subprocess.Popen(["nice", "-n", "5", sys.executable, "-c", "while True: pass"]) for _ in range(args.burners)]
    try:
        _restart(spark, args, master)
    finally:  # a failed recording leaves no busy loop behind
        for burner in burners:
            burner.kill()
            burner.wait()


def _restart(spark, args: argparse.Namespace, master: str) -> None:  # type: ignore[no-untyped-def]
    """The restart proper: the observer attached, the query run 3 batches from the checkpoint, its events written."""
    from scenario_job import wait_batches, write_jsonl

    import spark_state_observer as observer

    handle = observer.attach(spark, http_port=0)
    events: list[dict] = []
    killed: dict[str, Any] = {}
    lock = threading.Lock()

    def on_restore(e) -> None:  # type: ignore[no-untyped-def]
        with lock:
            events.append({"received": time.time(), **e.to_json()})

    for kind in ("restore_started", "restore_progress", "restore_finished"):
        handle.on(kind, on_restore)
    query = start(spark, args.checkpoint, 1.0)
    if args.kill:
        killer = threading.Thread(
            target=kill_mid_restore, args=(spark, args.partitions, killed, lock), daemon=True, name="kill-mid-restore"
        )
        killer.start()
    wait_batches(query, 3, timeout=3600)
    if args.kill and not killed:
        raise SystemExit("executor 1 was never seen running a task of the restoring batch's stateful stage: nothing killed")
    version = spark.version
    query.stop()
    handle.flush()
    handle.stop()
    spark.stop()
    write_jsonl(os.path.join(args.out, "live_events.jsonl"), events)
    with open(os.path.join(args.out, "restart.json"), "w") as f:
        json.dump({"spark_version": version, "master": master, "killed_executor": "1" if killed else None, **killed}, f)


def kill_mid_restore(spark, partitions: int, killed: dict[str, Any], lock: threading.Lock) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL executor 1 while the restoring batch's first stateful stage runs tasks on it, a partition of that stage
    already finished: the restore is under way, and executor 1 dies with partitions in hand. The restoring batch
    is the run's first (the lowest batch id among the stages seen)."""
    from executor_loss_job import executor_pid

    from spark_state_observer.placement.task_poll import _batch_key

    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    first_batch = None
    while time.monotonic() < deadline:
        time.sleep(0.3)
        try:
            stages = _get(f"{base}/stages?status=active")
            for stage in sorted(stages, key=lambda s: s["stageId"]):
                key = _batch_key(stage.get("description"))
                first_batch = key[1] if key is not None and first_batch is None else first_batch
                if stage.get("numTasks") != partitions or key is None or key[1] != first_batch:
                    continue
                if stage.get("numCompleteTasks", 0) < 1:
                    break  # the first stateful stage has not restored a partition yet
                sid, attempt = stage["stageId"], stage["attemptId"]
                running = _get(f"{base}/stages/{sid}/{attempt}/taskList?status=RUNNING&length=1000")
                on_one = sorted(t["index"] for t in running if t.get("executorId") == "1")
                if not on_one:
                    break
                with lock:
                    pid = executor_pid("1")
                    if pid is None:
                        return
                    os.kill(pid, signal.SIGKILL)
                    killed.update(
                        killed_at=time.time(),
                        killed_batch=first_batch,
                        killed_stage=sid,
                        killed_stage_attempt=attempt,
                        partitions_done_at_kill=stage["numCompleteTasks"],
                        partitions_running_on_killed=on_one,
                    )
                return
        except (OSError, ValueError, KeyError):
            continue  # the API is not up yet, or the stage went while it was read


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", choices=("build", "restart"), help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(FIXTURES, "large"))
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--batches", type=int, default=80)
    ap.add_argument("--kill", action="store_true", help="restart on local-cluster[2,1,1024] and kill executor 1 mid-restore")
    ap.add_argument("--burners", type=int, default=0, help="CPU burners (niced busy loops) running through the restart")
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
    flags = [*(["--kill"] if args.kill else []), "--burners", str(args.burners)]
    subprocess.run([sys.executable, __file__, "--phase", "restart", "--out", live, *common, *flags], check=True)
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
        "burners": args.burners,
        "load_average_after_restart": round(os.getloadavg()[0], 1),
        **restart_facts,
    }
    with open(os.path.join(args.out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(truth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
