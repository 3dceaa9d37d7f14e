"""Spark's listener event names, as event logs write them in their ``"Event"`` field: the one place they are spelled.

The watcher (``spark_state_observer.fleet``), the offline readers (``spark_state_observer.offline.eventlog``, ``log_identity``), placement's
task-event readers (``spark_state_observer.placement.tasks``) and the capacity model read these; the observer's own event
kinds (``started``, ``progress``...) are ``spark_state_observer.model.kinds``, the signals' ``spark_state_observer.model.signal_kinds``.
"""

from __future__ import annotations

from typing import Any, Mapping

from spark_state_observer.model import kinds
from spark_state_observer.model.bounded import clean_label, epoch_seconds, finite

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

# what a progress event calls a state writer (``stateOperators[].operatorName``, Spark's ``shortName``) by its
# physical plan node's name, as 4.0-4.3 name them (3.5 too, but for the session window: its writer has no short
# name of its own before 4.0, so 3.5's progress says StateStoreWriter's default, ``defaultName``): restore events
# name an operator so before the query's first progress (a new run's first batch is the one that restores), and
# by the progress's name once there is one (``spark_state_observer.placement.restore_progress``)
WRITER_OPERATOR_NAMES = {
    "StateStoreSave": "stateStoreSave",
    "SessionWindowStateStoreSave": "sessionWindowStateStoreSaveExec",
    "StreamingDeduplicate": "dedupe",
    "StreamingDeduplicateWithinWatermark": "dedupeWithinWatermark",
    "StreamingSymmetricHashJoin": "symmetricHashJoin",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "TransformWithStateInPandas": "transformWithStateInPandasExec",  # 4.0
    "TransformWithStateInPySpark": "transformWithStateInPandasExec",  # 4.1+: the node renamed, its short name kept
    "FlatMapGroupsWithState": "flatMapGroupsWithState",  # Scala's (map|flatMap)GroupsWithState
    "TransformWithState": "transformWithStateExec",  # Scala's and Java's transformWithState
}
# Spark 3.x: the session window's writer has no short name of its own yet
_WRITER_OPERATOR_NAMES_3 = {**WRITER_OPERATOR_NAMES, "SessionWindowStateStoreSave": "defaultName"}


def writer_operator_name(node: str, spark_version: str | None) -> str:
    """What the progress events of ``spark_version`` (None: not known, the 4.x names) call the state writer whose plan
    node is ``node``; a node not known here keeps its own name."""
    names = _WRITER_OPERATOR_NAMES_3 if spark_version is not None and spark_version.strip().startswith("3.") else WRITER_OPERATOR_NAMES
    return names.get(node, node)


# the writers behind a partial aggregation: their ``numRowsDroppedByWatermark`` and ``numRowsUpdated`` count groups
# (one per key and window of each task's partial aggregate), not the source rows (spark_state_observer.signals.late_rows). Not a
# session window: Spark merges no sessions before the shuffle unless
# spark.sql.streaming.sessionWindow.merge.sessions.in.local.partition is set, so it drops (and counts) rows, and
# counts sessions updated (recorded on 4.3: every late row counted, 30 a batch over 5 keys, against 95 sessions)
AGGREGATING_OPERATOR_NAMES = frozenset({"stateStoreSave"})
# the writers whose ``numRowsDroppedByWatermark`` and ``numRowsUpdated`` both count rows (a deduplication's new rows,
# a join's rows added to its state): the rows that reached one are those two (and a deduplication's duplicates)
ROW_OPERATOR_NAMES = frozenset({"dedupe", "dedupeWithinWatermark", "symmetricHashJoin"})

STREAMING_EVENTS = frozenset({QUERY_STARTED, QUERY_PROGRESS, QUERY_IDLE, QUERY_TERMINATED})
# a streaming query event's name -> the observer's event kind
STREAMING_KINDS = {
    QUERY_STARTED: kinds.STARTED,
    QUERY_PROGRESS: kinds.PROGRESS,
    QUERY_IDLE: kinds.IDLE,
    QUERY_TERMINATED: kinds.TERMINATED,
}
STREAMING_PREFIX = _STREAMING  # every streaming query event's name starts so


def application_end(obj: Mapping[str, Any]) -> tuple[float | None, int | None]:
    """An application end's time (epoch seconds, None without a usable one) and exit code (``ExitCode``, Spark 4.0+;
    None when not logged or not an integer): replay and the watcher read the event alike."""
    ms = finite(obj.get("Timestamp"))
    code = obj.get("ExitCode")
    exit_code = code if isinstance(code, int) and not isinstance(code, bool) and -(2**31) <= code < 2**31 else None
    return (epoch_seconds(ms / 1000.0) if ms is not None else None), exit_code


def line_prefix(name: str) -> bytes:
    """The first bytes of an event-log line holding event ``name`` (Spark writes ``"Event"`` first, no spaces)."""
    return b'{"Event":"' + name.encode() + b'"'


def executor_change(obj: Mapping[str, Any]) -> tuple[str, float | None]:
    """An executor added or removed event's executor id (bounded, printable) and the time Spark recorded it (epoch
    seconds, None without a usable one): replay and the watcher read these events alike."""
    ms = finite(obj.get("Timestamp"))
    executor = obj.get("Executor ID")
    return clean_label(executor if isinstance(executor, str) else str(executor)[:200], 200), epoch_seconds(
        ms / 1000.0
    ) if ms is not None else None
