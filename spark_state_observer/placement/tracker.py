"""Where each state partition lives, when it moves, and what the move cost: Spark's "rebalance".

A state store is cached on the executor that last ran its partition, and the scheduler prefers that
executor next batch. When the partition runs elsewhere (its executor was lost or decommissioned, a new
executor took it, or ``spark.locality.wait`` ran out while its executor was busy) the new executor loads
the store from the checkpoint and replays changelog files: a migration. From the per-partition runs of
``spark_state_observer.placement.tasks`` (replayed event logs) or ``spark_state_observer.placement.task_poll`` (live), this module keeps
the placement of every operator batch by batch and derives:

- migrations with their cause and cost, aggregated per operator and batch into one ``partition_migrated``
  fact (a ``SignalEvent``);
- stickiness: the share of partitions that stayed on their executor;
- per-partition skew (largest against the median, rows, memory and bytes) and the state each executor holds;
  bytes are RocksDB's SST files after the commit, the state's real size: memory is mostly fixed per store
  instance and rows weigh a one-kilobyte value like a one-megabyte one;
- the metrics of ``PLACEMENT_METRICS`` with bounded cardinality (per operator, per executor, top-K partitions);
- ``advise``: an estimate of whether more or fewer shuffle partitions would bring the worst restore under a target.

A retried task is not a migration by itself: only the final successful attempt of a partition counts, so
a partition whose failed attempt ran elsewhere but which succeeded on its usual executor stayed put.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.model.signal_kinds import PARTITION_MIGRATED, SignalEvent
from spark_state_observer.placement.tasks import BatchTasks, ExecutorChange, PartitionRun

CAUSE_EXECUTOR_REMOVED = "executor_removed"
CAUSE_EXECUTOR_ADDED = "executor_added"
LOCALITY_FALLBACK = "locality_fallback"
UNKNOWN = "unknown"
CAUSES = (CAUSE_EXECUTOR_REMOVED, CAUSE_EXECUTOR_ADDED, LOCALITY_FALLBACK, UNKNOWN)
MAX_OPERATORS = 256  # (query, operator) pairs followed; the least recently seen is forgotten first
MAX_EXECUTORS = 4096  # executors remembered (added / removed times)
MAX_FACTS = 1000


# the metrics live in the catalog (one source of names); the short names are this module's vocabulary
MIGRATIONS = catalog.PARTITION_MIGRATIONS
MIGRATION_BATCHES = catalog.PARTITION_MIGRATION_BATCHES
PLACEMENTS = catalog.PARTITION_PLACEMENTS
MIGRATION_LOAD = catalog.PARTITION_MIGRATION_LOAD
MIGRATION_FILES = catalog.PARTITION_MIGRATION_FILES
STICKINESS = catalog.PARTITION_STICKINESS
ROWS_SKEW = catalog.PARTITION_ROWS_SKEW
MEMORY_SKEW = catalog.PARTITION_MEMORY_SKEW
BYTES_SKEW = catalog.PARTITION_BYTES_SKEW
PARTITION_BYTES_MAX = catalog.PARTITION_BYTES_MAX
PARTITION_ROWS_MAX = catalog.PARTITION_ROWS_MAX
EXECUTOR_MEMORY = catalog.EXECUTOR_STATE_MEMORY
EXECUTOR_PARTITIONS = catalog.EXECUTOR_STATE_PARTITIONS
COSTLIEST = catalog.PARTITION_MIGRATION_LAST_LOAD
PLACEMENT_METRICS = catalog.PLACEMENT_METRICS


@dataclass(frozen=True)
class Migration:
    """One partition that ran on another executor than in its previous batch."""

    query_id: str
    batch_id: int
    operator: int
    partition: int
    from_executor: str
    to_executor: str
    cause: str
    load_seconds: float | None
    replay_seconds: float | None
    changelog_files: int | None
    attempt: int
    loads_from_dfs: int | None = None  # 4.2+: 1 when the store came from the checkpoint (aggregations may read 0)


@dataclass
class OperatorBatch:
    """One operator in one batch: where its partitions ran, what moved, how even its state is."""

    query_id: str
    batch_id: int
    operator: int
    operator_name: str
    placement: dict[int, str]  # partition -> executor
    migrations: list[Migration]
    compared: int  # partitions also seen in the operator's previous batch
    rows_skew: float | None
    memory_skew: float | None
    rows_max: int | None
    executor_memory: dict[str, float]
    executor_partitions: dict[str, int]
    runs: tuple[PartitionRun, ...] = ()  # the partition runs themselves (sizes, load times), for the history
    bytes_skew: float | None = None  # SST bytes: largest partition over the median (RocksDB only)
    bytes_max: int | None = None
    bytes_total: int | None = None
    heaviest_partition: int | None = None  # by SST bytes

    @property
    def heaviest_share(self) -> float | None:
        """The heaviest partition's share of the operator's SST bytes."""
        return self.bytes_max / self.bytes_total if self.bytes_max is not None and self.bytes_total else None

    @property
    def stickiness(self) -> float | None:
        return None if not self.compared else 1.0 - len(self.migrations) / self.compared


@dataclass
class _OperatorState:
    name: str
    placement: dict[int, tuple[str, float | None]] = field(default_factory=dict)  # partition -> (executor, finish time)
    batch_id: int | None = None
    run_id: str | None = None
    migrations: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0))
    placements: int = 0
    moved_batches: int = 0  # batches with at least one migration
    load_seconds: float = 0.0
    changelog_files: int = 0
    latest: OperatorBatch | None = None
    costliest: dict[int, float] = field(default_factory=dict)  # partition -> load seconds of its latest migration


class PlacementTracker:
    """Follows placements across batches; thread-confined (the observer's worker, or a replay loop)."""

    def __init__(self, top_k: int = 10, clock: Callable[[], float] = time.time) -> None:
        self.top_k = top_k
        self._clock = clock
        self._ops: OrderedDict[tuple[str, int], _OperatorState] = OrderedDict()
        self._added: OrderedDict[str, float | None] = OrderedDict()
        self._removed: OrderedDict[str, float | None] = OrderedDict()
        self._names: dict[str, str] = {}
        self.facts: deque[SignalEvent] = deque(maxlen=MAX_FACTS)
        self._untaken: deque[SignalEvent] = deque(maxlen=MAX_FACTS)  # facts not yet handed to the pipeline

    def on_executor(self, change: ExecutorChange) -> None:
        """An executor registered or was removed (event log, or the driver's executor list live)."""
        book = self._added if change.added else self._removed
        book[change.executor_id] = change.timestamp
        book.move_to_end(change.executor_id)
        if change.added:
            self._removed.pop(change.executor_id, None)
        for b in (self._added, self._removed):
            while len(b) > MAX_EXECUTORS:
                b.popitem(last=False)

    def on_batch(self, batch: BatchTasks, executors: Callable[[], Iterable[ExecutorChange]] | None = None) -> list[OperatorBatch]:
        """Apply one closed batch; returns one ``OperatorBatch`` per operator and records the facts.

        ``executors`` is asked (at most once) for the executors' changes when a migration needs its cause
        and the caller has not fed them already: the live poller reads the driver's executor list then only.
        """
        if batch.query_name:
            self._names[batch.query_id] = batch.query_name
        by_op: dict[int, list[PartitionRun]] = {}
        for run in batch.runs:
            by_op.setdefault(run.operator, []).append(run)
        asked = False
        out = []
        for op_index, runs in sorted(by_op.items()):
            key = (batch.query_id, op_index)
            state = self._ops.get(key)
            if state is None:
                state = self._ops[key] = _OperatorState(runs[0].operator_name)
                while len(self._ops) > MAX_OPERATORS:
                    self._ops.popitem(last=False)
            self._ops.move_to_end(key)
            state.name = batch.operator_names.get(op_index, state.name)
            if batch.run_id is not None and batch.run_id != state.run_id:
                # a new run (restart) starts with new executors, whose ids a new application reuses: nothing to compare
                state.placement.clear()
                state.batch_id = None
                state.run_id = batch.run_id
            if state.batch_id is not None and batch.batch_id <= state.batch_id:
                continue  # an old or repeated batch (a restarted query replays from its checkpoint): no comparison
            moved = [
                (run, state.placement[run.partition])
                for run in runs
                if run.partition in state.placement and state.placement[run.partition][0] != run.executor_id
            ]
            if moved and executors is not None and not asked:
                asked = True
                for change in executors():
                    self.on_executor(change)
            migrations = [self._migration(batch, run, prev) for run, prev in moved]
            compared = sum(1 for run in runs if run.partition in state.placement)
            for run in runs:
                state.placement[run.partition] = (run.executor_id, run.finish_time)
            state.batch_id = batch.batch_id
            state.placements += compared
            for m in migrations:
                state.migrations[m.cause] += 1
                state.load_seconds += m.load_seconds or 0.0
                state.changelog_files += m.changelog_files or 0
                if m.load_seconds is not None:
                    state.costliest[m.partition] = m.load_seconds
            if len(state.costliest) > self.top_k:
                state.costliest = dict(sorted(state.costliest.items(), key=lambda kv: -kv[1])[: self.top_k])
            result = _operator_batch(batch, op_index, state.name, runs, migrations, compared)
            state.latest = result
            out.append(result)
            if migrations:
                state.moved_batches += 1
                fact = self._fact(batch, result)
                self.facts.append(fact)
                self._untaken.append(fact)
        return out

    def _migration(self, batch: BatchTasks, run: PartitionRun, prev: tuple[str, float | None]) -> Migration:
        return Migration(
            batch.query_id,
            batch.batch_id,
            run.operator,
            run.partition,
            prev[0],
            run.executor_id,
            self._cause(run, prev),
            _seconds(run.load_ms),
            _seconds(run.replay_ms),
            run.changelog_files,
            run.attempt,
            run.loads_from_dfs,
        )

    def _cause(self, run: PartitionRun, prev: tuple[str, float | None]) -> str:
        """Why the partition left its executor: gone, a newcomer took it, or its executor was busy."""
        source, last_finish = prev
        if source in self._removed or (run.lost_executor and source in run.failed_on):
            return CAUSE_EXECUTOR_REMOVED
        added = self._added.get(run.executor_id)
        if added is not None and last_finish is not None and added > last_finish:
            return CAUSE_EXECUTOR_ADDED
        if source in self._added or not self._added:
            return LOCALITY_FALLBACK  # both alive as far as anyone told (no executor events at all: local mode)
        return UNKNOWN

    def _fact(self, batch: BatchTasks, ob: OperatorBatch) -> SignalEvent:
        causes: dict[str, int] = {}
        for m in ob.migrations:
            causes[m.cause] = causes.get(m.cause, 0) + 1
        loads = [m.load_seconds for m in ob.migrations if m.load_seconds is not None]
        files = [m.changelog_files for m in ob.migrations if m.changelog_files is not None]
        replays = [m.replay_seconds for m in ob.migrations if m.replay_seconds is not None]
        return SignalEvent(
            PARTITION_MIGRATED,
            batch.query_id,
            self._names.get(batch.query_id, batch.query_id),
            batch.run_id,
            self._clock(),
            {
                "batch_id": batch.batch_id,
                "operator_id": ob.operator,
                "operator_name": ob.operator_name,
                "migrated": len(ob.migrations),
                "partitions": sorted(m.partition for m in ob.migrations)[:64],
                "causes": causes,
                "stickiness": ob.stickiness,
                "from_executors": sorted({m.from_executor for m in ob.migrations}),
                "to_executors": sorted({m.to_executor for m in ob.migrations}),
                "load_seconds": sum(loads) if loads else None,
                "max_load_seconds": max(loads) if loads else None,
                "replay_seconds": sum(replays) if replays else None,
                "changelog_files": sum(files) if files else None,
                "loads_from_dfs": sum(m.loads_from_dfs or 0 for m in ob.migrations),
            },
        )

    def take_facts(self) -> list[SignalEvent]:
        """The ``partition_migrated`` facts since the last call, for the signal pipeline (``facts`` keeps the recent ones)."""
        out = list(self._untaken)
        self._untaken.clear()
        return out

    # --- reading ----------------------------------------------------------------------------------------
    def latest(self, query_id: str, operator: int) -> OperatorBatch | None:
        state = self._ops.get((query_id, operator))
        return state.latest if state else None

    def latest_batches(self) -> list[OperatorBatch]:
        """The latest placed batch of every operator followed (the capacity rule sums them per executor)."""
        return [state.latest for state in self._ops.values() if state.latest is not None]

    def samples(self) -> Iterator[tuple[MetricSpec, dict[str, str], float]]:
        """Every placement metric as (spec, labels, value); counters are running totals."""
        per_query_memory: dict[str, dict[str, float]] = {}
        per_query_parts: dict[str, dict[str, int]] = {}
        for (query_id, op_index), state in self._ops.items():
            labels = {
                "query": self._names.get(query_id, query_id),
                "query_id": query_id,
                "operator_index": str(op_index),
                "operator": state.name,
            }
            for cause, n in state.migrations.items():
                yield MIGRATIONS, {**labels, "cause": cause}, float(n)
            yield PLACEMENTS, labels, float(state.placements)
            yield MIGRATION_BATCHES, labels, float(state.moved_batches)
            yield MIGRATION_LOAD, labels, state.load_seconds
            yield MIGRATION_FILES, labels, float(state.changelog_files)
            latest = state.latest
            if latest is not None:
                for spec, value in (
                    (STICKINESS, latest.stickiness),
                    (ROWS_SKEW, latest.rows_skew),
                    (MEMORY_SKEW, latest.memory_skew),
                    (BYTES_SKEW, latest.bytes_skew),
                    (PARTITION_ROWS_MAX, latest.rows_max),
                    (PARTITION_BYTES_MAX, latest.bytes_max),
                ):
                    if value is not None:
                        yield spec, labels, float(value)
                mem = per_query_memory.setdefault(query_id, {})
                parts = per_query_parts.setdefault(query_id, {})
                for ex, v in latest.executor_memory.items():
                    mem[ex] = mem.get(ex, 0.0) + v
                for ex, n in latest.executor_partitions.items():
                    parts[ex] = parts.get(ex, 0) + n
            for partition, seconds in sorted(state.costliest.items(), key=lambda kv: -kv[1])[: self.top_k]:
                yield COSTLIEST, {**labels, "partition": str(partition)}, seconds
        for query_id, parts in per_query_parts.items():
            base = {"query": self._names.get(query_id, query_id), "query_id": query_id}
            mem = per_query_memory.get(query_id, {})
            top = sorted(parts, key=lambda ex: (-mem.get(ex, 0.0), -parts[ex], ex))[: self.top_k]
            for ex in top:
                yield EXECUTOR_PARTITIONS, {**base, "executor": ex}, float(parts[ex])
                if ex in mem:
                    yield EXECUTOR_MEMORY, {**base, "executor": ex}, mem[ex]


def _operator_batch(
    batch: BatchTasks, op_index: int, name: str, runs: list[PartitionRun], migrations: list[Migration], compared: int
) -> OperatorBatch:
    rows = [r.rows_total or 0 for r in runs]
    have_rows = any(r.rows_total is not None for r in runs)  # Spark leaves a zero count out of the task's accumulables
    memory = [float(r.memory_bytes) for r in runs if r.memory_bytes is not None]
    # Spark leaves a zero size out too: a partition without an SST file reports none, and holds no bytes on disk
    have_bytes = any(r.sst_bytes is not None for r in runs)
    sizes = {r.partition: r.sst_bytes or 0 for r in runs}
    heaviest = max(sizes, key=lambda p: (sizes[p], -p)) if have_bytes else None
    executor_memory: dict[str, float] = {}
    executor_partitions: dict[str, int] = {}
    for r in runs:
        executor_partitions[r.executor_id] = executor_partitions.get(r.executor_id, 0) + 1
        if r.memory_bytes is not None:
            executor_memory[r.executor_id] = executor_memory.get(r.executor_id, 0.0) + r.memory_bytes
    return OperatorBatch(
        batch.query_id,
        batch.batch_id,
        op_index,
        name,
        {r.partition: r.executor_id for r in runs},
        migrations,
        compared,
        skew_ratio(rows) if have_rows else None,
        skew_ratio(memory),
        max(rows) if have_rows else None,
        executor_memory,
        executor_partitions,
        tuple(runs),
        skew_ratio([float(v) for v in sizes.values()]) if have_bytes else None,
        sizes[heaviest] if heaviest is not None else None,
        sum(sizes.values()) if have_bytes else None,
        heaviest,
    )


def skew_ratio(values: Sequence[float]) -> float | None:
    """Largest value over the median; None when there is nothing to compare (no values, a zero median)."""
    if not values:
        return None
    mid = median(values)
    return max(values) / mid if mid > 0 else None


def _seconds(ms: float | None) -> float | None:
    return ms / 1000.0 if ms is not None and ms >= 0 else None


# --- advice ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitionStat:
    """What is known of one state partition: size and, where it was measured, the time to load it."""

    partition: int
    rows: float | None = None
    memory_bytes: float | None = None
    load_seconds: float | None = None


@dataclass(frozen=True)
class Advice:
    """An *estimate*: whether state is skewed and which partition count would meet a restore target."""

    skewed: bool
    skew_ratio: float | None
    worst_partition: int | None
    worst_restore_seconds: float | None
    target_seconds: float
    current_partitions: int
    suggested_partitions: int | None  # None: keep the current number
    message: str
    estimate: bool = True
    restore_seconds: float | None = None  # the operator's restore estimate, summed over its stores: the total the shares add up to
    over_target: bool | None = None  # the query's summed restore (all operators) against the target: the verdict given
    slots_needed: int | None = None  # at least this many tasks loading at once for waves of the stores to meet the target
    measured_partition: int | None = None  # the partition with the slowest reload measured when it last moved
    measured_seconds: float | None = None


def advise(
    partitions: Sequence[PartitionStat],
    target_restore_seconds: float,
    restore_estimate_seconds: float | None = None,
    spark_version: str | None = None,
    skew_threshold: float = 2.0,
    restore_shares: Mapping[int, float] | None = None,
    query_restore_seconds: float | None = None,
) -> Advice:
    """Estimate the worst partition's restore and the shuffle partitions that would bring it under the target.

    Spark loads a restart's stores in waves over the task slots: the restore takes at least the slowest
    partition's load and at most the sum over the partitions (one slot). So each partition's restore is
    its share of ``restore_estimate_seconds``, the same estimate as the report's total: ``restore_shares``
    (per partition, the estimate's own figures) or else by memory, else rows. The shares add up to the
    total and none is above it. A reload measured when a partition moved came
    from one executor under load, at another rate than the estimate's; it is reported beside the shares
    and used only when there is no estimate. The verdict is the summed estimate against the target: the
    query's, ``query_restore_seconds``, when given, since its operators' stages load one after another.
    When only the sum is over, more task slots meet it, not more partitions. With N partitions and state spread
    evenly, N' partitions scale each one by N/N'; a hot key stays in one partition whatever N' is, which is
    why a skewed operator gets that caveat rather than a bigger number.
    """
    n = len(partitions)
    if n == 0 or target_restore_seconds <= 0:
        return Advice(False, None, None, None, target_restore_seconds, n, None, "No partitions measured yet: no estimate.")
    sizes = [p.memory_bytes if p.memory_bytes is not None else (p.rows or 0.0) for p in partitions]
    skew = skew_ratio(sizes)
    skewed = skew is not None and skew >= skew_threshold
    total_size = sum(sizes)
    measured = [(p.load_seconds, p.partition) for p in partitions if p.load_seconds is not None]
    measured_worst, measured_partition = max(measured) if measured else (None, None)
    if restore_estimate_seconds is not None and restore_shares:
        restore = [restore_shares.get(p.partition, 0.0) for p in partitions]
        total = restore_estimate_seconds
    elif restore_estimate_seconds is not None:
        restore = [restore_estimate_seconds * (size / total_size if total_size > 0 else 1 / n) for size in sizes]
        total = restore_estimate_seconds
    elif measured:
        restore = [p.load_seconds if p.load_seconds is not None else 0.0 for p in partitions]
        total = sum(restore)
    else:
        return Advice(
            skewed,
            skew,
            None,
            None,
            target_restore_seconds,
            n,
            None,
            _skew_text(skewed, skew) + " No load time or restore estimate: no restore advice.",
        )
    worst, worst_partition = max((r, p.partition) for r, p in zip(restore, partitions))
    # spread evenly, N' partitions each take total / N': the target needs N' >= total / target
    needed = max(1, math.ceil(max(total, 1e-9) / target_restore_seconds))
    whole = max(query_restore_seconds, total) if query_restore_seconds is not None else total
    repartition = _repartition_text(spark_version)
    basis = "its share of the restore estimate" if restore_estimate_seconds is not None else "measured when it moved"
    text = (
        _skew_text(skewed, skew)
        + f" Restore about {total:.2f}s summed over {n} partitions"
        + (f", of {whole:.2f}s for the query's operators" if whole > total else "")
        + f" (target {target_restore_seconds:.2f}s);"
        + f" worst partition {worst_partition}: about {worst:.2f}s, {basis}."
    )
    suggested: int | None = None
    slots: int | None = None
    if worst > target_restore_seconds:
        suggested = max(needed, n + 1)
        text += f" About {suggested} shuffle partitions instead of {n} would bring an evenly spread restore under the target."
        if skewed:
            text += " The state is skewed: a hot key stays in one partition however many there are; more partitions help the rest only."
        text += repartition
    elif whole > target_restore_seconds:
        slots = max(1, math.ceil(whole / target_restore_seconds))
        text += (
            f" Over the target on one task slot: meeting it needs at least {slots} tasks loading at once."
            " More partitions do not shorten the sum; more executor cores do."
        )
    elif needed < n // 2:
        suggested = needed
        text += (
            f" Restores are well under the target: {needed} partitions instead of {n} would still meet it with fewer stores and files."
            + repartition
        )
    else:
        text += " The current partition count meets the target."
    if measured_worst is not None and restore_estimate_seconds is not None:
        text += (
            f" Partition {measured_partition} took {measured_worst:.2f}s to reload when it last moved, on one executor under load;"
            " the estimate's rate is used for the verdict."
        )
    return Advice(
        skewed,
        skew,
        worst_partition,
        worst,
        target_restore_seconds,
        n,
        suggested,
        "Estimate. " + text,
        restore_seconds=total,
        over_target=whole > target_restore_seconds,
        slots_needed=slots,
        measured_partition=measured_partition,
        measured_seconds=measured_worst,
    )


def _skew_text(skewed: bool, skew: float | None) -> str:
    if skew is None:
        return "Skew unknown (no sizes)."
    return f"State is {'skewed' if skewed else 'even'}: largest partition {skew:.1f}x the median."


def _repartition_text(spark_version: str | None) -> str:
    parts = _version(spark_version)
    if parts is not None and parts >= (4, 2):
        return (
            " Spark 4.2+ can repartition the state of a stopped query's checkpoint offline"
            " (StreamingCheckpointManager.repartition, experimental, classic PySpark: spark._streamingCheckpointManager in 4.3)."
        )
    if parts is not None:
        return f" Spark {spark_version} keeps the checkpoint's partition count: changing it needs a new checkpoint (4.2+ can repartition state offline)."
    return " The checkpoint fixes the partition count; Spark 4.2+ can repartition state offline, earlier versions need a new checkpoint."


def _version(text: str | None) -> tuple[int, int] | None:
    try:
        major, minor = (text or "").split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None
