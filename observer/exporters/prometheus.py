"""A prometheus-client collector that renders the latest state of every query and operator.

It holds no metric objects of its own: at each scrape it reads a copy of the tracker and the
observer's self-metrics and builds metric families from the registry's specs. Exposition (HTTP server,
Pushgateway) lives in ``observer.exporters.http``, as prometheus/client_python keeps the two apart.
"""

from __future__ import annotations

from typing import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from observer import registry
from observer.selfmetrics import SELF_METRICS, SelfMetrics
from observer.signals.engine import SignalEngine
from observer.tracker import QueryRecord, QueryTracker, operator_field, operator_labels, source_labels

_HELP = {s.prometheus_name: s.help for s in registry.CATALOG + SELF_METRICS}
_TYPE = {s.prometheus_name: s.prometheus_type for s in registry.CATALOG + SELF_METRICS}
STATUSES = ("active", "idle", "terminated", "failed")


class _Families:
    """Builds one metric family per name, with the label names of its first sample."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, name: str, labels: tuple[tuple[str, str], ...], value: float) -> None:
        family = self._families.get(name)
        if family is None:
            help_text = _HELP.get(name, name)
            names = [k for k, _ in labels]
            if _TYPE.get(name) == "counter":
                family = CounterMetricFamily(name, help_text, labels=names)
            else:
                family = GaugeMetricFamily(name, help_text, labels=names)
            self._families[name] = family
        family.add_metric([v for _, v in labels], value)

    def extend(self, metrics: list[Metric]) -> None:
        for metric in metrics:
            self._families[metric.name] = metric

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


class StateCollector(Collector):
    """Collector over a ``QueryTracker``; register it with any ``CollectorRegistry``."""

    def __init__(self, tracker: QueryTracker, self_metrics: SelfMetrics, signals: SignalEngine,
                 queue_len: Callable[[], int] = lambda: 0, partition_top_k: int = 10) -> None:
        self._tracker = tracker
        self._signals = signals
        self._self = self_metrics
        self._queue_len = queue_len
        self._top_k = partition_top_k

    def collect(self) -> Iterator[Metric]:
        families = _Families()
        records = self._tracker.snapshot()
        for record in records:
            render_query(families, record, self._top_k)
        for name, labels, value in self._signals.app_snapshot():
            families.add(name, labels, value)
        self._render_self(families, len(records))
        return iter(families)

    def _render_self(self, f: _Families, n_queries: int) -> None:
        s = self._self
        with s.lock:
            received, dropped = dict(s.received), dict(s.dropped)
            export_failures, failed, problems = dict(s.export_failures), s.failed, s.problems
            hists = {"spark_state_observer_callback_duration_seconds": (s.callback.cumulative(), s.callback.sum),
                     "spark_state_observer_processing_duration_seconds": (s.processing.cumulative(), s.processing.sum)}
        for kind in ("started", "progress", "idle", "terminated"):
            f.add("spark_state_observer_events_received_total", (("kind", kind),), received.get(kind, 0))
        for reason in sorted(set(dropped) | {"queue_full", "malformed"}):
            f.add("spark_state_observer_events_dropped_total", (("reason", reason),), dropped.get(reason, 0))
        for exporter, n in sorted(export_failures.items()):
            f.add("spark_state_observer_export_failures_total", (("exporter", exporter),), n)
        f.add("spark_state_observer_events_failed_total", (), failed)
        f.add("spark_state_observer_callback_failures_total", (), self._signals.callback_failures)
        f.add("spark_state_observer_event_problems_total", (), problems)
        f.add("spark_state_observer_queue_events", (), self._queue_len())
        f.add("spark_state_observer_queries", (), n_queries)
        hist_families = []
        for name, (buckets, total) in hists.items():
            h = HistogramMetricFamily(name, _HELP[name])
            h.add_metric([], buckets, total)
            hist_families.append(h)
        f.extend(hist_families)


def render_query(f: _Families, record: QueryRecord, top_k: int) -> None:
    """Every series of one query: lifecycle, latest progress as gauges, running totals as counters."""
    q = (("query", record.label), ("query_id", record.query_id))
    f.add("spark_streaming_query_info", q + (("run_id", record.run_id or ""),), 1)
    for status in STATUSES:
        f.add("spark_streaming_query_status", q + (("status", status),), 1.0 if record.status == status else 0.0)
    f.add("spark_streaming_query_starts_total", q, record.starts)
    for outcome in ("clean", "exception"):
        f.add("spark_streaming_query_terminations_total", q + (("outcome", outcome),), record.terminations.get(outcome, 0))
    for (name, labels), value in record.counters.items():
        f.add(name, q + labels, value)
    for (name, labels), value in record.signal_gauges.items():
        f.add(name, q + labels, value)
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


def _render_instances(f: _Families, ol, op, batch_id: int, top_k: int) -> None:  # type: ignore[no-untyped-def]
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


def _gauge(f: _Families, name: str, labels, value: float | None) -> None:  # type: ignore[no-untyped-def]
    if value is not None:
        f.add(name, labels, value)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * registry.MS
