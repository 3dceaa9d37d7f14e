"""Replay throughput: progress events per second from a large event log, against bare JSON parsing.

    python bench/replay_rate.py [--copies 400] [--source rocksdb_restart/run1] [--repeat 3]
    python bench/replay_rate.py --source incidents/clean_busy_30min/run1 --copies 40   # 8 partitions, 2 operators
    python bench/replay_rate.py --progress-only ...   # the streaming events alone: the pipeline's own cost
    python bench/replay_rate.py --before /path/to/worktree ...   # also an older tree's replay, interleaved

The log is generated from a recorded real event log (tests/fixtures/<source>/eventlog): its lines are
repeated with batch ids shifted (the progress events' and the job starts' that map stages to batches), zstd-compressed as Spark writes it. Baselines in the same run, each
repeated: decompress and ``json.loads`` every line; ``json.loads`` of the progress lines alone (already
decompressed: the strictest yardstick); the pipeline with the fast decoder switched off (the
reference parser, ``spark_state_observer.model.parse``, as before issue 17); placement's task, job and SQL lines read
with ``json.loads`` instead of their typed decode (``spark_state_observer.placement.task_decode``, as before it); and the
replay with placement off (the pipeline alone on the same log). With ``--before DIR`` also the replay of
the ``observer`` package in DIR (a git worktree of an earlier commit: ``git worktree add DIR <rev>``) on
the same log, in a subprocess timing itself, interleaved with the rest. Medians with min-max of CPU
seconds (single-threaded, so events per CPU second is what one core carries).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import zstandard

from bench.common import ROOT
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.model import decode
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.offline.replay import replay
from spark_state_observer.placement.tasks import TaskEventReader
from spark_state_observer.settings import Settings


def build_log(path: str, copies: int, source: str = "rocksdb_restart/run1", progress_only: bool = False) -> int:
    folder = os.path.join(ROOT, "tests", "fixtures", source, "eventlog")
    source = next(os.path.join(r, f) for r, _, files in os.walk(folder) for f in files if f.startswith("events_"))
    with open_decompressed(source) as f:
        lines = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    streaming = [e for e in lines if "StreamingQueryListener" in e["Event"]]
    progress = [e for e in streaming if e["Event"].endswith("QueryProgressEvent")]
    span = parse_timestamp(progress[-1]["progress"]["timestamp"]) - parse_timestamp(progress[0]["progress"]["timestamp"]) + 1.0

    def dumps(obj: dict) -> bytes:
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()  # as compact as Spark writes it

    n = 0
    with open(path, "wb") as raw, zstandard.ZstdCompressor().stream_writer(raw) as out:
        out.write(dumps(streaming[0]))
        for c in range(copies):
            for line in lines:
                if (line in streaming and line not in progress) or (progress_only and line not in progress):
                    continue
                if line in progress:
                    line = json.loads(json.dumps(line))
                    line["progress"]["batchId"] += c * len(progress)
                    ts = parse_timestamp(line["progress"]["timestamp"]) + c * span
                    line["progress"]["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"
                    n += 1
                elif c and str(line.get("Properties", {}).get("streaming.sql.batchId", "")).isdigit():
                    # a job of a batch (placement maps its stages to that batch): shifted like the progress events
                    line = json.loads(json.dumps(line))
                    line["Properties"]["streaming.sql.batchId"] = str(int(line["Properties"]["streaming.sql.batchId"]) + c * len(progress))
                out.write(dumps(line))
        out.write(dumps(streaming[-1]))
    return n


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    """CPU seconds of this process per run: everything here is single-threaded, and on the shared machine
    wall time swings 3x with the other sessions' load while CPU time measures this work alone."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return times


def _loads_each(lines: list[bytes]) -> None:
    """``json.loads`` of each line, each result dropped as the bare read drops it (kept, they would cost the GC)."""
    for line in lines:
        json.loads(line)


_TIMED_REPLAY = """
import sys, time
sys.path.insert(0, sys.argv[1])
from spark_state_observer.offline.replay import replay
replay([sys.argv[2]])  # warm: imports, caches
t = time.process_time()
replay([sys.argv[2]])
print(time.process_time() - t)
"""


def _before(tree: str, path: str) -> float:
    """CPU seconds of one replay of ``path`` by the ``observer`` package in ``tree``, timed in its own process."""
    out = subprocess.run([sys.executable, "-c", _TIMED_REPLAY, os.path.abspath(tree), path], check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def _fmt(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--source", default="rocksdb_restart/run1", help="a recorded run under tests/fixtures with an eventlog folder")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", help="a tree (git worktree) whose observer package to time too, interleaved: the figure before a change")
    ap.add_argument(
        "--progress-only",
        action="store_true",
        help="keep only the streaming events (no task, stage, SQL lines): the pipeline's own cost per event",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events_1_app.zstd")
        n = build_log(path, args.copies, args.source, args.progress_only)
        with open_decompressed(path) as f:
            lines = f.read().splitlines()
        progress_lines = [
            line
            for line in lines
            if line.startswith(b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"')
        ]

        def bare() -> None:
            with io.BufferedReader(open_decompressed(path), 1 << 16) as f:
                for line in f:
                    json.loads(line)

        reference = mock.patch.object(decode, "progress", lambda payload, rules: None)
        task_reference = mock.patch.object(TaskEventReader, "feed_line", lambda self, line: None)  # every line declined
        no_placement = Settings.from_env(placement="off")
        runs = {"bare": [], "progress": [], "fast": [], "reference": [], "tasks": [], "off": [], "before": []}  # type: dict[str, list[float]]
        replay([path])  # warm, as the subprocess of --before is: imports and first-use caches are not what a long replay pays per event
        for _ in range(args.repeat):  # interleaved, so load on the machine hits every variant alike
            runs["bare"] += _timed(bare, 1)
            runs["progress"] += _timed(lambda: _loads_each(progress_lines), 1)
            runs["fast"] += _timed(lambda: replay([path]), 1)
            with reference:
                runs["reference"] += _timed(lambda: replay([path]), 1)
            if not args.progress_only:
                with task_reference:
                    runs["tasks"] += _timed(lambda: replay([path]), 1)
                runs["off"] += _timed(lambda: replay([path], no_placement), 1)
            if args.before:
                runs["before"].append(_before(args.before, path))
    fast, ref = statistics.median(runs["fast"]), statistics.median(runs["reference"])
    size = sum(len(line) + 1 for line in lines)
    print(
        f"event log ({args.source} x {args.copies}{', progress only' if args.progress_only else ''}): {len(lines):,} lines, {size / 1e6:.0f} MB decompressed, {n:,} progress events, "
        f"{args.repeat} repeats, median (min-max) CPU seconds"
    )
    print(f"  bare decompress + json.loads of every line: {_fmt(runs['bare'])}")
    print(f"  json.loads of the progress lines alone:     {_fmt(runs['progress'])}")
    print(f"  replay, reference parser (decoder off):     {_fmt(runs['reference'])} = {n / ref:,.0f} progress events/s")
    print(
        f"  replay, fast decoder:                       {_fmt(runs['fast'])} = {n / fast:,.0f} progress events/s "
        f"({n / max(runs['fast']):,.0f}-{n / min(runs['fast']):,.0f}); {ref / fast:.2f}x the reference"
    )
    if runs["tasks"]:
        tasks, off = statistics.median(runs["tasks"]), statistics.median(runs["off"])
        print(
            f"  replay, task lines through json.loads (before): {_fmt(runs['tasks'])} = {n / tasks:,.0f} progress events/s; "
            f"the typed task decode is {tasks / fast:.2f}x faster"
        )
        print(f"  replay, placement off (the pipeline alone):     {_fmt(runs['off'])} = {n / off:,.0f} progress events/s")
    if runs["before"]:
        before = statistics.median(runs["before"])
        print(
            f"  replay, the tree before (--before):        {_fmt(runs['before'])} = {n / before:,.0f} progress events/s "
            f"({n / max(runs['before']):,.0f}-{n / min(runs['before']):,.0f}); this tree is {before / fast:.2f}x as fast"
        )
    print(
        f"  replay / bare every line: {fast / statistics.median(runs['bare']):.2f}; "
        f"replay / json.loads of progress lines: {fast / statistics.median(runs['progress']):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
