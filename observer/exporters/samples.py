"""Which samples exist right now: the one enumeration every exporter renders.

The Prometheus collector and the OpenTelemetry reader both walk the tracker's snapshot through these
functions, so a series added here appears in both with the same values and the same label sets; each
exporter only decides how a ``(name, labels, value)`` sample is written. Names are the registry's
Prometheus names (``observer.registry``), the key both exporters look their ``MetricSpec`` up by.
"""

from __future__ import annotations

from typing import Protocol

from observer import registry
from observer.selfmetrics import SelfMetrics
from observer.signals.engine import SignalEngine
from observer.tracker import Labels, QueryRecord, QueryTracker, operator_field, operator_labels, source_labels

STATUSES = ("active", "idle", "terminated", "failed")
EVENT_KINDS = ("started", "progress", "idle", "terminated")


class SampleSink(Protocol):
    """Receives every sample of one collection."""

    def add(self, name: str, labels: Labels, value: float) -> None:
        """One sample of metric ``name`` (the registry's Prometheus name)."""


def render_state(f: SampleSink, tracker: QueryTracker, signals: SignalEngine, top_k: int) -> int:
    """Every query's series and the application-wide signal series; returns the number of queries."""
    records = tracker.snapshot()
    for record in records:
        render_query(f, record, top_k)
    render_app(f, signals)
    return len(records)


def render_app(f: SampleSink, signals: SignalEngine) -> None:
    """The application-wide signal series (executors), which belong to no query."""
    for name, labels, value in signals.app_snapshot():
        f.add(name, labels, value)


def render_self(f: SampleSink, s: SelfMetrics, signals: SignalEngine, queue_len: int, n_queries: int) -> None:
    """The observer's own counters and gauges (its latency histograms are exporter-specific)."""
    with s.lock:
        received, dropped = dict(s.received), dict(s.dropped)
        export_failures, failed, problems = dict(s.export_failures), s.failed, s.problems
    for kind in EVENT_KINDS:
        f.add("spark_state_observer_events_received_total", (("kind", kind),), received.get(kind, 0))
    for reason in sorted(set(dropped) | {"queue_full", "malformed"}):
        f.add("spark_state_observer_events_dropped_total", (("reason", reason),), dropped.get(reason, 0))
    for exporter, n in sorted(export_failures.items()):
        f.add("spark_state_observer_export_failures_total", (("exporter", exporter),), n)
    f.add("spark_state_observer_events_failed_total", (), failed)
    f.add("spark_state_observer_callback_failures_total", (), signals.callback_failures)
    f.add("spark_state_observer_event_problems_total", (), problems)
    f.add("spark_state_observer_queue_events", (), queue_len)
    f.add("spark_state_observer_queries", (), n_queries)


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
    f.add("spark_streaming_query_info", q + (("run_id", record.run_id or ""),), 1)
    for status in STATUSES:
        f.add("spark_streaming_query_status", q + (("status", status),), 1.0 if record.status == status else 0.0)
    f.add("spark_streaming_query_starts_total", q, record.starts)
    for outcome in ("clean", "exception"):
        f.add("spark_streaming_query_terminations_total", q + (("outcome", outcome),), record.terminations.get(outcome, 0))
    for (name, labels), value in record.counters.items():
        f.add(name, q + labels, value)


def render_signal_gauges(f: SampleSink, record: QueryRecord) -> None:
    """The second part of ``render_query``: the signals' gauges, some rewritten every second."""
    q = _query_labels(record)
    for (name, labels), value in record.signal_gauges.items():
        f.add(name, q + labels, value)


def render_progress(f: SampleSink, record: QueryRecord, top_k: int) -> None:
    """The last part of ``render_query``: the latest progress as gauges."""
    q = _query_labels(record)
    p = record.last_progress
    if p is None:
        return
    _gauge(f, "spark_streaming_batch_id", q, p.batch_id)
    _gauge(f, "spark_streaming_batch_duration_seconds", q, _ms(p.batch_duration_ms))
    _gauge(f, "spark_streaming_input_rows_per_second", q, p.input_rows_per_second)
    _gauge(f, "spark_streaming_processed_rows_per_second", q, p.processed_rows_per_second)
    _gauge(f, "spark_streaming_last_progress_timestamp_seconds", q, p.timestamp)
    _gauge(f, "spark_streaming_watermark_timestamp_seconds", q, p.event_time.get("watermark"))
    _gauge(f, "spark_streaming_event_time_max_timestamp_seconds", q, p.event_time.get("max"))
    for phase, ms in p.duration_ms.items():
        f.add("spark_streaming_phase_duration_seconds", q + (("phase", phase),), ms * registry.MS)
    for src in p.sources:
        sl = q + source_labels(src.index, src.description)
        _gauge(f, "spark_streaming_source_input_rows_per_second", sl, src.input_rows_per_second)
        _gauge(f, "spark_streaming_source_processed_rows_per_second", sl, src.processed_rows_per_second)
        for key, value in src.metrics.items():
            stat = registry.KAFKA_LAG_KEYS.get(key)
            if stat:
                f.add("spark_streaming_source_offsets_behind_latest", sl + (("stat", stat),), value)
            else:
                f.add("spark_streaming_source_metric", sl + (("metric", key),), value)
    for op in p.operators:
        ol = q + operator_labels(op.index, op.name)
        f.add("spark_state_operator_info", ol + (("provider", op.provider),), 1)
        for spec in registry.OPERATOR_METRICS:
            if spec.kind == registry.GAUGE:
                value = operator_field(op, spec.key)
                _gauge(f, spec.prometheus_name, ol, None if value is None else value * spec.scale)
        for key, value in op.custom.items():
            spec = registry.CUSTOM_BY_KEY.get(key)
            if spec is None:
                f.add("spark_state_custom_metric", ol + (("metric", key),), value)
            elif spec.kind != registry.COUNTER:
                f.add(spec.prometheus_name, ol, value * spec.scale)
        _render_instances(f, ol, op, p.batch_id, top_k)


def _render_instances(f: SampleSink, ol, op, batch_id: int, top_k: int) -> None:  # type: ignore[no-untyped-def]
    """Per-store-instance series, bounded to the ``top_k`` most lagging (or largest, if unknown)."""
    snapshots = [m for m in op.instances if m.prefix == "SnapshotLastUploaded"]
    if snapshots:
        f.add("spark_state_snapshot_instances_without_upload", ol, sum(1 for m in snapshots if m.value is None))
    if top_k <= 0:
        return
    uploaded = sorted((m for m in snapshots if m.value is not None), key=lambda m: (m.value, m.partition))
    for m in uploaded[:top_k]:
        il = ol + (("partition", str(m.partition)), ("store", m.store))
        f.add("spark_state_snapshot_last_uploaded_version", il, m.value)
        f.add("spark_state_snapshot_lag_batches", il, max(0.0, batch_id + 1 - m.value))
    others = sorted((m for m in op.instances if m.prefix not in registry.KNOWN_INSTANCE_PREFIXES and m.value is not None),
                    key=lambda m: -m.value)
    for m in others[:top_k]:
        f.add("spark_state_instance_metric", ol + (("metric", m.prefix), ("partition", str(m.partition)), ("store", m.store)), m.value)


def _gauge(f: SampleSink, name: str, labels: Labels, value: float | None) -> None:
    if value is not None:
        f.add(name, labels, value)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * registry.MS
