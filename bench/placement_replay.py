"""Replay with and without placement (the task events of the logs): medians with min-max over alternating rounds.

    PYTHONPATH=$PWD python bench/placement_replay.py [--rounds 7]

The baseline (``placement=off``) is measured in the same run, round by round alternating with ``on``, so a
busy machine slows both alike; the ratio of the medians is the figure.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import time

from spark_state_observer.offline.replay import replay
from spark_state_observer.settings import Settings

LOGS = sorted(glob.glob("tests/fixtures/*/run*/eventlog")) + [
    "tests/fixtures/placement/kill/eventlog",
    "tests/fixtures/placement/locality/eventlog",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    rounds = ap.parse_args().rounds
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode in ("off", "on"):
            started = time.perf_counter()
            for log in LOGS:
                replay([log], Settings.from_env({}, placement=mode, history_enabled=False))
            seconds[mode].append(time.perf_counter() - started)
    for mode, xs in seconds.items():
        print(
            f"placement={mode}: median {statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f} - max {max(xs) * 1000:.0f}), "
            f"{len(LOGS)} logs, n={len(xs)}"
        )
    print(f"ratio on/off: {statistics.median(seconds['on']) / statistics.median(seconds['off']):.2f}")


if __name__ == "__main__":
    main()
