"""Replay against Spark's own reading of the same event log: the History Server's ``ReplayListenerBus``.

    python bench/jvm_replay.py [--copies 100] [--source rocksdb_restart/run1] [--repeat 5] [--warmup 3]
    python bench/jvm_replay.py --progress-only --copies 400   # the streaming events alone
    python bench/jvm_replay.py --before /path/to/worktree ...  # also an older tree's replay (CPU seconds, own process)

The log is ``bench/replay_rate.py``'s: a recorded real event log (progress, task, stage, SQL, executor
events as Spark wrote them) repeated with its batch ids shifted, zstd-compressed as Spark writes it
(``--copies 100`` of ``rocksdb_restart/run1`` is 17,500 lines, 126 MB decoded). The JVM side runs in the
installed PySpark's JVM (py4j): ``EventLogFileReader.openEventLog`` (the codec from the file's extension,
as the History Server opens it) into ``ReplayListenerBus.replay`` with one no-op listener
(``SparkFirehoseListener``), so every line is parsed into its event by ``JsonProtocol`` and posted; it is
warmed up (``--warmup`` replays, the JIT compiles the parse) before the timed runs. The observer's side is
``replay([path])`` with placement on, the ``replay --format prometheus`` path (plus the exposition render).
Runs are interleaved. Wall seconds are compared (the JVM's JIT and GC threads are part of what it costs),
and CPU seconds (the JVM process's, this process's): on a shared machine wall time swings with the other
sessions' load, CPU time far less. With ``--before DIR`` the replay of the ``observer`` package in DIR (a
git worktree of an earlier commit) is timed too, in a subprocess (``bench/replay_rate.py``'s), interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.replay_rate import _before, build_log
from spark_state_observer.offline.replay import replay


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_replayer(spark: Any, path: str) -> Callable[[], tuple[float, float, bool]]:
    """One timed ``ReplayListenerBus`` replay of ``path``: (wall seconds, JVM process CPU seconds, replay ok)."""
    jvm = spark.sparkContext._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    hpath = jvm.org.apache.hadoop.fs.Path("file://" + os.path.abspath(path))
    fs = hpath.getFileSystem(hconf)
    reader = getattr(jvm.org.apache.spark.deploy.history, "EventLogFileReader$").__getattr__("MODULE$")
    select_all = jvm.org.apache.spark.scheduler.ReplayListenerBus.SELECT_ALL_FILTER()
    pid = jvm.java.lang.ProcessHandle.current().pid()

    def run() -> tuple[float, float, bool]:
        bus = jvm.org.apache.spark.scheduler.ReplayListenerBus()  # Spark's default line limit
        bus.addListener(jvm.org.apache.spark.SparkFirehoseListener())
        stream = reader.openEventLog(hpath, fs)
        cpu = _process_cpu(pid)
        t = time.perf_counter()
        try:
            ok = bus.replay(stream, path, False, select_all)
        finally:
            stream.close()
        wall = time.perf_counter() - t
        return wall, _process_cpu(pid) - cpu, bool(ok)

    return run


def _observer_replay(path: str) -> tuple[float, float]:
    """One ``replay --format prometheus`` of ``path`` in this process: (wall seconds, CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    replay([path]).exposition()
    return time.perf_counter() - wall, time.process_time() - cpu


def _fmt(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--source", default="rocksdb_restart/run1", help="a recorded run under tests/fixtures with an eventlog folder")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--progress-only", action="store_true", help="keep only the streaming events")
    ap.add_argument("--before", help="a tree (git worktree) whose observer package's replay to time too (CPU seconds)")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "events_1_app.zstd")
            n = build_log(path, args.copies, args.source, args.progress_only)
            jvm_run = _jvm_replayer(spark, path)
            for _ in range(args.warmup):
                jvm_run()
                _observer_replay(path)
            runs: dict[str, list[float]] = {"jvm": [], "jvm_cpu": [], "ours": [], "ours_cpu": [], "before": []}
            lines = 0
            for _ in range(args.repeat):
                wall, cpu, ok = jvm_run()
                if not ok:
                    raise SystemExit("ReplayListenerBus did not replay the whole log")
                runs["jvm"].append(wall)
                runs["jvm_cpu"].append(cpu)
                wall, cpu = _observer_replay(path)
                runs["ours"].append(wall)
                runs["ours_cpu"].append(cpu)
                if args.before:
                    runs["before"].append(_before(args.before, path))
            from spark_state_observer.capture.codecs import open_decompressed

            with open_decompressed(path) as f:
                data = f.read()
            lines, size = data.count(b"\n"), len(data)
    finally:
        spark.stop()
    jvm, ours = statistics.median(runs["jvm"]), statistics.median(runs["ours"])
    ours_cpu = statistics.median(runs["ours_cpu"])
    print(
        f"event log ({args.source} x {args.copies}{', progress only' if args.progress_only else ''}): {lines:,} lines, "
        f"{size / 1e6:.0f} MB decoded, {n:,} progress events; {args.warmup} warm-up and {args.repeat} timed runs each, interleaved"
    )
    print(f"  Spark ReplayListenerBus (JVM, no-op listener): {_fmt(runs['jvm'])} wall, {_fmt(runs['jvm_cpu'])} JVM CPU")
    print(
        f"  replay --format prometheus (placement on):     {_fmt(runs['ours'])} wall, {_fmt(runs['ours_cpu'])} CPU "
        f"= {n / ours_cpu:,.0f} progress events and {lines / ours_cpu:,.0f} lines per CPU second"
    )
    if runs["before"]:
        before = statistics.median(runs["before"])
        print(
            f"  replay, the tree before (--before):            {_fmt(runs['before'])} CPU = {n / before:,.0f} progress events per CPU second; "
            f"JVM CPU / its CPU {statistics.median(runs['jvm_cpu']) / before:.2f}x; this tree is {before / ours_cpu:.2f}x as fast"
        )
    print(
        f"  ratio (JVM time / replay time, >= 1.0 is as fast as Spark): {jvm / ours:.2f}x wall "
        f"({min(runs['jvm']) / max(runs['ours']):.2f}-{max(runs['jvm']) / min(runs['ours']):.2f}), "
        f"{statistics.median(runs['jvm_cpu']) / ours_cpu:.2f}x CPU"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
