"""Which event-log lines the task reader needs (``spark_state_observer.placement.tasks``), told from a line's first
bytes and a few substring tests, before any line is parsed: most lines of a log are task ends of stateless
stages, kilobytes each, and parsing them all would cost more than the rest of a replay.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_state_observer.model.spark_events import (
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    JOB_START,
    QUERY_PROGRESS,
    QUERY_STARTED,
    SQL_ADAPTIVE,
    SQL_START,
    TASK_END,
    line_prefix,
)

# accumulable name (as Spark 3.5 - 4.3 write it) -> PartitionRun field; see docs/findings/placement.md
STATE_METRICS: Mapping[str, str] = {
    "RocksDB: load - time taken to load the store": "load_ms",
    "RocksDB: load - time taken to replay the change log": "replay_ms",
    "RocksDB: load - number of change log files replayed": "changelog_files",
    "RocksDB: load from snapshot - time taken to load the store from snapshot": "snapshot_load_ms",
    "RocksDB: load - number of state loads from external storage": "loads_from_dfs",  # 4.2+
    "number of total state rows": "rows_total",
    "memory used by state": "memory_bytes",
    "number of state store instances": "store_instances",
    "count of cache miss on states cache in provider": "cache_misses",  # HDFS-backed provider
    "RocksDB: size of all SST files": "sst_bytes",  # the state's bytes on local disk (RocksDB 3.5+)
}
# a plan node with one of these metrics writes state (StateStoreWriter); readers such as StateStoreRestore do not
WRITER_MARKERS = frozenset({"number of total state rows", "number of state store instances", "memory used by state"})
# the event types the reader uses, the one list of them: replay's tap and the watcher's line filter
# (``spark_state_observer.fleet.app_events.PLACEMENT_EVENTS``) decide from it, by a line's first bytes, which lines to parse at all
TASK_EVENT_TYPES = (
    TASK_END,
    JOB_START,
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    SQL_START,
    SQL_ADAPTIVE,
    QUERY_PROGRESS,
    QUERY_STARTED,
)
LINE_PREFIXES = tuple(line_prefix(name) for name in TASK_EVENT_TYPES)
# task ends and plans (the big, numerous lines) matter only when they name a state metric: the reader ignores
# the rest, so they are not even parsed (a substring test per name instead of json.loads of kilobytes)
_STATEFUL_ONLY = tuple(line_prefix(name) for name in (TASK_END, SQL_START, SQL_ADAPTIVE))
# the names every state-writing operator reports (memory: every provider, every writer) first, so that a stateful
# line usually stops at the first search
_STATE_NAMES = tuple(name.encode() for name in sorted(STATE_METRICS, key=lambda n: (n != "memory used by state", n not in WRITER_MARKERS)))
TASK_END_LINE = line_prefix(TASK_END)
JOB_START_LINE = line_prefix(JOB_START)
PLAN_LINES = (line_prefix(SQL_START), line_prefix(SQL_ADAPTIVE))


def wanted_line(line: bytes) -> bool:
    """Whether a raw event-log line can matter to ``TaskEventReader``: the one filter both task-event readers
    (``spark_state_observer.placement.task_log``, ``spark_state_observer.offline.task_events``) apply before parsing, since most lines
    of a log are task events of stateless stages.

    A stateless task end (kilobytes, most of a log's lines) is refused after two searches, not one per state
    metric name: every name holds one of ``_STATE_HINTS``. Its end reason is read where Spark writes it, the first
    ``"Reason"`` of the line (before any name or value a job sets)."""
    if not line.startswith(LINE_PREFIXES):
        return False
    if not line.startswith(_STATEFUL_ONLY):
        return True
    if any(hint in line for hint in _STATE_HINTS) and any(name in line for name in _STATE_NAMES):
        return True
    if not line.startswith(TASK_END_LINE):
        return False
    at = line.find(_REASON)
    return at >= 0 and line.startswith(_LOST_VALUES, at + len(_REASON))  # a restore's partition to load again


# task ends of a task lost with its executor: no state figures, but a restore loads that partition again
LOST_REASONS = frozenset({"ExecutorLostFailure", "Resubmitted"})
_REASON = b'"Reason":"'
_LOST_VALUES = tuple(f'{r}"'.encode() for r in sorted(LOST_REASONS))
# every state metric name holds one of these (tests/unit/test_wanted_line.py): a line holding neither names no state metric
_STATE_HINTS = (b"state", b"RocksDB: ")
