"""Times going back against times going forward: one query restarted many times, replayed both ways.

    python bench/time_order.py [--restarts 300] [--source incidents/clean_busy_90s/run1] [--repeat 5]

A recorded run's streaming events (tests/fixtures/<source>/eventlog: the query's start, its progress, its
end) are written ``--restarts`` times into one event log, each copy a new run of the same query (its own run
id, batch ids going on). In the log "back" every copy repeats the recorded times, as logs concatenated, a log
replayed twice into one run or a driver clock stepped back give; in the log "forward" each copy's times follow
the one before. The two logs differ in their times alone. Each is replayed ``--repeat`` times, interleaved;
printed are the CPU seconds of the replay and of the signal rules alone (``SignalEngine.on_event``, as
``bench/signal_rules.py`` times it), medians with min-max, the ratio back / forward, and the most points a
growth window held at the end (its cap bounds the work per event).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import zstandard

from bench.common import ROOT
from bench.signal_rules import time_rules
from spark_state_observer.capture.codecs import open_decompressed
from spark_state_observer.model.parse import parse_timestamp
from spark_state_observer.offline.replay import replay


def _stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(round(ts * 1000)) % 1000:03d}Z"


def build_log(path: str, restarts: int, source: str, back: bool) -> int:
    """The log of ``restarts`` runs of the recorded query in ``path``; returns its progress events."""
    folder = os.path.join(ROOT, "tests", "fixtures", source, "eventlog")
    log = next(os.path.join(r, f) for r, _, files in os.walk(folder) for f in files if f.startswith("events_"))
    with open_decompressed(log) as f:
        lines = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    streaming = [e for e in lines if "StreamingQueryListener" in e["Event"]]
    progress = [e for e in streaming if e["Event"].endswith("QueryProgressEvent")]
    started = next(e for e in streaming if e["Event"].endswith("QueryStartedEvent"))
    first = parse_timestamp(started["timestamp"])
    span = parse_timestamp(progress[-1]["progress"]["timestamp"]) - first + 1.0
    n = 0
    with open(path, "wb") as raw, zstandard.ZstdCompressor().stream_writer(raw) as out:
        for c in range(restarts):
            shift = 0.0 if back else c * span
            run_id = f"00000000-0000-0000-0001-{c:012d}"
            for line in streaming:
                line = json.loads(json.dumps(line))
                if "progress" in line:
                    line["progress"]["runId"] = run_id
                    line["progress"]["batchId"] += c * len(progress)
                    line["progress"]["timestamp"] = _stamp(parse_timestamp(line["progress"]["timestamp"]) + shift)
                    n += 1
                else:
                    line["runId"] = run_id
                    if "timestamp" in line:
                        line["timestamp"] = _stamp(parse_timestamp(line["timestamp"]) + shift)
                out.write((json.dumps(line, separators=(",", ":")) + "\n").encode())
    return n


def _replay_cpu(path: str) -> float:
    """CPU seconds of one replay of ``path`` (single-threaded: what one core carries, whatever the machine's load)."""
    t = time.process_time()
    replay([path])
    return time.process_time() - t


def _most_points(path: str) -> int:
    """The most points any growth window (rows or size) held after one replay of ``path``."""
    growth = replay([path]).observer.engine.growth
    windows = [w for state in growth._operators.values() for w in (state.window, state.size) if w is not None]
    return max((len(w.points) for w in windows), default=0)


def _fmt(times: list[float], events: int) -> str:
    median = statistics.median(times)
    return f"{median:.2f} s ({min(times):.2f}-{max(times):.2f}) = {events / median:,.0f} progress events/s"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--restarts", type=int, default=300)
    ap.add_argument("--source", default="incidents/clean_busy_90s/run1", help="a recorded run under tests/fixtures with an eventlog folder")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    logging.getLogger("spark_state_observer").setLevel(logging.ERROR)  # the log "went back in time" once per replay
    with tempfile.TemporaryDirectory() as tmp:
        logs = {}
        for order in ("forward", "back"):
            logs[order] = os.path.join(tmp, f"events_1_{order}.zstd")
            events = build_log(logs[order], args.restarts, args.source, back=order == "back")
        replay([logs["forward"]])  # warm: imports and first-use caches
        runs: dict[str, list[float]] = {f"{kind} {order}": [] for kind in ("replay", "rules") for order in logs}
        for _ in range(args.repeat):  # interleaved, so load on the machine weighs on both alike
            for order, path in logs.items():
                runs[f"replay {order}"].append(_replay_cpu(path))
                runs[f"rules {order}"].append(time_rules(path)[0])
        points = {order: _most_points(path) for order, path in logs.items()}
    print(
        f"{args.source} x {args.restarts} restarts of one query: {events:,} progress events, "
        f"{args.repeat} repeats, median (min-max) CPU seconds"
    )
    for kind in ("replay", "rules"):
        forward, back = runs[f"{kind} forward"], runs[f"{kind} back"]
        label = "replay" if kind == "replay" else "signal rules alone"
        print(f"  {label}, times forward: {_fmt(forward, events)}")
        print(f"  {label}, times back:    {_fmt(back, events)}")
        print(f"  {label}: back / forward = {statistics.median(back) / statistics.median(forward):.2f}x")
    print(f"  most points in a growth window at the end: forward {points['forward']:,}, back {points['back']:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
