"""The watcher's line filter on one recorded micro-batch, with a poll's lines held, with and without ``keep_freed_heap``.

    python bench/poll_heap.py            # glibc's defaults
    python bench/poll_heap.py --keep     # after spark_state_observer.fleet.heap.keep_freed_heap(), as the watch command runs

One batch of the recorded ``rocksdb_restart`` log (``bench/watch_scale.py``'s) goes through ``LineFilter.feed`` as a
fresh decoded piece, as ``codec_tail`` joins one per application and poll; the handler keeps the wanted lines and
drops them every 200 batches, as one poll of 200 applications holds them until it is handled. Prints the CPU per
batch (best of three rounds) and the minor page faults per batch: with the defaults, the heap freed at the end of
each "poll" goes back to the kernel and the next one faults it in again. Run each mode in its own process
(``mallopt`` is process-wide).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.watch_scale import recorded
from spark_state_observer.fleet.app_events import PLACEMENT_EVENTS
from spark_state_observer.fleet.heap import keep_freed_heap
from spark_state_observer.fleet.line_filter import LineFilter, line_pattern
from spark_state_observer.model.spark_events import APP_END, APP_START, ENVIRONMENT, LOG_START, STREAMING_EVENTS

APPS = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="call keep_freed_heap() first")
    parser.add_argument("--batches", type=int, default=4000)
    args = parser.parse_args()
    if args.keep and not keep_freed_heap():
        sys.exit("no glibc mallopt here: --keep changes nothing")
    _, segments, _ = recorded("rocksdb_restart")
    types = set(STREAMING_EVENTS) | set(PLACEMENT_EVENTS) | {APP_START, APP_END, ENVIRONMENT, LOG_START}
    patterns = {line_pattern(t): t for t in types}
    data = b"".join(segments[2])
    held: list[bytes] = []

    def batch() -> None:
        f = LineFilter(patterns, 1 << 24)
        f.feed(bytes(data), lambda n, kind, line: held.append(line) or False)
        if len(held) > 10 * APPS:  # ~10 wanted lines a batch: one poll's worth, freed
            held.clear()

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    best = min(timeit.repeat(batch, number=args.batches, repeat=3)) / args.batches
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / (3 * args.batches)
    mode = "keep_freed_heap" if args.keep else "glibc defaults"
    print(f"{mode}: {best * 1e6:.1f} µs a batch ({len(data):,} decoded bytes), {faults:.1f} minor page faults a batch")


if __name__ == "__main__":
    main()
