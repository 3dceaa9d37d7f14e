"""The observer's own metrics: what it received, dropped and failed, what it cost, and what the event-log
watcher follows, reads and finds wrong.

Specs are written here and assembled, checked and exported by ``spark_state_observer.metrics.catalog``, the one module
emitters import (``catalog.X``); see its docstring for what the kinds mean.
"""

from __future__ import annotations

from spark_state_observer.metrics.spec import COUNTER, GAUGE, HISTOGRAM, MetricSpec
from spark_state_observer.model.alert_spec import WARNING, AlertSpec


# --- the observer itself: what it received, dropped and failed, and what it cost ---------------------
def _o(name: str, kind: str, unit: str, help: str, labels: tuple[str, ...] = ()) -> MetricSpec:
    return MetricSpec("", name, kind, unit, help, "observer", "observer", labels=labels)


EVENTS_RECEIVED = _o("spark_state_observer_events_received", COUNTER, "", "Listener events received (label kind).", ("kind",))
EVENTS_DROPPED = _o(
    "spark_state_observer_events_dropped",
    COUNTER,
    "",
    "Events lost (label reason: queue_full, malformed, capture_error, too_many_queries).",
    ("reason",),
)
EVENTS_FAILED = _o(
    "spark_state_observer_events_failed", COUNTER, "", "Events whose processing raised inside the observer (logged; the job is unaffected)."
)
EVENT_PROBLEMS = _o(
    "spark_state_observer_event_problems",
    COUNTER,
    "",
    "Problems worked around in otherwise usable events: fields ignored (wrong type, non-finite, truncated maps), "
    "label values beyond a query's budget, a progress earlier than its query's previous one (its windows start again there).",
)
QUEUE_EVENTS = _o("spark_state_observer_queue_events", GAUGE, "", "Events waiting between the Spark callback and the worker.")
QUERIES = _o("spark_state_observer_queries", GAUGE, "", "Queries the observer currently keeps in memory.")
CALLBACK_FAILURES = _o(
    "spark_state_observer_callback_failures", COUNTER, "", "User signal callbacks that raised (logged; never reaches Spark)."
)
EXPORT_FAILURES = _o(
    "spark_state_observer_export_failures", COUNTER, "", "Failed exports (label exporter: pushgateway, ...).", ("exporter",)
)
HTTP_REQUESTS_REFUSED = _o(
    "spark_state_observer_http_requests_refused",
    COUNTER,
    "",
    "Requests to the /metrics endpoint refused (label reason: busy, timeout, malformed, unauthorized, throttled); "
    "a series appears with its first refusal.",
    ("reason",),
)
CALLBACK_DURATION = _o(
    "spark_state_observer_callback_duration_seconds",
    HISTOGRAM,
    "seconds",
    "Time the Spark listener callback took (runs on Spark's listener-bus thread).",
)
PROCESSING_DURATION = _o(
    "spark_state_observer_processing_duration_seconds",
    HISTOGRAM,
    "seconds",
    "Time the worker took to process one event (parse, signals, export).",
)
SELF_METRICS: tuple[MetricSpec, ...] = (
    EVENTS_RECEIVED,
    EVENTS_DROPPED,
    EVENTS_FAILED,
    EVENT_PROBLEMS,
    QUEUE_EVENTS,
    QUERIES,
    CALLBACK_FAILURES,
    EXPORT_FAILURES,
    HTTP_REQUESTS_REFUSED,
    CALLBACK_DURATION,
    PROCESSING_DURATION,
)

# --- the event-log watcher (``spark_state_observer.fleet.eventlog_watch``): what it follows, reads and finds wrong ---
WATCH_APPLICATIONS = _o(
    "spark_state_observer_watch_applications",
    GAUGE,
    "",
    "Applications the event-log watcher follows (label status: running, finished, lost).",
    ("status",),
)
WATCH_APPLICATIONS_DISCOVERED = _o(
    "spark_state_observer_watch_applications_discovered", COUNTER, "", "Applications the watcher started following."
)
WATCH_APPLICATIONS_FORGOTTEN = _o(
    "spark_state_observer_watch_applications_forgotten",
    COUNTER,
    "",
    "Applications dropped from memory after their grace period (or because their log vanished).",
)
WATCH_READ_BYTES = _o("spark_state_observer_watch_read_bytes", COUNTER, "bytes", "Raw (compressed) event-log bytes read.")
WATCH_DECODED_BYTES = _o("spark_state_observer_watch_decoded_bytes", COUNTER, "bytes", "Decoded event-log bytes scanned.")
WATCH_LINES = _o("spark_state_observer_watch_lines", COUNTER, "", "Event-log lines scanned.")
WATCH_EVENTS_PARSED = _o(
    "spark_state_observer_watch_events_parsed", COUNTER, "", "Event lines JSON-parsed (the rest were skipped by their type)."
)
WATCH_EVENTS_DELIVERED = _o("spark_state_observer_watch_events_delivered", COUNTER, "", "Events handed to the pipeline.")
WATCH_EVENTS_DUPLICATE = _o(
    "spark_state_observer_watch_events_duplicate",
    COUNTER,
    "",
    "Progress events dropped because their query run and batch were delivered already.",
)
WATCH_PROBLEMS = _o(
    "spark_state_observer_watch_problems",
    COUNTER,
    "",
    "Problems with event logs (label kind: unreadable, corrupt, truncated, vanished, ...).",
    ("kind",),
)
WATCH_STORE_REQUESTS = _o(
    "spark_state_observer_watch_store_requests",
    COUNTER,
    "",
    "Requests the watcher sent to object stores (label kind: list, get, head, other): at most one list per prefix per poll.",
    ("kind",),
)
WATCH_STORE_PROBLEMS = _o(
    "spark_state_observer_watch_store_problems",
    COUNTER,
    "",
    "Problems with object stores (label kind: not_found, denied, credentials, unreachable, throttled, gap, shrank, ...).",
    ("kind",),
)
WATCH_CLOCK_SKEW = _o(
    "spark_state_observer_watch_clock_skew_seconds",
    GAUGE,
    "seconds",
    "Clock skew measured between a followed application's event times and the watcher's clock, the largest of any "
    "application (positive: the driver's clock behind); 0 when within 30 s plus a poll interval. Ages and stalls are judged on the application's clock.",
)
WATCH_METRICS: tuple[MetricSpec, ...] = (
    WATCH_APPLICATIONS,
    WATCH_APPLICATIONS_DISCOVERED,
    WATCH_APPLICATIONS_FORGOTTEN,
    WATCH_READ_BYTES,
    WATCH_DECODED_BYTES,
    WATCH_LINES,
    WATCH_EVENTS_PARSED,
    WATCH_EVENTS_DELIVERED,
    WATCH_EVENTS_DUPLICATE,
    WATCH_PROBLEMS,
    WATCH_STORE_REQUESTS,
    WATCH_STORE_PROBLEMS,
    WATCH_CLOCK_SKEW,
)


# the alerts on the observer's own health, read straight from these metrics (and Prometheus' ``up``)
ALERTS = (
    AlertSpec("SparkStateObserverDown", "observer", "5m", WARNING, summary="The observer's endpoint cannot be scraped."),
    AlertSpec("SparkStateObserverDroppingEvents", "observer", "0m", WARNING, summary="The observer drops events."),
    AlertSpec("SparkStateObserverFailing", "observer", "0m", WARNING, summary="The observer fails to process or export events."),
)
