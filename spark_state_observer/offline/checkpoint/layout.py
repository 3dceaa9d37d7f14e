"""The checkpoint's layout, read from the filesystem: offsets against commits, sources, operators, stores.

The layout is ``../shared/spark-state-metrics.md`` section 6: ``offsets/`` and ``commits/`` per batch,
``state/<operator>/<partition>[/<store>]`` with HDFS ``N.delta``/``N.snapshot`` or RocksDB
``N.zip``/``N.changelog`` (and ``SSTs/``, checkpoint format v2 ids). Local paths only; reading never
writes or locks anything, so it is safe on a running query's checkpoint. Nothing in the folder is trusted
(``spark_state_observer.offline.checkpoint.files``): whatever cannot be read or makes no sense becomes a problem line of
the report, and the rest of the checkpoint is still read.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlparse

from spark_state_observer.model.bounded import loads
from spark_state_observer.model.fields import OPERATOR_NAME
from spark_state_observer.offline.checkpoint.files import UnreadableFile, is_dir, list_dir, read_text, regular_size
from spark_state_observer.offline.checkpoint.report import CheckpointError, CheckpointReport, OperatorState, PartitionState, StateFile
from spark_state_observer.offline.checkpoint.restore import restore_work

_STATE_FILE = re.compile(r"^(?P<version>[0-9]{1,18})(?:_(?P<uid>[0-9a-f-]{36}))?\.(?P<kind>delta|snapshot|zip|changelog)$")
_NUMBER = re.compile(r"[0-9]{1,18}")  # batch ids, operator ids, partitions: longs, ASCII digits only
_PROBLEMS = (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError)
"""What malformed JSON content raises when read as the structure Spark writes."""


def local_path(path: str) -> str:
    parsed = urlparse(path)
    if parsed.scheme not in ("", "file"):
        raise CheckpointError(f"{path}: only local checkpoints can be inspected without Spark (scheme {parsed.scheme!r})")
    return parsed.path if parsed.scheme else path


def _numbered(folder: str, problems: list[str]) -> list[str]:
    """The names of ``folder`` that are numbers (batch ids, operator ids, partitions), by value."""
    try:
        names = list_dir(folder)
    except UnreadableFile as exc:
        problems.append(str(exc))
        return []
    return sorted((n for n in names if _NUMBER.fullmatch(n)), key=int)


def _batch_files(folder: str, problems: list[str]) -> list[int]:
    """The batch ids of a log folder, by listing it (never by counting up to the largest)."""
    return [int(n) for n in _numbered(folder, problems)] if is_dir(folder) else []


def _read_log_entry(path: str) -> list[str]:
    return read_text(path).splitlines()


def _message(exc: BaseException) -> str:
    return exc.args[0] if isinstance(exc, UnreadableFile) and exc.args else f"{type(exc).__name__}: {str(exc)[:200]}"


def scan(path: str) -> CheckpointReport:
    """Read the checkpoint at ``path``, with each partition's restore work but no estimate yet."""
    root = local_path(path)
    if not is_dir(root):
        raise CheckpointError(f"{path}: no such directory")
    has = {n: os.path.lexists(os.path.join(root, n)) for n in ("metadata", "offsets", "commits", "state")}
    if not has["offsets"] and not has["metadata"]:
        raise CheckpointError(f"{path}: not a streaming checkpoint (no 'metadata' file and no 'offsets' folder)")
    problems: list[str] = []
    query_id = None
    if has["metadata"]:
        try:
            meta = loads(read_text(os.path.join(root, "metadata")).split("\n", 1)[0], MAX_ENTRY_ITEMS)
            query_id = meta.get("id") if isinstance(meta, dict) and isinstance(meta.get("id"), str) else None
            if query_id is None:
                problems.append("metadata names no query id")
        except _PROBLEMS as exc:
            problems.append(f"metadata unreadable: {_message(exc)}")
    for folder in ("offsets", "commits", "state"):
        if has[folder] and not is_dir(os.path.join(root, folder)):
            problems.append(f"{folder}: not a folder (a file, a dangling symlink or a loop); ignored")
    offsets = _batch_files(os.path.join(root, "offsets"), problems)
    commits = _batch_files(os.path.join(root, "commits"), problems)
    planned = offsets[-1] if offsets else None
    committed = commits[-1] if commits else None
    watermark = timestamp = provider = partitions = None
    sources: list[str] = []
    if planned is not None:
        try:
            lines = _read_log_entry(os.path.join(root, "offsets", str(planned)))
            meta = loads(lines[1], MAX_ENTRY_ITEMS)
            watermark, timestamp = _long(meta.get("batchWatermarkMs")), _long(meta.get("batchTimestampMs"))
            conf = meta.get("conf") or {}
            provider_class = conf.get("spark.sql.streaming.stateStore.providerClass", "")
            provider_class = provider_class if isinstance(provider_class, str) else ""
            provider = (
                "rocksdb" if "RocksDB" in provider_class else "hdfs" if "HDFSBacked" in provider_class else provider_class[:200] or None
            )
            partitions = _long(int(conf["spark.sql.shuffle.partitions"])) if "spark.sql.shuffle.partitions" in conf else None
            sources = lines[2:][:1000]
        except _PROBLEMS as exc:
            problems.append(f"offsets/{planned} is partially written or unreadable: {_message(exc)}")
    format_version, lineage = _commit_lineage(os.path.join(root, "commits"), commits, problems)
    operators = _operators(root, committed, problems, lineage)
    return CheckpointReport(
        path=path,
        query_id=query_id,
        last_planned_batch=planned,
        last_committed_batch=committed,
        uncommitted_batch=planned if planned is not None and (committed is None or planned > committed) else None,
        batch_watermark_ms=watermark,
        batch_timestamp_ms=timestamp,
        provider=provider,
        shuffle_partitions=partitions,
        sources=sources,
        operators=operators,
        estimate=None,
        problems=problems,
        checkpoint_format_version=format_version,
    )


def _long(value: Any) -> int | None:
    """An integer a Spark long can hold, else None."""
    return value if type(value) is int and -(2**63) <= value < 2**63 else None


MAX_COMMITS_READ = 1000  # commit log entries read for the lineage (Spark keeps minBatchesToRetain, 100)
# JSON items of one log entry (metadata, offsets, a commit): a v2 commit names a unique id per store, ~2 items each,
# so 200,000 holds 8 operators x 5,000 partitions x 2 stores; a 4 MB ``[{},{},...]`` (1.4 million) is refused
MAX_ENTRY_ITEMS = 200_000
MAX_COMMIT_BYTES = 64 << 20  # commit log bytes read in all, newest first: twelve 4 MB entries held 1.25 GB once parsed
MAX_LINEAGE_IDS = 1_000_000  # (store, version) unique ids kept from the commit log, ~100 bytes each
Lineage = dict[tuple[int, int, int], dict[int, str]]
"""(operator id, partition, store index) -> state version -> the unique id the commit log names (format v2)."""


def format_version(path: str) -> int | None:
    """The checkpoint format version of a local checkpoint (its newest commit's first line); None when the
    checkpoint is remote or has no readable commit."""
    try:
        root = local_path(path)
    except CheckpointError:
        return None
    problems: list[str] = []
    commits = _batch_files(os.path.join(root, "commits"), problems)
    return _commit_lineage(os.path.join(root, "commits"), commits[-1:], problems)[0] if commits else None


def _commit_lineage(folder: str, commits: list[int], problems: list[str]) -> tuple[int | None, Lineage]:
    """The checkpoint format version (the commit log's first line, ``v1`` or ``v2``) and, for v2, the
    unique id each committed batch gave every store: batch ``b`` wrote version ``b + 1``."""
    lineage: Lineage = {}
    version = None
    budget, kept = MAX_COMMIT_BYTES, 0
    for batch in reversed(commits[-MAX_COMMITS_READ:]):  # newest first: the budgets leave out the oldest
        path = os.path.join(folder, str(batch))
        try:
            budget -= regular_size(path)
            if budget < 0:
                problems.append(f"commits: more than {MAX_COMMIT_BYTES >> 20} MB; entries up to commits/{batch} not read")
                break
            lines = _read_log_entry(path)
            head = lines[0].strip() if lines else ""
            if version is None and head in ("v1", "v2"):
                version = int(head[1])
            if head != "v2" or len(lines) < 2:
                continue
            ids = loads(lines[1], MAX_ENTRY_ITEMS).get("stateUniqueIds") or {}
            for op, partitions in list(ids.items())[:1000]:
                for part, stores in enumerate(partitions[:100_000]):
                    for index, uid in enumerate(stores[:16]):
                        if isinstance(uid, str) and _NUMBER.fullmatch(op):
                            lineage.setdefault((int(op), part, index), {})[batch + 1] = uid[:64]
                            kept += 1
            if kept > MAX_LINEAGE_IDS:
                problems.append(f"commits: more than {MAX_LINEAGE_IDS:,} store versions named; entries before commits/{batch} not read")
                break
        except _PROBLEMS as exc:
            problems.append(f"commits/{batch} unreadable: {_message(exc)}")
    return version, lineage


def _operators(root: str, committed: int | None, problems: list[str], lineage: Lineage | None = None) -> list[OperatorState]:
    state_root = os.path.join(root, "state")
    if not is_dir(state_root):
        return []
    out = []
    for op_dir in _numbered(state_root, problems):
        try:
            out.append(_operator(os.path.join(state_root, op_dir), int(op_dir), committed, problems, lineage or {}))
        except Exception as exc:  # whatever one operator's folder holds, the others are still read
            problems.append(f"state/{op_dir}: unreadable ({_message(exc)})")
    return out


def _operator(op_path: str, op_id: int, committed: int | None, problems: list[str], lineage: Lineage) -> OperatorState:
    name, stores, num_partitions = None, [], None
    meta_file = os.path.join(op_path, "_metadata", "metadata")
    if os.path.lexists(meta_file):
        try:
            meta = loads(_read_log_entry(meta_file)[1], MAX_ENTRY_ITEMS)
            raw_name = meta["operatorInfo"][OPERATOR_NAME]
            name = raw_name[:100] if isinstance(raw_name, str) else None
            raw_infos = meta.get("stateStoreInfo", [])[:1000]
            infos = [s for s in raw_infos if isinstance(s, dict)]
            stores = [s["storeName"][:100] for s in infos if isinstance(s.get("storeName"), str)]
            if name is None or len(stores) != len(raw_infos):
                problems.append(f"state/{op_id}/_metadata/metadata: operator name or store names are not strings")
            num_partitions = max((n for s in infos if (n := _long(s.get("numPartitions"))) is not None), default=None)
        except _PROBLEMS as exc:
            problems.append(f"state/{op_id}/_metadata/metadata unreadable: {_message(exc)}")
    op = OperatorState(op_id, name, stores, num_partitions)
    for part in _numbered(op_path, problems):
        part_path = os.path.join(op_path, part)
        try:
            names = list_dir(part_path)
        except UnreadableFile as exc:
            problems.append(str(exc))
            continue
        store_dirs = [
            n for n in names if not n.startswith("_") and n != "SSTs" and not _STATE_FILE.match(n) and is_dir(os.path.join(part_path, n))
        ]
        if store_dirs:  # multi-store operators (stream-stream join) keep one folder per store
            for store in sorted(store_dirs):
                index = op.stores.index(store) if store in op.stores else -1
                ids = lineage.get((op_id, int(part), index))
                op.partitions.append(_partition(os.path.join(part_path, store), int(part), store, committed, problems, None, ids))
        else:
            ids = lineage.get((op_id, int(part), 0))
            op.partitions.append(_partition(part_path, int(part), "default", committed, problems, names, ids))
    return op


def _partition(
    folder: str,
    partition: int,
    store: str,
    committed: int | None,
    problems: list[str],
    names: list[str] | None = None,
    lineage: dict[int, str] | None = None,
) -> PartitionState:
    files = []
    if names is None:
        try:
            names = list_dir(folder)
        except UnreadableFile as exc:
            problems.append(str(exc))
            names = []
    for name in names:
        m = _STATE_FILE.match(name)
        if m:
            try:
                size = regular_size(os.path.join(folder, name))
            except UnreadableFile as exc:
                problems.append(str(exc))
                continue
            files.append(StateFile(int(m["version"]), m["kind"], size, m["uid"]))
        elif name.endswith(".tmp") or (name.startswith(".") and not name.endswith(".crc")):
            problems.append(f"{os.path.join(folder, name)}: temporary or partially written file")
    files.sort(key=lambda f: (f.version, f.kind))
    kinds = {f.kind for f in files}
    provider = "rocksdb" if kinds & {"zip", "changelog"} else "hdfs" if kinds else "unknown"
    sst_dir = os.path.join(folder, "SSTs")
    ssts: list[int] = []
    if is_dir(sst_dir):
        try:
            for n in list_dir(sst_dir):
                try:
                    ssts.append(regular_size(os.path.join(sst_dir, n)))
                except UnreadableFile as exc:
                    problems.append(str(exc))
        except UnreadableFile as exc:
            problems.append(str(exc))
    snapshots = [f.version for f in files if f.kind in ("snapshot", "zip")]
    p = PartitionState(
        partition,
        store,
        provider,
        files,
        len(ssts),
        sum(ssts),
        max(snapshots) if snapshots else None,
        max((f.version for f in files), default=None),
    )
    if committed is not None and files:
        p.restore = restore_work(folder, p, committed + 1, problems, lineage)
    return p
