"""The metric tracker's share of a progress event, alone: ``QueryTracker.apply`` and ``apply_updates``.

    python bench/tracker_apply.py [--copies 400] [--source rocksdb_restart/run1] [--repeat 7] [--before TREE]

One replay of ``bench/replay_rate.py``'s log records what the tracker is handed (every event, and every
list of the signals' updates, in order); then a fresh tracker is fed that sequence ``--repeat`` times and
the CPU seconds are timed. ``--before`` times the same recorded sequence on another tree's tracker (in a
subprocess, so the two trees' modules do not mix): the decode and the rules are out of the figure.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time


def record(path: str, copies: int, source: str) -> list[tuple[str, object]]:
    """What one replay hands the tracker, in order: ("apply", event) and ("updates", [Update, ...])."""
    from bench.replay_rate import build_log
    from spark_state_observer.metrics.tracker import QueryTracker
    from spark_state_observer.offline.replay import replay

    build_log(path, copies, source, True)
    calls: list[tuple[str, object]] = []
    apply, apply_updates = QueryTracker.apply, QueryTracker.apply_updates

    def spy_apply(self, event):  # type: ignore[no-untyped-def]
        calls.append(("apply", event))
        return apply(self, event)

    def spy_updates(self, updates):  # type: ignore[no-untyped-def]
        updates = list(updates)
        calls.append(("updates", updates))
        return apply_updates(self, updates)

    QueryTracker.apply, QueryTracker.apply_updates = spy_apply, spy_updates  # type: ignore[method-assign]
    try:
        replay([path])
    finally:
        QueryTracker.apply, QueryTracker.apply_updates = apply, apply_updates  # type: ignore[method-assign]
    return calls


def time_calls(calls: list[tuple[str, object]], repeat: int) -> list[float]:
    """CPU seconds of ``repeat`` fresh trackers each fed ``calls``."""
    from spark_state_observer.metrics.tracker import QueryTracker

    times = []
    for _ in range(repeat):
        tracker = QueryTracker()
        apply, apply_updates = tracker.apply, tracker.apply_updates
        started = time.process_time()
        for kind, arg in calls:
            if kind == "apply":
                apply(arg)  # type: ignore[arg-type]
            else:
                apply_updates(arg)  # type: ignore[arg-type]
        times.append(time.process_time() - started)
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--source", default="rocksdb_restart/run1")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", help="another checkout: time its tracker on the same calls")
    ap.add_argument("--calls", help=argparse.SUPPRESS)  # internal: time a pickled sequence and print the times
    args = ap.parse_args()
    if args.calls:  # the tree on PYTHONPATH (the one --before named), not this one
        import spark_state_observer as observer

        assert os.path.abspath(observer.__file__).startswith(os.path.abspath(os.getcwd())), observer.__file__
        with open(args.calls, "rb") as f:
            calls = pickle.load(f)
        print(repr(time_calls(calls, args.repeat)))
        return 0
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    with tempfile.TemporaryDirectory() as tmp:
        calls = record(os.path.join(tmp, "events_1_app.zstd"), args.copies, args.source)
        events = sum(1 for kind, _ in calls if kind == "apply")
        updates = sum(len(arg) for kind, arg in calls if kind == "updates")  # type: ignore[arg-type]
        rows = [("this tree", time_calls(calls, args.repeat))]
        if args.before:
            dump = os.path.join(tmp, "calls.pickle")
            with open(dump, "wb") as f:
                pickle.dump(calls, f)
            env = {**os.environ, "PYTHONPATH": os.path.abspath(args.before)}
            script = os.path.join(os.path.abspath(os.path.dirname(__file__)), "tracker_apply.py")
            out = subprocess.run(
                [sys.executable, script, "--calls", dump, "--repeat", str(args.repeat)],
                env=env,
                cwd=args.before,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
            rows.append(("the tree before", eval(out)))
    print(f"{events:,} progress events and {updates:,} updates ({args.source} x {args.copies}), {args.repeat} repeats, CPU seconds:")
    for name, times in rows:
        median = statistics.median(times)
        print(f"  {name:16} {median:.3f} s ({min(times):.3f}-{max(times):.3f}) = {1e6 * median / events:.1f} µs a progress event")
    if len(rows) == 2:
        print(f"  this tree is {statistics.median(rows[1][1]) / statistics.median(rows[0][1]):.2f}x as fast")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
