"""Print what Spark reported about state loading around a restart, as a markdown table.

    python scripts/restore_metrics.py tests/fixtures/incidents/dedup_agg_restart_43 [...]

For each recording made by ``record_incidents.py`` (two runs on one checkpoint) and each state operator:
the load metrics on the first batch after the restart, against steady state (the median over the first
run's batches from its third on), and the batch's ``addBatch``. This is how docs/findings/restore-metrics.md
was measured; it reads only progress JSON, so it works for every Spark version.
"""

from __future__ import annotations

import json
import os
import statistics
import sys

LOAD_METRICS = ("rocksdbLoadLatencyMs", "rocksdbReplayChangeLogLatencyMs", "rocksdbNumReplayChangelogFiles",
                "rocksdbNumLoadedFromDfs", "rocksdbLoadFromSnapshotLatencyMs")


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
    rows = [f"### {os.path.basename(recording)} (Spark {truth['spark_version']}, downtime {truth['restarts'][0]['downtime_seconds']:.0f} s)",
            "",
            (f"First batch after restart: batch {first['batchId']}, addBatch {first['durationMs'].get('addBatch')} ms, "
             f"triggerExecution {first['durationMs'].get('triggerExecution')} ms, {first.get('numInputRows')} input rows; "
             f"steady addBatch (median of run 1, batch 3 on) {statistics.median(b['durationMs'].get('addBatch', 0) for b in steady):g} ms."),
            "",
            "| operator | metric | first batch after restart | steady state (median, min-max) |",
            "|---|---|---|---|"]
    for index, op in enumerate(first.get("stateOperators") or []):
        for name in LOAD_METRICS:
            values = [v for b in steady if (v := operator_metric(b, index, name)) is not None]
            steady_text = f"{statistics.median(values):g} ({min(values):g}-{max(values):g})" if values else "absent"
            rows.append(f"| {op['operatorName']} | {name} | {fmt(operator_metric(first, index, name))} | {steady_text} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    for recording in sys.argv[1:]:
        print(table(recording))
    return 0


if __name__ == "__main__":
    sys.exit(main())
