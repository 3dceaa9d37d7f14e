"""Replay throughput: progress events per second from a large event log, against bare JSON parsing.

    python bench/replay_rate.py [--copies 400]

The log is generated from a recorded real event log (tests/fixtures): its lines are repeated with
batch ids shifted, zstd-compressed as Spark writes it. Baseline in the same run: decompress and
``json.loads`` every line, nothing else.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import zstandard

from bench.common import ROOT
from observer.model.parse import parse_timestamp
from observer.offline.eventlog import open_decompressed
from observer.offline.replay import replay


def build_log(path: str, copies: int) -> int:
    folder = os.path.join(ROOT, "tests", "fixtures", "rocksdb_restart", "run1", "eventlog")
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
                if line in streaming and line not in progress:
                    continue
                if line in progress:
                    line = json.loads(json.dumps(line))
                    line["progress"]["batchId"] += c * len(progress)
                    ts = parse_timestamp(line["progress"]["timestamp"]) + c * span
                    line["progress"]["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"
                    n += 1
                out.write(dumps(line))
        out.write(dumps(streaming[-1]))
    return n


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events_1_app.zstd")
        n = build_log(path, args.copies)
        t = time.perf_counter()
        with io.BufferedReader(open_decompressed(path), 1 << 16) as f:
            parsed = sum(1 for line in f if json.loads(line))
        bare = time.perf_counter() - t
        t = time.perf_counter()
        replay([path])
        full = time.perf_counter() - t
    print(f"event log: {parsed:,} lines, {n:,} progress events")
    print(
        f"bare decompress + json.loads of every line: {bare:.2f} s; replay through the pipeline: {full:.2f} s "
        f"= {n / full:,.0f} progress events/s; replay/bare ratio {full / bare:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
