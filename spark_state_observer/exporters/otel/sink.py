"""The OpenTelemetry sink: OTLP metrics, signal log records and (optionally) batch spans of one observer.

Providers are private to the observer (never the global ones), so a job's own OpenTelemetry setup is
left alone. Every buffer is bounded (``otlp_queue_size`` log records and spans; metrics are read from
the tracker at export time, so they need none), every export has a timeout, and every failed export is
counted; when the collector comes back the next export carries the cumulative values again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping, Sequence

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from spark_state_observer.exporters.last_export import within
from spark_state_observer.exporters.otel.config import OtlpConfig, resolve
from spark_state_observer.exporters.otel.events import emit_signal, record_batch, record_restore
from spark_state_observer.exporters.otel.metrics import TrackerInstruments
from spark_state_observer.exporters.otel.transport import build_exporters
from spark_state_observer.metrics.view import MetricsView
from spark_state_observer.model.events import Event, QueryProgress
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.settings import Settings

log = logging.getLogger(__name__)
SCOPE = "spark-state-observer"
DEFAULT_SERVICE_NAME = "spark-state-observer"
MAX_SPAN_ATTRIBUTES = 1024  # a batch span carries ~60 figures per state operator


def build_resource(attributes: Mapping[str, Any] | None = None) -> Resource:
    """The Spark application's attributes, then ``OTEL_RESOURCE_ATTRIBUTES`` / ``OTEL_SERVICE_NAME``, which win.

    ``service.name`` is, unless set there, the Spark application name, else ``spark-state-observer``.
    """
    given = {k: v for k, v in (attributes or {}).items() if v is not None}
    name = given.pop(SERVICE_NAME, None) or given.get("spark.app.name") or DEFAULT_SERVICE_NAME
    resource = Resource.create(given)
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: name}))
    return resource


class OtelSink:
    """``spark_state_observer.pipeline.sink.Sink`` exporting over OTLP.

    ``OtelSink(observer.view, spark_state_observer.settings, on_failure)``: the metrics are read from ``view`` at each
    export; ``on_failure`` counts each failed export.
    """

    name = "otlp"

    def __init__(
        self,
        view: MetricsView,
        settings: Settings,
        on_failure: Callable[[], None] = lambda: None,
        resource_attributes: Mapping[str, Any] | None = None,
        config: OtlpConfig | None = None,
    ) -> None:
        self.config = config or resolve(settings)
        self._stop_seconds = settings.stop_flush_seconds
        self._on_failure = on_failure
        self._given_up = threading.Event()  # the last export was counted as failed when given up: not counted again
        resource = build_resource(resource_attributes)
        metric_exporter, log_exporter, span_exporter = build_exporters(self.config, self._count_failure)
        interval_ms = None if self.config.interval_seconds is None else self.config.interval_seconds * 1000.0
        timeout_ms = None if self.config.timeout_seconds is None else self.config.timeout_seconds * 1000.0
        self._reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=interval_ms, export_timeout_millis=timeout_ms)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self._reader])
        TrackerInstruments(self.meter_provider.get_meter(SCOPE), view)
        queue, batch = self.config.queue_size, min(512, self.config.queue_size)
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(log_exporter, max_queue_size=queue, max_export_batch_size=batch, export_timeout_millis=timeout_ms)
        )
        self._logger = self.logger_provider.get_logger(SCOPE)
        self.tracer_provider: TracerProvider | None = None
        if span_exporter is not None:
            self.tracer_provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_span_attributes=MAX_SPAN_ATTRIBUTES))
            self.tracer_provider.add_span_processor(
                BatchSpanProcessor(span_exporter, max_queue_size=queue, max_export_batch_size=batch, export_timeout_millis=timeout_ms)
            )
            self._tracer = self.tracer_provider.get_tracer(SCOPE)

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if self.tracer_provider is not None and isinstance(event, QueryProgress):
            record_batch(self._tracer, event)
        for signal in signals:
            emit_signal(self._logger, signal)
            if self.tracer_provider is not None:
                record_restore(self._tracer, signal)

    def tick(self, processed: int) -> None:
        """Nothing to do: the SDK's threads export on their own schedule."""

    def flush(self) -> None:
        """Nothing: exporting now would block the worker on the collector; ``force_flush`` does it on purpose."""

    def force_flush(self, timeout_seconds: float = 10.0) -> None:
        """Export now what is buffered and the current metric values (tests, demo)."""
        ms = int(timeout_seconds * 1000)
        if self.tracer_provider is not None:
            self.tracer_provider.force_flush(ms)
        self.logger_provider.force_flush(ms)
        self.meter_provider.force_flush(ms)

    def close(self) -> None:
        """Export what is left once and stop the SDK's threads, within ``stop_flush_seconds``
        (``spark_state_observer.exporters.last_export``): a last export not done by then is given up and counted once."""
        if not within(self._stop_seconds, self._shutdown, "otlp"):
            self._given_up.set()
            self._on_failure()
            log.warning("spark-state-observer: last OTLP export not done within %.1fs (stop_flush_seconds): given up", self._stop_seconds)

    def _shutdown(self) -> None:
        timeout_ms = int((self.config.timeout_seconds or 10.0) * 1000) + 1000
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown(timeout_millis=timeout_ms)

    def _count_failure(self) -> None:
        if not self._given_up.is_set():
            self._on_failure()
