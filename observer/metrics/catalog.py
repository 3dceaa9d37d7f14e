"""The metric catalog: every metric the observer exports, in one typed list.

Spark-derived metrics, the signals' metrics and the observer's own metrics are all here, with name,
type, unit, labels, help text, the Spark field they come from and the first Spark version that reports
it. Emitters (the tracker, the signals, the exporters) refer to these spec objects, never to names; the
README's metric reference, the ``metrics`` command, the OpenTelemetry names, the dashboards and the alert
rules are all derived from ``CATALOG``. Importing this module imports nothing beyond the standard library.

How Spark computes the values (``StateStoreWriter.getProgress`` / ``setStoreMetrics``): every operator
field and custom metric in a progress event is the **sum over the tasks of that one batch**. So:

- ``COUNTER`` specs are per-batch amounts (rows updated, milliseconds spent, gets, bytes written). The
  observer adds each batch's value to a ``_total`` counter, which is what ``rate()`` wants.
- ``GAUGE`` specs are point-in-time sizes summed over partitions (rows held, memory, SST size), exported
  as the latest batch's value.
- ``CUMULATIVE_PER_RUN`` specs are counters Spark keeps per provider instance (HDFS ``loadedMapCache*``):
  they restart with every run, so they are exported as gauges and the signals take their deltas.
- ``HISTOGRAM`` specs are the observer's own latency histograms (Prometheus only).

Values in milliseconds are exported in seconds and the name says so (``_seconds``); ``-1`` sentinels are
never a value (see ``observer.model``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from observer.model.identity import APP_LABEL
from observer.model.signal_kinds import EXCEPTION_CLASSES

GAUGE = "gauge"
COUNTER = "counter"
CUMULATIVE_PER_RUN = "cumulative_per_run"
HISTOGRAM = "histogram"

MS = 0.001

# the labels every series of a scope carries, before the spec's own
SCOPE_LABELS: dict[str, tuple[str, ...]] = {
    "query": ("query", "query_id"),
    "sink": ("query", "query_id"),
    "source": ("query", "query_id", "source_index", "source"),
    "operator": ("query", "query_id", "operator_index", "operator"),
    "instance": ("query", "query_id", "operator_index", "operator", "partition", "store"),
    "app": (),
    "observer": (),
}


class UnknownMetricError(KeyError):
    """A name or spec that is not in ``CATALOG``: a metric must be declared here before it is emitted."""


@dataclass(frozen=True, eq=False)  # identity equality: specs are singletons, and hashing them is on the hot path
class MetricSpec:
    """One exported metric: where its value comes from and how it is named, typed and labelled."""

    key: str  # field of the progress JSON, or custom metric name, or "" for derived metrics
    name: str  # Prometheus name without the "_total" suffix a counter gets
    kind: str  # GAUGE, COUNTER, CUMULATIVE_PER_RUN or HISTOGRAM
    unit: str  # base unit: seconds, bytes, rows, files, ... ("" for a plain number)
    help: str
    scope: str  # a key of SCOPE_LABELS: query, operator, source, sink, instance, app, observer
    source: str = "common"  # common, rocksdb, hdfs, dedup, join, transformWithState, signal, observer
    since: str = "3.5"
    scale: float = 1.0  # multiply Spark's value by this to get the base unit
    labels: tuple[str, ...] = ()  # labels beyond the scope's

    @property
    def prometheus_name(self) -> str:
        return self.name + "_total" if self.kind == COUNTER else self.name

    @property
    def prometheus_type(self) -> str:
        return {COUNTER: "counter", HISTOGRAM: "histogram"}.get(self.kind, "gauge")

    @property
    def label_names(self) -> tuple[str, ...]:
        """Every label of the metric's series: the scope's, then its own."""
        return SCOPE_LABELS[self.scope] + self.labels

    @property
    def carries_app(self) -> bool:
        """Whether the series also carry the application's identity (``APP_LABEL`` after the static labels).

        The exporter puts ``AppContext.labels`` before every series of an application, listener, watcher
        and replay alike; only the observer's own series (scope ``observer``) leave ``app`` out, since one
        watcher serves many applications. ``label_names`` lists the labels beyond that identity.
        """
        return self.scope != "observer"


def _g(
    key: str,
    name: str,
    unit: str,
    help: str,
    scope: str = "operator",
    source: str = "common",
    since: str = "3.5",
    scale: float = 1.0,
    labels: tuple[str, ...] = (),
) -> MetricSpec:
    return MetricSpec(key, name, GAUGE, unit, help, scope, source, since, scale, labels)


def _c(
    key: str,
    name: str,
    unit: str,
    help: str,
    scope: str = "operator",
    source: str = "common",
    since: str = "3.5",
    scale: float = 1.0,
    labels: tuple[str, ...] = (),
) -> MetricSpec:
    return MetricSpec(key, name, COUNTER, unit, help, scope, source, since, scale, labels)


# --- query level (StreamingQueryProgress top-level fields) -------------------------------------------
BATCH_ID = _g("batchId", "spark_streaming_batch_id", "", "Id of the latest completed micro-batch.", "query")
BATCHES = _c("", "spark_streaming_batches", "", "Micro-batches completed (progress events received).", "query")
BATCH_DURATION = _g(
    "batchDuration", "spark_streaming_batch_duration_seconds", "seconds", "Duration of the latest micro-batch.", "query", scale=MS
)
BATCH_SECONDS = _c(
    "batchDuration",
    "spark_streaming_batch_seconds",
    "seconds",
    "Time spent in micro-batches; its rate() over batches_total's gives the mean batch duration.",
    "query",
    scale=MS,
)
INPUT_ROWS = _c("numInputRows", "spark_streaming_input_rows", "rows", "Rows read from all sources.", "query")
INPUT_ROWS_PER_SECOND = _g(
    "inputRowsPerSecond",
    "spark_streaming_input_rows_per_second",
    "rows",
    "Rate at which data arrived, over the latest trigger (Spark reports 0 on a run's first batch).",
    "query",
)
PROCESSED_ROWS_PER_SECOND = _g(
    "processedRowsPerSecond",
    "spark_streaming_processed_rows_per_second",
    "rows",
    "Rate at which Spark processed data in the latest batch.",
    "query",
)
LAST_PROGRESS_TIMESTAMP = _g(
    "timestamp", "spark_streaming_last_progress_timestamp_seconds", "seconds", "Trigger start time of the latest batch, Unix time.", "query"
)
WATERMARK_TIMESTAMP = _g(
    "eventTime.watermark",
    "spark_streaming_watermark_timestamp_seconds",
    "seconds",
    "Event-time watermark after the latest batch, Unix time (absent without a watermark).",
    "query",
)
EVENT_TIME_MAX_TIMESTAMP = _g(
    "eventTime.max",
    "spark_streaming_event_time_max_timestamp_seconds",
    "seconds",
    "Latest event time seen in the latest batch with rows, Unix time.",
    "query",
)
QUERY_METRICS: tuple[MetricSpec, ...] = (
    BATCH_ID,
    BATCHES,
    BATCH_DURATION,
    BATCH_SECONDS,
    INPUT_ROWS,
    INPUT_ROWS_PER_SECOND,
    PROCESSED_ROWS_PER_SECOND,
    LAST_PROGRESS_TIMESTAMP,
    WATERMARK_TIMESTAMP,
    EVENT_TIME_MAX_TIMESTAMP,
)
# durationMs.<phase>, labelled by phase
PHASE_DURATION = _g(
    "durationMs",
    "spark_streaming_phase_duration_seconds",
    "seconds",
    "Duration of each phase of the latest batch (label phase: triggerExecution, latestOffset, getBatch, queryPlanning, addBatch, walCommit, commitOffsets).",
    "query",
    scale=MS,
    labels=("phase",),
)
PHASE_SECONDS = _c(
    "durationMs",
    "spark_streaming_phase_seconds",
    "seconds",
    "Time spent in each batch phase (label phase).",
    "query",
    scale=MS,
    labels=("phase",),
)
PHASE_METRICS: tuple[MetricSpec, ...] = (PHASE_DURATION, PHASE_SECONDS)
SOURCE_INPUT_ROWS = _c("numInputRows", "spark_streaming_source_input_rows", "rows", "Rows read from this source.", "source")
SOURCE_INPUT_ROWS_PER_SECOND = _g(
    "inputRowsPerSecond",
    "spark_streaming_source_input_rows_per_second",
    "rows",
    "Arrival rate at this source in the latest trigger.",
    "source",
)
SOURCE_PROCESSED_ROWS_PER_SECOND = _g(
    "processedRowsPerSecond",
    "spark_streaming_source_processed_rows_per_second",
    "rows",
    "Processing rate of this source's rows in the latest batch.",
    "source",
)
SOURCE_OFFSETS_BEHIND_LATEST = _g(
    "metrics.OffsetsBehindLatest",
    "spark_streaming_source_offsets_behind_latest",
    "",
    "Kafka: offsets between the batch's end and the latest available offset (label stat: min, avg, max).",
    "source",
    labels=("stat",),
)
SOURCE_METRIC = _g(
    "metrics", "spark_streaming_source_metric", "", "Other numeric source metrics, by name (label metric).", "source", labels=("metric",)
)
SOURCE_METRICS: tuple[MetricSpec, ...] = (
    SOURCE_INPUT_ROWS,
    SOURCE_INPUT_ROWS_PER_SECOND,
    SOURCE_PROCESSED_ROWS_PER_SECOND,
    SOURCE_OFFSETS_BEHIND_LATEST,
    SOURCE_METRIC,
)
SINK_OUTPUT_ROWS = _c(
    "numOutputRows",
    "spark_streaming_sink_output_rows",
    "rows",
    "Rows written to the sink (not exported for DSv1 sinks, which report -1).",
    "sink",
)
SINK_METRICS: tuple[MetricSpec, ...] = (SINK_OUTPUT_ROWS,)

# --- state operator fields (StateOperatorProgress) ---------------------------------------------------
OPERATOR_METRICS: tuple[MetricSpec, ...] = (
    _g(
        "numRowsTotal",
        "spark_state_rows",
        "rows",
        "Rows held in the operator's state after the latest batch, summed over partitions (RocksDB reports 0 when trackTotalNumberOfRows=false).",
    ),
    _c("numRowsUpdated", "spark_state_rows_updated", "rows", "State rows added or updated."),
    _c("numRowsRemoved", "spark_state_rows_removed", "rows", "State rows removed (evicted by watermark, timeout or TTL)."),
    _c("numRowsDroppedByWatermark", "spark_state_rows_dropped_by_watermark", "rows", "Input rows dropped as too late for the watermark."),
    _c("allUpdatesTimeMs", "spark_state_update_seconds", "seconds", "Time spent updating state, summed over tasks.", scale=MS),
    _c("allRemovalsTimeMs", "spark_state_removal_seconds", "seconds", "Time spent removing state rows, summed over tasks.", scale=MS),
    _c("commitTimeMs", "spark_state_commit_seconds", "seconds", "Time spent committing state stores, summed over tasks.", scale=MS),
    _g(
        "memoryUsedBytes",
        "spark_state_memory_used_bytes",
        "bytes",
        "Memory used by the operator's state stores after the latest batch, summed over partitions.",
    ),
    _g(
        "numShufflePartitions",
        "spark_state_shuffle_partitions",
        "",
        "Shuffle partitions of the operator, i.e. state partitions (pinned by the checkpoint).",
    ),
    _g(
        "numStateStoreInstances",
        "spark_state_store_instances",
        "",
        "State store instances that ran in the latest batch (partitions x stores per partition).",
    ),
)

# --- provider and operator custom metrics ------------------------------------------------------------
CUSTOM_METRICS: tuple[MetricSpec, ...] = (
    # RocksDB commit breakdown
    _c(
        "rocksdbCommitWriteBatchLatency",
        "spark_state_rocksdb_commit_write_batch_seconds",
        "seconds",
        "RocksDB commit: write-batch time (Spark 3.5 only).",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbCommitPauseLatency",
        "spark_state_rocksdb_commit_pause_seconds",
        "seconds",
        "RocksDB commit: time pausing background work (Spark 3.5 only).",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbCommitFlushLatency",
        "spark_state_rocksdb_commit_flush_seconds",
        "seconds",
        "RocksDB commit: memtable flush time.",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbCommitCompactLatency",
        "spark_state_rocksdb_commit_compact_seconds",
        "seconds",
        "RocksDB commit: compaction time (non-zero only with compactOnCommit).",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbCommitCheckpointLatency",
        "spark_state_rocksdb_commit_checkpoint_seconds",
        "seconds",
        "RocksDB commit: native checkpoint to a local directory.",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbCommitFileSyncLatencyMs",
        "spark_state_rocksdb_commit_file_sync_seconds",
        "seconds",
        "RocksDB commit: sync of files to the checkpoint location.",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbChangeLogWriterCommitLatencyMs",
        "spark_state_rocksdb_commit_changelog_seconds",
        "seconds",
        "RocksDB commit: changelog file commit (changelog checkpointing only).",
        since="4.1",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbSaveZipFilesLatencyMs",
        "spark_state_rocksdb_commit_zip_upload_seconds",
        "seconds",
        "RocksDB commit: snapshot zip upload to the checkpoint location.",
        since="4.1",
        scale=MS,
        source="rocksdb",
    ),
    # RocksDB load / restore
    _c(
        "rocksdbLoadLatencyMs",
        "spark_state_rocksdb_load_seconds",
        "seconds",
        "RocksDB: time loading stores (a restore when a store comes from the checkpoint). Reads 0 for aggregations and session windows, which load twice per task.",
        since="4.1",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbLoadFromSnapshotLatencyMs",
        "spark_state_rocksdb_load_from_snapshot_seconds",
        "seconds",
        "RocksDB: time loading from an explicit snapshot (state reader path; 0 in normal restores).",
        since="4.1",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbReplayChangeLogLatencyMs",
        "spark_state_rocksdb_changelog_replay_seconds",
        "seconds",
        "RocksDB: time replaying changelog files during loads.",
        since="4.1",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbNumReplayChangelogFiles",
        "spark_state_rocksdb_changelog_files_replayed",
        "files",
        "RocksDB: changelog files replayed during loads.",
        since="4.1",
        source="rocksdb",
    ),
    _c(
        "rocksdbNumLoadedFromDfs",
        "spark_state_rocksdb_loads_from_checkpoint",
        "",
        "RocksDB: store loads that fetched state from the checkpoint location instead of reusing an open instance (a restore).",
        since="4.2",
        source="rocksdb",
    ),
    _c(
        "rocksdbNumSnapshotsAutoRepaired",
        "spark_state_rocksdb_snapshots_auto_repaired",
        "",
        "RocksDB: snapshots repaired automatically during load.",
        since="4.2",
        source="rocksdb",
    ),
    _c(
        "rocksdbForceSnapshotCount",
        "spark_state_rocksdb_forced_snapshots",
        "",
        "RocksDB: stores forced to snapshot on commit because their snapshot upload lagged.",
        since="4.2",
        source="rocksdb",
    ),
    # RocksDB file manager (the last upload, not a load)
    _g(
        "rocksdbFilesCopied",
        "spark_state_rocksdb_upload_files_copied",
        "files",
        "RocksDB: SST files copied to the checkpoint at the last upload (an upload, not a load).",
        source="rocksdb",
    ),
    _g(
        "rocksdbBytesCopied",
        "spark_state_rocksdb_upload_copied_bytes",
        "bytes",
        "RocksDB: bytes copied to the checkpoint at the last upload.",
        source="rocksdb",
    ),
    _g(
        "rocksdbFilesReused",
        "spark_state_rocksdb_upload_files_reused",
        "files",
        "RocksDB: SST files already in the checkpoint, not uploaded again, at the last upload.",
        source="rocksdb",
    ),
    _g(
        "rocksdbZipFileBytesUncompressed",
        "spark_state_rocksdb_upload_zip_uncompressed_bytes",
        "bytes",
        "RocksDB: uncompressed bytes of the non-SST files in the last snapshot zip.",
        source="rocksdb",
    ),
    # RocksDB operations
    _c("rocksdbGetLatency", "spark_state_rocksdb_get_seconds", "seconds", "RocksDB: total time in get calls.", scale=MS, source="rocksdb"),
    _c(
        "rocksdbPutLatency",
        "spark_state_rocksdb_put_seconds",
        "seconds",
        "RocksDB: total time in put (write) calls.",
        scale=MS,
        source="rocksdb",
    ),
    _c("rocksdbGetCount", "spark_state_rocksdb_gets", "", "RocksDB: get calls.", source="rocksdb"),
    _c("rocksdbPutCount", "spark_state_rocksdb_puts", "", "RocksDB: put calls.", source="rocksdb"),
    _c(
        "rocksdbReadBlockCacheHitCount",
        "spark_state_rocksdb_block_cache_hits",
        "",
        "RocksDB: reads served by the block cache.",
        source="rocksdb",
    ),
    _c(
        "rocksdbReadBlockCacheMissCount",
        "spark_state_rocksdb_block_cache_misses",
        "",
        "RocksDB: reads that missed the block cache and went to disk.",
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalBytesRead",
        "spark_state_rocksdb_read_bytes",
        "bytes",
        "RocksDB: uncompressed bytes read by get calls.",
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalBytesWritten",
        "spark_state_rocksdb_written_bytes",
        "bytes",
        "RocksDB: uncompressed bytes written by put, delete, merge and write.",
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalBytesReadThroughIterator",
        "spark_state_rocksdb_iterator_read_bytes",
        "bytes",
        "RocksDB: bytes read through iterators (e.g. watermark eviction scans).",
        source="rocksdb",
    ),
    _c(
        "rocksdbWriterStallLatencyMs",
        "spark_state_rocksdb_write_stall_seconds",
        "seconds",
        "RocksDB: time writers waited for flush or compaction (Spark's unit conversion is suspect; compare relative values).",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalCompactionLatencyMs",
        "spark_state_rocksdb_compaction_seconds",
        "seconds",
        "RocksDB: compaction time, background included.",
        scale=MS,
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalBytesReadByCompaction",
        "spark_state_rocksdb_compaction_read_bytes",
        "bytes",
        "RocksDB: bytes read by compaction.",
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalBytesWrittenByCompaction",
        "spark_state_rocksdb_compaction_written_bytes",
        "bytes",
        "RocksDB: bytes written by compaction.",
        source="rocksdb",
    ),
    _c(
        "rocksdbTotalBytesWrittenByFlush",
        "spark_state_rocksdb_flush_written_bytes",
        "bytes",
        "RocksDB: bytes written by memtable flushes.",
        source="rocksdb",
    ),
    # RocksDB sizes (point in time, summed over partitions)
    _g(
        "rocksdbSstFileSize",
        "spark_state_rocksdb_sst_size_bytes",
        "bytes",
        "RocksDB: size of all live SST files on the executors' local disks, summed over partitions.",
        source="rocksdb",
    ),
    _g(
        "rocksdbPinnedBlocksMemoryUsage",
        "spark_state_rocksdb_pinned_blocks_memory_bytes",
        "bytes",
        "RocksDB: memory of pinned blocks in the block cache, summed over partitions.",
        source="rocksdb",
    ),
    _g(
        "rocksdbNumInternalColFamiliesKeys",
        "spark_state_rocksdb_internal_column_family_keys",
        "",
        "RocksDB: keys in internal column families (transformWithState timers, TTL indexes).",
        since="4.0",
        source="rocksdb",
    ),
    _g(
        "rocksdbNumExternalColumnFamilies",
        "spark_state_rocksdb_external_column_families",
        "",
        "RocksDB: user column families, summed over partitions (swapped with the internal count in Spark 4.0 and 4.1).",
        since="4.0",
        source="rocksdb",
    ),
    _g(
        "rocksdbNumInternalColumnFamilies",
        "spark_state_rocksdb_internal_column_families",
        "",
        "RocksDB: internal column families, summed over partitions (swapped with the external count in Spark 4.0 and 4.1).",
        since="4.0",
        source="rocksdb",
    ),
    # HDFS-backed provider
    MetricSpec(
        "loadedMapCacheHitCount",
        "spark_state_hdfs_loaded_map_cache_hits",
        CUMULATIVE_PER_RUN,
        "",
        "HDFS-backed store: state-cache hits, cumulative per provider instance (restarts with each run).",
        "operator",
        "hdfs",
    ),
    MetricSpec(
        "loadedMapCacheMissCount",
        "spark_state_hdfs_loaded_map_cache_misses",
        CUMULATIVE_PER_RUN,
        "",
        "HDFS-backed store: versions rebuilt from snapshot and delta files, cumulative per provider instance; an increase is a restore.",
        "operator",
        "hdfs",
    ),
    _g(
        "stateOnCurrentVersionSizeBytes",
        "spark_state_hdfs_current_version_size_bytes",
        "bytes",
        "HDFS-backed store: estimated size of the current version only (memory_used_bytes counts every version kept in memory).",
        source="hdfs",
    ),
    _c(
        "numSnapshotsAutoRepaired",
        "spark_state_hdfs_snapshots_auto_repaired",
        "",
        "HDFS-backed store: snapshots repaired automatically.",
        since="4.2",
        source="hdfs",
    ),
    _c(
        "forceSnapshotCount",
        "spark_state_hdfs_forced_snapshots",
        "",
        "HDFS-backed store: stores forced to snapshot because their upload lagged.",
        since="4.2",
        source="hdfs",
    ),
    # operator-specific
    _c(
        "numDroppedDuplicateRows",
        "spark_state_dedup_dropped_duplicate_rows",
        "rows",
        "Deduplication: duplicate input rows dropped.",
        source="dedup",
    ),
    _c(
        "numRowsReadDuringEviction",
        "spark_state_eviction_rows_read",
        "rows",
        "State rows read while evicting (dedup, streamline aggregation).",
        source="dedup",
        since="4.3",
    ),
    _c(
        "numRowsIncrementallyRemoved",
        "spark_state_eviction_rows_incrementally_removed",
        "rows",
        "State rows removed by incremental eviction.",
        source="dedup",
        since="4.3",
    ),
    _c(
        "skippedNullValueCount",
        "spark_state_join_skipped_null_values",
        "",
        "Stream-stream join: null values skipped in state.",
        source="join",
    ),
    _c(
        "initialStateProcessingTimeMs",
        "spark_state_tws_initial_state_processing_seconds",
        "seconds",
        "transformWithState: time processing the initial state.",
        source="transformWithState",
        since="4.0",
        scale=MS,
    ),
    _c(
        "timerProcessingTimeMs",
        "spark_state_tws_timer_processing_seconds",
        "seconds",
        "transformWithState: time processing timers.",
        source="transformWithState",
        since="4.0",
        scale=MS,
    ),
    _g(
        "numValueStateVars",
        "spark_state_tws_value_state_variables",
        "",
        "transformWithState: value state variables, summed over tasks.",
        source="transformWithState",
        since="4.0",
    ),
    _g(
        "numListStateVars",
        "spark_state_tws_list_state_variables",
        "",
        "transformWithState: list state variables, summed over tasks.",
        source="transformWithState",
        since="4.0",
    ),
    _g(
        "numMapStateVars",
        "spark_state_tws_map_state_variables",
        "",
        "transformWithState: map state variables, summed over tasks.",
        source="transformWithState",
        since="4.0",
    ),
    _g(
        "numValueStateWithTTLVars",
        "spark_state_tws_value_state_ttl_variables",
        "",
        "transformWithState: value state variables with TTL, summed over tasks.",
        source="transformWithState",
        since="4.0",
    ),
    _g(
        "numListStateWithTTLVars",
        "spark_state_tws_list_state_ttl_variables",
        "",
        "transformWithState: list state variables with TTL, summed over tasks.",
        source="transformWithState",
        since="4.0",
    ),
    _g(
        "numMapStateWithTTLVars",
        "spark_state_tws_map_state_ttl_variables",
        "",
        "transformWithState: map state variables with TTL, summed over tasks.",
        source="transformWithState",
        since="4.0",
    ),
    _c(
        "numDeletedStateVars",
        "spark_state_tws_deleted_state_variables",
        "",
        "transformWithState: state variables deleted.",
        source="transformWithState",
        since="4.0",
    ),
    _c(
        "numRegisteredTimers",
        "spark_state_tws_timers_registered",
        "",
        "transformWithState: timers registered.",
        source="transformWithState",
        since="4.0",
    ),
    _c(
        "numDeletedTimers",
        "spark_state_tws_timers_deleted",
        "",
        "transformWithState: timers deleted.",
        source="transformWithState",
        since="4.0",
    ),
    _c(
        "numExpiredTimers",
        "spark_state_tws_timers_expired",
        "",
        "transformWithState: timers that fired.",
        source="transformWithState",
        since="4.0",
    ),
    _c(
        "numValuesRemovedDueToTTLExpiry",
        "spark_state_tws_ttl_expired_values",
        "",
        "transformWithState: values removed because their TTL expired.",
        source="transformWithState",
        since="4.0",
    ),
)
UNKNOWN_CUSTOM_METRIC = _g(
    "",
    "spark_state_custom_metric",
    "",
    "Custom state metrics this observer does not know yet, by Spark's name (label metric), latest batch value.",
    labels=("metric",),
)

# --- per store instance (4.1+), bounded to the top-K most lagging ------------------------------------
SNAPSHOT_LAST_UPLOADED = _g(
    "SnapshotLastUploaded",
    "spark_state_snapshot_last_uploaded_version",
    "",
    "Last state version whose snapshot this store instance uploaded (only the most lagging instances are reported; -1 'none yet' is not exported).",
    "instance",
    since="4.1",
)
SNAPSHOT_LAG_BATCHES = _g(
    "",
    "spark_state_snapshot_lag_batches",
    "",
    "Versions committed since this store instance's last uploaded snapshot, counted from the first version when it never uploaded: "
    "about the changelog files a restart would replay (top-K most lagging instances; from the checkpoint's listing where it is readable).",
    "instance",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_WITHOUT_UPLOAD = _g(
    "",
    "spark_state_snapshot_instances_without_upload",
    "",
    "Reported store instances that have not uploaded a snapshot yet in this run (Spark's -1).",
    "operator",
    source="signal",
    since="4.1",
)
# --- snapshot health of every store instance (observer.signals.snapshots), per operator -------------
SNAPSHOT_MAX_LAG_BATCHES = _g(
    "",
    "spark_state_snapshot_max_lag_batches",
    "",
    "Largest snapshot lag over all the operator's store instances (never uploaded: counted from the first version); "
    "exact from the progress, whose top-K report always holds the most lagging instance.",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_NEVER_UPLOADED = _g(
    "",
    "spark_state_snapshot_instances_never_uploaded",
    "",
    "Store instances of the operator without any uploaded snapshot: from the checkpoint's listing where readable, "
    "else from the progress (a lower bound while spark_state_snapshot_instances_unknown is above 0).",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_UNKNOWN = _g(
    "",
    "spark_state_snapshot_instances_unknown",
    "",
    "Store instances whose snapshot state neither the progress (Spark reports the most lagging few) nor the checkpoint's listing tells.",
    source="signal",
    since="4.1",
)
SNAPSHOT_INSTANCES_LAGGING = _g(
    "",
    "spark_state_snapshot_instances_lagging",
    "",
    "Store instances whose snapshot lag exceeds what is normal (setting snapshot_lag_batches plus a maintenance interval's worth of batches).",
    source="signal",
    since="4.1",
)
SNAPSHOT_RESTORE_REPLAY_FILES = _g(
    "",
    "spark_state_snapshot_restore_replay_files",
    "files",
    "Changelog (or delta) files a restore of all the operator's store instances would replay after their newest snapshot, "
    "from the checkpoint's listing (absent where the checkpoint cannot be read).",
    source="signal",
    since="4.1",
)
INSTANCE_METRICS: tuple[MetricSpec, ...] = (
    SNAPSHOT_LAST_UPLOADED,
    SNAPSHOT_LAG_BATCHES,
    SNAPSHOT_INSTANCES_WITHOUT_UPLOAD,
    SNAPSHOT_MAX_LAG_BATCHES,
    SNAPSHOT_INSTANCES_NEVER_UPLOADED,
    SNAPSHOT_INSTANCES_UNKNOWN,
    SNAPSHOT_INSTANCES_LAGGING,
    SNAPSHOT_RESTORE_REPLAY_FILES,
)
UNKNOWN_INSTANCE_METRIC = _g(
    "",
    "spark_state_instance_metric",
    "",
    "Per-instance metrics this observer does not know yet (label metric), top-K by value.",
    "instance",
    labels=("metric",),
)

# --- query lifecycle, from started / idle / terminated events ----------------------------------------
QUERY_INFO = _g(
    "",
    "spark_streaming_query_info",
    "",
    "Always 1; labels carry the current run id and the observer's view of the provider.",
    "query",
    labels=("run_id",),
)
QUERY_STATUS = _g(
    "",
    "spark_streaming_query_status",
    "",
    "1 for the query's current status (label status: active, idle, terminated, failed), 0 for the others.",
    "query",
    labels=("status",),
)
QUERY_STARTS = _c("", "spark_streaming_query_starts", "", "Query starts seen (first start and restarts).", "query")
QUERY_TERMINATIONS = _c(
    "", "spark_streaming_query_terminations", "", "Query terminations seen (label outcome: clean, exception).", "query", labels=("outcome",)
)
LIFECYCLE_METRICS: tuple[MetricSpec, ...] = (QUERY_INFO, QUERY_STATUS, QUERY_STARTS, QUERY_TERMINATIONS)
APPLICATION_INFO = _g(
    "",
    "spark_streaming_application_info",
    "",
    "Always 1 per observed application; its labels carry the volatile identity (application id, attempt, event-log name) that every other series leaves out: they carry only `app` and the static labels.",
    "app",
    labels=("app_id", "attempt", "log_name"),
)
OPERATOR_INFO = _g(
    "",
    "spark_state_operator_info",
    "",
    "Always 1; label provider tells the state store provider (rocksdb, hdfs, unknown).",
    "operator",
    labels=("provider",),
)


# --- derived by observer.signals ---------------------------------------------------------------------
def _s(name: str, kind: str, unit: str, help: str, scope: str = "operator", labels: tuple[str, ...] = ()) -> MetricSpec:
    return MetricSpec("", name, kind, unit, help, scope, "signal", labels=labels)


QUERY_RESTARTS = _s(
    "spark_streaming_query_restarts",
    COUNTER,
    "",
    "Restarts: the same query id started with a new run id (in this process, or from a checkpoint with committed batches).",
    "query",
)
QUERY_LAST_DOWNTIME = _s(
    "spark_streaming_query_last_downtime_seconds",
    GAUGE,
    "seconds",
    "Time the query was down before its latest restart: from the previous run's termination to the new run's start (when the termination was not seen: from its last progress).",
    "query",
)
QUERY_CRASH_LOOP = _s(
    "spark_streaming_query_crash_loop",
    GAUGE,
    "",
    "1 while the query restarted crash_loop_restarts times within crash_loop_window_seconds.",
    "query",
)
QUERY_STALLED = _s(
    "spark_streaming_query_stalled",
    GAUGE,
    "",
    "1 while a non-idle query has made no progress for stall_factor x its usual interval.",
    "query",
)
QUERY_SECONDS_SINCE_PROGRESS = _s(
    "spark_streaming_query_seconds_since_progress",
    GAUGE,
    "seconds",
    "Seconds since the query's last progress event (at the observer's last tick).",
    "query",
)
QUERY_TERMINATIONS_BY_CLASS = _s(
    "spark_streaming_query_terminations_by_class",
    COUNTER,
    "",
    "Terminations with an exception, by class (label exception_class: " + ", ".join(EXCEPTION_CLASSES) + ").",
    "query",
    ("exception_class",),
)
WATERMARK_LAG = _s(
    "spark_streaming_watermark_lag_seconds", GAUGE, "seconds", "Trigger time of the latest batch minus its event-time watermark.", "query"
)
FALLING_BEHIND = _s(
    "spark_streaming_falling_behind",
    GAUGE,
    "",
    "1 while the input rate stayed above the processing rate for falling_behind_window_seconds.",
    "query",
)
STATE_RESTORES = _s(
    "spark_state_restores",
    COUNTER,
    "",
    "State restores after a restart, per operator (the restore event carries duration, method and files).",
    "operator",
)
STATE_STORE_RELOADS = _s(
    "spark_state_store_reloads",
    COUNTER,
    "",
    "Batches in which stores were reloaded from the checkpoint within a run: an executor loss or a task moved (the store_reload event carries the evidence).",
    "operator",
)
LAST_RESTORE_DURATION = _s(
    "spark_state_last_restore_duration_seconds",
    GAUGE,
    "seconds",
    "Duration of the operator's latest restore (label method: load_metrics, measured by Spark; task_times, the extra time of the stateful stage's slowest task in the restart batch over its next batches, where tasks are followed; or residual_estimate, what remains of the batch's excess over the usual once other operators' restores and the backlog are taken out; label confidence: measured, estimated or low).",
    "operator",
    ("method", "confidence"),
)
LAST_RESTORE_CHANGELOG_FILES = _s(
    "spark_state_last_restore_changelog_files",
    GAUGE,
    "files",
    "Changelog files replayed in the operator's latest restore (RocksDB 4.1+).",
    "operator",
)
ROWS_GROWTH_RATE = _s(
    "spark_state_rows_growth_rate",
    GAUGE,
    "rows",
    "Rows per second the operator's state grew over growth_window_seconds (least squares).",
    "operator",
)
MEMORY_GROWTH_RATE = _s(
    "spark_state_memory_growth_rate_bytes",
    GAUGE,
    "bytes",
    "Bytes per second the operator's state memory grew over the growth window.",
    "operator",
)
EVICTION_RATIO = _s(
    "spark_state_eviction_ratio",
    GAUGE,
    "ratio",
    "Rows removed per row added or updated over the growth window (0 = nothing evicted).",
    "operator",
)
STATE_UNBOUNDED = _s(
    "spark_state_unbounded",
    GAUGE,
    "",
    "1 when the state's rows (or bytes) kept rising over the growth window; 0 when flat (bounded); absent until judged.",
    "operator",
)
ROWS_BUDGET_ETA = _s(
    "spark_state_rows_budget_eta_seconds",
    GAUGE,
    "seconds",
    "Forecast seconds until the operator's rows reach state_rows_budget at the current growth rate.",
    "operator",
)
MEMORY_BUDGET_ETA = _s(
    "spark_state_memory_budget_eta_seconds",
    GAUGE,
    "seconds",
    "Forecast seconds until the operator's memory reaches state_memory_budget_bytes.",
    "operator",
)
PARTITION_CHANGES = _s(
    "spark_state_partition_changes",
    COUNTER,
    "",
    "Changes of the operator's shuffle partitions between batches (a repartitioning; a checkpointed stateful query pins them).",
    "operator",
)
STATE_TASK_RETRIES = _s(
    "spark_state_task_retry_batches",
    COUNTER,
    "",
    "Batches in which the operator ran more state store instances than usual with the same partitions: retried or speculative tasks, not a repartitioning.",
    "operator",
)
LOAD_LATENCY_ANOMALIES = _s(
    "spark_state_load_latency_anomalies",
    COUNTER,
    "",
    "Batches whose RocksDB load latency was far above the run's usual with no sign of a reload (jitter on a busy machine, or a slow disk).",
    "operator",
)
EXECUTORS = _s(
    "spark_streaming_executors",
    GAUGE,
    "",
    "Executors registered with the driver (polled at most once per progress event; 0 in local mode).",
    "app",
)
EXECUTOR_CHANGES = _s("spark_streaming_executor_changes", COUNTER, "", "Executors added and removed (label change).", "app", ("change",))
SIGNAL_METRICS: tuple[MetricSpec, ...] = (
    QUERY_RESTARTS,
    QUERY_LAST_DOWNTIME,
    QUERY_CRASH_LOOP,
    QUERY_STALLED,
    QUERY_SECONDS_SINCE_PROGRESS,
    QUERY_TERMINATIONS_BY_CLASS,
    WATERMARK_LAG,
    FALLING_BEHIND,
    STATE_RESTORES,
    STATE_STORE_RELOADS,
    LAST_RESTORE_DURATION,
    LAST_RESTORE_CHANGELOG_FILES,
    ROWS_GROWTH_RATE,
    MEMORY_GROWTH_RATE,
    EVICTION_RATIO,
    STATE_UNBOUNDED,
    ROWS_BUDGET_ETA,
    MEMORY_BUDGET_ETA,
    PARTITION_CHANGES,
    STATE_TASK_RETRIES,
    LOAD_LATENCY_ANOMALIES,
    EXECUTORS,
    EXECUTOR_CHANGES,
)


# --- Kafka sources, from the offsets of each progress (observer.signals.kafka_lag, observer.signals.kafka) ---
def _k(name: str, kind: str, unit: str, help: str, labels: tuple[str, ...], key: str = "") -> MetricSpec:
    return MetricSpec(key, name, kind, unit, help, "source", "kafka", labels=labels)


KAFKA_LAG_RECORDS = _k(
    "spark_streaming_kafka_lag_records",
    GAUGE,
    "records",
    "Kafka records not yet read by the query per partition (latest offset when the batch was planned minus the batch's end offset); only the top-K partitions by lag (labels topic, partition).",
    ("topic", "partition"),
    "latestOffset-endOffset",
)
KAFKA_LAG_SECONDS = _k(
    "spark_streaming_kafka_lag_seconds",
    GAUGE,
    "seconds",
    "Age of the oldest unread Kafka record per partition, interpolated over the history of latest offsets (absent while only a lower bound is known: a new observer's first batch); only the top-K partitions (labels topic, partition).",
    ("topic", "partition"),
)
KAFKA_TOPIC_LAG_RECORDS = _k(
    "spark_streaming_kafka_topic_lag_records",
    GAUGE,
    "records",
    "Kafka records not yet read by the query, summed over the topic's partitions (label topic).",
    ("topic",),
    "latestOffset-endOffset",
)
KAFKA_TOPIC_LAG_SECONDS = _k(
    "spark_streaming_kafka_topic_lag_seconds",
    GAUGE,
    "seconds",
    "Largest lag in seconds over the topic's partitions: the figure a freshness SLO is written in (label topic).",
    ("topic",),
)
KAFKA_PARTITIONS = _k(
    "spark_streaming_kafka_partitions", GAUGE, "", "Partitions of the topic the query reads (label topic).", ("topic",), "latestOffset"
)
KAFKA_STUCK_PARTITIONS = _k(
    "spark_streaming_kafka_stuck_partitions",
    GAUGE,
    "",
    "Partitions whose end offset has not moved for several batches while their latest offset has (label topic).",
    ("topic",),
)
KAFKA_LAG_GROWTH = _k(
    "spark_streaming_kafka_topic_lag_growth_records_per_second",
    GAUGE,
    "records",
    "Slope of the topic's lag over the growth window (least squares); positive while the query falls behind (label topic).",
    ("topic",),
)
KAFKA_CATCH_UP_FORECAST = _k(
    "spark_streaming_kafka_catch_up_forecast_seconds",
    GAUGE,
    "seconds",
    "Forecast seconds until the query has read the topic's backlog, at the rate it read while behind and the topic's produce rate over the recent batches; 0 when caught up, absent when it is not draining (label topic).",
    ("topic",),
)
KAFKA_OFFSET_ANOMALIES = _k(
    "spark_streaming_kafka_offset_anomalies",
    COUNTER,
    "",
    "Offsets that went backwards or skipped between batches (label kind: rewound, skipped, latest_went_back; label topic): data-loss or reprocessing risk.",
    ("topic", "kind"),
)
KAFKA_PARTITIONS_ADDED = _k(
    "spark_streaming_kafka_partitions_added", COUNTER, "", "Partitions that appeared in a topic the query reads (label topic).", ("topic",)
)
KAFKA_METRICS: tuple[MetricSpec, ...] = (
    KAFKA_LAG_RECORDS,
    KAFKA_LAG_SECONDS,
    KAFKA_TOPIC_LAG_RECORDS,
    KAFKA_TOPIC_LAG_SECONDS,
    KAFKA_PARTITIONS,
    KAFKA_STUCK_PARTITIONS,
    KAFKA_LAG_GROWTH,
    KAFKA_CATCH_UP_FORECAST,
    KAFKA_OFFSET_ANOMALIES,
    KAFKA_PARTITIONS_ADDED,
)


# --- placement of state partitions (observer.placement.tracker): bounded per operator, top-K partitions / executors ---
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
    PARTITION_ROWS_MAX,
    EXECUTOR_STATE_MEMORY,
    EXECUTOR_STATE_PARTITIONS,
    PARTITION_MIGRATION_LAST_LOAD,
)
"""Where state partitions run and what their moves cost (issue 14); written by ``observer.placement.feed``."""


# --- RocksDB capacity per executor (observer.signals.capacity): top-K executors plus executor="total" ---
def _cap(name: str, help: str) -> MetricSpec:
    return MetricSpec("", name, GAUGE, "bytes" if name.endswith("_bytes") else "", help, "app", "signal", labels=("executor",))


EXECUTOR_STORE_INSTANCES = _cap(
    "spark_state_executor_store_instances",
    "State store instances each executor holds over the application's queries, latest placed batch of each operator (label executor: top-K executors by estimated memory, and total).",
)
EXECUTOR_ROCKSDB_MEMORY_ESTIMATE = _cap(
    "spark_state_executor_rocksdb_memory_estimate_bytes",
    "RocksDB memory the executor's stores need by the application's configuration and the data they hold (observer.model.capacity, expected; capped by maxMemoryUsageMB when boundedMemoryUsage is on).",
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
ROCKSDB_MEMORY_IMPLAUSIBLE = _s(
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
"""RocksDB memory and disk per executor against its budget (issue 31); written by ``observer.signals.capacity``."""


# --- the observer itself: what it received, dropped and failed, and what it cost ---------------------
def _o(name: str, kind: str, unit: str, help: str, labels: tuple[str, ...] = ()) -> MetricSpec:
    return MetricSpec("", name, kind, unit, help, "observer", "observer", labels=labels)


EVENTS_RECEIVED = _o("spark_state_observer_events_received", COUNTER, "", "Listener events received (label kind).", ("kind",))
EVENTS_DROPPED = _o(
    "spark_state_observer_events_dropped",
    COUNTER,
    "",
    "Events lost (label reason: queue_full, malformed, capture_error, too_many_queries).",
    ("reason",),
)
EVENTS_FAILED = _o(
    "spark_state_observer_events_failed", COUNTER, "", "Events whose processing raised inside the observer (logged; the job is unaffected)."
)
EVENT_PROBLEMS = _o(
    "spark_state_observer_event_problems",
    COUNTER,
    "",
    "Fields ignored in otherwise usable events (wrong type, non-finite, truncated maps).",
)
QUEUE_EVENTS = _o("spark_state_observer_queue_events", GAUGE, "", "Events waiting between the Spark callback and the worker.")
QUERIES = _o("spark_state_observer_queries", GAUGE, "", "Queries the observer currently keeps in memory.")
CALLBACK_FAILURES = _o(
    "spark_state_observer_callback_failures", COUNTER, "", "User signal callbacks that raised (logged; never reaches Spark)."
)
EXPORT_FAILURES = _o(
    "spark_state_observer_export_failures", COUNTER, "", "Failed exports (label exporter: pushgateway, ...).", ("exporter",)
)
HTTP_REQUESTS_REFUSED = _o(
    "spark_state_observer_http_requests_refused",
    COUNTER,
    "",
    "Requests to the /metrics endpoint refused (label reason: busy, timeout, malformed, unauthorized, throttled); "
    "a series appears with its first refusal.",
    ("reason",),
)
CALLBACK_DURATION = _o(
    "spark_state_observer_callback_duration_seconds",
    HISTOGRAM,
    "seconds",
    "Time the Spark listener callback took (runs on Spark's listener-bus thread).",
)
PROCESSING_DURATION = _o(
    "spark_state_observer_processing_duration_seconds",
    HISTOGRAM,
    "seconds",
    "Time the worker took to process one event (parse, signals, export).",
)
SELF_METRICS: tuple[MetricSpec, ...] = (
    EVENTS_RECEIVED,
    EVENTS_DROPPED,
    EVENTS_FAILED,
    EVENT_PROBLEMS,
    QUEUE_EVENTS,
    QUERIES,
    CALLBACK_FAILURES,
    EXPORT_FAILURES,
    HTTP_REQUESTS_REFUSED,
    CALLBACK_DURATION,
    PROCESSING_DURATION,
)

# --- the event-log watcher (``observer.fleet.eventlog_watch``): what it follows, reads and finds wrong ---
WATCH_APPLICATIONS = _o(
    "spark_state_observer_watch_applications",
    GAUGE,
    "",
    "Applications the event-log watcher follows (label status: running, finished, lost).",
    ("status",),
)
WATCH_APPLICATIONS_DISCOVERED = _o(
    "spark_state_observer_watch_applications_discovered", COUNTER, "", "Applications the watcher started following."
)
WATCH_APPLICATIONS_FORGOTTEN = _o(
    "spark_state_observer_watch_applications_forgotten",
    COUNTER,
    "",
    "Applications dropped from memory after their grace period (or because their log vanished).",
)
WATCH_READ_BYTES = _o("spark_state_observer_watch_read_bytes", COUNTER, "bytes", "Raw (compressed) event-log bytes read.")
WATCH_DECODED_BYTES = _o("spark_state_observer_watch_decoded_bytes", COUNTER, "bytes", "Decoded event-log bytes scanned.")
WATCH_LINES = _o("spark_state_observer_watch_lines", COUNTER, "", "Event-log lines scanned.")
WATCH_EVENTS_PARSED = _o(
    "spark_state_observer_watch_events_parsed", COUNTER, "", "Event lines JSON-parsed (the rest were skipped by their type)."
)
WATCH_EVENTS_DELIVERED = _o("spark_state_observer_watch_events_delivered", COUNTER, "", "Events handed to the pipeline.")
WATCH_EVENTS_DUPLICATE = _o(
    "spark_state_observer_watch_events_duplicate",
    COUNTER,
    "",
    "Progress events dropped because their query run and batch were delivered already.",
)
WATCH_PROBLEMS = _o(
    "spark_state_observer_watch_problems",
    COUNTER,
    "",
    "Problems with event logs (label kind: unreadable, corrupt, truncated, vanished, ...).",
    ("kind",),
)
WATCH_STORE_REQUESTS = _o(
    "spark_state_observer_watch_store_requests",
    COUNTER,
    "",
    "Requests the watcher sent to object stores (label kind: list, get, head, other): at most one list per prefix per poll.",
    ("kind",),
)
WATCH_STORE_PROBLEMS = _o(
    "spark_state_observer_watch_store_problems",
    COUNTER,
    "",
    "Problems with object stores (label kind: not_found, denied, credentials, unreachable, throttled, gap, shrank, ...).",
    ("kind",),
)
WATCH_CLOCK_SKEW = _o(
    "spark_state_observer_watch_clock_skew_seconds",
    GAUGE,
    "seconds",
    "Clock skew measured between a followed application's event times and the watcher's clock, the largest of any "
    "application (positive: the driver's clock behind); 0 when within 30 s plus a poll interval. Ages and stalls are judged on the application's clock.",
)
WATCH_METRICS: tuple[MetricSpec, ...] = (
    WATCH_APPLICATIONS,
    WATCH_APPLICATIONS_DISCOVERED,
    WATCH_APPLICATIONS_FORGOTTEN,
    WATCH_READ_BYTES,
    WATCH_DECODED_BYTES,
    WATCH_LINES,
    WATCH_EVENTS_PARSED,
    WATCH_EVENTS_DELIVERED,
    WATCH_EVENTS_DUPLICATE,
    WATCH_PROBLEMS,
    WATCH_STORE_REQUESTS,
    WATCH_STORE_PROBLEMS,
    WATCH_CLOCK_SKEW,
)

# --- the catalog ---------------------------------------------------------------------------------------
CATALOG: tuple[MetricSpec, ...] = (
    QUERY_METRICS
    + PHASE_METRICS
    + SOURCE_METRICS
    + SINK_METRICS
    + OPERATOR_METRICS
    + CUSTOM_METRICS
    + (UNKNOWN_CUSTOM_METRIC,)
    + INSTANCE_METRICS
    + (UNKNOWN_INSTANCE_METRIC,)
    + LIFECYCLE_METRICS
    + (APPLICATION_INFO, OPERATOR_INFO)
    + SIGNAL_METRICS
    + KAFKA_METRICS
    + PLACEMENT_METRICS
    + CAPACITY_METRICS
    + SELF_METRICS
    + WATCH_METRICS
)
"""Every metric the observer exports, Spark-derived, signal and self, each once."""

# names a static label (the ``labels`` setting) may not take: every label of the series above, the
# application's, and those Prometheus and the rules add (target labels, histogram buckets, alert severity)
RESERVED_LABELS: frozenset[str] = frozenset(name for spec in CATALOG for name in spec.label_names) | {
    APP_LABEL,
    "job",
    "instance",
    "le",
    "severity",
}

BY_NAME: dict[str, MetricSpec] = {s.prometheus_name: s for s in CATALOG}
CUSTOM_BY_KEY: dict[str, MetricSpec] = {s.key: s for s in CUSTOM_METRICS}
# operator fields and custom metrics have no constant of their own: code names them by Spark's key
BY_KEY: dict[str, MetricSpec] = {s.key: s for s in OPERATOR_METRICS + CUSTOM_METRICS}
KNOWN_INSTANCE_PREFIXES = frozenset({SNAPSHOT_LAST_UPLOADED.key})
KAFKA_LAG_KEYS = {"minOffsetsBehindLatest": "min", "avgOffsetsBehindLatest": "avg", "maxOffsetsBehindLatest": "max"}


def lookup(name: str) -> MetricSpec:
    """The spec of an exported (Prometheus) name; ``UnknownMetricError`` for a name the catalog lacks."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownMetricError(f"{name} is not a metric of observer.metrics.catalog") from None


def by_key(key: str) -> MetricSpec:
    """The spec of a state operator field or custom metric by Spark's key (``"rocksdbPutCount"``).

    Those specs are rows of ``OPERATOR_METRICS`` / ``CUSTOM_METRICS`` without a constant; the dashboards and
    rules name them by the key Spark reports, so a key Spark renames fails here, at generation.
    """
    try:
        return BY_KEY[key]
    except KeyError:
        raise UnknownMetricError(f"{key} is not a state operator field or custom metric of observer.metrics.catalog") from None


def check(spec: MetricSpec) -> MetricSpec:
    """``spec`` itself if it is the catalog's; ``UnknownMetricError`` for a spec built elsewhere."""
    if BY_NAME.get(spec.prometheus_name) is not spec:
        raise UnknownMetricError(f"{spec.prometheus_name} is not a metric of observer.metrics.catalog")
    return spec


def reference_table(specs: Iterable[MetricSpec] = CATALOG) -> str:
    """Markdown metric reference for the README and the ``metrics`` command, generated from the catalog."""
    rows = ["| metric | type | unit | labels | from Spark | since | meaning |", "|---|---|---|---|---|---|---|"]
    for s in specs:
        labels = ", ".join(f"`{label}`" for label in s.label_names) or "-"
        source = f"`{s.key}`" if s.key else "derived"
        rows.append(f"| `{s.prometheus_name}` | {s.prometheus_type} | {s.unit or '-'} | {labels} | {source} | {s.since} | {s.help} |")
    return "\n".join(rows)
