"""Print what Spark reported about state loading around a restart, as a markdown table.

    python scripts/restore_metrics.py tests/fixtures/incidents/dedup_agg_restart_43 [...]

For each recording made by ``record_incidents.py`` (two runs on one checkpoint) and each state operator:
the load metrics on the first batch after the restart, against steady state (the median over the first
run's batches from its third on), and the batch's ``addBatch``. This is how docs/findings/restore-metrics.md
was measured. The progress part works for every Spark version; the task part reads the run's event log:
per stateful stage (tasks that report state metrics, in submission order within the batch), the slowest
task's executor run time and the per-node "time taken to load the store" summed over tasks. The aggregation
loads its store twice (StateStoreRestore, then StateStoreSave): only the second load has metrics, so the
stage's run time against steady state is the one place the first load shows.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

LOAD_METRICS = (
    "rocksdbLoadLatencyMs",
    "rocksdbReplayChangeLogLatencyMs",
    "rocksdbNumReplayChangelogFiles",
    "rocksdbNumLoadedFromDfs",
    "rocksdbLoadFromSnapshotLatencyMs",
)


def progress(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def operator_metric(batch: dict, index: int, name: str) -> float | None:
    ops = batch.get("stateOperators") or []
    if index >= len(ops):
        return None
    value = (ops[index].get("customMetrics") or {}).get(name)
    return None if value is None else float(value)


def fmt(value: float | None) -> str:
    return "absent" if value is None else f"{value:g}"


def table(recording: str) -> str:
    with open(os.path.join(recording, "truth.json")) as f:
        truth = json.load(f)
    before = progress(os.path.join(recording, "run1", "progress.jsonl"))
    after = progress(os.path.join(recording, "run2", "progress.jsonl"))
    steady = before[2:] or before
    first = after[0]
    rows = [
        f"### {os.path.basename(recording)} (Spark {truth['spark_version']}, downtime {truth['restarts'][0]['downtime_seconds']:.0f} s)",
        "",
        (
            f"First batch after restart: batch {first['batchId']}, addBatch {first['durationMs'].get('addBatch')} ms, "
            f"triggerExecution {first['durationMs'].get('triggerExecution')} ms, {first.get('numInputRows')} input rows; "
            f"steady addBatch (median of run 1, batch 3 on) {statistics.median(b['durationMs'].get('addBatch', 0) for b in steady):g} ms."
        ),
        "",
        "| operator | metric | first batch after restart | steady state (median, min-max) |",
        "|---|---|---|---|",
    ]
    for index, op in enumerate(first.get("stateOperators") or []):
        for name in LOAD_METRICS:
            values = [v for b in steady if (v := operator_metric(b, index, name)) is not None]
            steady_text = f"{statistics.median(values):g} ({min(values):g}-{max(values):g})" if values else "absent"
            rows.append(f"| {op['operatorName']} | {name} | {fmt(operator_metric(first, index, name))} | {steady_text} |")
    return "\n".join(rows) + "\n"


def stage_times(eventlog: str) -> dict[int, list[tuple[int, float, dict[str, float]]]]:
    """batch -> [(stateful stage order, slowest task run ms, {plan node: load ms summed over tasks})]."""
    from spark_state_observer.capture.codecs import open_decompressed
    from spark_state_observer.offline.eventlog import expand

    load_metric: dict[int, str] = {}  # accumulator id -> plan node, for "load - time taken to load the store"
    batch_of_stage: dict[int, int] = {}
    slowest: dict[int, float] = defaultdict(float)
    loads: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    stateful: set[int] = set()
    for path in expand([eventlog]):
        with open_decompressed(path) as stream:
            for line in stream:
                event = json.loads(line)
                kind = event["Event"]
                if kind.endswith(("SQLExecutionStart", "SQLAdaptiveExecutionUpdate")):
                    nodes = [event["sparkPlanInfo"]]
                    while nodes:
                        node = nodes.pop()
                        nodes += node.get("children", [])
                        load_metric.update(
                            (m["accumulatorId"], node["nodeName"])
                            for m in node.get("metrics", [])
                            if m["name"].endswith("load - time taken to load the store")
                        )
                elif kind == "SparkListenerJobStart" and "streaming.sql.batchId" in (event.get("Properties") or {}):
                    batch_of_stage.update((stage, int(event["Properties"]["streaming.sql.batchId"])) for stage in event["Stage IDs"])
                elif kind == "SparkListenerTaskEnd":
                    stage, info = event["Stage ID"], event["Task Info"]
                    accumulables = info.get("Accumulables", [])
                    if not any("state" in str(a.get("Name", "")) for a in accumulables):
                        continue
                    stateful.add(stage)
                    slowest[stage] = max(slowest[stage], float((event.get("Task Metrics") or {}).get("Executor Run Time", 0)))
                    for a in accumulables:
                        if a["ID"] in load_metric:
                            loads[stage][load_metric[a["ID"]]] += float(a.get("Update") or 0)
    result: dict[int, list[tuple[int, float, dict[str, float]]]] = defaultdict(list)
    for stage in sorted(stateful):
        if stage in batch_of_stage:
            batch = batch_of_stage[stage]
            result[batch].append((len(result[batch]), slowest[stage], dict(loads[stage])))
    return result


def slowest_excess(times: dict[int, list[tuple[int, float, dict[str, float]]]], order: int) -> tuple[float, float] | None:
    """A stage's slowest task run (ms) in the run's first batch, and the median of it over the run's later batches."""
    if not times:
        return None
    first, later = min(times), sorted(times)[1:]
    run_ms = next((t[1] for t in times[first] if t[0] == order), None)
    steady = [t[1] for b in later for t in times[b] if t[0] == order]
    return None if run_ms is None or not steady else (run_ms, statistics.median(steady))


def task_table(recording: str) -> str:
    """The restart batch's stateful stages against the median of the same stage in run 2's later batches.

    The last columns are the truth the ``task_times`` restore is compared with (the slowest task's extra run
    time in the restart batch) and the same figure for run 1's first batch, a new process with no state to
    restore: what a new JVM's warm-up alone costs the stage."""
    eventlog = os.path.join(recording, "run2", "eventlog")
    if not os.path.isdir(eventlog):
        return ""
    times = stage_times(eventlog)
    if not times:
        return ""
    before_log = os.path.join(recording, "run1", "eventlog")
    before = stage_times(before_log) if os.path.isdir(before_log) else {}
    first, later = min(times), sorted(times)[1:]
    rows = [
        "",
        "| stateful stage | nodes (load ms summed over tasks: restart batch / later median) | slowest task run ms: restart batch / later median "
        "| extra run time of the slowest task (truth) | run 1's first batch (no state): slowest / later median |",
        "|---|---|---|---|---|",
    ]
    for order, run_ms, loads in times[first]:
        steady = [t for b in later for t in times[b] if t[0] == order]
        nodes = (
            "; ".join(
                f"{node} {ms:g} / {statistics.median(s[2].get(node, 0) for s in steady) if steady else 'n/a'}"
                for node, ms in sorted(loads.items())
            )
            or "no load metrics"
        )
        steady_run = f"{statistics.median(s[1] for s in steady):g}" if steady else "n/a"
        truth = f"{(run_ms - statistics.median(s[1] for s in steady)) / 1000.0:.3f} s" if steady else "n/a"
        warm = slowest_excess(before, order)
        warm_text = f"{warm[0]:g} / {warm[1]:g}" if warm else "n/a"
        rows.append(f"| {order} | {nodes} | {run_ms:g} / {steady_run} | {truth} | {warm_text} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    for recording in sys.argv[1:]:
        print(table(recording) + task_table(recording))
    return 0


if __name__ == "__main__":
    sys.exit(main())
