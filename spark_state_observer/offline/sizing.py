"""The what-if behind ``spark-state-observer size``: a workload and a configuration, from flags or a real application.

A real application gives what the flags would: its Spark configuration (``SparkListenerEnvironmentUpdate`` in its
event log), its state's shape and size (the newest progress of each query: state partitions, store instances, rows,
``rocksdbSstFileSize``), its executors (the log's executor events, or the history's placements) and, from a history,
the restore rates it measured. ``--conf`` values override the application's; flags override its shape. The
estimate itself is ``spark_state_observer.model.capacity``; the restore time uses the checkpoint inspector's rates
(``spark_state_observer.offline.checkpoint.restore``), so both commands say the same thing about the same state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from contextlib import closing
from typing import Any

from spark_state_observer.model import kinds
from spark_state_observer.model.bounded import loads, stored_json
from spark_state_observer.model.capacity import ENVIRONMENT_PREFIX, Estimate, StateConf, Workload, spark_properties
from spark_state_observer.offline.checkpoint.restore import DEFAULT_BYTES_PER_SECOND, DEFAULT_SECONDS_PER_FILE, DEFAULT_SECONDS_PER_STORE
from spark_state_observer.offline.eventlog import RECORD_EXECUTOR_ADDED, RECORD_EXECUTOR_REMOVED, EventLogError, read_records
from spark_state_observer.offline.size_advice import HeapEstimate

CHANGELOG_CONF = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
SNAPSHOT_EVERY_CONF = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


@dataclasses.dataclass
class Observed:
    """What a real application showed: its conf, the shape and size of its state, what Spark reported."""

    conf: dict[str, str] = dataclasses.field(default_factory=dict)
    partitions: int | None = None
    instances: int | None = None
    operators: int | None = None
    executors: int | None = None
    rows: int | None = None
    sst_bytes: int | None = None
    memory_bytes: int | None = None  # Spark's memoryUsedBytes, summed over the operators
    version_bytes: int | None = None  # HDFS: stateOnCurrentVersionSizeBytes, summed (memoryUsedBytes counts every loaded version)
    rates: dict[str, float] | None = None
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def bytes_per_row(self) -> float | None:
        return self.sst_bytes / self.rows if self.sst_bytes is not None and self.rows else None

    def take_progress(self, newest: Mapping[str, Mapping[str, Any]]) -> None:
        """The state's shape and size from the newest progress of each query."""
        partitions, instances, operators, rows, sst, memory, version = 0, 0, 0, 0, 0, 0, 0
        for progress in newest.values():
            for op in progress.get("stateOperators") or []:
                if not isinstance(op, Mapping):
                    continue
                operators += 1
                partitions = max(partitions, _int(op.get("numShufflePartitions")))
                instances += _int(op.get("numStateStoreInstances"))
                rows += _int(op.get("numRowsTotal"))
                memory += _int(op.get("memoryUsedBytes"))
                custom = op.get("customMetrics")
                sst += _int(custom.get("rocksdbSstFileSize")) if isinstance(custom, Mapping) else 0
                version += _int(custom.get("stateOnCurrentVersionSizeBytes")) if isinstance(custom, Mapping) else 0
        if operators:
            self.partitions, self.instances, self.operators = partitions, instances, operators
            self.rows, self.sst_bytes, self.memory_bytes, self.version_bytes = rows, sst, memory, version


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0 else 0


def from_event_log(paths: list[str]) -> Observed:
    """Conf, state and executors of the application in an event log (raises ``EventLogError`` for a missing path)."""
    seen = Observed()
    newest: dict[str, Mapping[str, Any]] = {}
    executors: set[str] = set()

    def tap(line: bytes) -> None:
        if line.startswith(ENVIRONMENT_PREFIX):
            try:
                event = loads(line)  # counted before parsed: an item bomb in the line is refused
            except (ValueError, RecursionError) as exc:
                seen.problems.append(f"environment event unreadable: {type(exc).__name__}: {str(exc)[:80]}")
                return
            if isinstance(event, dict):
                seen.conf.update(spark_properties(event))

    for item in read_records(paths, tap=tap):
        if isinstance(item, EventLogError):
            seen.problems.append(str(item))
        elif item.kind == kinds.PROGRESS and isinstance(item.payload, Mapping):
            newest[str(item.payload.get("id"))] = item.payload
        elif item.kind == RECORD_EXECUTOR_ADDED:
            executors.add(str(item.payload))
        elif item.kind == RECORD_EXECUTOR_REMOVED:
            executors.discard(str(item.payload))
    seen.take_progress(newest)
    workers = executors - {"driver"}
    seen.executors = len(workers) or (1 if executors or newest else None)
    if not seen.conf:
        seen.problems.append("no SparkListenerEnvironmentUpdate in the log: Spark's defaults assumed for its configuration")
    return seen


def from_history(location: str, query_id: str | None = None) -> Observed:
    """State, executors and restore rates of a query in a history (its newest batch); raises ``HistoryError``."""
    from spark_state_observer.history.backend import open_backend
    from spark_state_observer.offline.checkpoint.restore import rates_from_history

    seen = Observed()
    with closing(open_backend(location, readonly=True)) as backend:
        where, params = ("WHERE query_id = ?", (query_id,)) if query_id else ("", ())
        _, rows = backend.rows(f"SELECT query_id, run_id, batch_id, progress FROM batches {where} ORDER BY ts DESC LIMIT 1", params)
        if not rows:
            seen.problems.append("the history holds no batch" + (f" of query {query_id}" if query_id else ""))
            return seen
        qid, run_id, batch_id, text = rows[0]
        progress = stored_json(text, None)
        if isinstance(progress, dict):
            seen.take_progress({qid: progress})
        else:
            seen.problems.append(f"batch {batch_id} of query {qid} has no readable progress")
        _, placed = backend.rows(
            "SELECT COUNT(DISTINCT executor) FROM placements WHERE query_id = ? AND run_id = ? AND batch_id = ?", (qid, run_id, batch_id)
        )
        seen.executors = int(placed[0][0]) if placed and placed[0][0] else None
    seen.rates = rates_from_history(location, qid)
    return seen


def parse_conf_flags(pairs: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """``KEY=VALUE`` flags as a conf, with a problem for each flag that is not one."""
    conf: dict[str, str] = {}
    problems: list[str] = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(f"--conf {pair!r} is not KEY=VALUE; ignored")
            continue
        conf[key.strip()] = value.strip()
    return conf, problems


@dataclasses.dataclass(frozen=True)
class Restore:
    """Restore time of the whole state (what a restart loads, summed over stores as the inspector does) and of one executor's."""

    seconds: float
    executor_loss_seconds: float
    basis: str


def restore_time(est: Estimate, conf: Mapping[str, str], rates: Mapping[str, float] | None = None) -> Restore:
    """Per store: opening it, copying its SST bytes, and (changelog checkpointing) replaying up to a snapshot interval of files."""
    r = {
        "seconds_per_store": DEFAULT_SECONDS_PER_STORE,
        "seconds_per_file": DEFAULT_SECONDS_PER_FILE,
        "bytes_per_second": DEFAULT_BYTES_PER_SECOND,
        **(rates or {}),
    }
    replay = 0
    if conf.get(CHANGELOG_CONF, "false").strip().lower() == "true":
        every = conf.get(SNAPSHOT_EVERY_CONF, "10").strip()
        replay = int(every) if every.isdigit() and int(every) < 1_000_000 else 10

    def seconds(stores: int, sst: int | None) -> float:
        return stores * (r["seconds_per_store"] + replay * r["seconds_per_file"]) + (sst or 0) / r["bytes_per_second"]

    return Restore(
        seconds(est.instances, est.sst_bytes),
        seconds(est.instances_per_executor, est.sst_bytes_per_executor),
        "history" if rates else "defaults",
    )


def workload(
    args_partitions: int | None,
    args_operators: int | None,
    args_stores: int | None,
    args_executors: int | None,
    args_rows: int | None,
    args_bytes_per_row: float | None,
    seen: Observed,
    state: StateConf,
) -> Workload:
    """Flags first, then what the application showed, then Spark's defaults (its shuffle partitions, one operator)."""
    partitions = args_partitions if args_partitions is not None else seen.partitions or state.shuffle_partitions
    shaped = args_partitions is None and args_operators is None and args_stores is None
    return Workload(
        partitions=partitions,
        operators=args_operators if args_operators is not None else seen.operators or 1,
        stores_per_operator=args_stores if args_stores is not None else 1,
        executors=args_executors if args_executors is not None else seen.executors or 1,
        rows=args_rows if args_rows is not None else seen.rows,
        bytes_per_row=args_bytes_per_row if args_bytes_per_row is not None else seen.bytes_per_row,
        instances=seen.instances if shaped and seen.instances else None,
    )


def to_json(
    est: Estimate, restore: Restore, seen: Observed | None, advice: list[str] | None = None, heap: HeapEstimate | None = None
) -> dict[str, Any]:
    """The ``--json`` document: the issue's fields first, then the rest of the estimate and what was measured;
    ``advice`` in words, and for the HDFS provider its heap figures (``heap``), which replace RocksDB's."""
    document: dict[str, Any] = {
        "instances_per_executor": est.instances_per_executor,
        "memory_bytes_per_executor": est.memory_bytes_per_executor,
        "memory_bound_bytes_per_executor": est.memory_bound_bytes_per_executor,
        "dfs_bytes": est.dfs_bytes,
        "restore_seconds": round(restore.seconds, 3),
        "restore_seconds_executor_loss": round(restore.executor_loss_seconds, 3),
        "restore_basis": restore.basis,
        "instances": est.instances,
        "memory_expected_bytes_per_executor": est.memory_expected_bytes_per_executor,
        "instance_ceiling_bytes": est.instance_ceiling_bytes,
        "instance_expected_bytes": est.instance_expected_bytes,
        "budget_bytes": est.budget_bytes,
        "budget_share": round(est.budget_share, 4) if est.budget_share is not None else None,
        "sst_bytes": est.sst_bytes,
        "sst_bytes_per_executor": est.sst_bytes_per_executor,
        "bounded": est.bounded,
        "provider": est.provider,
        "assumed": est.assumed,
        "notes": list(est.notes),
    }
    document["advice"] = list(advice or [])
    if heap is not None:
        document["heap"] = dataclasses.asdict(heap)
    if seen is not None and seen.memory_bytes is not None:
        document["measured"] = {"memory_bytes": seen.memory_bytes, "sst_bytes": seen.sst_bytes, "rows": seen.rows}
    if seen is not None:
        document["problems"] = seen.problems[:50]
    return document


def size(n: float | None) -> str:
    """Bytes for people (binary units)."""
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024
    return str(n)


def render_heap(heap: HeapEstimate, est: Estimate, restore: Restore, seen: Observed | None, advice: list[str]) -> str:
    """The HDFS provider's figures for people: its state on the JVM heap, then what to set."""
    basis = "measured by Spark, newest batch" if heap.measured else "rows x bytes per row, per version"
    lines = [
        "provider                         HDFS (HDFSBackedStateStoreProvider): the state lives on the JVM heap",
        f"state store instances            {est.instances} ({est.instances_per_executor} per executor)",
        f"current version                  {size(heap.version_bytes)}",
        f"loaded versions ({heap.versions})".ljust(33) + f"{size(heap.loaded_bytes)} "
        f"({size(heap.loaded_bytes_per_executor)} per executor; {basis})",
        f"budget (heap user memory)        {size(heap.budget_bytes)} per executor",
        f"restore, whole state             {restore.seconds:.1f} s (rates: {restore.basis})",
        f"restore, one executor lost       {restore.executor_loss_seconds:.1f} s",
        "what to set:",
        *(f"  {line}" for line in advice),
    ]
    lines += [f"note: {n}" for n in est.notes if "is not RocksDB" not in n]
    if seen is not None:
        lines += [f"warning: {p}" for p in seen.problems[:20]]
    return "\n".join(lines)


def render_text(est: Estimate, restore: Restore, seen: Observed | None, advice: list[str] | None = None) -> str:
    """The estimate as a table for people, then ``advice`` (what to set); notes say what was assumed."""
    share = f"{est.budget_share:.0%}" if est.budget_share is not None else "-"
    lines = [
        f"state store instances            {est.instances} ({est.instances_per_executor} per executor)",
        f"memory per instance (ceiling)    {size(est.instance_ceiling_bytes)}",
        f"memory per instance (expected)   {size(est.instance_expected_bytes)}",
        f"memory per executor, unbounded   {size(est.memory_bytes_per_executor)}",
        f"memory per executor, expected    {size(est.memory_expected_bytes_per_executor)}",
        f"memory per executor, bounded     {size(est.memory_bound_bytes_per_executor)}"
        + ("" if est.bounded else " (boundedMemoryUsage is off)"),
        f"budget (memoryOverhead)          {size(est.budget_bytes)}; {share} held at the ceiling (all buffers and caches full)",
        f"SST bytes                        {size(est.sst_bytes)} ({size(est.sst_bytes_per_executor)} per executor)",
        f"DFS bytes (newest version)       {size(est.dfs_bytes)}",
        f"restore, whole state             {restore.seconds:.1f} s (rates: {restore.basis})",
        f"restore, one executor lost       {restore.executor_loss_seconds:.1f} s",
    ]
    if advice:
        lines += ["what to set:", *(f"  {line}" for line in advice)]
    if seen is not None and seen.memory_bytes is not None:
        lines.append(f"measured by Spark (newest batch) memory {size(seen.memory_bytes)}, SST {size(seen.sst_bytes)}, rows {seen.rows}")
    if est.assumed:
        lines.append("ESTIMATE MARKED AS ASSUMED:")
    lines += [f"note: {n}" for n in est.notes]
    if seen is not None:
        lines += [f"warning: {p}" for p in seen.problems[:20]]
    return "\n".join(lines)
