"""Placement of state partitions (``spark_state_observer.placement.tracker``): migrations, stickiness, skew, per executor.

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import COUNTER, GAUGE, MetricSpec


# --- placement of state partitions (spark_state_observer.placement.tracker): bounded per operator, top-K partitions / executors ---
def _p(name: str, kind: str, unit: str, help: str, scope: str = "operator", labels: tuple[str, ...] = (), since: str = "3.5") -> MetricSpec:
    return MetricSpec("", name, kind, unit, help, scope, "signal", since, labels=labels)


PARTITION_MIGRATIONS = _p(
    "spark_state_partition_migrations",
    COUNTER,
    "",
    "State partitions that ran on another executor than in their previous batch (label cause: executor_removed, executor_added, locality_fallback, unknown).",
    labels=("cause",),
)
PARTITION_MIGRATION_BATCHES = _p(
    "spark_state_partition_migration_batches",
    COUNTER,
    "",
    "Batches in which at least one of the operator's state partitions migrated (one partition_migrated signal each); a few per window means state keeps moving.",
)
PARTITION_PLACEMENTS = _p(
    "spark_state_partition_placements",
    COUNTER,
    "",
    "State partitions compared with their previous batch (the denominator of stickiness: 1 - rate(migrations)/rate(placements)).",
)
PARTITION_MIGRATION_LOAD = _p(
    "spark_state_partition_migration_load_seconds",
    COUNTER,
    "seconds",
    "Store load time of migrated partitions (RocksDB 4.1+ per-task metric, from event logs; live polling carries no per-task SQL metrics; an aggregation's second, cheap load is what its tasks report).",
    since="4.1",
)
PARTITION_MIGRATION_FILES = _p(
    "spark_state_partition_migration_changelog_files",
    COUNTER,
    "files",
    "Changelog files replayed by migrated partitions (RocksDB 4.1+, from event logs).",
    since="4.1",
)
PARTITION_STICKINESS = _p(
    "spark_state_partition_stickiness_ratio",
    GAUGE,
    "ratio",
    "Share of the operator's state partitions that stayed on their executor in the latest placed batch.",
)
PARTITION_ROWS_SKEW = _p(
    "spark_state_partition_rows_skew_ratio",
    GAUGE,
    "ratio",
    "Largest partition's state rows over the median partition's, latest batch (1 = even; event logs only).",
)
PARTITION_MEMORY_SKEW = _p(
    "spark_state_partition_memory_skew_ratio",
    GAUGE,
    "ratio",
    "Largest partition's state memory over the median partition's, latest batch (event logs only).",
)
PARTITION_BYTES_SKEW = _p(
    "spark_state_partition_bytes_skew_ratio",
    GAUGE,
    "ratio",
    "Largest partition's state bytes (RocksDB SST files) over the median partition's, latest batch (1 = even; event logs only). "
    "The state's size: memory is mostly fixed per store instance, rows do not weigh values.",
)
PARTITION_BYTES_MAX = _p(
    "spark_state_partition_max_bytes",
    GAUGE,
    "bytes",
    "State bytes (RocksDB SST files) of the operator's largest partition, latest batch (event logs only).",
)
PARTITION_ROWS_MAX = _p(
    "spark_state_partition_rows_max", GAUGE, "rows", "State rows of the operator's largest partition, latest batch (event logs only)."
)
EXECUTOR_STATE_MEMORY = _p(
    "spark_state_executor_memory_used_bytes",
    GAUGE,
    "bytes",
    "State memory held per executor over the query's operators and partitions, latest batch (label executor, top-K executors; event logs only).",
    "query",
    ("executor",),
)
EXECUTOR_STATE_PARTITIONS = _p(
    "spark_state_executor_partitions",
    GAUGE,
    "",
    "State partitions per executor over the query's operators, latest batch (label executor, top-K executors).",
    "query",
    ("executor",),
)
PARTITION_MIGRATION_LAST_LOAD = _p(
    "spark_state_partition_migration_last_load_seconds",
    GAUGE,
    "seconds",
    "Load time of the latest migration of the operator's top-K costliest migrated partitions (label partition; event logs only).",
    labels=("partition",),
    since="4.1",
)
PLACEMENT_METRICS: tuple[MetricSpec, ...] = (
    PARTITION_MIGRATIONS,
    PARTITION_MIGRATION_BATCHES,
    PARTITION_PLACEMENTS,
    PARTITION_MIGRATION_LOAD,
    PARTITION_MIGRATION_FILES,
    PARTITION_STICKINESS,
    PARTITION_ROWS_SKEW,
    PARTITION_MEMORY_SKEW,
    PARTITION_BYTES_SKEW,
    PARTITION_ROWS_MAX,
    PARTITION_BYTES_MAX,
    EXECUTOR_STATE_MEMORY,
    EXECUTOR_STATE_PARTITIONS,
    PARTITION_MIGRATION_LAST_LOAD,
)
"""Where state partitions run and what their moves cost (issue 14); written by ``spark_state_observer.placement.feed``."""
