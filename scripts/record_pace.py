"""Record the pace corpus: a real stall, a real falling behind, and their clean counterparts (real Spark).

    python scripts/record_pace.py                   # every recording below
    python scripts/record_pace.py pace_stall        # some of them
    python scripts/record_pace.py --list

Each recording is one run of ``scripts/scenario_job.py --query paced`` (``scripts/pace_queries.py``: a
count per key written by a foreachBatch writer that sleeps as told), kept under
``tests/fixtures/incidents/<name>/`` with its Spark event log (slimmed as ``record_incidents.slim_event_log``
does), as the incident corpus is. ``truth.json`` is
written here from what the run did: the writer's own log (``sink.jsonl``: when each batch's write started
and ended) gives when the stall happened and for how long; the falling behind is where the ramped input
(Spark's ``rampUpTime``, linear from 0) passes the writer's capacity (1 / ``seconds_per_row``), from the
run's first batch. Stalled and falling behind are judged relative to the trigger: the clean counterparts
have batches far longer than their trigger (8 s on a 2 s trigger, 9 s on a 10 s one) that never stop and
never lose ground, a ramp that stays below capacity, and Spark's default trigger (batches back to back) with
input at 80 % of capacity; nothing may fire in them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from record_incidents import SLIMMED_EVENTS, Recorder, record_scenarios, slim_event_log  # noqa: E402


def sink_log(rec: Recorder, facts: dict[str, Any]) -> list[dict[str, Any]]:
    with open(os.path.join(rec.target, facts["run_dir"], "sink.jsonl")) as f:
        return [json.loads(line) for line in f]


def first_batch_at(facts: dict[str, Any]) -> float:
    return datetime.fromisoformat(facts["first_batch_timestamp"].replace("Z", "+00:00")).timestamp()


def paced(length: str, trigger: float, rows_per_second: int, clean: bool, **options: float) -> Callable[[Recorder], dict[str, Any]]:
    """One run of ``pace_queries.paced`` with these options, as long as ``length`` says (``--duration S`` or
    ``--batches N``); its truth from the writer's log and the ramp."""

    def scenario(rec: Recorder) -> dict[str, Any]:
        opts = {"trigger": trigger, **options}
        args = [*length.split(), "--batches-timeout", "1800", "--query", "paced", "--rows-per-second", str(rows_per_second)]
        args += ["--name", rec.name]
        for key, value in opts.items():
            args += ["--option", f"{key}={value}"]
        facts = rec.run(*args)
        writes = sink_log(rec, facts)
        slim_event_log(os.path.join(rec.target, facts["run_dir"], "eventlog"))
        durations = [w["ended"] - w["started"] for w in writes]
        truth: dict[str, Any] = {
            "clean": clean,
            "provider": "rocksdb",
            "trigger_seconds": trigger,
            "rows_per_second": rows_per_second,
            "options": opts,
            "duration_seconds": facts["process_ended"] - facts["process_started"],
            "writes": len(writes),
            "write_seconds": {"min": round(min(durations), 3), "max": round(max(durations), 3)},
            "kept": f"progress lines, the writer's log and the event log without {', '.join(sorted(SLIMMED_EVENTS))} and stateless task ends",
            "expected_events": [],
        }
        if "block_batch" in options:
            (blocked,) = [w for w in writes if w["batch_id"] == options["block_batch"]]
            if blocked["ended"] >= facts["process_ended"]:
                raise ValueError("the run ended before the blocked batch did: the stall was not recorded whole")
            truth["stalls"] = [
                {
                    "run": facts["run_dir"],
                    "batch_id": blocked["batch_id"],
                    "from": blocked["started"],
                    "until": blocked["ended"],
                    "seconds": blocked["ended"] - blocked["started"],
                    "trigger_intervals": (blocked["ended"] - blocked["started"]) / trigger,
                }
            ]
            truth["expected_events"] = ["stalled while the write of the blocked batch hangs, stall_recovered after"]
        if "seconds_per_row" in options and not clean:
            capacity = 1.0 / options["seconds_per_row"]
            start = first_batch_at(facts)
            truth["falling_behind"] = [
                {
                    "run": facts["run_dir"],
                    "from": start + options["ramp_seconds"] * capacity / rows_per_second,
                    "input_rows_per_second": rows_per_second,
                    "capacity_rows_per_second": capacity,
                    "why": "the ramped input passes the writer's capacity at ramp_seconds x capacity / rate after the first batch",
                }
            ]
            truth["expected_events"] = ["falling_behind once the averaging window shows input above processing"]
        return truth

    return scenario


# a busy machine takes minutes to start a session; falling behind is judged over 300 s of batches, for 120 s
SCENARIOS: dict[str, Callable[[Recorder], dict[str, Any]]] = {
    "pace_stall": paced("--batches 26", 2, 20, clean=False, block_batch=15, block_seconds=120),
    "pace_steady_slow_2s": paced("--duration 480", 2, 20, clean=True, sleep=8),
    "pace_steady_9s_of_10s": paced("--duration 480", 10, 20, clean=True, sleep=8.5),
    "pace_falling_behind": paced("--duration 1500", 1, 300, clean=False, ramp_seconds=60, seconds_per_row=0.005),
    "pace_ramp_within": paced("--duration 900", 1, 150, clean=True, ramp_seconds=60, seconds_per_row=0.005),
    # Spark's default trigger (no trigger set: each batch starts when the last ends), input at 80 % of the
    # writer's capacity: back-to-back batches whose size follows the last one's duration, keeping up
    "pace_default_trigger_80pct": paced("--duration 480", 0, 200, clean=True, seconds_per_row=0.004),
}


def main() -> int:
    return record_scenarios(SCENARIOS, recorded_by="scripts/record_pace.py", errors=(ValueError,))


if __name__ == "__main__":
    sys.exit(main())
