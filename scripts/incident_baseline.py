"""Compare what the signals say about each recorded incident with its ground truth (a markdown report).

    PYTHONPATH=$PWD python scripts/incident_baseline.py [tests/fixtures/incidents/NAME ...]

Replays every run of each recording in ``tests/fixtures/incidents`` (as ``spark-state-observer replay``
does) and sets its signal events against ``truth.json``: lifecycle events that are false in a clean run,
restarts found or missed, restore durations against the operator's own load metric and the batch's
addBatch, executor loss and reloads, the exception class and whether the root cause survived, and
terminations placed before their run started. docs/findings/incidents.md was written from its output.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from spark_state_observer.offline.replay import replay

INCIDENTS = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "incidents")
# events that state a fact rather than an incident: not counted as false in a clean run
INFORMATIONAL = {"query_started", "query_idle", "state_bounded"}


def recording(run_dir: str) -> str:
    eventlog = os.path.join(run_dir, "eventlog")
    return eventlog if os.path.isdir(eventlog) else glob.glob(os.path.join(run_dir, "progress.jsonl*"))[0]


def first_progress(run_dir: str) -> dict[str, Any] | None:
    path = os.path.join(run_dir, "progress.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        line = f.readline()
    return json.loads(line) if line.strip() else None


def report(folder: str) -> str:
    with open(os.path.join(folder, "truth.json")) as f:
        truth = json.load(f)
    runs = sorted(glob.glob(os.path.join(folder, "run*")), key=lambda p: int(p.rsplit("run", 1)[1]))
    result = replay([recording(r) for r in runs])
    events = list(result.observer.signals.recent)
    started = {f["run_id"]: f["process_started"] for f in truth["run_facts"]}
    origin = min(started.values())
    out = [f"### {truth['scenario']} (Spark {truth['spark_version']}, {truth['runs']} run(s))", ""]
    out += [
        f"- `{e.kind}` at +{e.timestamp - origin:.1f} s run {str(e.run_id)[:8]}: "
        + ", ".join(f"{k}={_short(v)}" for k, v in e.attributes.items())
        for e in events
    ]
    out.append("")
    findings: list[str] = []
    if truth.get("clean"):
        false = [
            e
            for e in events
            if e.kind not in INFORMATIONAL and not (e.kind == "query_terminated" and e.attributes.get("outcome") == "clean")
        ]
        kinds = sorted({e.kind for e in false})
        findings.append(
            f"clean run: {len(false)} false event(s)"
            + (": " + ", ".join(f"{k} x{sum(e.kind == k for e in false)}" for k in kinds) if false else "")
        )
    for restart in truth.get("restarts", []):
        found = [e for e in events if e.kind == "query_restarted" and e.run_id == restart["run_id"]]
        findings.append(
            f"restart into {restart['run']} (downtime {restart['downtime_seconds']:.1f} s): "
            + (f"found, downtime_seconds={found[0].attributes.get('downtime_seconds')}" if found else "MISSED")
        )
        first = first_progress(os.path.join(folder, restart["run"]))
        for e in (e for e in events if e.kind == "restore" and e.run_id == restart["run_id"]):
            index = e.attributes["operator_index"]
            ops = (first or {}).get("stateOperators") or []
            load = ops[index]["customMetrics"].get("rocksdbLoadLatencyMs") if index < len(ops) else None
            add_batch = (first or {}).get("durationMs", {}).get("addBatch")
            findings.append(
                f"restore {e.attributes['operator']}: {e.attributes['duration_seconds']} s by {e.attributes['method']}; "
                f"its rocksdbLoadLatencyMs {load} ms, the batch's addBatch {add_batch} ms"
                + (" (restore > its batch)" if add_batch is not None and e.attributes["duration_seconds"] * 1000 > add_batch else "")
            )
    if "killed_executor_id" in truth:
        removed = [e for e in events if e.kind == "executor_removed"]
        reloads = [e for e in events if e.kind == "store_reload"]
        changed = [e for e in events if e.kind == "partitions_changed"]
        findings.append(
            f"executor {truth['killed_executor_id']} killed at +{truth['killed_at'] - origin:.1f} s: executor_removed "
            + (", ".join(f"+{e.timestamp - origin:.1f} s" for e in removed) or "MISSED")
            + f"; store_reload x{len(reloads)} (batches {sorted({e.attributes['batch_id'] for e in reloads})}); "
            + f"partitions_changed x{len(changed)} (false: the checkpoint pins the partitions)" * bool(changed)
        )
    if "failure" in truth:
        failure = truth["failure"]
        failing = (
            set(started) if failure["every_run"] else {f["run_id"] for f in truth["run_facts"] if f["run_dir"] == failure["failing_run"]}
        )
        terminated = [e for e in events if e.kind == "query_terminated" and e.run_id in failing]
        if len(terminated) < len(failing):
            findings.append(f"{len(failing) - len(terminated)} failing run(s) without a query_terminated event")
        for e in terminated:
            cls = e.attributes.get("exception_class")
            cause = str(e.attributes.get("root_cause") or "")
            findings.append(
                f"terminated run {str(e.run_id)[:8]}: class {cls} (expected {failure['expected_class']}); root cause "
                + ("found" if failure["expected_root_cause"] in cause else "LOST")
                + f": {cause[:160]}"
            )
    ended = {f["run_id"]: f["process_ended"] for f in truth["run_facts"]}
    for e in (e for e in events if e.kind == "query_terminated"):
        if e.run_id in started and e.timestamp < started[e.run_id]:
            findings.append(
                f"termination of run {str(e.run_id)[:8]} placed {started[e.run_id] - e.timestamp:.1f} s BEFORE its process started"
            )
        elif e.run_id in ended and e.timestamp > ended[e.run_id] + 1:
            findings.append(f"termination of run {str(e.run_id)[:8]} placed {e.timestamp - ended[e.run_id]:.1f} s AFTER its process ended")
    if result.errors:
        findings.append(f"replay problems: {result.errors[:3]}")
    return "\n".join(out + ["Against truth:", ""] + [f"- {f}" for f in findings]) + "\n"


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def main() -> int:
    folders = sys.argv[1:] or sorted(os.path.dirname(p) for p in glob.glob(os.path.join(INCIDENTS, "*", "truth.json")))
    for folder in folders:
        print(report(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
