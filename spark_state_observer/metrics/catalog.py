"""The metric catalog: every metric the observer exports, in one typed list.

Spark-derived metrics, the signals' metrics and the observer's own metrics are all here, with name,
type, unit, labels, help text, the Spark field they come from and the first Spark version that reports
it. The specs are written by family in ``spark_state_observer.metrics.families`` (query, state, lifecycle, signals,
kafka, placement, capacity, observer); this module assembles them into ``CATALOG``, checks them when it is
imported (one spec per name, known kinds and scopes, every family spec assembled) and is the one module
emitters import (``catalog.X``). Emitters (the tracker, the signals, the exporters) refer to these spec objects, never to names; the
README's metric reference, the ``metrics`` command, the OpenTelemetry names, the dashboards and the alert
rules are all derived from ``CATALOG``. Importing this module imports nothing beyond the standard library.

How Spark computes the values (``StateStoreWriter.getProgress`` / ``setStoreMetrics``): every operator
field and custom metric in a progress event is the **sum over the tasks of that one batch**. So:

- ``COUNTER`` specs are per-batch amounts (rows updated, milliseconds spent, gets, bytes written). The
  observer adds each batch's value to a ``_total`` counter, which is what ``rate()`` wants.
- ``GAUGE`` specs are point-in-time sizes summed over partitions (rows held, memory, SST size), exported
  as the latest batch's value.
- ``CUMULATIVE_PER_RUN`` specs are counters Spark keeps per provider instance (HDFS ``loadedMapCache*``):
  they restart with every run, so they are exported as gauges and the signals take their deltas.
- ``HISTOGRAM`` specs are the observer's own latency histograms (Prometheus only).

Values in milliseconds are exported in seconds and the name says so (``_seconds``); ``-1`` sentinels are
never a value (see ``spark_state_observer.model``).
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_state_observer.metrics import families
from spark_state_observer.metrics.families.capacity import CAPACITY_METRICS as CAPACITY_METRICS
from spark_state_observer.metrics.families.capacity import EXECUTOR_ROCKSDB_MEMORY_BUDGET as EXECUTOR_ROCKSDB_MEMORY_BUDGET
from spark_state_observer.metrics.families.capacity import EXECUTOR_ROCKSDB_MEMORY_CEILING as EXECUTOR_ROCKSDB_MEMORY_CEILING
from spark_state_observer.metrics.families.capacity import EXECUTOR_ROCKSDB_MEMORY_ESTIMATE as EXECUTOR_ROCKSDB_MEMORY_ESTIMATE
from spark_state_observer.metrics.families.capacity import EXECUTOR_ROCKSDB_MEMORY_REPORTED as EXECUTOR_ROCKSDB_MEMORY_REPORTED
from spark_state_observer.metrics.families.capacity import EXECUTOR_ROCKSDB_SST as EXECUTOR_ROCKSDB_SST
from spark_state_observer.metrics.families.capacity import EXECUTOR_STORE_INSTANCES as EXECUTOR_STORE_INSTANCES
from spark_state_observer.metrics.families.capacity import ROCKSDB_MEMORY_IMPLAUSIBLE as ROCKSDB_MEMORY_IMPLAUSIBLE
from spark_state_observer.metrics.families.instances import INSTANCE_METRICS as INSTANCE_METRICS
from spark_state_observer.metrics.families.instances import SNAPSHOT_INSTANCES_LAGGING as SNAPSHOT_INSTANCES_LAGGING
from spark_state_observer.metrics.families.instances import SNAPSHOT_INSTANCES_NEVER_UPLOADED as SNAPSHOT_INSTANCES_NEVER_UPLOADED
from spark_state_observer.metrics.families.instances import SNAPSHOT_INSTANCES_UNKNOWN as SNAPSHOT_INSTANCES_UNKNOWN
from spark_state_observer.metrics.families.instances import SNAPSHOT_INSTANCES_WITHOUT_UPLOAD as SNAPSHOT_INSTANCES_WITHOUT_UPLOAD
from spark_state_observer.metrics.families.instances import SNAPSHOT_LAG_BATCHES as SNAPSHOT_LAG_BATCHES
from spark_state_observer.metrics.families.instances import SNAPSHOT_LAST_UPLOADED as SNAPSHOT_LAST_UPLOADED
from spark_state_observer.metrics.families.instances import SNAPSHOT_MAX_LAG_BATCHES as SNAPSHOT_MAX_LAG_BATCHES
from spark_state_observer.metrics.families.instances import SNAPSHOT_RESTORE_REPLAY_FILES as SNAPSHOT_RESTORE_REPLAY_FILES
from spark_state_observer.metrics.families.instances import UNKNOWN_INSTANCE_METRIC as UNKNOWN_INSTANCE_METRIC
from spark_state_observer.metrics.families.kafka import KAFKA_CATCH_UP_FORECAST as KAFKA_CATCH_UP_FORECAST
from spark_state_observer.metrics.families.kafka import KAFKA_LAG_GROWING as KAFKA_LAG_GROWING
from spark_state_observer.metrics.families.kafka import KAFKA_LAG_GROWTH as KAFKA_LAG_GROWTH
from spark_state_observer.metrics.families.kafka import KAFKA_LAG_RECORDS as KAFKA_LAG_RECORDS
from spark_state_observer.metrics.families.kafka import KAFKA_LAG_SECONDS as KAFKA_LAG_SECONDS
from spark_state_observer.metrics.families.kafka import KAFKA_METRICS as KAFKA_METRICS
from spark_state_observer.metrics.families.kafka import KAFKA_OFFSET_ANOMALIES as KAFKA_OFFSET_ANOMALIES
from spark_state_observer.metrics.families.kafka import KAFKA_PARTITIONS as KAFKA_PARTITIONS
from spark_state_observer.metrics.families.kafka import KAFKA_PARTITIONS_ADDED as KAFKA_PARTITIONS_ADDED
from spark_state_observer.metrics.families.kafka import KAFKA_STUCK_PARTITIONS as KAFKA_STUCK_PARTITIONS
from spark_state_observer.metrics.families.kafka import KAFKA_TOPIC_LAG_RECORDS as KAFKA_TOPIC_LAG_RECORDS
from spark_state_observer.metrics.families.kafka import KAFKA_TOPIC_LAG_SECONDS as KAFKA_TOPIC_LAG_SECONDS
from spark_state_observer.metrics.families.lifecycle import APPLICATION_INFO as APPLICATION_INFO
from spark_state_observer.metrics.families.lifecycle import LIFECYCLE_METRICS as LIFECYCLE_METRICS
from spark_state_observer.metrics.families.lifecycle import OPERATOR_INFO as OPERATOR_INFO
from spark_state_observer.metrics.families.lifecycle import QUERY_INFO as QUERY_INFO
from spark_state_observer.metrics.families.lifecycle import QUERY_LIFECYCLE as QUERY_LIFECYCLE
from spark_state_observer.metrics.families.lifecycle import QUERY_STARTS as QUERY_STARTS
from spark_state_observer.metrics.families.lifecycle import QUERY_STATUS as QUERY_STATUS
from spark_state_observer.metrics.families.lifecycle import QUERY_TERMINATIONS as QUERY_TERMINATIONS
from spark_state_observer.metrics.families.observer import CALLBACK_DURATION as CALLBACK_DURATION
from spark_state_observer.metrics.families.observer import CALLBACK_FAILURES as CALLBACK_FAILURES
from spark_state_observer.metrics.families.observer import EVENT_PROBLEMS as EVENT_PROBLEMS
from spark_state_observer.metrics.families.observer import EVENTS_DROPPED as EVENTS_DROPPED
from spark_state_observer.metrics.families.observer import EVENTS_FAILED as EVENTS_FAILED
from spark_state_observer.metrics.families.observer import EVENTS_RECEIVED as EVENTS_RECEIVED
from spark_state_observer.metrics.families.observer import EXPORT_FAILURES as EXPORT_FAILURES
from spark_state_observer.metrics.families.observer import HTTP_REQUESTS_REFUSED as HTTP_REQUESTS_REFUSED
from spark_state_observer.metrics.families.observer import PROCESSING_DURATION as PROCESSING_DURATION
from spark_state_observer.metrics.families.observer import QUERIES as QUERIES
from spark_state_observer.metrics.families.observer import QUEUE_EVENTS as QUEUE_EVENTS
from spark_state_observer.metrics.families.observer import SELF_METRICS as SELF_METRICS
from spark_state_observer.metrics.families.observer import WATCH_APPLICATIONS as WATCH_APPLICATIONS
from spark_state_observer.metrics.families.observer import WATCH_APPLICATIONS_DISCOVERED as WATCH_APPLICATIONS_DISCOVERED
from spark_state_observer.metrics.families.observer import WATCH_APPLICATIONS_FORGOTTEN as WATCH_APPLICATIONS_FORGOTTEN
from spark_state_observer.metrics.families.observer import WATCH_CLOCK_SKEW as WATCH_CLOCK_SKEW
from spark_state_observer.metrics.families.observer import WATCH_DECODED_BYTES as WATCH_DECODED_BYTES
from spark_state_observer.metrics.families.observer import WATCH_EVENTS_DELIVERED as WATCH_EVENTS_DELIVERED
from spark_state_observer.metrics.families.observer import WATCH_EVENTS_DUPLICATE as WATCH_EVENTS_DUPLICATE
from spark_state_observer.metrics.families.observer import WATCH_EVENTS_PARSED as WATCH_EVENTS_PARSED
from spark_state_observer.metrics.families.observer import WATCH_LINES as WATCH_LINES
from spark_state_observer.metrics.families.observer import WATCH_METRICS as WATCH_METRICS
from spark_state_observer.metrics.families.observer import WATCH_PROBLEMS as WATCH_PROBLEMS
from spark_state_observer.metrics.families.observer import WATCH_READ_BYTES as WATCH_READ_BYTES
from spark_state_observer.metrics.families.observer import WATCH_STORE_PROBLEMS as WATCH_STORE_PROBLEMS
from spark_state_observer.metrics.families.observer import WATCH_STORE_REQUESTS as WATCH_STORE_REQUESTS
from spark_state_observer.metrics.families.placement import EXECUTOR_STATE_MEMORY as EXECUTOR_STATE_MEMORY
from spark_state_observer.metrics.families.placement import EXECUTOR_STATE_PARTITIONS as EXECUTOR_STATE_PARTITIONS
from spark_state_observer.metrics.families.placement import PARTITION_BYTES_MAX as PARTITION_BYTES_MAX
from spark_state_observer.metrics.families.placement import PARTITION_BYTES_SKEW as PARTITION_BYTES_SKEW
from spark_state_observer.metrics.families.placement import PARTITION_MEMORY_SKEW as PARTITION_MEMORY_SKEW
from spark_state_observer.metrics.families.placement import PARTITION_MIGRATION_BATCHES as PARTITION_MIGRATION_BATCHES
from spark_state_observer.metrics.families.placement import PARTITION_MIGRATION_FILES as PARTITION_MIGRATION_FILES
from spark_state_observer.metrics.families.placement import PARTITION_MIGRATION_LAST_LOAD as PARTITION_MIGRATION_LAST_LOAD
from spark_state_observer.metrics.families.placement import PARTITION_MIGRATION_LOAD as PARTITION_MIGRATION_LOAD
from spark_state_observer.metrics.families.placement import PARTITION_MIGRATIONS as PARTITION_MIGRATIONS
from spark_state_observer.metrics.families.placement import PARTITION_PLACEMENTS as PARTITION_PLACEMENTS
from spark_state_observer.metrics.families.placement import PARTITION_ROWS_MAX as PARTITION_ROWS_MAX
from spark_state_observer.metrics.families.placement import PARTITION_ROWS_SKEW as PARTITION_ROWS_SKEW
from spark_state_observer.metrics.families.placement import PARTITION_STICKINESS as PARTITION_STICKINESS
from spark_state_observer.metrics.families.placement import PLACEMENT_METRICS as PLACEMENT_METRICS
from spark_state_observer.metrics.families.query import BATCH_DURATION as BATCH_DURATION
from spark_state_observer.metrics.families.query import BATCH_ID as BATCH_ID
from spark_state_observer.metrics.families.query import BATCH_SECONDS as BATCH_SECONDS
from spark_state_observer.metrics.families.query import BATCHES as BATCHES
from spark_state_observer.metrics.families.query import EVENT_TIME_MAX_TIMESTAMP as EVENT_TIME_MAX_TIMESTAMP
from spark_state_observer.metrics.families.query import INPUT_ROWS as INPUT_ROWS
from spark_state_observer.metrics.families.query import INPUT_ROWS_PER_SECOND as INPUT_ROWS_PER_SECOND
from spark_state_observer.metrics.families.query import LAST_PROGRESS_TIMESTAMP as LAST_PROGRESS_TIMESTAMP
from spark_state_observer.metrics.families.query import PHASE_DURATION as PHASE_DURATION
from spark_state_observer.metrics.families.query import PHASE_METRICS as PHASE_METRICS
from spark_state_observer.metrics.families.query import PHASE_SECONDS as PHASE_SECONDS
from spark_state_observer.metrics.families.query import PROCESSED_ROWS_PER_SECOND as PROCESSED_ROWS_PER_SECOND
from spark_state_observer.metrics.families.query import QUERY_METRICS as QUERY_METRICS
from spark_state_observer.metrics.families.query import SINK_METRICS as SINK_METRICS
from spark_state_observer.metrics.families.query import SINK_OUTPUT_ROWS as SINK_OUTPUT_ROWS
from spark_state_observer.metrics.families.query import SOURCE_INPUT_ROWS as SOURCE_INPUT_ROWS
from spark_state_observer.metrics.families.query import SOURCE_INPUT_ROWS_PER_SECOND as SOURCE_INPUT_ROWS_PER_SECOND
from spark_state_observer.metrics.families.query import SOURCE_METRIC as SOURCE_METRIC
from spark_state_observer.metrics.families.query import SOURCE_METRICS as SOURCE_METRICS
from spark_state_observer.metrics.families.query import SOURCE_OFFSETS_BEHIND_LATEST as SOURCE_OFFSETS_BEHIND_LATEST
from spark_state_observer.metrics.families.query import SOURCE_PROCESSED_ROWS_PER_SECOND as SOURCE_PROCESSED_ROWS_PER_SECOND
from spark_state_observer.metrics.families.query import WATERMARK_TIMESTAMP as WATERMARK_TIMESTAMP
from spark_state_observer.metrics.families.signals import EVICTION_RATIO as EVICTION_RATIO
from spark_state_observer.metrics.families.signals import EXECUTOR_CHANGES as EXECUTOR_CHANGES
from spark_state_observer.metrics.families.signals import EXECUTORS as EXECUTORS
from spark_state_observer.metrics.families.signals import FALLING_BEHIND as FALLING_BEHIND
from spark_state_observer.metrics.families.signals import LAST_RESTORE_CHANGELOG_FILES as LAST_RESTORE_CHANGELOG_FILES
from spark_state_observer.metrics.families.signals import LAST_RESTORE_DURATION as LAST_RESTORE_DURATION
from spark_state_observer.metrics.families.signals import LATE_ROWS_DROPPING as LATE_ROWS_DROPPING
from spark_state_observer.metrics.families.signals import LATE_ROWS_SHARE as LATE_ROWS_SHARE
from spark_state_observer.metrics.families.signals import LOAD_LATENCY_ANOMALIES as LOAD_LATENCY_ANOMALIES
from spark_state_observer.metrics.families.signals import MEMORY_BUDGET_ETA as MEMORY_BUDGET_ETA
from spark_state_observer.metrics.families.signals import MEMORY_GROWTH_RATE as MEMORY_GROWTH_RATE
from spark_state_observer.metrics.families.signals import PARTITION_CHANGES as PARTITION_CHANGES
from spark_state_observer.metrics.families.signals import QUERY_CRASH_LOOP as QUERY_CRASH_LOOP
from spark_state_observer.metrics.families.signals import QUERY_LAST_DOWNTIME as QUERY_LAST_DOWNTIME
from spark_state_observer.metrics.families.signals import QUERY_LAST_START as QUERY_LAST_START
from spark_state_observer.metrics.families.signals import QUERY_LOST as QUERY_LOST
from spark_state_observer.metrics.families.signals import QUERY_LOST_SINCE as QUERY_LOST_SINCE
from spark_state_observer.metrics.families.signals import QUERY_RESTARTS as QUERY_RESTARTS
from spark_state_observer.metrics.families.signals import QUERY_SCHEDULE_INTERVAL as QUERY_SCHEDULE_INTERVAL
from spark_state_observer.metrics.families.signals import QUERY_SCHEDULED as QUERY_SCHEDULED
from spark_state_observer.metrics.families.signals import QUERY_SECONDS_SINCE_PROGRESS as QUERY_SECONDS_SINCE_PROGRESS
from spark_state_observer.metrics.families.signals import QUERY_STALLED as QUERY_STALLED
from spark_state_observer.metrics.families.signals import QUERY_TERMINATIONS_BY_CLASS as QUERY_TERMINATIONS_BY_CLASS
from spark_state_observer.metrics.families.signals import REAL_TIME_BOUNDARY_BACKLOG as REAL_TIME_BOUNDARY_BACKLOG
from spark_state_observer.metrics.families.signals import REAL_TIME_BOUNDARY_PAUSE as REAL_TIME_BOUNDARY_PAUSE
from spark_state_observer.metrics.families.signals import REAL_TIME_CHECKPOINT_INTERVAL as REAL_TIME_CHECKPOINT_INTERVAL
from spark_state_observer.metrics.families.signals import REAL_TIME_MODE as REAL_TIME_MODE
from spark_state_observer.metrics.families.signals import RESTORE_ELAPSED as RESTORE_ELAPSED
from spark_state_observer.metrics.families.signals import RESTORE_ETA as RESTORE_ETA
from spark_state_observer.metrics.families.signals import RESTORE_IN_PROGRESS as RESTORE_IN_PROGRESS
from spark_state_observer.metrics.families.signals import RESTORE_PARTITIONS_REMAINING as RESTORE_PARTITIONS_REMAINING
from spark_state_observer.metrics.families.signals import ROWS_BUDGET_ETA as ROWS_BUDGET_ETA
from spark_state_observer.metrics.families.signals import ROWS_GROWTH_RATE as ROWS_GROWTH_RATE
from spark_state_observer.metrics.families.signals import SIGNAL_METRICS as SIGNAL_METRICS
from spark_state_observer.metrics.families.signals import STATE_RESTORES as STATE_RESTORES
from spark_state_observer.metrics.families.signals import STATE_STORE_RELOADS as STATE_STORE_RELOADS
from spark_state_observer.metrics.families.signals import STATE_TASK_RETRIES as STATE_TASK_RETRIES
from spark_state_observer.metrics.families.signals import STATE_UNBOUNDED as STATE_UNBOUNDED
from spark_state_observer.metrics.families.signals import WATERMARK_AHEAD as WATERMARK_AHEAD
from spark_state_observer.metrics.families.signals import WATERMARK_LAG as WATERMARK_LAG
from spark_state_observer.metrics.families.state import CUSTOM_METRICS as CUSTOM_METRICS
from spark_state_observer.metrics.families.state import OPERATOR_METRICS as OPERATOR_METRICS
from spark_state_observer.metrics.families.state import UNKNOWN_CUSTOM_METRIC as UNKNOWN_CUSTOM_METRIC
from spark_state_observer.metrics.spec import COUNTER as COUNTER
from spark_state_observer.metrics.spec import CUMULATIVE_PER_RUN as CUMULATIVE_PER_RUN
from spark_state_observer.metrics.spec import GAUGE as GAUGE
from spark_state_observer.metrics.spec import HISTOGRAM as HISTOGRAM
from spark_state_observer.metrics.spec import MS as MS
from spark_state_observer.metrics.spec import SCOPE_LABELS as SCOPE_LABELS
from spark_state_observer.metrics.spec import MetricSpec as MetricSpec
from spark_state_observer.model.identity import APP_LABEL


class UnknownMetricError(KeyError):
    """A name or spec that is not in ``CATALOG``: a metric must be declared here before it is emitted."""


def _checked(specs: tuple[MetricSpec, ...]) -> tuple[MetricSpec, ...]:
    """``specs`` if they can be one catalog; ``ValueError`` otherwise, at import, so a family's slip fails every
    test and command at once instead of one scrape or one generated rule later.

    A name twice would export two series families under one name; an unknown kind or scope would be exported
    as whatever the exporter falls back to; a spec written in a family but not assembled here would be emitted
    and refused by ``check`` at run time."""
    seen: dict[str, MetricSpec] = {}
    for spec in specs:
        if spec.prometheus_name in seen:
            raise ValueError(f"{spec.prometheus_name} is declared twice in spark_state_observer.metrics.families")
        if spec.kind not in (GAUGE, COUNTER, CUMULATIVE_PER_RUN, HISTOGRAM):
            raise ValueError(f"{spec.prometheus_name}: unknown kind {spec.kind!r}")
        if spec.scope not in SCOPE_LABELS:
            raise ValueError(f"{spec.prometheus_name}: unknown scope {spec.scope!r}")
        seen[spec.prometheus_name] = spec
    for family in families.MODULES:
        for name, value in vars(family).items():
            if isinstance(value, MetricSpec) and seen.get(value.prometheus_name) is not value:
                raise ValueError(f"{family.__name__}.{name} is not assembled into spark_state_observer.metrics.catalog.CATALOG")
    return specs


# --- the catalog ---------------------------------------------------------------------------------------
CATALOG: tuple[MetricSpec, ...] = _checked(
    QUERY_METRICS
    + PHASE_METRICS
    + SOURCE_METRICS
    + SINK_METRICS
    + OPERATOR_METRICS
    + CUSTOM_METRICS
    + (UNKNOWN_CUSTOM_METRIC,)
    + INSTANCE_METRICS
    + (UNKNOWN_INSTANCE_METRIC,)
    + LIFECYCLE_METRICS
    + (APPLICATION_INFO, OPERATOR_INFO)
    + SIGNAL_METRICS
    + KAFKA_METRICS
    + PLACEMENT_METRICS
    + CAPACITY_METRICS
    + SELF_METRICS
    + WATCH_METRICS
)
"""Every metric the observer exports, Spark-derived, signal and self, each once."""

# names a static label (the ``labels`` setting) may not take: every label of the series above, the
# application's, and those Prometheus and the rules add (target labels, histogram buckets, alert severity)
RESERVED_LABELS: frozenset[str] = frozenset(name for spec in CATALOG for name in spec.label_names) | {
    APP_LABEL,
    "job",
    "instance",
    "le",
    "severity",
}

BY_NAME: dict[str, MetricSpec] = {s.prometheus_name: s for s in CATALOG}
CUSTOM_BY_KEY: dict[str, MetricSpec] = {s.key: s for s in CUSTOM_METRICS}
# operator fields and custom metrics have no constant of their own: code names them by Spark's key
BY_KEY: dict[str, MetricSpec] = {s.key: s for s in OPERATOR_METRICS + CUSTOM_METRICS}
KNOWN_INSTANCE_PREFIXES = frozenset({SNAPSHOT_LAST_UPLOADED.key})
KAFKA_LAG_KEYS = {"minOffsetsBehindLatest": "min", "avgOffsetsBehindLatest": "avg", "maxOffsetsBehindLatest": "max"}


def lookup(name: str) -> MetricSpec:
    """The spec of an exported (Prometheus) name; ``UnknownMetricError`` for a name the catalog lacks."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownMetricError(f"{name} is not a metric of spark_state_observer.metrics.catalog") from None


def by_key(key: str) -> MetricSpec:
    """The spec of a state operator field or custom metric by Spark's key (``"rocksdbPutCount"``).

    Those specs are rows of ``OPERATOR_METRICS`` / ``CUSTOM_METRICS`` without a constant; the dashboards and
    rules name them by the key Spark reports, so a key Spark renames fails here, at generation.
    """
    try:
        return BY_KEY[key]
    except KeyError:
        raise UnknownMetricError(f"{key} is not a state operator field or custom metric of spark_state_observer.metrics.catalog") from None


def check(spec: MetricSpec) -> MetricSpec:
    """``spec`` itself if it is the catalog's; ``UnknownMetricError`` for a spec built elsewhere."""
    if BY_NAME.get(spec.prometheus_name) is not spec:
        raise UnknownMetricError(f"{spec.prometheus_name} is not a metric of spark_state_observer.metrics.catalog")
    return spec


def reference_table(specs: Iterable[MetricSpec] = CATALOG) -> str:
    """Markdown metric reference for the README and the ``metrics`` command, generated from the catalog."""
    rows = ["| metric | type | unit | labels | from Spark | since | meaning |", "|---|---|---|---|---|---|---|"]
    for s in specs:
        labels = ", ".join(f"`{label}`" for label in s.label_names) or "-"
        source = f"`{s.key}`" if s.key else "derived"
        rows.append(f"| `{s.prometheus_name}` | {s.prometheus_type} | {s.unit or '-'} | {labels} | {source} | {s.since} | {s.help} |")
    return "\n".join(rows)
