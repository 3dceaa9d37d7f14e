"""Query-level metrics: the top-level fields of each ``StreamingQueryProgress``, its phases, sources and sinks.

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import MS, MetricSpec, counter, gauge

# --- query level (StreamingQueryProgress top-level fields) -------------------------------------------
BATCH_ID = gauge("batchId", "spark_streaming_batch_id", "", "Id of the latest completed micro-batch.", "query")
BATCHES = counter("", "spark_streaming_batches", "", "Micro-batches completed (progress events received).", "query")
BATCH_DURATION = gauge(
    "batchDuration", "spark_streaming_batch_duration_seconds", "seconds", "Duration of the latest micro-batch.", "query", scale=MS
)
BATCH_SECONDS = counter(
    "batchDuration",
    "spark_streaming_batch_seconds",
    "seconds",
    "Time spent in micro-batches; its rate() over batches_total's gives the mean batch duration.",
    "query",
    scale=MS,
)
INPUT_ROWS = counter("numInputRows", "spark_streaming_input_rows", "rows", "Rows read from all sources.", "query")
INPUT_ROWS_PER_SECOND = gauge(
    "inputRowsPerSecond",
    "spark_streaming_input_rows_per_second",
    "rows",
    "Rate at which data arrived, over the latest trigger (Spark reports 0 on a run's first batch).",
    "query",
)
PROCESSED_ROWS_PER_SECOND = gauge(
    "processedRowsPerSecond",
    "spark_streaming_processed_rows_per_second",
    "rows",
    "Rate at which Spark processed data in the latest batch.",
    "query",
)
LAST_PROGRESS_TIMESTAMP = gauge(
    "timestamp", "spark_streaming_last_progress_timestamp_seconds", "seconds", "Trigger start time of the latest batch, Unix time.", "query"
)
WATERMARK_TIMESTAMP = gauge(
    "eventTime.watermark",
    "spark_streaming_watermark_timestamp_seconds",
    "seconds",
    "Event-time watermark after the latest batch, Unix time (absent without a watermark).",
    "query",
)
EVENT_TIME_MAX_TIMESTAMP = gauge(
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
PHASE_DURATION = gauge(
    "durationMs",
    "spark_streaming_phase_duration_seconds",
    "seconds",
    "Duration of each phase of the latest batch (label phase: triggerExecution, latestOffset, getBatch, queryPlanning, addBatch, walCommit, commitOffsets).",
    "query",
    scale=MS,
    labels=("phase",),
)
PHASE_SECONDS = counter(
    "durationMs",
    "spark_streaming_phase_seconds",
    "seconds",
    "Time spent in each batch phase (label phase).",
    "query",
    scale=MS,
    labels=("phase",),
)
PHASE_METRICS: tuple[MetricSpec, ...] = (PHASE_DURATION, PHASE_SECONDS)
SOURCE_INPUT_ROWS = counter("numInputRows", "spark_streaming_source_input_rows", "rows", "Rows read from this source.", "source")
SOURCE_INPUT_ROWS_PER_SECOND = gauge(
    "inputRowsPerSecond",
    "spark_streaming_source_input_rows_per_second",
    "rows",
    "Arrival rate at this source in the latest trigger.",
    "source",
)
SOURCE_PROCESSED_ROWS_PER_SECOND = gauge(
    "processedRowsPerSecond",
    "spark_streaming_source_processed_rows_per_second",
    "rows",
    "Processing rate of this source's rows in the latest batch.",
    "source",
)
SOURCE_OFFSETS_BEHIND_LATEST = gauge(
    "metrics.OffsetsBehindLatest",
    "spark_streaming_source_offsets_behind_latest",
    "",
    "Kafka: offsets between the batch's end and the latest available offset (label stat: min, avg, max).",
    "source",
    labels=("stat",),
)
SOURCE_METRIC = gauge(
    "metrics", "spark_streaming_source_metric", "", "Other numeric source metrics, by name (label metric).", "source", labels=("metric",)
)
SOURCE_METRICS: tuple[MetricSpec, ...] = (
    SOURCE_INPUT_ROWS,
    SOURCE_INPUT_ROWS_PER_SECOND,
    SOURCE_PROCESSED_ROWS_PER_SECOND,
    SOURCE_OFFSETS_BEHIND_LATEST,
    SOURCE_METRIC,
)
SINK_OUTPUT_ROWS = counter(
    "numOutputRows",
    "spark_streaming_sink_output_rows",
    "rows",
    "Rows written to the sink (not exported for DSv1 sinks, which report -1).",
    "sink",
)
SINK_METRICS: tuple[MetricSpec, ...] = (SINK_OUTPUT_ROWS,)
