"""Where a replay's CPU goes, by sampling: the share of samples each function is on the stack for.

    python bench/replay_profile.py [--copies 400] [--progress-only] [--rounds 10] [--top 60]

cProfile multiplies the cost of every Python call (a progress-only replay took ~15x as long under it on
this machine, and the rules are many small calls), which skews its split towards the call-heavy parts. This
samples the stack instead: a ``SIGPROF`` timer every 0.5 ms of this process's CPU, each sample counting once
for every function on the stack (inclusive) and once for the line running (own). The log is
``bench/replay_rate.py``'s; one replay warms up (imports, caches) before ``--rounds`` sampled ones.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import tempfile
from types import FrameType

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.common import ROOT
from bench.replay_rate import build_log
from spark_state_observer.offline.replay import replay

Where = tuple[str, str]


_HERE = os.path.abspath(ROOT)


def _where(frame: FrameType) -> Where:
    """A frame's file (relative to the checkout, when in it) and function."""
    file = frame.f_code.co_filename
    return (os.path.relpath(file, _HERE) if file.startswith(_HERE) else file), frame.f_code.co_name


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--source", default="rocksdb_restart/run1")
    ap.add_argument("--progress-only", action="store_true")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--top", type=int, default=60)
    args = ap.parse_args()
    inclusive: collections.Counter[Where] = collections.Counter()
    own: collections.Counter[tuple[str, str, int | None]] = collections.Counter()
    samples = 0

    def sample(_signum: int, frame: FrameType | None) -> None:
        nonlocal samples
        if frame is None:
            return
        samples += 1
        own[(*_where(frame), frame.f_lineno)] += 1
        seen: set[Where] = set()
        f: FrameType | None = frame
        while f is not None:
            seen.add(_where(f))
            f = f.f_back
        inclusive.update(seen)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events_1_app.zstd")
        n = build_log(path, args.copies, args.source, args.progress_only)
        replay([path])
        signal.signal(signal.SIGPROF, sample)
        signal.setitimer(signal.ITIMER_PROF, 0.0005, 0.0005)
        for _ in range(args.rounds):
            replay([path])
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
    print(f"{args.rounds} replays of {n:,} progress events: {samples:,} samples; inclusive share:")
    for (file, name), count in inclusive.most_common(args.top):
        print(f"  {100 * count / samples:5.1f} %  {file}:{name}")
    print("own share, by line:")
    for (file, name, line), count in own.most_common(args.top // 2):
        print(f"  {100 * count / samples:5.1f} %  {file}:{line} ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
