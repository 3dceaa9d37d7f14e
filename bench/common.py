"""Helpers shared by the benchmarks: recorded real progress to derive larger workloads from."""

from __future__ import annotations

import copy
import json
import os
import statistics
import time
from typing import Callable

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def recorded_progress(scenario: str = "rocksdb_restart", run: str = "run1") -> list[dict]:
    """Progress JSON recorded from a real Spark run (tests/fixtures, see scripts/record_fixtures.py)."""
    with open(os.path.join(ROOT, "tests", "fixtures", scenario, run, "progress.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def derived(progress: dict, query: int, batch: int, operators: int | None = None) -> dict:
    """A real progress object re-labelled as another query/batch, optionally with more operators."""
    p = copy.deepcopy(progress)
    p["id"] = f"00000000-0000-0000-0000-{query:012d}"
    p["runId"] = f"00000000-0000-0000-0001-{query:012d}"
    p["name"] = f"query_{query:03d}"
    p["batchId"] = batch
    if operators:
        ops = p["stateOperators"]
        p["stateOperators"] = [copy.deepcopy(ops[i % len(ops)]) for i in range(operators)]
    return p


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def progress_only_log(folder: str, copies: int) -> tuple[str, int]:
    """``replay_rate.py``'s log of progress events alone, written into ``folder``: its path and its progress events."""
    from bench.replay_rate import build_log  # replay_rate imports this module

    log = os.path.join(folder, "events_1_bench.zstd")
    return log, build_log(log, copies, progress_only=True)
