"""The signal rules' share of a progress event, alone: CPU time inside ``SignalEngine.on_event`` during a replay.

    python bench/signal_rules.py [--copies 400] [--source rocksdb_restart/run1] [--repeat 7] [--before TREE]

``bench/replay_rate.py``'s log is replayed ``--repeat`` times; each call of the engine's ``on_event`` is timed
(``time.process_time`` around it, ~1 µs of the ~70 µs it takes) and the CPU seconds summed per replay, so the
decode, the tracker and placement are out of the figure, and the rules see exactly what a replay hands them
(the tracker's records, the label budget, the order). ``--before`` times another tree's rules the same way, in
a subprocess on that tree's modules, alternating with this tree's round by round (a busy machine's load then
weighs on both alike).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def time_rules(path: str) -> tuple[float, int]:
    """CPU seconds inside ``SignalEngine.on_event`` over one replay of ``path``, and the progress events replayed."""
    from spark_state_observer.model.events import QueryProgress
    from spark_state_observer.offline.replay import replay
    from spark_state_observer.signals.engine import SignalEngine

    on_event = SignalEngine.on_event
    spent = [0.0]
    progress = [0]
    clock = time.process_time

    def timed(self, event, *args, **kwargs):  # type: ignore[no-untyped-def]
        started = clock()
        try:
            return on_event(self, event, *args, **kwargs)
        finally:
            spent[0] += clock() - started
            progress[0] += isinstance(event, QueryProgress)

    SignalEngine.on_event = timed  # type: ignore[method-assign]
    try:
        replay([path])
    finally:
        SignalEngine.on_event = on_event  # type: ignore[method-assign]
    return spent[0], progress[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=400)
    ap.add_argument("--source", default="rocksdb_restart/run1")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", help="another checkout: time its rules on the same log, round by round")
    ap.add_argument("--log", help=argparse.SUPPRESS)  # internal: time one replay of this log and print the result
    args = ap.parse_args()
    if args.log:  # the tree on PYTHONPATH (the one --before named), not this one
        import spark_state_observer as observer

        assert os.path.abspath(observer.__file__).startswith(os.path.abspath(os.getcwd())), observer.__file__
        print(repr(time_rules(args.log)))
        return 0
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from bench.replay_rate import build_log

    script = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events_1_app.zstd")
        build_log(path, args.copies, args.source, True)
        rows: dict[str, list[float]] = {"this tree": []}
        if args.before:
            rows["the tree before"] = []
        events = 0
        for _ in range(args.repeat):
            for name, tree in (("this tree", os.path.join(os.path.dirname(script), "..")), ("the tree before", args.before)):
                if tree is None:
                    continue
                env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
                out = subprocess.run(
                    [sys.executable, script, "--log", path],
                    env=env,
                    cwd=os.path.abspath(tree),
                    check=True,
                    stdout=subprocess.PIPE,
                    text=True,
                ).stdout
                seconds, events = eval(out)
                rows[name].append(seconds)
    print(f"{events:,} progress events ({args.source} x {args.copies}), {args.repeat} rounds, CPU seconds in the signal rules:")
    for name, times in rows.items():
        median = statistics.median(times)
        print(f"  {name:16} {median:.3f} s ({min(times):.3f}-{max(times):.3f}) = {1e6 * median / events:.1f} µs a progress event")
    if len(rows) == 2:
        print(f"  this tree's rules are {statistics.median(rows['the tree before']) / statistics.median(rows['this tree']):.2f}x as fast")
    print(f"  load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
