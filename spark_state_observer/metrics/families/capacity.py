"""RocksDB capacity per executor (``spark_state_observer.signals.capacity``): estimate, ceiling, budget, reported.

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import COUNTER, GAUGE, MetricSpec, signal_metric
from spark_state_observer.model.alert_spec import WARNING, AlertSpec


# --- RocksDB capacity per executor (spark_state_observer.signals.capacity): top-K executors plus executor="total" ---
def _cap(name: str, help: str) -> MetricSpec:
    return MetricSpec("", name, GAUGE, "bytes" if name.endswith("_bytes") else "", help, "app", "signal", labels=("executor",))


EXECUTOR_STORE_INSTANCES = _cap(
    "spark_state_executor_store_instances",
    "State store instances each executor holds over the application's queries, latest placed batch of each operator (label executor: top-K executors by estimated memory, and total).",
)
EXECUTOR_ROCKSDB_MEMORY_ESTIMATE = _cap(
    "spark_state_executor_rocksdb_memory_estimate_bytes",
    "RocksDB memory the executor's stores need by the application's configuration and the data they hold (spark_state_observer.model.capacity, expected; capped by maxMemoryUsageMB when boundedMemoryUsage is on).",
)
EXECUTOR_ROCKSDB_MEMORY_CEILING = _cap(
    "spark_state_executor_rocksdb_memory_ceiling_bytes",
    "RocksDB memory the executor's stores can grow to: full write buffers and block cache per instance, plus index and filters (capped when bounded).",
)
EXECUTOR_ROCKSDB_MEMORY_BUDGET = _cap(
    "spark_state_executor_rocksdb_memory_budget_bytes",
    "The executor's room for RocksDB: spark.executor.memoryOverhead (else max(factor x executor memory, minimum)); total: over the executors holding state.",
)
EXECUTOR_ROCKSDB_MEMORY_REPORTED = _cap(
    "spark_state_executor_rocksdb_memory_reported_bytes",
    "RocksDB memory Spark reports for the executor's state partitions (memoryUsedBytes of their tasks; event logs only; bounded mode: a share of the shared total, SPARK-53002).",
)
EXECUTOR_ROCKSDB_SST = _cap(
    "spark_state_executor_rocksdb_sst_bytes",
    "Local SST bytes of the executor's stores: each operator's rocksdbSstFileSize shared out by the executor's share of its partitions.",
)
ROCKSDB_MEMORY_IMPLAUSIBLE = signal_metric(
    "spark_state_rocksdb_memory_implausible",
    COUNTER,
    "",
    "Batches whose RocksDB memory report cannot be right (label reason: above_budget, zero_with_rows, bounded_division); one rocksdb_memory_implausible signal each (once per run for bounded_division).",
    labels=("reason",),
)
CAPACITY_METRICS: tuple[MetricSpec, ...] = (
    EXECUTOR_STORE_INSTANCES,
    EXECUTOR_ROCKSDB_MEMORY_ESTIMATE,
    EXECUTOR_ROCKSDB_MEMORY_CEILING,
    EXECUTOR_ROCKSDB_MEMORY_BUDGET,
    EXECUTOR_ROCKSDB_MEMORY_REPORTED,
    EXECUTOR_ROCKSDB_SST,
    ROCKSDB_MEMORY_IMPLAUSIBLE,
)
"""RocksDB memory and disk per executor against its budget (issue 31); written by ``spark_state_observer.signals.capacity``."""


# the alert read straight from these metrics
ALERTS = (
    AlertSpec(
        "SparkStateRocksDBMemoryNearBudget",
        "state",
        "15m",
        WARNING,
        thresholds=("rocksdb_memory_budget_ratio",),
        summary="RocksDB needs most of an executor's memory overhead.",
    ),
)
