"""A query's effective state configuration, as far as its own reports tell it.

The history keeps no Spark configuration, but Spark's progress reports betray much of it: the store
provider by its metric names, changelog checkpointing by which commit phase takes the time (RocksDB
writes a changelog file, or a checkpoint and its zip, on every commit), snapshot uploads by the
``SnapshotLastUploaded`` metrics, the partitions by ``numShufflePartitions``. What the reports do not
carry (the trigger, snapshot intervals) is said to be unknown rather than guessed; what is observed
instead (the interval between batch starts) is labelled as observed.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

import pandas as pd

from spark_state_observer.browser import fmt

UNKNOWN = "unknown"
PROVIDERS = {"rocksdb": "RocksDB (RocksDBStateStoreProvider)", "hdfs": "HDFS-backed (HDFSBackedStateStoreProvider)"}
SNAPSHOT_PREFIX = "SnapshotLastUploaded"


def _ops(progress: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for p in progress for op in (p.get("stateOperators") or []) if isinstance(op, dict)]


def _custom(op: dict[str, Any]) -> dict[str, Any]:
    custom = op.get("customMetrics")
    return custom if isinstance(custom, dict) else {}


def _positive(ops: list[dict[str, Any]], metric: str) -> bool:
    return any(isinstance(_custom(op).get(metric), (int, float)) and _custom(op)[metric] > 0 for op in ops)


def provider(ops: list[dict[str, Any]]) -> str | None:
    """rocksdb, hdfs or None, by the operators' metric names (``OperatorProgress.provider``'s rule)."""
    names = {k for op in ops for k in _custom(op)}
    if any(k.startswith("rocksdb") for k in names):
        return "rocksdb"
    if names & {"loadedMapCacheMissCount", "stateOnCurrentVersionSizeBytes"}:
        return "hdfs"
    return None


def changelog(ops: list[dict[str, Any]], store: str | None) -> tuple[str, str]:
    """(value, evidence) of changelog checkpointing: only RocksDB has it."""
    if store == "hdfs":
        return "not applicable", "the HDFS-backed store always writes delta files"
    if store != "rocksdb":
        return UNKNOWN, "no RocksDB metrics in the progress"
    if _positive(ops, "rocksdbChangeLogWriterCommitLatencyMs"):
        return "on", "commits write a changelog file (rocksdbChangeLogWriterCommitLatencyMs > 0)"
    if _positive(ops, "rocksdbCommitCheckpointLatency") or _positive(ops, "rocksdbSaveZipFilesLatencyMs"):
        return "off", "commits write a checkpoint and upload it (rocksdbCommitCheckpointLatency > 0)"
    return UNKNOWN, "no commit in the progress took measurable time"


def snapshots(newest: dict[str, Any]) -> tuple[str, str]:
    """(value, evidence) of snapshot uploads in the newest batch: the versions last uploaded per instance."""
    uploaded = [
        float(v)
        for op in newest.get("stateOperators") or []
        for k, v in _custom(op).items()
        if k.startswith(SNAPSHOT_PREFIX) and isinstance(v, (int, float))
    ]
    if not uploaded:
        return UNKNOWN, "Spark reports snapshot uploads (SnapshotLastUploaded) with 4.1 and later only"
    never = sum(1 for v in uploaded if v < 0)
    done = [v for v in uploaded if v >= 0]
    text = f"{fmt.plural(len(uploaded), 'store instance')} report uploads"
    if done:
        text += f"; last uploaded versions {fmt.number(min(done))}-{fmt.number(max(done))}"
    if never:
        text += f"; {never} never uploaded one"
    return text, f"batch {newest.get('batchId')}: SnapshotLastUploaded per instance (minDeltasForSnapshot itself is not reported)"


def _number(ops: list[dict[str, Any]], key: str) -> float | None:
    values = [v for op in ops if isinstance(v := op.get(key), (int, float))]
    return max(values) if values else None


def interval(progress: Sequence[dict[str, Any]]) -> float | None:
    """Median seconds between consecutive batch starts of the run."""
    times = sorted(pd.Timestamp(p["timestamp"]).timestamp() for p in progress if p.get("timestamp"))
    steps = [b - a for a, b in zip(times, times[1:]) if b > a]
    return statistics.median(steps) if steps else None


def effective_config(progress: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per setting (``setting``, ``value``, ``from``) for the newest run in ``progress`` (oldest
    first): provider, changelog checkpointing, snapshots, shuffle partitions, state store instances, the
    trigger, the observed batch interval, sources and sink."""
    if not progress:
        return pd.DataFrame(columns=["setting", "value", "from"])
    run = progress[-1].get("runId")
    mine = [p for p in progress if p.get("runId") == run]
    newest = mine[-1]
    ops = _ops(mine)
    store = provider(ops)
    latest_ops = _ops([newest])
    partitions = _number(latest_ops, "numShufflePartitions")
    instances = sum(
        op.get("numStateStoreInstances") or 0 for op in latest_ops if isinstance(op.get("numStateStoreInstances"), (int, float))
    )
    step = interval(mine)
    seen = f"newest run {fmt.short_id(run)}, {fmt.plural(len(mine), 'batch', 'batches')}"
    rows = [
        (
            "state store provider",
            PROVIDERS.get(store or "", UNKNOWN),
            f"metric names in the progress ({seen})" if store else "no state metrics",
        ),
        ("changelog checkpointing", *changelog(ops, store)),
        ("snapshots", *snapshots(newest)),
        (
            "shuffle (state) partitions",
            fmt.number(partitions) if partitions is not None else UNKNOWN,
            "numShufflePartitions" if partitions is not None else "no stateful operator reports it",
        ),
        (
            "state store instances",
            fmt.number(instances) if latest_ops else UNKNOWN,
            f"numStateStoreInstances over {fmt.plural(len(latest_ops), 'operator')}" if latest_ops else "no stateful operator",
        ),
        ("trigger", UNKNOWN, "Spark's progress does not carry the trigger"),
        ("observed batch interval", fmt.duration(step) if step is not None else UNKNOWN, f"median between batch starts ({seen})"),
        ("sources", "; ".join(str(s.get("description")) for s in newest.get("sources") or []) or UNKNOWN, "the progress"),
        ("sink", str((newest.get("sink") or {}).get("description") or UNKNOWN), "the progress"),
    ]
    return pd.DataFrame(rows, columns=["setting", "value", "from"])
