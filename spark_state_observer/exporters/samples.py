"""Which samples exist right now: the one enumeration every exporter renders.

The Prometheus collector and the OpenTelemetry reader both walk a ``MetricsView`` through these
functions, so a series added here appears in both with the same values and the same label sets; each
exporter only decides how a ``(spec, labels, value)`` sample is written. Samples are named by their
catalog spec (``spark_state_observer.metrics.catalog``), never by a string.
"""

from __future__ import annotations

from typing import Callable, Protocol

from spark_state_observer.metrics import catalog
from spark_state_observer.metrics.catalog import MetricSpec
from spark_state_observer.metrics.selfmetrics import SelfSnapshot
from spark_state_observer.metrics.tracker import QueryRecord, operator_labels, source_labels
from spark_state_observer.metrics.updates import Labels
from spark_state_observer.metrics.view import MetricsView
from spark_state_observer.model import kinds, query_lifecycle
from spark_state_observer.model.events import OperatorProgress
from spark_state_observer.model.fields import SNAPSHOT_LAST_UPLOADED, operator_field


class SampleSink(Protocol):
    """Receives every sample of one collection."""

    def add(self, spec: MetricSpec, labels: Labels, value: float) -> None:
        """One sample of the metric ``spec``."""


class Prefixed:
    """A ``SampleSink`` that puts ``prefix`` (an application's identity labels) before every sample's labels."""

    __slots__ = ("_f", "_prefix")

    def __init__(self, f: SampleSink, prefix: Labels) -> None:
        self._f, self._prefix = f, prefix

    def add(self, spec: MetricSpec, labels: Labels, value: float) -> None:
        self._f.add(spec, self._prefix + labels, value)


def labelled(f: SampleSink, prefix: Labels) -> SampleSink:
    """``f`` itself without a prefix (no copy on the common path), else a ``Prefixed`` over it."""
    return Prefixed(f, prefix) if prefix else f


def render_state(f: SampleSink, view: MetricsView) -> int:
    """Every query's series and the application-wide series; returns the number of queries."""
    records = view.records()
    scoped = labelled(f, view.identity.labels)
    for record in records:
        render_query(scoped, record, view.partition_top_k)
    render_app(f, view)
    return len(records)


def render_app(f: SampleSink, view: MetricsView) -> None:
    """The application-wide series (its info series, executors), which belong to no query; with its identity labels."""
    identity = view.identity
    if identity.known:
        f.add(catalog.APPLICATION_INFO, identity.info_labels, 1)
    scoped = labelled(f, identity.labels)
    for spec, labels, value in view.app_values():
        scoped.add(spec, labels, value)


def render_self(f: SampleSink, s: SelfSnapshot, static: Labels = ()) -> None:
    """The observer's own counters and gauges (its latency histograms are exporter-specific).

    They carry the static labels (``static``) but no ``app``: in the watcher they are the process's, not an application's.
    """
    f = labelled(f, static)
    for kind in kinds.EVENT_KINDS:
        f.add(catalog.EVENTS_RECEIVED, (("kind", kind),), s.received.get(kind, 0))
    for reason in sorted(set(s.dropped) | {"queue_full", "malformed"}):
        f.add(catalog.EVENTS_DROPPED, (("reason", reason),), s.dropped.get(reason, 0))
    for exporter, n in sorted(s.export_failures.items()):
        f.add(catalog.EXPORT_FAILURES, (("exporter", exporter),), n)
    for reason, n in sorted(s.http_refused.items()):
        f.add(catalog.HTTP_REQUESTS_REFUSED, (("reason", reason),), n)
    f.add(catalog.EVENTS_FAILED, (), s.failed)
    f.add(catalog.CALLBACK_FAILURES, (), s.callback_failures)
    f.add(catalog.EVENT_PROBLEMS, (), s.problems)
    f.add(catalog.QUEUE_EVENTS, (), s.queue_events)
    f.add(catalog.QUERIES, (), s.queries)


def render_query(f: SampleSink, record: QueryRecord, top_k: int) -> None:
    """Every series of one query: lifecycle, latest progress as gauges, running totals as counters."""
    render_totals(f, record)
    render_signal_gauges(f, record)
    render_progress(f, record, top_k)


def _query_labels(record: QueryRecord) -> Labels:
    return (("query", record.label), ("query_id", record.query_id))


def render_totals(f: SampleSink, record: QueryRecord) -> None:
    """The first part of ``render_query``: lifecycle and counters."""
    q = _query_labels(record)
    f.add(catalog.QUERY_INFO, q + (("run_id", record.run_id or ""),), 1)
    for status in kinds.QUERY_STATUSES:
        f.add(catalog.QUERY_STATUS, q + (("status", status),), 1.0 if record.status == status else 0.0)
    render_lifecycle(f, q, record.lifecycle)
    f.add(catalog.QUERY_STARTS, q, record.starts)
    for outcome in kinds.OUTCOMES:
        f.add(catalog.QUERY_TERMINATIONS, q + (("outcome", outcome),), record.terminations.get(outcome, 0))
    for (spec, labels), value in record.counters.items():
        f.add(spec, q + labels, value)


def render_lifecycle(f: SampleSink, query: Labels, state: str) -> None:
    """The state set ``spark_streaming_query_lifecycle`` of one query (``query``: its query labels)."""
    for each in query_lifecycle.STATES:
        f.add(catalog.QUERY_LIFECYCLE, query + (("state", each),), 1.0 if state == each else 0.0)


def render_lasting(
    f: SampleSink, query: Labels, state: str, run_start: float | None, schedule_seconds: float | None, lost_since: float | None = None
) -> None:
    """What the watcher renders for a lasting query whose application it forgot: its lifecycle state and, for one
    on a schedule, the latest start and the interval its application exported (the overdue alert reads them); for a
    lost one, its driver's last sign of life (the lost alert pages only for a recent loss)."""
    render_lifecycle(f, query, state)
    if lost_since is not None:
        f.add(catalog.QUERY_LOST_SINCE, query, lost_since)
    if run_start is not None:
        f.add(catalog.QUERY_LAST_START, query, run_start)
    if schedule_seconds is not None:
        f.add(catalog.QUERY_SCHEDULE_INTERVAL, query, schedule_seconds)


def render_signal_gauges(f: SampleSink, record: QueryRecord) -> None:
    """The second part of ``render_query``: the signals' gauges, some rewritten every second."""
    q = _query_labels(record)
    for (spec, labels), value in record.signal_gauges.items():
        f.add(spec, q + labels, value)


def render_progress(f: SampleSink, record: QueryRecord, top_k: int) -> None:
    """The last part of ``render_query``: the latest progress as gauges."""
    q = _query_labels(record)
    p = record.last_progress
    if p is None:
        return
    _gauge(f, catalog.BATCH_ID, q, p.batch_id)
    _gauge(f, catalog.BATCH_DURATION, q, _scaled(p.batch_duration_ms, catalog.BATCH_DURATION))
    _gauge(f, catalog.INPUT_ROWS_PER_SECOND, q, p.input_rows_per_second)
    _gauge(f, catalog.PROCESSED_ROWS_PER_SECOND, q, p.processed_rows_per_second)
    _gauge(f, catalog.LAST_PROGRESS_TIMESTAMP, q, p.timestamp)
    _gauge(f, catalog.WATERMARK_TIMESTAMP, q, p.event_time.get("watermark"))
    _gauge(f, catalog.EVENT_TIME_MAX_TIMESTAMP, q, p.event_time.get("max"))
    allows = record.labels.allows  # label values beyond the query's budget are not rendered
    for phase, ms in p.duration_ms.items():
        if allows((("phase", phase),)):
            f.add(catalog.PHASE_DURATION, q + (("phase", phase),), ms * catalog.PHASE_DURATION.scale)
    for src in p.sources:
        if not allows(source_labels(src.index, src.description)):
            continue
        sl = q + source_labels(src.index, src.description)
        _gauge(f, catalog.SOURCE_INPUT_ROWS_PER_SECOND, sl, src.input_rows_per_second)
        _gauge(f, catalog.SOURCE_PROCESSED_ROWS_PER_SECOND, sl, src.processed_rows_per_second)
        for key, value in src.metrics.items():
            stat = catalog.KAFKA_LAG_KEYS.get(key)
            if stat:
                f.add(catalog.SOURCE_OFFSETS_BEHIND_LATEST, sl + (("stat", stat),), value)
            elif allows((("metric", key),)):
                f.add(catalog.SOURCE_METRIC, sl + (("metric", key),), value)
    for op in p.operators:
        if not allows(operator_labels(op.index, op.name)):
            continue
        ol = q + operator_labels(op.index, op.name)
        f.add(catalog.OPERATOR_INFO, ol + (("provider", op.provider),), 1)
        for spec in _OPERATOR_GAUGES:
            _gauge(f, spec, ol, _scaled(operator_field(op, spec.key), spec))
        for key, value in op.custom.items():
            custom = catalog.CUSTOM_BY_KEY.get(key)
            if custom is None:
                if allows((("metric", key),)):
                    f.add(catalog.UNKNOWN_CUSTOM_METRIC, ol + (("metric", key),), value)
            elif custom.kind != catalog.COUNTER:
                f.add(custom, ol, value * custom.scale)
        _render_instances(f, ol, op, top_k, allows)


_OPERATOR_GAUGES = tuple(s for s in catalog.OPERATOR_METRICS if s.kind == catalog.GAUGE)


def _render_instances(f: SampleSink, ol: Labels, op: OperatorProgress, top_k: int, allows: Callable[[Labels], bool]) -> None:
    """Per-store-instance series, bounded to the ``top_k`` most lagging (or largest, if unknown); the lag of
    every instance, never-uploaded ones included, comes from ``spark_state_observer.signals.snapshots``."""
    snapshots = [m for m in op.instances if m.prefix == SNAPSHOT_LAST_UPLOADED]
    if snapshots:
        f.add(catalog.SNAPSHOT_INSTANCES_WITHOUT_UPLOAD, ol, sum(1 for m in snapshots if m.value is None))
    if top_k <= 0:
        return
    uploaded = sorted(((m.value, m) for m in snapshots if m.value is not None), key=lambda vm: (vm[0], vm[1].partition))
    for value, m in uploaded[:top_k]:
        il = ol + (("partition", str(m.partition)), ("store", m.store))
        f.add(catalog.SNAPSHOT_LAST_UPLOADED, il, value)
    others = sorted(
        ((m.value, m) for m in op.instances if m.prefix not in catalog.KNOWN_INSTANCE_PREFIXES and m.value is not None),
        key=lambda vm: -vm[0],
    )
    for value, m in others[:top_k]:
        if not allows((("metric", m.prefix),)):
            continue
        f.add(catalog.UNKNOWN_INSTANCE_METRIC, ol + (("metric", m.prefix), ("partition", str(m.partition)), ("store", m.store)), value)


def _gauge(f: SampleSink, spec: MetricSpec, labels: Labels, value: float | None) -> None:
    if value is not None:
        f.add(spec, labels, value)


def _scaled(value: float | None, spec: MetricSpec) -> float | None:
    return None if value is None else value * spec.scale
