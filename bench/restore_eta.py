"""How right the live restore ETA is, and how late the observer knows a partition is restored.

    PYTHONPATH=$PWD python bench/restore_eta.py [--checkpoint RECORDING=CHECKPOINT ...] [RECORDING ...]

A recording is a folder with an ``eventlog`` (``scripts/record_restore.py``, or the executor-loss and restart
recordings of ``record_placement.py`` / ``record_fixtures.py``). The log is replayed twice: without a checkpoint
(the ETA from observed finishes only, as before the checkpoint was read: ``observed``) and with the recording's
checkpoint, its ``checkpoint`` folder or the one given (the ETA from the checkpoint's expected work, blended with
the observed speed: ``checkpoint``); a recording without one is replayed once. For each operator's restore, the
``restore_started`` event (0 %) and the first ``restore_progress`` event at or past 25 %, 50 % and 75 % of its
partitions give the ETA then, against what actually remained (its ``restore_finished`` time minus that event's
time). The error is the factor between the two (1.0 = exact; 2.0 = twice or half). ``restore_progress/large``
and ``large_kill`` kept no checkpoint; the recorder's build is deterministic (the ``rate-micro-batch`` source),
so ``--phase build --batches 40`` and then 40 more on one checkpoint rebuild theirs (versions 1-40 and 1-80),
given here with ``--checkpoint``; ``restart_32``'s is ``--phase build --batches 32`` on its own. Where the recording has ``live_events.jsonl``
(the callbacks of the observer attached to the restarted job, with the time each ran), the delay from a
partition's task end (the event's time) to the callback is summarized too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from typing import Any

from spark_state_observer.model import signal_kinds as kinds
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.offline.replay import replay
from spark_state_observer.placement import restore_progress
from spark_state_observer.placement.restore_eta import Stage, TaskTimes
from spark_state_observer.settings import Settings

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RECORDINGS = [
    "tests/fixtures/restore_progress/large",
    "tests/fixtures/restore_progress/large_kill",
    "tests/fixtures/restore_progress/checkpointed",
    "tests/fixtures/restore_progress/live_estimate",
    "tests/fixtures/restore_progress/restart_24",
    "tests/fixtures/restore_progress/restart_24_loaded",
    "tests/fixtures/restore_progress/restart_32",
    "tests/fixtures/restore_progress/kill_mid_restore",
    "tests/fixtures/placement/kill",
    "tests/fixtures/incidents/dedup_agg_restart_43/run2",
    "tests/fixtures/incidents/dedup_agg_restart_35/run2",
]
CHECKPOINTED = {
    "tests/fixtures/restore_progress/checkpointed": "tests/fixtures/restore_progress/checkpointed/checkpoint",
    "tests/fixtures/restore_progress/restart_24": "tests/fixtures/restore_progress/restart_24/checkpoint",
    "tests/fixtures/restore_progress/restart_24_loaded": "tests/fixtures/restore_progress/restart_24/checkpoint",
}
POINTS = (0.0, 0.25, 0.5, 0.75)


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
                (
                    e
                    for e in stream
                    if (e.kind == kinds.RESTORE_STARTED and point == 0)
                    or (e.kind == kinds.RESTORE_PROGRESS and total and point > 0 and e.attributes["partitions_done"] / total >= point)
                ),
                None,
            )
            row[point] = None if at is None else factor(at.attributes.get("eta_seconds"), end.timestamp - at.timestamp)
        rows.append(row)
    return rows


def restores(folder: str, checkpoint: str | None) -> list[dict[Any, Any]]:
    """The ETA errors of every restore of the recording, its checkpoint at ``checkpoint`` (None: none readable)."""
    events: list[SignalEvent] = []
    missing = os.path.join(folder, "no-checkpoint")  # the log's own plan names a folder that may exist on this machine

    def locate(query_id: str, run_id: str | None) -> str:
        return checkpoint or missing

    replay([os.path.join(folder, "eventlog")], Settings.from_env({}, history_enabled=False), on_signal=events.append, checkpoint=locate)
    return eta_errors([e for e in events if e.kind in kinds.RESTORE_PROGRESS_KINDS])


def known_times(folder: str, checkpoint: str | None) -> list[dict[Any, Any]]:
    """The same restores with each task's own time (from the finished restore) in place of the speed forecast: what
    is left is the error of the schedule played (waves, tasks in flight, stages in order) alone. A stage not begun
    at a point has no times yet: no ETA there."""
    finals: list[TaskTimes] = []
    played = restore_progress.remaining_seconds

    def seen(stages: list[Stage], slots: int, started: float, now: float, prior: float | None) -> float | None:
        finals.extend(dict(s.done) for s in stages if s.done)
        return played(stages, slots, started, now, prior)

    def known(stages: list[Stage], slots: int, started: float, now: float, prior: float | None) -> float | None:
        timed = []
        for stage in stages:
            p, times = next(iter(stage.done.items()), (None, None))
            final = max((d for d in finals if p is not None and d.get(p) == times), key=len, default={})
            if len(final) < len(stage.work) or any(launch is None for launch, _ in final.values()):
                return None
            timed.append(Stage({q: finish - (launch or 0.0) for q, (launch, finish) in final.items()}, stage.done))
        return played(timed, slots, started, now, 1.0)  # each task's work is its seconds: a speed of 1

    try:
        restore_progress.remaining_seconds = seen  # type: ignore[assignment]
        restores(folder, checkpoint)
        restore_progress.remaining_seconds = known  # type: ignore[assignment]
        return restores(folder, checkpoint)
    finally:
        restore_progress.remaining_seconds = played


def live_delays(path: str) -> list[float]:
    """Seconds from each restored partition's task end (a progress or finish event's time) to its callback."""
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [e["received"] - e["timestamp"] for e in lines if e["kind"] in (kinds.RESTORE_PROGRESS, kinds.RESTORE_FINISHED)]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", action="append", default=[], help="RECORDING=CHECKPOINT: a rebuilt checkpoint of a recording")
    ap.add_argument("--known-times", action="store_true", help="also the ETA given each task's own time: the schedule's error alone")
    ap.add_argument("recordings", nargs="*")
    args = ap.parse_args(argv)
    checkpoints = dict(CHECKPOINTED)
    checkpoints.update(dict(c.split("=", 1) for c in args.checkpoint))
    print("| recording | batch | operator | reason | partitions | restore (s) | ETA | error at 0 % | 25 % | 50 % | 75 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    delays: dict[str, list[float]] = {}
    for rec in args.recordings or RECORDINGS:
        folder = os.path.join(ROOT, rec)
        if not os.path.isdir(folder):
            continue
        checkpoint = checkpoints.get(rec)
        runs = [("observed", restores(folder, None))]
        if checkpoint is not None:
            runs.append(("checkpoint", restores(folder, os.path.join(ROOT, checkpoint))))
        if args.known_times:
            runs.append(("known times", known_times(folder, None if checkpoint is None else os.path.join(ROOT, checkpoint))))
        for basis, rows in runs:
            for row in rows:
                cells = ["-" if row[p] is None else f"{row[p]:.2f}x" for p in POINTS]
                print(
                    f"| {rec} | {row['batch']} | {row['operator']} | {row['reason']} | {row['partitions']} | {row['duration']:.1f} "
                    f"| {basis} | {' | '.join(cells)} |"
                )
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
    main(sys.argv[1:])
