"""Where a query run keeps its checkpoint, read from the plans its event log records.

An event log names no checkpoint in its streaming events, but every stateful operator of a micro-batch's
plan (``SparkListenerSQLExecutionStart``) says ``state info [ checkpoint = <root>/state, runId = <run id>,
...``. ``PlanCheckpoints`` keeps run id -> checkpoint root from those lines, so the watcher and a replay can
list a local checkpoint for the snapshot state of every store instance (``spark_state_observer.signals.snapshots``) as
the listener does with ``resolvedCheckpointRoot``. A run's plan repeats every batch: once a run is known its
lines are only searched for the marker, never parsed.
"""

from __future__ import annotations

import re
from collections import OrderedDict

SQL_START_PREFIX = b'{"Event":"org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"'
_MARKER = b"state info [ checkpoint = "
_PLAN_INFO = b'"sparkPlanInfo"'
_STATE_INFO = re.compile(rb"state info \[ checkpoint = ([^,\s\]\\\"]{1,4096})/state, runId = ([0-9a-f-]{36})")
MAX_RUNS = 1024  # runs remembered, the oldest forgotten first


def tree_state_info(line: bytes) -> tuple[int, int]:
    """Where a SQL execution start's plan tree (``sparkPlanInfo``) begins and where its first ``state info [`` is,
    ``(tree, -1)`` in a line without one (or not a SQL execution start). The tree names the query's run; the plan's
    description before it names a run id of its own on Spark 3.5 and 4.0 (and ``checkpoint = <unknown>``). Both
    readers of the plans (``PlanCheckpoints``, ``spark_state_observer.model.plan_eviction``) start from here."""
    if not line.startswith(SQL_START_PREFIX):
        return 0, -1
    tree = max(0, line.find(_PLAN_INFO))
    return tree, line.find(_MARKER, tree)


class PlanCheckpoints:
    """run id -> checkpoint root, from the stateful plans of SQL executions; bounded to ``MAX_RUNS``."""

    def __init__(self) -> None:
        self._roots: OrderedDict[str, str] = OrderedDict()

    def feed_line(self, line: bytes) -> None:
        """One raw event-log line; anything but a SQL execution start with a stateful plan is ignored."""
        _, at = tree_state_info(line)
        if at < 0:
            return
        m = _STATE_INFO.match(line, at)
        if m is None:
            return
        run_id = m[2].decode("ascii")
        if run_id in self._roots:
            return
        self._roots[run_id] = m[1].decode("utf-8", errors="replace")
        while len(self._roots) > MAX_RUNS:
            self._roots.popitem(last=False)

    def __call__(self, query_id: str, run_id: str | None) -> str | None:
        return self._roots.get(run_id) if run_id else None
