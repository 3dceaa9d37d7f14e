"""The OTLP exporters (http/protobuf or gRPC), wrapped so that every failed export is counted.

The OpenTelemetry exporters retry transient errors with backoff until their timeout and then give up
with a FAILURE result (or, rarely, an exception); the SDK only logs it. The wrappers turn each such
outcome into ``spark_state_observer_export_failures_total{exporter="otlp"}``, so an unreachable
collector shows in the observer's own metrics (Prometheus, and OTLP again once the collector is back).
Exports run on the SDK's threads (periodic metric reader, batch processors), never on Spark's.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from spark_state_observer.exporters.otel.config import OtlpConfig

OnFailure = Callable[[], None]
R = TypeVar("R")


def _exporter_classes(protocol: str) -> tuple[type, type, type]:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter  # type: ignore[assignment]
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # type: ignore[assignment]
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]
    return OTLPMetricExporter, OTLPLogExporter, OTLPSpanExporter


def build_exporters(config: OtlpConfig, on_failure: OnFailure) -> tuple[MetricExporter, LogRecordExporter, SpanExporter | None]:
    """Metric, log and (with ``otlp_traces``) span exporters for the configured protocol and endpoint."""
    metric_cls, log_cls, span_cls = _exporter_classes(config.protocol)

    def make(cls: type, signal: str) -> Any:
        kwargs: dict[str, Any] = {}
        if config.endpoint is not None:
            kwargs["endpoint"] = config.signal_endpoint(signal)
        if config.timeout_seconds is not None:
            kwargs["timeout"] = config.timeout_seconds
        return cls(**kwargs)

    spans = CountingSpanExporter(make(span_cls, "traces"), on_failure) if config.traces else None
    return CountingMetricExporter(make(metric_cls, "metrics"), on_failure), CountingLogExporter(make(log_cls, "logs"), on_failure), spans


def _counted(export: Callable[[], R], success: R, failure: R, on_failure: OnFailure) -> R:
    """Run one export; an exception counts as a failure; every result but success is counted."""
    try:
        result = export()
    except Exception:
        result = failure
    if result is not success:
        on_failure()
    return result


class CountingMetricExporter(MetricExporter):
    """Delegates to an OTLP metric exporter and counts each export that did not succeed."""

    def __init__(self, inner: MetricExporter, on_failure: OnFailure) -> None:
        # the reader asks the exporter for its temporality and aggregation: keep the inner one's
        super().__init__(preferred_temporality=inner._preferred_temporality, preferred_aggregation=inner._preferred_aggregation)
        self._inner, self._on_failure = inner, on_failure

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return _counted(
            lambda: self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs),
            MetricExportResult.SUCCESS,
            MetricExportResult.FAILURE,
            self._on_failure,
        )

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)


class CountingLogExporter(LogRecordExporter):
    """Delegates to an OTLP log exporter and counts each export that did not succeed."""

    def __init__(self, inner: LogRecordExporter, on_failure: OnFailure) -> None:
        self._inner, self._on_failure = inner, on_failure

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        return _counted(lambda: self._inner.export(batch), LogRecordExportResult.SUCCESS, LogRecordExportResult.FAILURE, self._on_failure)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated


class CountingSpanExporter(SpanExporter):
    """Delegates to an OTLP span exporter and counts each export that did not succeed."""

    def __init__(self, inner: SpanExporter, on_failure: OnFailure) -> None:
        self._inner, self._on_failure = inner, on_failure

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return _counted(lambda: self._inner.export(spans), SpanExportResult.SUCCESS, SpanExportResult.FAILURE, self._on_failure)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        self._inner.shutdown()
