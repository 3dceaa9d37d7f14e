"""The commit history of a query, like Flink's checkpoint history: every batch commits its state, so
each batch is one row of figures (batch duration, state commit, RocksDB load and commit latencies,
state rows and memory), summed over the stateful operators; a summary gives min / avg / max over them,
and the history groups consecutive batches into windows with the same three figures each.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import pandas as pd

from spark_state_observer.browser import fmt

COMMIT_LATENCIES = (
    "rocksdbCommitWriteBatchLatency",
    "rocksdbCommitFlushLatency",
    "rocksdbCommitCompactLatency",
    "rocksdbCommitPauseLatency",
    "rocksdbCommitCheckpointLatency",
    "rocksdbCommitFileSyncLatencyMs",
)
# figure -> (label, unit): ms figures are shown as durations, bytes as sizes, rows as counts
FIGURES = {
    "batch_ms": ("batch duration", "ms"),
    "wal_commit_ms": ("offset log write (walCommit)", "ms"),
    "commit_offsets_ms": ("commit log write (commitOffsets)", "ms"),
    "state_commit_ms": ("state commit (commitTimeMs)", "ms"),
    "rocksdb_commit_ms": ("RocksDB commit latency", "ms"),
    "load_ms": ("RocksDB load latency", "ms"),
    "state_rows": ("state rows", "rows"),
    "state_memory": ("state memory", "bytes"),
}
WINDOWS = 20  # rows of the history table at most


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def per_batch(progress: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per batch (oldest first): its run, id, time and every FIGURES column (None when not reported)."""
    rows = []
    for p in progress:
        ops = [op for op in p.get("stateOperators") or [] if isinstance(op, dict)]
        custom: list[dict[str, Any]] = [c if isinstance(c := op.get("customMetrics"), dict) else {} for op in ops]
        durations: dict[str, Any] = d if isinstance(d := p.get("durationMs"), dict) else {}
        rows.append(
            {
                "run_id": p.get("runId"),
                "batch_id": p.get("batchId"),
                "ts": pd.Timestamp(p["timestamp"]).timestamp() if p.get("timestamp") else None,
                "batch_ms": _num(p.get("batchDuration")) or _num(durations.get("triggerExecution")),
                "wal_commit_ms": _num(durations.get("walCommit")),
                "commit_offsets_ms": _num(durations.get("commitOffsets")),
                "state_commit_ms": _sum([_num(op.get("commitTimeMs")) for op in ops]),
                "rocksdb_commit_ms": _sum([_num(c.get(m)) for c in custom for m in COMMIT_LATENCIES]),
                "load_ms": _sum([_num(c.get("rocksdbLoadLatencyMs")) for c in custom]),
                "state_rows": _sum([_num(op.get("numRowsTotal")) for op in ops]),
                "state_memory": _sum([_num(op.get("memoryUsedBytes")) for op in ops]),
            }
        )
    return pd.DataFrame(rows, columns=["run_id", "batch_id", "ts", *FIGURES])


def show(value: float | None, unit: str) -> str:
    if fmt.missing(value):
        return "-"
    if unit == "ms":
        return fmt.duration(float(value) / 1000.0)  # type: ignore[arg-type]
    if unit == "bytes":
        return fmt.size(value)
    return fmt.number(value)


def summary(batches: pd.DataFrame) -> pd.DataFrame:
    """min / avg / max / newest of every figure some batch reported (rows), over the batches given."""
    rows = []
    for column, (name, unit) in FIGURES.items():
        values = batches[column].dropna().astype(float) if column in batches else pd.Series(dtype=float)
        if values.empty:
            continue
        rows.append(
            {
                "figure": name,
                "min": show(values.min(), unit),
                "avg": show(values.mean(), unit),
                "max": show(values.max(), unit),
                "newest": show(values.iloc[-1], unit),
                "batches": len(values),
            }
        )
    return pd.DataFrame(rows, columns=["figure", "min", "avg", "max", "newest", "batches"])


def history(batches: pd.DataFrame, windows: int = WINDOWS) -> pd.DataFrame:
    """Newest window first: consecutive batches of one run in at most ``windows`` groups, each with its batch
    ids, start time and min / avg / max of the batch duration, state commit and RocksDB latencies, and its
    newest state rows and memory. One grouped aggregation, then text: it is on the drilldown's first paint."""
    if batches.empty:
        return pd.DataFrame()
    size = max(1, math.ceil(len(batches) / windows))
    run_change = (batches.run_id != batches.run_id.shift()).cumsum()
    window = run_change * (len(batches) + 1) + batches.groupby(run_change).cumcount() // size  # in time order
    latencies = ("batch_ms", "state_commit_ms", "rocksdb_commit_ms", "load_ms")
    grouped = batches.assign(_window=window.to_numpy()).groupby("_window", sort=True)
    stats = grouped[list(latencies)].agg(["min", "mean", "max"])
    stats.columns = [f"{column} {f}" for column, f in stats.columns]
    stats["size"] = grouped.size()
    stats[["state_rows", "state_memory"]] = grouped[["state_rows", "state_memory"]].last()  # the newest value reported
    heads, tails = grouped.head(1).set_index("_window"), grouped.tail(1).set_index("_window")
    stats[["first", "ts", "run_id"]] = heads[["batch_id", "ts", "run_id"]]
    stats["last"] = tails.batch_id
    rows = []
    for w in stats.iloc[::-1].to_dict("records"):  # plain values: cheaper to read one by one than the frame's cells
        row: dict[str, Any] = {
            "batches": f"{int(w['first']):,}-{int(w['last']):,}" if w["size"] > 1 else f"{int(w['first']):,}",
            "from": fmt.when(w["ts"]),
            "run": fmt.short_id(w["run_id"]),
        }
        for column in latencies:
            figures = [w[f"{column} {f}"] for f in ("min", "mean", "max")]
            row[f"{FIGURES[column][0]} min / avg / max"] = "-" if fmt.missing(figures[1]) else " / ".join(show(v, "ms") for v in figures)
        row["state rows"] = show(w["state_rows"], "rows")
        row["state memory"] = show(w["state_memory"], "bytes")
        rows.append(row)
    return pd.DataFrame(rows)
