"""The OpenTelemetry instrumentor: ``opentelemetry-instrument python job.py`` attaches the observer too.

Declared under the ``opentelemetry_instrumentor`` entry-point group (``pyproject.toml``), so OpenTelemetry's
own ``sitecustomize`` loads it in every instrumented process; it installs the same hook as
``spark-state-observer run`` (``spark_state_observer.zerocode.hook``), asking for OTLP export as OpenTelemetry's SDK
would do it (``spark_state_observer.zerocode.sessions.otlp_overrides``): the ``OTEL_*`` variables choose the endpoint,
protocol, interval, headers and resource. Needs the ``instrument`` extra (opentelemetry-instrumentation).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from spark_state_observer.zerocode import hook


class SparkStateObserverInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Attach spark-state-observer to every SparkSession the process creates, exporting over OTLP."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("pyspark >= 3.5",)

    def _instrument(self, **kwargs: Any) -> None:
        hook.install(otlp_default=True)

    def _uninstrument(self, **kwargs: Any) -> None:
        hook.uninstall()
