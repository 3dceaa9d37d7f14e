"""Spark's field names for state operators, and how they map onto ``OperatorProgress``, defined once.

The parser reads operators through ``OPERATOR_FIELDS``; the tracker, the exporters and the batch spans
read them back by the same Spark key with ``operator_field``. The custom-metric keys below are the ones
the signals and the provider detection reason about.
"""

from __future__ import annotations

OPERATOR_NAME = "operatorName"
CUSTOM_METRICS = "customMetrics"
OPERATOR_FIELDS: dict[str, str] = {
    "numRowsTotal": "rows_total",
    "numRowsUpdated": "rows_updated",
    "numRowsRemoved": "rows_removed",
    "numRowsDroppedByWatermark": "rows_dropped_by_watermark",
    "allUpdatesTimeMs": "updates_ms",
    "allRemovalsTimeMs": "removals_ms",
    "commitTimeMs": "commit_ms",
    "memoryUsedBytes": "memory_bytes",
    "numShufflePartitions": "shuffle_partitions",
    "numStateStoreInstances": "store_instances",
}
"""Spark's ``StateOperatorProgress`` field -> ``OperatorProgress`` attribute."""

# RocksDB custom metrics the restore and reload signals read
ROCKSDB_PREFIX = "rocksdb"
ROCKSDB_LOAD_MS = "rocksdbLoadLatencyMs"
ROCKSDB_REPLAY_MS = "rocksdbReplayChangeLogLatencyMs"
ROCKSDB_REPLAY_FILES = "rocksdbNumReplayChangelogFiles"
ROCKSDB_LOADED_FROM_DFS = "rocksdbNumLoadedFromDfs"
ROCKSDB_SST_BYTES = "rocksdbSstFileSize"  # the store's SST files on the executor's disk (live and not yet compacted)
ROCKSDB_COMPACTION_WRITTEN = "rocksdbTotalBytesWrittenByCompaction"  # in the batch: a compaction ran
# HDFS-backed provider custom metrics
HDFS_CACHE_MISSES = "loadedMapCacheMissCount"
HDFS_CURRENT_VERSION_SIZE = "stateOnCurrentVersionSizeBytes"
# per store instance (4.1+): "<prefix>.partition_<n>_<store>"
SNAPSHOT_LAST_UPLOADED = "SnapshotLastUploaded"


def operator_field(op: object, key: str) -> float | None:
    """An operator's value for Spark's field name ``key`` (a key of ``OPERATOR_FIELDS``)."""
    value: float | None = getattr(op, OPERATOR_FIELDS[key])
    return value
