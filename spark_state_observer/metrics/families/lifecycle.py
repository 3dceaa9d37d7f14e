"""Lifecycle and info metrics: query starts, statuses and terminations, and the application's and operators' info series.

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import MetricSpec, counter, gauge

# --- query lifecycle, from started / idle / terminated events ----------------------------------------
QUERY_INFO = gauge(
    "",
    "spark_streaming_query_info",
    "",
    "Always 1; labels carry the current run id and the observer's view of the provider.",
    "query",
    labels=("run_id",),
)
QUERY_STATUS = gauge(
    "",
    "spark_streaming_query_status",
    "",
    "1 for the query's current status (label status: active, idle, terminated, failed), 0 for the others.",
    "query",
    labels=("status",),
)
QUERY_LIFECYCLE = gauge(
    "",
    "spark_streaming_query_lifecycle",
    "",
    "1 for the query's lifecycle state across applications (label state: running, idle, stopped, scheduled, failed, "
    "crash_looping; scheduled: stopped cleanly on its schedule, waiting for its next run), 0 for the others. The watcher "
    "keeps a failed, crash-looping or scheduled query's series after its application is forgotten, until a later run runs, "
    "an operator retires it (`spark-state-observer retire`) or `query_status_retention_days` pass.",
    "query",
    labels=("state",),
)
QUERY_STARTS = counter("", "spark_streaming_query_starts", "", "Query starts seen (first start and restarts).", "query")
QUERY_TERMINATIONS = counter(
    "", "spark_streaming_query_terminations", "", "Query terminations seen (label outcome: clean, exception).", "query", labels=("outcome",)
)
LIFECYCLE_METRICS: tuple[MetricSpec, ...] = (QUERY_INFO, QUERY_STATUS, QUERY_LIFECYCLE, QUERY_STARTS, QUERY_TERMINATIONS)
APPLICATION_INFO = gauge(
    "",
    "spark_streaming_application_info",
    "",
    "Always 1 per observed application; its labels carry the volatile identity (application id, attempt, event-log name) that every other series leaves out: they carry only `app` and the static labels.",
    "app",
    labels=("app_id", "attempt", "log_name"),
)
OPERATOR_INFO = gauge(
    "",
    "spark_state_operator_info",
    "",
    "Always 1; label provider tells the state store provider (rocksdb, hdfs, unknown).",
    "operator",
    labels=("provider",),
)
