"""The listener's vocabulary: event kinds, query statuses and termination outcomes, defined once."""

from __future__ import annotations

STARTED = "started"
PROGRESS = "progress"
IDLE = "idle"
TERMINATED = "terminated"
EVENT_KINDS = (STARTED, PROGRESS, IDLE, TERMINATED)
"""The four ``StreamingQueryListener`` callbacks, by the name the capture queue and the history use."""
APPLICATION_END = "application_end"
"""An event log's ``SparkListenerApplicationEnd``, which replay and the watcher hand on: the application stopped
(its shutdown hook ran: ``spark.stop()``, an exit, a SIGTERM) and every query run it still had ended with it."""

ACTIVE = "active"
FAILED = "failed"
QUERY_STATUSES = (ACTIVE, IDLE, TERMINATED, FAILED)
"""A query's status as the tracker sees it: the label values of ``spark_streaming_query_status``."""

CLEAN = "clean"
EXCEPTION = "exception"
OUTCOMES = (CLEAN, EXCEPTION)
"""How a query terminated: the label values of ``spark_streaming_query_terminations_total``."""
