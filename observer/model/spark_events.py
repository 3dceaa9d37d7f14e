"""Spark's listener event names, as event logs write them in their ``"Event"`` field: the one place they are spelled.

The watcher (``observer.fleet``), the offline readers (``observer.offline.eventlog``, ``log_identity``), placement's
task-event readers (``observer.placement.tasks``) and the capacity model read these; the observer's own event
kinds (``started``, ``progress``...) are ``observer.model.kinds``, the signals' ``observer.model.signal_kinds``.
"""

from __future__ import annotations

from observer.model import kinds

_STREAMING = "org.apache.spark.sql.streaming.StreamingQueryListener$"
_SQL = "org.apache.spark.sql.execution.ui."

QUERY_STARTED = _STREAMING + "QueryStartedEvent"
QUERY_PROGRESS = _STREAMING + "QueryProgressEvent"
QUERY_IDLE = _STREAMING + "QueryIdleEvent"
QUERY_TERMINATED = _STREAMING + "QueryTerminatedEvent"
APP_START = "SparkListenerApplicationStart"
APP_END = "SparkListenerApplicationEnd"
LOG_START = "SparkListenerLogStart"
ENVIRONMENT = "SparkListenerEnvironmentUpdate"
EXECUTOR_ADDED = "SparkListenerExecutorAdded"
EXECUTOR_REMOVED = "SparkListenerExecutorRemoved"
TASK_END = "SparkListenerTaskEnd"
JOB_START = "SparkListenerJobStart"  # maps a stage to its query, batch and SQL execution (placement)
SQL_START = _SQL + "SparkListenerSQLExecutionStart"
SQL_ADAPTIVE = _SQL + "SparkListenerSQLAdaptiveExecutionUpdate"

STREAMING_EVENTS = frozenset({QUERY_STARTED, QUERY_PROGRESS, QUERY_IDLE, QUERY_TERMINATED})
# a streaming query event's name -> the observer's event kind
STREAMING_KINDS = {
    QUERY_STARTED: kinds.STARTED,
    QUERY_PROGRESS: kinds.PROGRESS,
    QUERY_IDLE: kinds.IDLE,
    QUERY_TERMINATED: kinds.TERMINATED,
}
STREAMING_PREFIX = _STREAMING  # every streaming query event's name starts so


def line_prefix(name: str) -> bytes:
    """The first bytes of an event-log line holding event ``name`` (Spark writes ``"Event"`` first, no spaces)."""
    return b'{"Event":"' + name.encode() + b'"'
