"""What ``spark-state-observer size`` tells a user to set, in words, and the HDFS provider's own figures.

The table of ``sizing.render_text`` gives numbers; a data engineer sizing a job asks which configuration to
change. The advice compares the *expected* use (what the state's data fills) with the budget, not the
ceiling (every write buffer and cache full), which a small state never reaches. It names the settings
that bring the use under the budget: bounded memory with ``maxMemoryUsageMB``, more executors, fewer
shuffle partitions (for a new checkpoint only: a checkpoint keeps its partitions), or more overhead.

The HDFS provider (Spark's default) keeps its state in the executor's JVM heap, as hash maps of the
versions it has loaded (``spark.sql.streaming.maxBatchesToRetainInMemory``, default 2). Its state lives in
the heap's user memory, outside Spark's unified memory: ``(spark.executor.memory - 300 MiB) x (1 -
spark.memory.fraction)``. RocksDB figures (write buffers, block cache) say nothing about it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from spark_state_observer.model.capacity import MIB, ROCKSDB_PREFIX, Estimate, StateConf, parse_size

TARGET_SHARE = 0.7  # advice aims at this share of the budget: room for the rest of the native memory and a spike
RESERVED_HEAP_BYTES = 300 * MIB  # Spark's reserved system memory (UnifiedMemoryManager)
RETAIN_CONF = "spark.sql.streaming.maxBatchesToRetainInMemory"
FRACTION_CONF = "spark.memory.fraction"


def mib(n: float) -> str:
    """A byte count in MiB, as the settings take it (KiB under one MiB)."""
    return f"{math.ceil(n / MIB):,} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


def rocksdb_advice(est: Estimate, state: StateConf) -> list[str]:
    """Sentences saying whether the RocksDB state fits its executors' memoryOverhead and what to set if not."""
    budget = est.budget_bytes
    if budget <= 0 or est.instances_per_executor == 0:
        return ["No state store instance per executor: nothing to size."]
    expected = (
        min(est.memory_expected_bytes_per_executor, state.max_memory_bytes) if est.bounded else est.memory_expected_bytes_per_executor
    )
    ceiling = est.memory_bound_bytes_per_executor
    out = [
        f"Expected use: {mib(expected)} per executor, {expected / budget:.0%} of its budget "
        f"(spark.executor.memoryOverhead, {mib(budget)}). With every write buffer and cache full it could reach "
        f"{mib(ceiling)} ({ceiling / budget:.0%}): '% held' is that share."
    ]
    target = TARGET_SHARE * budget
    if ceiling <= target:
        out.append("It fits even at the ceiling: nothing to set.")
        return out
    per_instance = max(est.instance_expected_bytes, 1)
    limit = max(int(target // MIB), 1)
    bound = f"{ROCKSDB_PREFIX}boundedMemoryUsage=true and {ROCKSDB_PREFIX}maxMemoryUsageMB={limit}"
    if expected <= target:
        if est.bounded and state.max_memory_bytes <= target:
            out.append("It fits: the bounded limit holds RocksDB under the budget.")
        elif est.bounded:
            out.append(f"It fits as expected; lower {ROCKSDB_PREFIX}maxMemoryUsageMB to {limit} so a growing state stays in the budget.")
        else:
            out.append(f"It fits as expected; should the state grow to fill its buffers and caches, set {bound}.")
        return out
    if not est.bounded:
        out.append(f"Set {bound}: one shared cache per executor, held to {limit} MiB (write buffers count against it).")
    elif state.max_memory_bytes > target:
        out.append(f"Lower {ROCKSDB_PREFIX}maxMemoryUsageMB to {limit}: the limit now is above the executor's room for it.")
    fit = max(int(target // per_instance), 1)
    executors = math.ceil(est.instances / fit)
    out.append(
        f"Or spread the {est.instances} store instances over {executors} executors ({fit} each) "
        f"for {mib(fit * per_instance)} each; or set spark.executor.memoryOverhead to {mib(expected / TARGET_SHARE)}."
    )
    out.append(
        "Fewer spark.sql.shuffle.partitions means fewer instances, but only for a new checkpoint: a checkpoint keeps its partitions."
    )
    return out


@dataclasses.dataclass(frozen=True)
class HeapEstimate:
    """The HDFS provider's state in the executors' JVM heap."""

    versions: int  # versions each store keeps loaded (maxBatchesToRetainInMemory)
    version_bytes: int | None  # the current version, over all instances
    loaded_bytes: int | None  # every loaded version, over all instances (Spark's memoryUsedBytes when measured)
    loaded_bytes_per_executor: int | None
    budget_bytes: int  # the executor heap's user memory
    measured: bool


def heap_estimate(
    conf: Mapping[str, str],
    executors: int,
    rows: int | None,
    bytes_per_row: float | None,
    measured_version: int | None,
    measured_loaded: int | None,
) -> HeapEstimate:
    """The loaded versions' memory: measured by Spark (``memoryUsedBytes``, ``stateOnCurrentVersionSizeBytes``)
    unless the rows or their size are given, else rows x bytes per row for each version kept."""
    text = conf.get(RETAIN_CONF, "2").strip()
    versions = int(text) if text.isdigit() and int(text) < 1000 else 2
    try:
        fraction = float(conf.get(FRACTION_CONF, "0.6"))
    except ValueError:
        fraction = 0.6
    fraction = fraction if 0.0 < fraction < 1.0 else 0.6
    heap = parse_size(conf.get("spark.executor.memory", "1g"), MIB) or 1024 * MIB
    budget = max(int((heap - RESERVED_HEAP_BYTES) * (1.0 - fraction)), 0)
    if rows is not None and bytes_per_row is not None:
        version: int | None = int(rows * bytes_per_row)
        loaded: int | None = version * max(versions, 1) if version is not None else None
        measured = False
    else:
        version, loaded, measured = measured_version, measured_loaded, measured_loaded is not None
    per_executor = math.ceil(loaded / max(executors, 1)) if loaded is not None else None
    return HeapEstimate(max(versions, 0), version, loaded, per_executor, budget, measured)


def hdfs_advice(heap: HeapEstimate, executors: int) -> list[str]:
    """Sentences saying whether the HDFS state fits the executors' heap and what to set if not."""
    if heap.loaded_bytes_per_executor is None:
        return ["The state's size is unknown: give --rows and --bytes-per-row (JVM bytes per row), or start from a log or a history."]
    use, budget = heap.loaded_bytes_per_executor, heap.budget_bytes
    share = f"{use / budget:.0%}" if budget > 0 else "all"
    out = [
        f"Expected use: {mib(use)} of JVM heap per executor for {heap.versions} loaded versions "
        f"({RETAIN_CONF}), {share} of the heap's user memory ({mib(budget)}: spark.executor.memory less 300 MiB, "
        f"times 1 - {FRACTION_CONF})."
    ]
    if budget > 0 and use <= TARGET_SHARE * budget:
        out.append("It fits: nothing to set.")
        return out
    need = math.ceil(use / (TARGET_SHARE * budget) * executors) if budget > 0 else executors * 2
    out.append(
        f"Spread it over {need} executors, or raise spark.executor.memory, or set {RETAIN_CONF}=1 "
        "(one version in memory; a retried batch reloads from the checkpoint)."
    )
    out.append("A large state belongs in RocksDB (off the heap), but only for a new checkpoint: a checkpoint keeps its provider.")
    return out
