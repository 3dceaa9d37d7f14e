"""The phases of a micro-batch as ``durationMs`` names them, in the order Spark runs them."""

from __future__ import annotations

TRIGGER_EXECUTION = "triggerExecution"  # the whole trigger: the other phases and the time between them
LATEST_OFFSET = "latestOffset"
GET_BATCH = "getBatch"
QUERY_PLANNING = "queryPlanning"
ADD_BATCH = "addBatch"  # the state work happens here, so restores show up in it
WAL_COMMIT = "walCommit"
COMMIT_OFFSETS = "commitOffsets"
PHASES = (LATEST_OFFSET, GET_BATCH, QUERY_PLANNING, ADD_BATCH, WAL_COMMIT, COMMIT_OFFSETS)
