"""Metrics derived by ``spark_state_observer.signals``: restarts, stalls, lag, growth, restores, executors.

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import COUNTER, GAUGE, MetricSpec, signal_metric
from spark_state_observer.model.alert_spec import WARNING, AlertSpec
from spark_state_observer.model.signal_kinds import EXCEPTION_CLASSES

# --- derived by spark_state_observer.signals ---------------------------------------------------------------------


QUERY_RESTARTS = signal_metric(
    "spark_streaming_query_restarts",
    COUNTER,
    "",
    "Restarts: the same query id started with a new run id (in this process, or from a checkpoint with committed batches).",
    "query",
)
QUERY_LAST_DOWNTIME = signal_metric(
    "spark_streaming_query_last_downtime_seconds",
    GAUGE,
    "seconds",
    "Time the query was down before its latest restart: from the previous run's termination to the new run's start (when the termination was not seen: from its last progress).",
    "query",
)
QUERY_SCHEDULED = signal_metric(
    "spark_streaming_query_scheduled",
    GAUGE,
    "",
    "1 while the query runs on a schedule: its last runs each stopped cleanly and the next started after a pause longer "
    "than the run (a job with Trigger.AvailableNow or Once); 0 after a restart that is not so. Between such runs the query "
    "is not down.",
    "query",
)
QUERY_LAST_START = signal_metric(
    "spark_streaming_query_last_start_timestamp_seconds",
    GAUGE,
    "seconds",
    "When the query's latest run started, Unix time (its start event, or its first batch when the start was not seen).",
    "query",
)
QUERY_SCHEDULE_INTERVAL = signal_metric(
    "spark_streaming_query_schedule_interval_seconds",
    GAUGE,
    "seconds",
    "A query on a schedule (spark_streaming_query_scheduled 1): the usual time from one run's start to the next, the median "
    "of its last runs; absent for a query not on a schedule. The next run is due this long after "
    "spark_streaming_query_last_start_timestamp_seconds.",
    "query",
)
QUERY_CRASH_LOOP = signal_metric(
    "spark_streaming_query_crash_loop",
    GAUGE,
    "",
    "1 while the query restarted crash_loop_restarts times within crash_loop_window_seconds around runs that crashed "
    "(restarts between cleanly stopped runs, as a scheduled availableNow job makes, do not count).",
    "query",
)
QUERY_LOST = signal_metric(
    "spark_streaming_query_lost",
    GAUGE,
    "",
    "Watcher: 1 while the query's driver is judged gone: its run is open but its event log has not grown for longer "
    "than the query's cadence allows (lost_min_seconds at least; a live idle query still writes an idle event every "
    "10 s). Absent outside the watcher.",
    "query",
)
QUERY_LOST_SINCE = signal_metric(
    "spark_streaming_query_lost_since_timestamp_seconds",
    GAUGE,
    "seconds",
    "Watcher: while the query is lost, its driver's last sign of life, Unix time (the newer of its log's last event "
    "and modification time). A log found long dead when the watcher started keeps its true time here.",
    "query",
)
QUERY_STALLED = signal_metric(
    "spark_streaming_query_stalled",
    GAUGE,
    "",
    "1 while a non-idle query has made no progress for stall_factor x its usual interval.",
    "query",
)
QUERY_SECONDS_SINCE_PROGRESS = signal_metric(
    "spark_streaming_query_seconds_since_progress",
    GAUGE,
    "seconds",
    "Seconds since the query's last progress event (at the observer's last tick).",
    "query",
)
QUERY_TERMINATIONS_BY_CLASS = signal_metric(
    "spark_streaming_query_terminations_by_class",
    COUNTER,
    "",
    "Terminations with an exception, by class (label exception_class: " + ", ".join(EXCEPTION_CLASSES) + ").",
    "query",
    ("exception_class",),
)
WATERMARK_LAG = signal_metric(
    "spark_streaming_watermark_lag_seconds", GAUGE, "seconds", "Trigger time of the latest batch minus its event-time watermark.", "query"
)
WATERMARK_AHEAD = signal_metric(
    "spark_streaming_watermark_ahead_seconds",
    GAUGE,
    "seconds",
    "How far the event-time watermark of the latest batch stands ahead of its trigger time (0 when behind it): "
    "an event from the future moved it, and every row older than it is dropped as late.",
    "query",
)
LATE_ROWS_SHARE = signal_metric(
    "spark_streaming_late_rows_share",
    GAUGE,
    "ratio",
    "Rows the watermark dropped as too late over late_rows_window_seconds of batches, as a share of the input rows "
    "then (an aggregation counts its rows after partial aggregation: a lower bound), or of the rows that reached "
    "a deduplication or stream-stream join where that is larger (a filter before it, another source).",
    "query",
)
LATE_ROWS_DROPPING = signal_metric(
    "spark_streaming_late_rows_dropping",
    GAUGE,
    "",
    "1 while the watermark drops at least late_rows_share of the input (and late_rows_min rows) over "
    "late_rows_window_seconds: the late_rows_dropped signal until its late_rows_stopped.",
    "query",
)
FALLING_BEHIND = signal_metric(
    "spark_streaming_falling_behind",
    GAUGE,
    "",
    "1 while the input rate stayed above the processing rate for falling_behind_window_seconds (a real-time-mode run: while its batches ended with more records behind than they read, for falling_behind_for_seconds).",
    "query",
)
REAL_TIME_MODE = signal_metric(
    "spark_streaming_real_time_mode",
    GAUGE,
    "",
    "1 while the query's run reads in real-time mode (trigger(realTime=...): its Kafka source reports the backlog when its reading ended, not the one its batch was planned with); 0 once a later run of the query is not; absent for queries never seen in it.",
    "query",
    since="4.1",
)
REAL_TIME_CHECKPOINT_INTERVAL = signal_metric(
    "spark_streaming_real_time_checkpoint_interval_seconds",
    GAUGE,
    "seconds",
    "A real-time run's checkpoint interval: the median duration of its batches after the first (each lasts the trigger interval).",
    "query",
    since="4.1",
)
REAL_TIME_BOUNDARY_PAUSE = signal_metric(
    "spark_streaming_real_time_boundary_pause_seconds",
    GAUGE,
    "seconds",
    "A real-time run's latest batch boundary: triggerExecution minus addBatch, the planning and commits during which no record is read (the latency a record arriving then gets).",
    "query",
    since="4.1",
)
REAL_TIME_BOUNDARY_BACKLOG = signal_metric(
    "spark_streaming_real_time_boundary_backlog_records",
    GAUGE,
    "",
    "Records behind the latest offsets at the end of a real-time run's latest batch (Spark's maxOffsetsBehindLatest, summed over Kafka sources).",
    "query",
    since="4.1",
)
STATE_RESTORES = signal_metric(
    "spark_state_restores",
    COUNTER,
    "",
    "State restores after a restart, per operator (the restore event carries duration, method and files).",
    "operator",
)
STATE_STORE_RELOADS = signal_metric(
    "spark_state_store_reloads",
    COUNTER,
    "",
    "Batches in which stores were reloaded from the checkpoint within a run: an executor loss or a task moved (the store_reload event carries the evidence).",
    "operator",
)
LAST_RESTORE_DURATION = signal_metric(
    "spark_state_last_restore_duration_seconds",
    GAUGE,
    "seconds",
    "Duration of the operator's latest restore (label method: load_metrics, measured by Spark; task_times, the extra time of the stateful stage's slowest task in the restart batch over its next batches, where tasks are followed; or residual_estimate, what remains of the batch's excess over the usual once other operators' restores and the backlog are taken out; label confidence: measured, estimated or low). Absent after a restore whose estimate saw no extra time: its restore event says so (duration_unknown).",
    "operator",
    ("method", "confidence"),
)
LAST_RESTORE_CHANGELOG_FILES = signal_metric(
    "spark_state_last_restore_changelog_files",
    GAUGE,
    "files",
    "Changelog files replayed in the operator's latest restore (RocksDB 4.1+).",
    "operator",
)
RESTORE_IN_PROGRESS = signal_metric(
    "spark_state_restore_in_progress",
    GAUGE,
    "",
    "1 while the operator's state is being restored (a restart's first batch, or the batch after an executor loss), from the batch's tasks as they end; where tasks are followed.",
    "operator",
)
RESTORE_PARTITIONS_REMAINING = signal_metric(
    "spark_state_restore_partitions_remaining",
    GAUGE,
    "",
    "State partitions (store instances) of the running restore not loaded yet, as of its latest finished task.",
    "operator",
)
RESTORE_ELAPSED = signal_metric(
    "spark_state_restore_elapsed_seconds",
    GAUGE,
    "seconds",
    "Seconds since the running restore's batch job started, as of its latest finished task.",
    "operator",
)
RESTORE_ETA = signal_metric(
    "spark_state_restore_eta_seconds",
    GAUGE,
    "seconds",
    "Seconds the running restore still needs: from its checkpoint's expected work where readable, corrected by the speed its partitions show as they finish; else at the rate they have finished so far (then absent before the first one).",
    "operator",
)
ROWS_GROWTH_RATE = signal_metric(
    "spark_state_rows_growth_rate",
    GAUGE,
    "rows",
    "Rows per second the operator's state grew over growth_window_seconds (least squares).",
    "operator",
)
MEMORY_GROWTH_RATE = signal_metric(
    "spark_state_memory_growth_rate_bytes",
    GAUGE,
    "bytes",
    "Bytes per second the operator's state memory grew over the growth window.",
    "operator",
)
EVICTION_RATIO = signal_metric(
    "spark_state_eviction_ratio",
    GAUGE,
    "ratio",
    "Rows removed per row added or updated over the growth window (0 = nothing evicted).",
    "operator",
)
STATE_UNBOUNDED = signal_metric(
    "spark_state_unbounded",
    GAUGE,
    "",
    "1 when the state's rows (or bytes) kept rising over the growth window, or its size did with its rows flat; 0 when flat (bounded); absent until judged.",
    "operator",
)
ROWS_BUDGET_ETA = signal_metric(
    "spark_state_rows_budget_eta_seconds",
    GAUGE,
    "seconds",
    "Forecast seconds until the operator's rows reach state_rows_budget at the current growth rate.",
    "operator",
)
MEMORY_BUDGET_ETA = signal_metric(
    "spark_state_memory_budget_eta_seconds",
    GAUGE,
    "seconds",
    "Forecast seconds until the operator's memory reaches state_memory_budget_bytes.",
    "operator",
)
PARTITION_CHANGES = signal_metric(
    "spark_state_partition_changes",
    COUNTER,
    "",
    "Changes of the operator's shuffle partitions between batches (a repartitioning; a checkpointed stateful query pins them).",
    "operator",
)
STATE_TASK_RETRIES = signal_metric(
    "spark_state_task_retry_batches",
    COUNTER,
    "",
    "Batches in which the operator ran more state store instances than usual with the same partitions: retried or speculative tasks, not a repartitioning.",
    "operator",
)
LOAD_LATENCY_ANOMALIES = signal_metric(
    "spark_state_load_latency_anomalies",
    COUNTER,
    "",
    "Batches whose RocksDB load latency was far above the run's usual with no sign of a reload (jitter on a busy machine, or a slow disk).",
    "operator",
)
EXECUTORS = signal_metric(
    "spark_streaming_executors",
    GAUGE,
    "",
    "Executors registered with the driver (polled at most once per progress event; 0 in local mode).",
    "app",
)
EXECUTOR_CHANGES = signal_metric(
    "spark_streaming_executor_changes", COUNTER, "", "Executors added and removed (label change).", "app", ("change",)
)
SIGNAL_METRICS: tuple[MetricSpec, ...] = (
    QUERY_RESTARTS,
    QUERY_LAST_DOWNTIME,
    QUERY_SCHEDULED,
    QUERY_LAST_START,
    QUERY_SCHEDULE_INTERVAL,
    QUERY_CRASH_LOOP,
    QUERY_LOST,
    QUERY_LOST_SINCE,
    QUERY_STALLED,
    QUERY_SECONDS_SINCE_PROGRESS,
    QUERY_TERMINATIONS_BY_CLASS,
    WATERMARK_LAG,
    WATERMARK_AHEAD,
    LATE_ROWS_SHARE,
    LATE_ROWS_DROPPING,
    FALLING_BEHIND,
    REAL_TIME_MODE,
    REAL_TIME_CHECKPOINT_INTERVAL,
    REAL_TIME_BOUNDARY_PAUSE,
    REAL_TIME_BOUNDARY_BACKLOG,
    STATE_RESTORES,
    STATE_STORE_RELOADS,
    LAST_RESTORE_DURATION,
    LAST_RESTORE_CHANGELOG_FILES,
    RESTORE_IN_PROGRESS,
    RESTORE_PARTITIONS_REMAINING,
    RESTORE_ELAPSED,
    RESTORE_ETA,
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


# the alert read straight from these metrics (the running restore's elapsed time and ETA)
ALERTS = (
    AlertSpec(
        "SparkStateRestoreSlow",
        "state",
        "0m",
        WARNING,
        thresholds=("restore_seconds",),
        summary="A running state restore will take too long.",
    ),
)
