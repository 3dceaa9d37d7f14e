"""What reading and decoding cost a progress event in a replay, stage by stage, without the pipeline.

    PYTHONPATH=$PWD python bench/decode_stages.py [--copies 400] [--repeat 5] [--all]
    PYTHONPATH=/path/to/before python bench/decode_stages.py ...   # the same stages of an older tree

On ``bench/replay_rate.py``'s progress-only log (``--all``: the log with its task, job and SQL lines), each stage
includes the ones before it, as a replay runs them on each line:

1. **read**: ``read_records`` as replay calls it (zstd, lines, the progress object's bytes, which decodes it typed);
2. **+ placement**: placement's tap on every line (``EventLogSource.feed_line``);
3. **+ stamp**: the event's time, as replay places it (``stamp_fields``, ``parse_timestamp_memo``);
4. **+ model**: ``parse_event`` of every record: the model the pipeline consumes.

Medians with min-max of CPU µs per progress event (single-threaded), after one warm-up pass of each stage.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.replay_rate import build_log
from spark_state_observer.model import kinds
from spark_state_observer.model.decode import stamp_fields
from spark_state_observer.model.parse import parse_event, parse_timestamp_memo
from spark_state_observer.offline.eventlog import EventLogError, read_records
from spark_state_observer.placement.task_log import EventLogSource

STAGES = ("read", "+ placement", "+ stamp", "+ model")


def run(path: str, stage: int) -> None:
    """One pass over the log, up to ``stage`` (an index of ``STAGES``)."""
    source = EventLogSource()
    tap = source.feed_line if stage >= 1 else None
    for item in read_records([path], tap=tap, progress_as_bytes=True):
        if isinstance(item, EventLogError):
            continue
        if stage >= 2 and isinstance(item.payload, bytes):
            text, _ = stamp_fields(item.payload)
            parse_timestamp_memo(text)
        if stage >= 3 and item.kind in kinds.EVENT_KINDS:
            parse_event(item.kind, item.payload)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--all", action="store_true", help="the log with its task, job and SQL lines (as Spark writes it)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events_1_app.zstd")
        n = build_log(path, args.copies, progress_only=not args.all)
        times: list[list[float]] = [[] for _ in STAGES]
        for stage in range(len(STAGES)):
            run(path, stage)
        for _ in range(args.repeat):  # interleaved, so load on the machine hits every stage alike
            for stage in range(len(STAGES)):
                started = time.process_time()
                run(path, stage)
                times[stage].append(time.process_time() - started)
    print(f"{n:,} progress events{'' if args.all else ', progress only'}; CPU µs a progress event, median (min-max) of {args.repeat}")
    for name, spent in zip(STAGES, times):
        print(f"  {name:12s} {statistics.median(spent) / n * 1e6:6.1f} ({min(spent) / n * 1e6:.1f}-{max(spent) / n * 1e6:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
