"""The work one restoring batch will do, per stateful operator and partition, read from its checkpoint.

A restore's ETA has no rate before its first partition finishes, and for minutes on a large state nothing
finishes. The checkpoint already tells how much each store instance has to load: batch ``b`` loads state
version ``b`` (written by batch ``b - 1``), that is the newest snapshot at or below it plus every changelog
(RocksDB) or delta (HDFS) file after it. This module lists that work and prices it with the inspector's
rates (``spark_state_observer.offline.checkpoint.restore`` uses the same ones), so the live observer can start its ETA
from it (``spark_state_observer.placement.restore_progress``). It lives in the model, standard library only, because
every composition root (``attach``, ``watch``, ``replay``) builds the estimate hook and only the model is
below all of them.

Bounded, since it runs once per restore on the observer's worker thread (never Spark's): folder listings
plus one ``stat`` per file the restore loads, at most ``MAX_NAMES`` names listed, ``MAX_STATS`` files
stat'ed and ``MAX_SECONDS`` spent; past any of them there is no estimate (the ETA then waits for observed
finishes, as without a checkpoint) and the reason says which bound. Nothing is read but names and sizes:
a RocksDB snapshot is priced by its zip's size, not the SST files its metadata lists (reading them is the
inspector's job), so a snapshot-heavy restore is priced low; the observed rate corrects it as partitions end.

Rates. Per store instance: opening it (``SECONDS_PER_STORE``), per file replayed (``SECONDS_PER_FILE``:
opening and checking one changelog/delta file), per byte replayed (``REPLAY_BYTES_PER_SECOND``: a changelog
is decompressed and every record put into RocksDB or the HDFS map, so replay costs follow its records, which
its compressed bytes track) and per snapshot byte (``SNAPSHOT_BYTES_PER_SECOND``: copied and opened). They
come from the 4.3 recordings of ``scripts/record_restore.py`` on this project's 2-core machine under load
(docs/benchmarks.md, "Live restore ETA and delay"): a dedupe replaying 80 files of ~5.1 KB (1,000 records
each) spent 10.1 s per partition in ``rocksdbReplayChangeLogLatencyMs``; an aggregation's partition with
80 files of ~1.3 KB (250 records) took 4-6 s. Their absolute scale is this machine's; the ETA uses them as a
prior that the observed rate replaces as work finishes.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from spark_state_observer.model.checkpoint_listing import UnreadableFolder, is_dir, list_dir, local_root

SECONDS_PER_STORE = 0.15  # opening a store: provider, RocksDB instance, first file fetch
SECONDS_PER_FILE = 0.005  # opening, checking and closing one changelog or delta file
REPLAY_BYTES_PER_SECOND = 500e3  # compressed changelog bytes replayed per second (records decoded and put)
SNAPSHOT_BYTES_PER_SECOND = 100e6  # snapshot and SST bytes copied from the checkpoint and opened
MAX_NAMES = 200_000  # names listed under state/
MAX_STATS = 50_000  # files stat'ed (those the restore loads)
MAX_SECONDS = 2.0  # wall time spent listing and stat'ing
_STATE_FILE = re.compile(r"^(?P<version>[0-9]{1,18})(?:_[0-9a-f-]{36})?\.(?P<kind>delta|snapshot|zip|changelog)$")
_NUMBER = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class OperatorWork:
    """What one stateful operator's partitions load: the checkpoint's ``state/<operator_id>``."""

    operator_id: int  # the plan's stateful writers top down, as the progress' ``stateOperators`` index them
    seconds: dict[int, float]  # partition -> its stores' estimated load time on one core
    files: int  # snapshots and replayed files
    replay_bytes: int
    snapshot_bytes: int


@dataclass(frozen=True)
class ExpectedWork:
    """The expected load work of a restoring batch, per operator, and where it came from."""

    version: int  # the state version the batch loads (its batch id)
    operators: dict[int, OperatorWork]  # by operator id
    slots: int | None = None  # task slots (cores) the job runs on, where the caller knows them


class NoEstimate(Exception):
    """A bound was reached or a file to load is missing; the message says which."""


def expected_work(location: str, batch_id: int, slots: int | None = None) -> tuple[ExpectedWork | None, str | None]:
    """The work batch ``batch_id`` loads from the checkpoint at ``location``; (None, why) when it cannot be told
    (a remote checkpoint, no state folder, a bound reached, files missing)."""
    root = local_root(location)
    if root is None:
        return None, f"{location}: not a local checkpoint"
    state = os.path.join(root, "state")
    if not is_dir(state):
        return None, f"{location}: no state folder"
    budget = _Budget(time.monotonic() + MAX_SECONDS)
    operators: dict[int, OperatorWork] = {}
    try:
        for op in _numbers(state, budget):
            work = _operator(os.path.join(state, str(op)), op, batch_id, budget)
            if work is not None:
                operators[op] = work
    except (NoEstimate, UnreadableFolder) as exc:
        return None, str(exc)
    if not operators:
        return None, f"{location}: no state file at or below version {batch_id}"
    return ExpectedWork(batch_id, operators, slots), None


class _Budget:
    def __init__(self, deadline: float) -> None:
        self.deadline, self.names, self.stats = deadline, 0, 0

    def listed(self, path: str) -> list[str]:
        names = list_dir(path)
        self.names += len(names)
        if self.names > MAX_NAMES:
            raise NoEstimate(f"more than {MAX_NAMES} names under the checkpoint's state folder: no restore estimate")
        self._clock()
        return names

    def size(self, path: str) -> int:
        self.stats += 1
        if self.stats > MAX_STATS:
            raise NoEstimate(f"more than {MAX_STATS} state files to load: no restore estimate")
        self._clock()
        try:
            info = os.stat(path)
        except OSError:
            return -1  # cleaned up meanwhile: counted as missing
        return info.st_size if stat.S_ISREG(info.st_mode) else -1

    def _clock(self) -> None:
        if time.monotonic() > self.deadline:
            raise NoEstimate(f"listing the checkpoint took more than {MAX_SECONDS:g} s: no restore estimate")


def _numbers(folder: str, budget: _Budget) -> list[int]:
    return sorted(int(n) for n in budget.listed(folder) if _NUMBER.fullmatch(n))


def _operator(folder: str, op: int, version: int, budget: _Budget) -> OperatorWork | None:
    seconds: dict[int, float] = {}
    files = replay_bytes = snapshot_bytes = 0
    for part in _numbers(folder, budget):
        part_folder = os.path.join(folder, str(part))
        names = budget.listed(part_folder)
        stores = [n for n in names if not n.startswith("_") and n != "SSTs" and "." not in n and is_dir(os.path.join(part_folder, n))]
        instances = [(os.path.join(part_folder, s), budget.listed(os.path.join(part_folder, s))) for s in sorted(stores)] or [
            (part_folder, names)
        ]
        total = 0.0
        for store_folder, store_names in instances:
            loaded = _instance(store_folder, store_names, version, budget)
            if loaded is None:
                continue
            replay_files, replayed, snapshots, snapshot = loaded
            files, replay_bytes, snapshot_bytes = files + replay_files + snapshots, replay_bytes + replayed, snapshot_bytes + snapshot
            total += store_seconds(replay_files, replayed, snapshot)
        if total:
            seconds[part] = total
    return OperatorWork(op, seconds, files, replay_bytes, snapshot_bytes) if seconds else None


def store_seconds(replay_files: int, replay_bytes: int, snapshot_bytes: int) -> float:
    """One store instance's load time on one core at the default rates."""
    return (
        SECONDS_PER_STORE
        + replay_files * SECONDS_PER_FILE
        + replay_bytes / REPLAY_BYTES_PER_SECOND
        + snapshot_bytes / SNAPSHOT_BYTES_PER_SECOND
    )


def _instance(folder: str, names: list[str], version: int, budget: _Budget) -> tuple[int, int, int, int] | None:
    """(files replayed, their bytes, snapshots loaded, their bytes) for loading ``version``; None when the instance has nothing
    at or below it. Where several files share a version (format v2 orphans of a retried batch) the largest counts."""
    snapshots: dict[int, list[str]] = {}
    replays: dict[int, list[str]] = {}
    for name in names:
        m = _STATE_FILE.match(name)
        if m is None or int(m["version"]) > version:
            continue
        (snapshots if m["kind"] in ("zip", "snapshot") else replays).setdefault(int(m["version"]), []).append(name)
    if not snapshots and not replays:
        return None
    start = max(snapshots, default=0)
    snapshot = _largest(folder, snapshots[start], budget) if start else 0
    wanted = [v for v in replays if v > start]
    if len(wanted) != version - start:
        raise NoEstimate(
            f"{folder}: {version - start - len(wanted)} file(s) to replay up to version {version} are missing: no restore estimate"
        )
    replayed = sum(_largest(folder, replays[v], budget) for v in wanted)
    return len(wanted), replayed, (1 if start else 0), snapshot


def _largest(folder: str, names: list[str], budget: _Budget) -> int:
    sizes = [budget.size(os.path.join(folder, n)) for n in names]
    if max(sizes) < 0:
        raise NoEstimate(f"{folder}: {names[0]} is gone or not a file: no restore estimate")
    return max(sizes)


def expected_work_hook(
    locate: Callable[[str, str | None], str | None],
    slots: Callable[[], int | None] | None = None,
    on_problem: Callable[[str], None] | None = None,
) -> Callable[[str, str | None, int], ExpectedWork | None]:
    """The hook ``spark_state_observer.placement.restore_progress`` calls at a restore's start: ``locate`` names the run's
    checkpoint (``resolvedCheckpointRoot`` live, the plans' ``state info`` in a log), ``slots`` the cores where
    the caller knows them; why there is no estimate goes to ``on_problem``."""

    def hook(query_id: str, run_id: str | None, batch_id: int) -> ExpectedWork | None:
        location = locate(query_id, run_id)
        if location is None:
            return None
        work, why = expected_work(location, batch_id, slots() if slots is not None else None)
        if why is not None and on_problem is not None:
            on_problem(why)
        return work

    return hook
