"""The work a restart would do per store, and the estimate of how long it takes.

For each partition and store: the newest snapshot at or below the version to restore, and the delta or
changelog files to replay after it, in files and bytes. The estimate sums a per-store cost over the
stores (as Spark's summed load metrics do) and names the slowest partition and its skew; its rates are
documented defaults or, with a history, the per-store restore time this query measured. The history is
read with the standard library (``sqlite3``), so ``inspect --history`` works on a plain install.
"""

from __future__ import annotations

import os
import statistics
from contextlib import closing

from spark_state_observer.model import checkpoint_work
from spark_state_observer.model.bounded import loads, stored_json
from spark_state_observer.model.signal_kinds import RESTORE
from spark_state_observer.offline.checkpoint.changelog_lineage import NoLineage, changelog_lineage
from spark_state_observer.offline.checkpoint.files import UnreadableFile, zip_member
from spark_state_observer.offline.checkpoint.report import CheckpointReport, PartitionState, RestoreEstimate, RestoreWork, StateFile

# Defaults for the restore-time estimate: the rates the live ETA starts from (``spark_state_observer.model.checkpoint_work``
# says where they come from); replaced by rates observed in the history when it holds restores of the same query.
DEFAULT_SECONDS_PER_STORE = checkpoint_work.SECONDS_PER_STORE  # opening a store: provider, RocksDB instance, first file fetch
DEFAULT_SECONDS_PER_FILE = checkpoint_work.SECONDS_PER_FILE  # opening one delta/changelog file
DEFAULT_REPLAY_BYTES_PER_SECOND = checkpoint_work.REPLAY_BYTES_PER_SECOND  # replaying its records (compressed bytes)
DEFAULT_BYTES_PER_SECOND = checkpoint_work.SNAPSHOT_BYTES_PER_SECOND  # copying snapshot and SST bytes from the checkpoint


def restore_work(folder: str, p: PartitionState, target: int, problems: list[str], lineage: dict[int, str] | None = None) -> RestoreWork:
    """The files a restart at ``target`` would load: newest snapshot at or below it, then the rest.

    With checkpoint format v2 several unique ids may share a version (a retried batch leaves an orphan):
    ``lineage`` (version -> the unique id the commit log names) picks the one that counts; for the versions
    it does not name, the lineage the target's changelog starts with (``changelog_lineage``) does; a version
    neither names takes the largest file. Where the two disagree the report says so (Spark fails such a load
    with ``STATE_STORE_BASE_CHECKPOINT_ID_MISMATCH``)."""
    snapshot_kind, replay_kind = ("zip", "changelog") if p.provider == "rocksdb" else ("snapshot", "delta")
    lineage = lineage or {}
    by_version = _pick(p.files, lineage)
    head = by_version.get((target, replay_kind))
    if replay_kind == "changelog" and head is not None and head.unique_id is not None:
        named = _changelog_lineage(os.path.join(folder, f"{head.version}_{head.unique_id}.changelog"), problems)
        disagree = sorted(v for v, uid in named.items() if v in lineage and lineage[v] != uid)
        if disagree:
            problems.append(
                f"{folder}: the changelog of version {target} builds on other files than the commit log names for "
                f"version(s) {', '.join(map(str, disagree[:5]))}"
            )
        if any(v not in lineage for v in named):
            by_version = _pick(p.files, {**named, **lineage})
    snapshot_versions = [v for (v, k) in by_version if k == snapshot_kind and v <= target]
    start = max(snapshot_versions) if snapshot_versions else None
    snapshot_bytes = 0
    if start is not None:
        snap = by_version[(start, snapshot_kind)]
        snapshot_bytes = snap.size
        if snapshot_kind == "zip":
            snapshot_bytes += _zip_sst_bytes(folder, snap, problems)
    has_replay_files = any(k == replay_kind for (_, k) in by_version)
    # the files there are, counted against the versions there should be: never a loop over versions,
    # which a commit named 1000000000000 would make endless
    replay = [f for (v, k), f in by_version.items() if k == replay_kind and (start or 0) < v <= target]
    replay_files, replay_bytes = len(replay), sum(f.size for f in replay)
    missing = target - (start or 0) - replay_files if has_replay_files else 0
    if missing:
        problems.append(
            f"{folder}: {missing} {replay_kind} file(s) between version {(start or 0) + 1} and {target} are missing "
            "(cleaned up, or the restore will fail)"
        )
    return RestoreWork(target, start, snapshot_bytes, replay_files, replay_bytes, missing)


def _pick(files: list[StateFile], lineage: dict[int, str]) -> dict[tuple[int, str], StateFile]:
    """The file that counts for each (version, kind)."""
    by_version: dict[tuple[int, str], StateFile] = {}
    for f in files:
        key = (f.version, f.kind)
        if key not in by_version or _rank(f, lineage) > _rank(by_version[key], lineage):
            by_version[key] = f
    return by_version


def _changelog_lineage(path: str, problems: list[str]) -> dict[int, str]:
    """The lineage a v2 changelog names; a header that cannot be read is a problem line, no lineage none."""
    try:
        return changelog_lineage(path)
    except NoLineage as exc:
        if "carries no lineage" not in str(exc):
            problems.append(str(exc))
    except UnreadableFile as exc:
        problems.append(str(exc))
    return {}


def _rank(f: StateFile, lineage: dict[int, str]) -> tuple[bool, int]:
    """The file the commit log names for its version first, then the larger."""
    return (f.unique_id is not None and lineage.get(f.version) == f.unique_id, f.size)


def _zip_sst_bytes(folder: str, snap: StateFile, problems: list[str]) -> int:
    """The SST bytes a RocksDB snapshot's ``metadata`` lists; only that member is read, bounded."""
    name = f"{snap.version}_{snap.unique_id}.zip" if snap.unique_id else f"{snap.version}.zip"
    path = os.path.join(folder, name)
    try:
        text = zip_member(path, "metadata").decode("utf-8", errors="replace")
        meta = loads(text.split("\n", 1)[1])  # bounded: 16 MB of ``[{},{},...]`` is 5 million objects
        listed = meta.get("sstFiles", [])
        sizes = [n for f in listed if isinstance(f, dict) and type(n := f.get("sizeBytes", 0)) is int and 0 <= n < 2**63]
        if len(sizes) != len(listed):
            problems.append(f"{path}: {len(listed) - len(sizes)} SST file entries without a size; the snapshot's bytes are a lower bound")
        return sum(sizes)
    except UnreadableFile as exc:
        problems.append(f"snapshot unreadable: {exc}")
    except (ValueError, IndexError, AttributeError, TypeError, RecursionError) as exc:
        problems.append(f"{path}: snapshot metadata unreadable ({type(exc).__name__}: {str(exc)[:120]})")
    return 0


def store_seconds(report: CheckpointReport, rates: dict[str, float] | None = None) -> dict[tuple[int, int, str], float]:
    """Per store instance (operator, partition, store): the seconds its restore would take at ``rates``.

    The one per-store figure the estimate sums and the placement advice shares out, so the two agree."""
    r = {
        "seconds_per_store": DEFAULT_SECONDS_PER_STORE,
        "seconds_per_file": DEFAULT_SECONDS_PER_FILE,
        "replay_bytes_per_second": DEFAULT_REPLAY_BYTES_PER_SECOND,
        "bytes_per_second": DEFAULT_BYTES_PER_SECOND,
        **(rates or {}),
    }

    def seconds(w: RestoreWork) -> float:
        """A changelog's bytes are records to decode and put (slow), a snapshot's are copied (fast)."""
        return (
            r["seconds_per_store"]
            + w.replay_files * r["seconds_per_file"]
            + w.replay_bytes / r["replay_bytes_per_second"]
            + w.snapshot_bytes / r["bytes_per_second"]
        )

    return {(op.operator_id, p.partition, p.store): seconds(p.restore) for op in report.operators for p in op.partitions if p.restore}


def estimate_restore(report: CheckpointReport, rates: dict[str, float] | None = None) -> RestoreEstimate | None:
    """Restore time summed over stores (what Spark's summed load metrics report), plus the skew."""
    works = [p.restore for op in report.operators for p in op.partitions if p.restore]
    if not works:
        return None
    per_partition = {f"{op}/{partition}/{store}": s for (op, partition, store), s in store_seconds(report, rates).items()}
    slowest = max(per_partition, key=lambda name: per_partition[name])
    median = statistics.median(per_partition.values())
    return RestoreEstimate(
        stores=len(works),
        files=sum(w.replay_files + (1 if w.snapshot_version is not None else 0) for w in works),
        bytes=sum(w.bytes for w in works),
        seconds=sum(per_partition.values()),
        basis="history" if rates else "defaults",
        slowest_partition=slowest,
        skew=per_partition[slowest] / median if median > 0 else None,
        measured_restores=int((rates or {}).get("restores", 0)),
    )


def _number(value: object) -> float:
    """A stored attribute as a finite number; -1 when it is none."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf"):
        return float(value)
    return -1.0


def rates_from_history(history_path: str, query_id: str) -> dict[str, float] | None:
    """Per-store restore cost observed in the history (restores measured by Spark's load metrics).

    Raises ``HistoryError`` when the history cannot be read.
    """
    from spark_state_observer.history.backend import open_backend

    with closing(open_backend(history_path, readonly=True)) as backend:
        _, rows = backend.rows("SELECT attributes FROM events WHERE query_id = ? AND kind = ?", (query_id, RESTORE))
    loads = [
        a
        for a in (stored_json(text, None) for (text,) in rows)  # a row that is not an observer's is skipped
        if isinstance(a, dict)
        and a.get("method") == "load_metrics"
        and _number(a.get("stores")) > 0
        and _number(a.get("duration_seconds")) >= 0
    ]
    if not loads:
        return None
    # ``restores``: how many measured it, for the pages that say which estimate they show
    return {"seconds_per_store": statistics.median(a["duration_seconds"] / a["stores"] for a in loads), "restores": float(len(loads))}
