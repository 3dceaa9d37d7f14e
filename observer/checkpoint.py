"""Checkpoint inspector: what a streaming checkpoint holds, and how much work a restore would be.

Kafka Streams users read their state directory to understand recovery; this is the same for a Spark
checkpoint (layout in ``../shared/spark-state-metrics.md`` section 6): offsets vs commits, operators and
their stores, the state files of both providers per partition, and for each partition the snapshot a
restart would load and the delta/changelog files it would replay after it. Local paths only; reading
never writes or locks anything, so it is safe on a running query's checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import zipfile
from dataclasses import asdict, dataclass, field
from urllib.parse import urlparse

_STATE_FILE = re.compile(r"^(?P<version>\d+)(?:_(?P<uid>[0-9a-f-]{36}))?\.(?P<kind>delta|snapshot|zip|changelog)$")

# Defaults for the restore-time estimate, from RocksDB load latencies measured on this project's 2-core
# machine (0.075 s per small store when idle, up to 0.75 s under load); replaced by rates observed in
# the history when it holds restores of the same query.
DEFAULT_SECONDS_PER_STORE = 0.15  # opening a store: provider, RocksDB instance, first file fetch
DEFAULT_SECONDS_PER_FILE = 0.01  # replaying one delta/changelog file of a small state
DEFAULT_BYTES_PER_SECOND = 100e6  # copying snapshot and SST bytes from the checkpoint


class CheckpointError(ValueError):
    """The path is not a readable streaming checkpoint; the message says what is missing."""


@dataclass
class StateFile:
    version: int
    kind: str  # delta, snapshot (HDFS) / zip, changelog (RocksDB)
    size: int
    unique_id: str | None = None


@dataclass
class RestoreWork:
    target_version: int
    snapshot_version: int | None
    snapshot_bytes: int
    replay_files: int
    replay_bytes: int
    missing_files: int = 0

    @property
    def bytes(self) -> int:
        return self.snapshot_bytes + self.replay_bytes


@dataclass
class PartitionState:
    partition: int
    store: str
    provider: str
    files: list[StateFile]
    sst_files: int = 0
    sst_bytes: int = 0
    newest_snapshot: int | None = None
    latest_version: int | None = None
    restore: RestoreWork | None = None


@dataclass
class OperatorState:
    operator_id: int
    name: str | None
    stores: list[str]
    num_partitions: int | None
    partitions: list[PartitionState] = field(default_factory=list)


@dataclass
class RestoreEstimate:
    stores: int
    files: int
    bytes: int
    seconds: float
    basis: str  # "history" or "defaults"
    slowest_partition: str | None
    skew: float | None  # slowest partition's work over the median partition's


@dataclass
class CheckpointReport:
    path: str
    query_id: str | None
    last_planned_batch: int | None
    last_committed_batch: int | None
    uncommitted_batch: int | None
    batch_watermark_ms: int | None
    batch_timestamp_ms: int | None
    provider: str | None
    shuffle_partitions: int | None
    sources: list[str]
    operators: list[OperatorState]
    estimate: RestoreEstimate | None
    problems: list[str]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)


def _local(path: str) -> str:
    parsed = urlparse(path)
    if parsed.scheme not in ("", "file"):
        raise CheckpointError(f"{path}: only local checkpoints can be inspected without Spark (scheme {parsed.scheme!r})")
    return parsed.path if parsed.scheme else path


def _batch_files(folder: str) -> list[int]:
    if not os.path.isdir(folder):
        return []
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit())


def _read_log_entry(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def inspect_checkpoint(path: str, rates: dict[str, float] | None = None) -> CheckpointReport:
    """Read the checkpoint at ``path``; ``rates`` (seconds_per_store, seconds_per_file,
    bytes_per_second) override the estimate's defaults, e.g. from ``rates_from_history``."""
    root = _local(path)
    if not os.path.isdir(root):
        raise CheckpointError(f"{path}: no such directory")
    has = {n: os.path.exists(os.path.join(root, n)) for n in ("metadata", "offsets", "commits", "state")}
    if not has["offsets"] and not has["metadata"]:
        raise CheckpointError(f"{path}: not a streaming checkpoint (no 'metadata' file and no 'offsets' folder)")
    problems: list[str] = []
    query_id = None
    if has["metadata"]:
        try:
            with open(os.path.join(root, "metadata")) as f:
                query_id = json.loads(f.read()).get("id")
        except (OSError, ValueError) as exc:
            problems.append(f"metadata unreadable: {exc}")
    offsets = _batch_files(os.path.join(root, "offsets"))
    commits = _batch_files(os.path.join(root, "commits"))
    planned = offsets[-1] if offsets else None
    committed = commits[-1] if commits else None
    watermark = timestamp = provider = partitions = None
    sources: list[str] = []
    if planned is not None:
        lines = _read_log_entry(os.path.join(root, "offsets", str(planned)))
        try:
            meta = json.loads(lines[1])
            watermark, timestamp = meta.get("batchWatermarkMs"), meta.get("batchTimestampMs")
            conf = meta.get("conf", {})
            provider_class = conf.get("spark.sql.streaming.stateStore.providerClass", "")
            provider = "rocksdb" if "RocksDB" in provider_class else "hdfs" if "HDFSBacked" in provider_class else provider_class or None
            partitions = int(conf["spark.sql.shuffle.partitions"]) if "spark.sql.shuffle.partitions" in conf else None
            sources = lines[2:]
        except (IndexError, ValueError) as exc:
            problems.append(f"offsets/{planned} is partially written or unreadable: {exc}")
    operators = _operators(root, committed, problems)
    report = CheckpointReport(
        path=path, query_id=query_id, last_planned_batch=planned, last_committed_batch=committed,
        uncommitted_batch=planned if planned is not None and (committed is None or planned > committed) else None,
        batch_watermark_ms=watermark, batch_timestamp_ms=timestamp, provider=provider, shuffle_partitions=partitions,
        sources=sources, operators=operators, estimate=None, problems=problems,
    )
    report.estimate = estimate_restore(report, rates)
    return report


def _operators(root: str, committed: int | None, problems: list[str]) -> list[OperatorState]:
    state_root = os.path.join(root, "state")
    if not os.path.isdir(state_root):
        return []
    out = []
    for op_dir in sorted((n for n in os.listdir(state_root) if n.isdigit()), key=int):
        op_path = os.path.join(state_root, op_dir)
        name, stores, num_partitions = None, [], None
        meta_file = os.path.join(op_path, "_metadata", "metadata")
        if os.path.exists(meta_file):
            try:
                meta = json.loads(_read_log_entry(meta_file)[1])
                name = meta["operatorInfo"]["operatorName"]
                stores = [s["storeName"] for s in meta.get("stateStoreInfo", [])]
                num_partitions = max((s.get("numPartitions", 0) for s in meta.get("stateStoreInfo", [])), default=None)
            except (IndexError, KeyError, ValueError) as exc:
                problems.append(f"state/{op_dir}/_metadata/metadata unreadable: {exc}")
        op = OperatorState(int(op_dir), name, stores, num_partitions)
        for part in sorted((n for n in os.listdir(op_path) if n.isdigit()), key=int):
            part_path = os.path.join(op_path, part)
            store_dirs = [n for n in os.listdir(part_path) if os.path.isdir(os.path.join(part_path, n))
                          and not n.startswith("_") and n != "SSTs"]
            if store_dirs:  # multi-store operators (stream-stream join) keep one folder per store
                for store in sorted(store_dirs):
                    op.partitions.append(_partition(os.path.join(part_path, store), int(part), store, committed, problems))
            else:
                op.partitions.append(_partition(part_path, int(part), "default", committed, problems))
        out.append(op)
    return out


def _partition(folder: str, partition: int, store: str, committed: int | None, problems: list[str]) -> PartitionState:
    files = []
    for name in os.listdir(folder):
        m = _STATE_FILE.match(name)
        if m:
            size = os.path.getsize(os.path.join(folder, name))
            files.append(StateFile(int(m["version"]), m["kind"], size, m["uid"]))
        elif name.endswith(".tmp") or (name.startswith(".") and not name.endswith(".crc")):
            problems.append(f"{os.path.join(folder, name)}: temporary or partially written file")
    files.sort(key=lambda f: (f.version, f.kind))
    kinds = {f.kind for f in files}
    provider = "rocksdb" if kinds & {"zip", "changelog"} else "hdfs" if kinds else "unknown"
    sst_dir = os.path.join(folder, "SSTs")
    ssts = [os.path.getsize(os.path.join(sst_dir, n)) for n in os.listdir(sst_dir)] if os.path.isdir(sst_dir) else []
    snapshots = [f.version for f in files if f.kind in ("snapshot", "zip")]
    p = PartitionState(partition, store, provider, files, len(ssts), sum(ssts),
                       max(snapshots) if snapshots else None, max((f.version for f in files), default=None))
    if committed is not None and files:
        p.restore = _restore_work(folder, p, committed + 1, problems)
    return p


def _restore_work(folder: str, p: PartitionState, target: int, problems: list[str]) -> RestoreWork:
    """The files a restart at ``target`` would load: newest snapshot at or below it, then the rest."""
    snapshot_kind, replay_kind = ("zip", "changelog") if p.provider == "rocksdb" else ("snapshot", "delta")
    by_version: dict[tuple[int, str], StateFile] = {}
    for f in p.files:  # with checkpoint format v2 several ids may share a version: take the largest
        key = (f.version, f.kind)
        if key not in by_version or f.size > by_version[key].size:
            by_version[key] = f
    snapshot_versions = [v for (v, k) in by_version if k == snapshot_kind and v <= target]
    start = max(snapshot_versions) if snapshot_versions else None
    snapshot_bytes = 0
    if start is not None:
        snap = by_version[(start, snapshot_kind)]
        snapshot_bytes = snap.size
        if snapshot_kind == "zip":
            snapshot_bytes += _zip_sst_bytes(folder, snap, problems)
    has_replay_files = any(k == replay_kind for (_, k) in by_version)
    replay_files = replay_bytes = missing = 0
    if has_replay_files:
        for version in range((start or 0) + 1, target + 1):
            f = by_version.get((version, replay_kind))
            if f is None:
                missing += 1
            else:
                replay_files += 1
                replay_bytes += f.size
    if missing:
        problems.append(f"{folder}: {missing} {replay_kind} file(s) between version {(start or 0) + 1} and {target} are missing "
                        "(cleaned up, or the restore will fail)")
    return RestoreWork(target, start, snapshot_bytes, replay_files, replay_bytes, missing)


def _zip_sst_bytes(folder: str, snap: StateFile, problems: list[str]) -> int:
    name = f"{snap.version}_{snap.unique_id}.zip" if snap.unique_id else f"{snap.version}.zip"
    try:
        with zipfile.ZipFile(os.path.join(folder, name)) as z:
            text = z.read("metadata").decode()
        meta = json.loads(text.split("\n", 1)[1])
        return int(sum(f.get("sizeBytes", 0) for f in meta.get("sstFiles", [])))
    except (OSError, KeyError, ValueError, IndexError, zipfile.BadZipFile) as exc:
        problems.append(f"{os.path.join(folder, name)}: snapshot unreadable ({exc})")
        return 0


def estimate_restore(report: CheckpointReport, rates: dict[str, float] | None = None) -> RestoreEstimate | None:
    """Restore time summed over stores (what Spark's summed load metrics report), plus the skew."""
    works = [(f"{op.operator_id}/{p.partition}/{p.store}", p.restore) for op in report.operators for p in op.partitions if p.restore]
    if not works:
        return None
    r = {"seconds_per_store": DEFAULT_SECONDS_PER_STORE, "seconds_per_file": DEFAULT_SECONDS_PER_FILE,
         "bytes_per_second": DEFAULT_BYTES_PER_SECOND, **(rates or {})}

    def seconds(w: RestoreWork) -> float:
        return r["seconds_per_store"] + w.replay_files * r["seconds_per_file"] + w.bytes / r["bytes_per_second"]

    per_partition = {name: seconds(w) for name, w in works}
    slowest = max(per_partition, key=per_partition.get)  # type: ignore[arg-type]
    median = statistics.median(per_partition.values())
    return RestoreEstimate(
        stores=len(works), files=sum(w.replay_files + (1 if w.snapshot_version is not None else 0) for _, w in works),
        bytes=sum(w.bytes for _, w in works), seconds=sum(per_partition.values()),
        basis="history" if rates else "defaults", slowest_partition=slowest,
        skew=per_partition[slowest] / median if median > 0 else None,
    )


def rates_from_history(history_path: str, query_id: str) -> dict[str, float] | None:
    """Per-store restore cost observed in the history (restores measured by Spark's load metrics)."""
    from observer.history.loaders import load_events

    events = load_events(history_path, query_id)
    loads = [a for a in events[events["kind"] == "restore"]["attributes"] if a.get("method") == "load_metrics" and a.get("stores")]
    if not loads:
        return None
    return {"seconds_per_store": statistics.median(a["duration_seconds"] / a["stores"] for a in loads)}


def render_text(report: CheckpointReport) -> str:
    """The report for a terminal."""
    lines = [f"checkpoint {report.path}", f"  query id: {report.query_id}",
             f"  last planned batch: {report.last_planned_batch}, last committed: {report.last_committed_batch}"
             + (f", batch {report.uncommitted_batch} planned but not committed" if report.uncommitted_batch is not None else ""),
             f"  provider: {report.provider}, shuffle partitions: {report.shuffle_partitions}"]
    for source in report.sources:
        lines.append(f"  source offset: {source[:120]}")
    for op in report.operators:
        lines.append(f"  operator {op.operator_id} {op.name or '?'} stores={','.join(op.stores) or '?'} partitions={op.num_partitions}")
        for p in op.partitions:
            w = p.restore
            restore = (f"restore: snapshot v{w.snapshot_version} ({w.snapshot_bytes} B) + {w.replay_files} files ({w.replay_bytes} B)"
                       if w else "restore: -")
            lines.append(f"    p{p.partition}/{p.store} {p.provider}: {len(p.files)} files, newest snapshot v{p.newest_snapshot}, "
                         f"latest v{p.latest_version}, {p.sst_files} SSTs ({p.sst_bytes} B); {restore}")
    e = report.estimate
    if e:
        lines.append(f"  restore estimate: {e.seconds:.2f} s over {e.stores} stores ({e.files} files, {e.bytes} B; rates from {e.basis}); "
                     f"slowest {e.slowest_partition}" + (f", skew {e.skew:.1f}x" if e.skew else ""))
    for problem in report.problems:
        lines.append(f"  problem: {problem}")
    return "\n".join(lines)

