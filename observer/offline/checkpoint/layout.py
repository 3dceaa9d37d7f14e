"""The checkpoint's layout, read from the filesystem: offsets against commits, sources, operators, stores.

The layout is ``../shared/spark-state-metrics.md`` section 6: ``offsets/`` and ``commits/`` per batch,
``state/<operator>/<partition>[/<store>]`` with HDFS ``N.delta``/``N.snapshot`` or RocksDB
``N.zip``/``N.changelog`` (and ``SSTs/``, checkpoint format v2 ids). Local paths only; reading never
writes or locks anything, so it is safe on a running query's checkpoint.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import urlparse

from observer.model.fields import OPERATOR_NAME
from observer.offline.checkpoint.report import CheckpointError, CheckpointReport, OperatorState, PartitionState, StateFile
from observer.offline.checkpoint.restore import restore_work

_STATE_FILE = re.compile(r"^(?P<version>\d+)(?:_(?P<uid>[0-9a-f-]{36}))?\.(?P<kind>delta|snapshot|zip|changelog)$")


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


def scan(path: str) -> CheckpointReport:
    """Read the checkpoint at ``path``, with each partition's restore work but no estimate yet."""
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
    return CheckpointReport(
        path=path, query_id=query_id, last_planned_batch=planned, last_committed_batch=committed,
        uncommitted_batch=planned if planned is not None and (committed is None or planned > committed) else None,
        batch_watermark_ms=watermark, batch_timestamp_ms=timestamp, provider=provider, shuffle_partitions=partitions,
        sources=sources, operators=operators, estimate=None, problems=problems,
    )


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
                name = meta["operatorInfo"][OPERATOR_NAME]
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
        p.restore = restore_work(folder, p, committed + 1, problems)
    return p


