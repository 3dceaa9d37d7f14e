"""The signals' vocabulary: every signal kind and ``SignalEvent``, defined once for every reader.

A leaf module (standard library only): the engine emits these kinds, and the OpenTelemetry events, the
history, the browser's charts and health read them from here.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

QUERY_STARTED = "query_started"
QUERY_RESTARTED = "query_restarted"
QUERY_TERMINATED = "query_terminated"
QUERY_IDLE = "query_idle"
CRASH_LOOP = "crash_loop"
STALLED = "stalled"
STALL_RECOVERED = "stall_recovered"
QUERY_LOST = "query_lost"  # the query's driver is gone without a word: its log silent, no end (the watcher's verdict)
RESTORE = "restore"
STORE_RELOAD = "store_reload"
EXECUTOR_ADDED = "executor_added"
EXECUTOR_REMOVED = "executor_removed"
PARTITIONS_CHANGED = "partitions_changed"
STATE_UNBOUNDED = "state_unbounded"
STATE_BOUNDED = "state_bounded"
FALLING_BEHIND = "falling_behind"
CAUGHT_UP = "caught_up"
LOAD_LATENCY_ANOMALY = "load_latency_anomaly"
STATE_TASK_RETRY = "state_task_retry"
PARTITION_MIGRATED = "partition_migrated"  # state partitions ran elsewhere than last batch (spark_state_observer.placement.tracker)
ROCKSDB_MEMORY_IMPLAUSIBLE = (
    "rocksdb_memory_implausible"  # Spark's RocksDB memory report cannot be right (spark_state_observer.signals.capacity)
)
# one state partition holds far more bytes than the others, batch after batch (spark_state_observer.signals.skew)
STATE_SKEWED = "state_skewed"
SNAPSHOT_LAGGING = "snapshot_lagging"  # store instances without a snapshot for longer than normal (spark_state_observer.signals.snapshots)
# rows the event-time watermark dropped as too late, a share of the input (spark_state_observer.signals.late_rows)
LATE_ROWS_DROPPED = "late_rows_dropped"
LATE_ROWS_STOPPED = "late_rows_stopped"
# a restore while it runs, per stateful operator, from the restoring batch's tasks (spark_state_observer.placement.restore_progress)
RESTORE_STARTED = "restore_started"
RESTORE_PROGRESS = "restore_progress"
RESTORE_FINISHED = "restore_finished"
RESTORE_PROGRESS_KINDS = (RESTORE_STARTED, RESTORE_PROGRESS, RESTORE_FINISHED)
# Kafka sources (spark_state_observer.signals.kafka): source health from the offsets of each progress
KAFKA_LAG_GROWING = "kafka_lag_growing"
KAFKA_PARTITION_STUCK = "kafka_partition_stuck"
KAFKA_PARTITION_RECOVERED = "kafka_partition_recovered"
KAFKA_PARTITIONS_ADDED = "kafka_partitions_added"
KAFKA_OFFSETS_REWOUND = "kafka_offsets_rewound"
KAFKA_OFFSETS_SKIPPED = "kafka_offsets_skipped"
KAFKA_LATEST_WENT_BACK = "kafka_latest_went_back"
KAFKA_CATCH_UP_FORECAST = "kafka_catch_up_forecast"
KAFKA_CAUGHT_UP = "kafka_caught_up"
KAFKA_KINDS = (
    KAFKA_LAG_GROWING,
    KAFKA_PARTITION_STUCK,
    KAFKA_PARTITION_RECOVERED,
    KAFKA_PARTITIONS_ADDED,
    KAFKA_OFFSETS_REWOUND,
    KAFKA_OFFSETS_SKIPPED,
    KAFKA_LATEST_WENT_BACK,
    KAFKA_CATCH_UP_FORECAST,
    KAFKA_CAUGHT_UP,
)
KAFKA_DATA_LOSS_KINDS = frozenset({KAFKA_OFFSETS_REWOUND, KAFKA_OFFSETS_SKIPPED, KAFKA_LATEST_WENT_BACK})
"""Offsets that did not continue where the previous batch left them: records skipped (lost) or read twice."""

SIGNAL_KINDS = (
    QUERY_STARTED,
    QUERY_RESTARTED,
    QUERY_TERMINATED,
    QUERY_IDLE,
    CRASH_LOOP,
    STALLED,
    STALL_RECOVERED,
    QUERY_LOST,
    RESTORE,
    STORE_RELOAD,
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    PARTITIONS_CHANGED,
    STATE_UNBOUNDED,
    STATE_BOUNDED,
    FALLING_BEHIND,
    CAUGHT_UP,
    LOAD_LATENCY_ANOMALY,
    STATE_TASK_RETRY,
    PARTITION_MIGRATED,
    ROCKSDB_MEMORY_IMPLAUSIBLE,
    SNAPSHOT_LAGGING,
    STATE_SKEWED,
    LATE_ROWS_DROPPED,
    LATE_ROWS_STOPPED,
    *RESTORE_PROGRESS_KINDS,
    *KAFKA_KINDS,
)
ALL = "*"
"""Subscribe to every kind."""

LIFECYCLE_KINDS = (QUERY_STARTED, QUERY_RESTARTED, QUERY_TERMINATED, QUERY_IDLE, CRASH_LOOP, STALLED, STALL_RECOVERED, QUERY_LOST)
"""The kinds that change a query's health (running, idle, stalled, failed, stopped)."""

WARNING_KINDS = (
    frozenset(
        {
            QUERY_RESTARTED,
            CRASH_LOOP,
            STALLED,
            QUERY_LOST,
            STORE_RELOAD,
            EXECUTOR_REMOVED,
            STATE_UNBOUNDED,
            FALLING_BEHIND,
            PARTITIONS_CHANGED,
            PARTITION_MIGRATED,
            ROCKSDB_MEMORY_IMPLAUSIBLE,
            SNAPSHOT_LAGGING,
            STATE_SKEWED,
            LATE_ROWS_DROPPED,
            KAFKA_LAG_GROWING,
            KAFKA_PARTITION_STUCK,
            KAFKA_PARTITIONS_ADDED,
        }
    )
    | KAFKA_DATA_LOSS_KINDS
)
"""Kinds worth a warning; a termination with an exception is an error, every other kind informational."""

# Why a query failed (attribute ``exception_class`` of ``query_terminated``, label of the terminations
# counter): the causes an on-call engineer acts on differently. ``spark_state_observer.signals.classify`` decides.
EXC_USER_CODE = "user_code"  # the user's foreachBatch function or UDF raised
EXC_SINK = "sink"  # writing the output failed
EXC_SOURCE = "source"  # reading the input failed
EXC_STATE_SCHEMA = "state_schema"  # the checkpoint's state does not fit the query any more
EXC_CHECKPOINT_CORRUPTION = "checkpoint_corruption"  # the checkpoint or its state files cannot be read
EXC_OUT_OF_MEMORY = "out_of_memory"  # a JVM heap, a container or a Python worker ran out of memory
EXC_PYTHON_DEPENDENCY = "python_dependency"  # the Python workers cannot import what the job needs
EXC_CONFIGURATION = "configuration"  # a setting, class or mode the runtime cannot honour
EXC_OTHER = "other"
EXCEPTION_CLASSES = (
    EXC_USER_CODE,
    EXC_SINK,
    EXC_SOURCE,
    EXC_STATE_SCHEMA,
    EXC_CHECKPOINT_CORRUPTION,
    EXC_OUT_OF_MEMORY,
    EXC_PYTHON_DEPENDENCY,
    EXC_CONFIGURATION,
    EXC_OTHER,
)


@dataclass(frozen=True)
class SignalEvent:
    """A derived event: what happened, to which query (and operator), when, with its figures."""

    kind: str
    query_id: str
    query: str
    run_id: str | None
    timestamp: float
    attributes: dict[str, Any] = field(default_factory=dict)
    # the application's stable identity: static labels, then ``app`` (``spark_state_observer.model.identity``); set by
    # the runtime that delivers the signal, empty when nothing is known about the application
    app: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """One line for people (the CLI, logs): each attribute's first line only, so a JVM stack trace in an
        exception does not fill a terminal; ``to_json`` keeps the whole text."""
        attrs = ", ".join(f"{k}={one_line(v)}" for k, v in self.attributes.items())
        where = dict(self.app).get("app")
        return f"{self.kind} {self.query}{f' of {where}' if where else ''} ({attrs})"

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form (``replay --format events``, one JSON object per line)."""
        when = datetime.datetime.fromtimestamp(self.timestamp, datetime.timezone.utc)
        return {
            "kind": self.kind,
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "timestamp": self.timestamp,
            "query": self.query,
            "query_id": self.query_id,
            "run_id": self.run_id,
            "attributes": self.attributes,
            **({"app": dict(self.app)} if self.app else {}),
        }


ONE_LINE_CHARS = 300


def one_line(value: Any) -> str:
    """``value``'s first non-blank line, at most ``ONE_LINE_CHARS`` long; "…" marks what was left out."""
    text = str(value)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else text.strip()
    cut = len(first) > ONE_LINE_CHARS
    return first[:ONE_LINE_CHARS] + (" …" if cut or len(lines) > 1 else "")
