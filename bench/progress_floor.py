"""What a progress event costs at the least in Python: the floor under issue 32's 20,000 a second (50 µs an event).

    python bench/progress_floor.py [--copies 400] [--repeat 7]

On ``bench/replay_rate.py``'s progress-only log (a recorded RocksDB query: two stateful operators, two
partitions, ~40 custom metrics each), it times stages that any design of the replay must pass through, each
the leanest Python can do, and each stage's time includes the ones before it:

1. **read**: ``read_records`` as replay calls it (zstd, lines, the record) and nothing else;
2. **+ decode**: msgspec's typed decode of each progress line into the structs ``spark_state_observer.model.decode`` uses
   (C; every field the exporters and rules read, no model objects built);
3. **+ counters**: every per-batch amount of the event (the event's, each phase's, each operator's fields and
   custom metrics: ~90) added to one list of running totals in bulk C loops (``map(operator.add, ...)``), the
   leanest form of the tracker's ``_total`` counters;
4. **+ rules**: for each operator, nine calls (one per signal rule family the engine runs per operator or batch)
   that each read two of the operator's numbers, compare them with a threshold kept per operator and append one
   gauge update: far less than any real rule does (no windows, no evidence, no labels budget), so a floor.

Then the replay itself (``replay(...).exposition()``, placement on) on the same log. Medians with min-max of CPU
µs per progress event, each stage in a fresh process (a warm-up pass, then one timed pass).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

_LOOP = """
import operator, sys, time
sys.path.insert(0, sys.argv[1])
from spark_state_observer.model import decode
from spark_state_observer.offline.eventlog import read_records
from spark_state_observer.offline.replay import replay

stage = sys.argv[3]
RULES = 9

def rule(op, state, out):
    # the least a rule does: read two numbers, compare with what it kept, keep one, emit one gauge
    rows = op.numRowsTotal or 0.0
    updated = op.numRowsUpdated or 0.0
    if rows > state[0] + updated:
        out.append((state, rows))
    state[0] = rows
    out.append(("gauge", rows - updated))

def once(path):
    if stage == "replay":
        replay([path]).exposition()
        return None
    n = 0
    totals = None
    states = {}
    for item in read_records([path], progress_as_bytes=True):
        if item.kind != "progress" or not isinstance(item.payload, bytes):
            continue
        n += 1
        if stage == "read":
            continue
        doc = decode._PROGRESS.decode(item.payload)
        if stage == "decode":
            continue
        values = [1.0, doc.batchDuration or 0.0, doc.numInputRows or 0.0, *doc.durationMs.values()]
        for op in doc.stateOperators:
            values += (op.numRowsUpdated or 0.0, op.numRowsRemoved or 0.0, op.numRowsDroppedByWatermark or 0.0,
                       op.allUpdatesTimeMs or 0.0, op.allRemovalsTimeMs or 0.0, op.commitTimeMs or 0.0)
            values += op.customMetrics.values()
        if totals is None or len(totals) != len(values):
            totals = [0.0] * len(values)
        totals[:] = map(operator.add, totals, values)
        if stage == "counters":
            continue
        out = []
        for op in doc.stateOperators:
            kept = states.get(op.operatorName)
            if kept is None:
                kept = states[op.operatorName] = [[0.0] for _ in range(RULES)]
            for state in kept:
                rule(op, state, out)
    return n

once(sys.argv[2])
started = time.process_time()
once(sys.argv[2])
print((time.process_time() - started) / int(sys.argv[4]) * 1e6)
"""

STAGES = ("read", "decode", "counters", "rules", "replay")


def _run(tree: str, log: str, stage: str, events: int) -> float:
    """CPU µs per progress event of one stage (a warm-up pass, then one timed), in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _LOOP, tree, log, stage, str(events)], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    here = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    sys.path.insert(0, here)
    from bench.common import progress_only_log

    with tempfile.TemporaryDirectory() as tmp:
        log, events = progress_only_log(tmp, args.copies)
        times: dict[str, list[float]] = {stage: [] for stage in STAGES}
        for _ in range(args.repeat):
            for stage in STAGES:
                times[stage].append(_run(here, log, stage, events))
    print(f"{events:,} progress events, {args.repeat} runs each, CPU µs per progress event, median (min-max), events a CPU second:")
    for stage, values in times.items():
        median = statistics.median(values)
        print(f"  {stage:>8}: {median:6.1f} ({min(values):.1f}-{max(values):.1f})  {1e6 / median:8,.0f} a CPU second")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
