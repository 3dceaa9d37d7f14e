"""The reading and decoding of progress lines alone: CPU per progress event of what a replay does before the signals.

    python bench/progress_read.py [--copies 400] [--repeat 7] [--before /path/to/tree]

On ``bench/replay_rate.py``'s progress-only log, each progress line goes the replay's way through the parts
issue 32 measured as "decode, read and tap": ``read_records`` (decompression, lines, the record), placement's
ids of the line as the tap (``spark_state_observer.model.decode.event_progress_ids``), the replay clock's stamp
(``stamp_fields`` and the memoized time) and ``parse_event`` into the model; no tracker, signals or placement
state. With ``--before DIR`` the same loop runs on the ``observer`` package of DIR (an older tree) in a
subprocess, interleaved. Medians with min-max of CPU µs per progress event.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

_LOOP = """
import sys, time
sys.path.insert(0, sys.argv[1])
from spark_state_observer.model import decode
from spark_state_observer.model.parse import parse_event, parse_timestamp_memo
from spark_state_observer.offline.eventlog import read_records

def once(path):
    n = 0
    for item in read_records([path], progress_as_bytes=True, tap=decode.event_progress_ids):
        if item.kind == "progress" and isinstance(item.payload, bytes):
            text, _ = decode.stamp_fields(item.payload)
            parse_timestamp_memo(text)
            parse_event(item.kind, item.payload)
            n += 1
    return n

once(sys.argv[2])
started = time.process_time()
n = once(sys.argv[2])
print((time.process_time() - started) / n * 1e6)
"""


def _run(tree: str, log: str) -> float:
    """CPU µs per progress event of ``tree``'s reading and decoding (a warm-up pass, then one timed), in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _LOOP, tree, log], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", default=None, help="an older tree whose observer package to time too, interleaved")
    args = ap.parse_args()
    here = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    sys.path.insert(0, here)
    from bench.common import progress_only_log

    with tempfile.TemporaryDirectory() as tmp:
        log, events = progress_only_log(tmp, args.copies)
        trees = [("this tree", here)] + ([("before", os.path.abspath(args.before))] if args.before else [])
        times: dict[str, list[float]] = {name: [] for name, _ in trees}
        for _ in range(args.repeat):
            for name, tree in trees:
                times[name].append(_run(tree, log))
    print(f"{events:,} progress events, {args.repeat} runs each, CPU µs per progress event, median (min-max):")
    for name, values in times.items():
        print(f"  {name}: {statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})")
    if args.before:
        ratio = statistics.median(times["before"]) / statistics.median(times["this tree"])
        print(f"  before / this tree: {ratio:.2f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
