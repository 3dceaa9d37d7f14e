"""How right the live restore ETA is, and how late the observer knows a partition is restored.

    PYTHONPATH=$PWD python bench/restore_eta.py [RECORDING ...]   # default: every recorded restore

A recording is a folder with an ``eventlog`` (``scripts/record_restore.py``, or the executor-loss and restart
recordings of ``record_placement.py`` / ``record_fixtures.py``). The log is replayed; for each operator's
restore, the first ``restore_progress`` event at or past 25 %, 50 % and 75 % of its partitions gives the ETA
then, against what actually remained (its ``restore_finished`` time minus that event's time). The error is
the factor between the two (1.0 = exact; 2.0 = twice or half). Where the recording has ``live_events.jsonl``
(the callbacks of the observer attached to the restarted job, with the time each ran), the delay from a
partition's task end (the event's time) to the callback is summarized too.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections import defaultdict
from typing import Any

from observer.model import signal_kinds as kinds
from observer.model.signal_kinds import SignalEvent
from observer.offline.replay import replay
from observer.settings import Settings

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RECORDINGS = [
    "tests/fixtures/restore_progress/large",
    "tests/fixtures/restore_progress/large_kill",
    "tests/fixtures/placement/kill",
    "tests/fixtures/incidents/dedup_agg_restart_43/run2",
    "tests/fixtures/incidents/dedup_agg_restart_35/run2",
]
POINTS = (0.25, 0.5, 0.75)


def factor(predicted: float | None, actual: float) -> float | None:
    """max(p/a, a/p); None without a prediction; a zero on one side only is an infinite error."""
    if predicted is None:
        return None
    if predicted <= 0 or actual <= 0:
        return 1.0 if predicted == actual else float("inf")
    return max(predicted / actual, actual / predicted)


def eta_errors(events: list[SignalEvent]) -> list[dict[Any, Any]]:
    """Per restore (query, batch, operator): its size, duration and the ETA's error at each point."""
    by_restore: dict[tuple[str, int, str], list[SignalEvent]] = defaultdict(list)
    for e in events:
        by_restore[(e.query_id, e.attributes["batch_id"], e.attributes["operator"])].append(e)
    rows = []
    for (_, batch, operator), stream in by_restore.items():
        end = next((e for e in stream if e.kind == kinds.RESTORE_FINISHED), None)
        if end is None:
            continue
        total = end.attributes["partitions_total"]
        row: dict[Any, Any] = {
            "operator": operator,
            "batch": batch,
            "reason": end.attributes["reason"],
            "partitions": total,
            "duration": end.attributes["duration_seconds"],
        }
        for point in POINTS:
            at = next(
                (e for e in stream if e.kind == kinds.RESTORE_PROGRESS and total and e.attributes["partitions_done"] / total >= point), None
            )
            row[point] = None if at is None else factor(at.attributes["eta_seconds"], end.timestamp - at.timestamp)
        rows.append(row)
    return rows


def live_delays(path: str) -> list[float]:
    """Seconds from each restored partition's task end (a progress or finish event's time) to its callback."""
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [e["received"] - e["timestamp"] for e in lines if e["kind"] in (kinds.RESTORE_PROGRESS, kinds.RESTORE_FINISHED)]


def main(recordings: list[str]) -> None:
    print("| recording | operator | reason | partitions | restore (s) | ETA error at 25 % | 50 % | 75 % |")
    print("|---|---|---|---|---|---|---|---|")
    delays: dict[str, list[float]] = {}
    for rec in recordings:
        folder = os.path.join(ROOT, rec)
        if not os.path.isdir(folder):
            continue
        events: list[SignalEvent] = []
        replay([os.path.join(folder, "eventlog")], Settings.from_env({}, history_enabled=False), on_signal=events.append)
        for row in eta_errors([e for e in events if e.kind in kinds.RESTORE_PROGRESS_KINDS]):
            cells = ["-" if row[p] is None else f"{row[p]:.2f}x" for p in POINTS]
            print(f"| {rec} | {row['operator']} | {row['reason']} | {row['partitions']} | {row['duration']:.1f} | {' | '.join(cells)} |")
        live = os.path.join(folder, "live_events.jsonl")
        if os.path.exists(live):
            delays[rec] = live_delays(live)
    for rec, xs in delays.items():
        if xs:
            print(
                f"\n{rec}: live delay from a partition's task end to the callback: median {statistics.median(xs):.2f} s, "
                f"max {max(xs):.2f} s, n={len(xs)}"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or RECORDINGS)
