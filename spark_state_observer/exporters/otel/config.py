"""Where and how to export over OTLP: the observer's settings first, then the standard ``OTEL_*`` variables.

Kept free of OpenTelemetry imports so ``attach()`` can decide whether OTLP export is wanted without the
SDK installed. Precedence: ``attach(otlp_...=)`` > ``SPARK_STATE_OBSERVER_OTLP_*`` > ``OTEL_*`` > the
OpenTelemetry defaults (http/protobuf, 60 s interval, 10 s timeout). Headers, TLS files, compression and
per-signal endpoints are read by the OpenTelemetry exporters themselves from their ``OTEL_*`` variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from spark_state_observer.settings import Settings, SettingsError

PROTOCOLS = ("http/protobuf", "grpc")
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
HTTP_PATHS = {"metrics": "v1/metrics", "logs": "v1/logs", "traces": "v1/traces"}


@dataclass(frozen=True)
class OtlpConfig:
    """Resolved OTLP options; ``None`` leaves the choice to the exporter (and its ``OTEL_*`` variables)."""

    endpoint: str | None  # base URL from the settings; None: the exporters read OTEL_EXPORTER_OTLP_*ENDPOINT
    protocol: str
    interval_seconds: float | None
    timeout_seconds: float | None
    traces: bool
    queue_size: int

    def signal_endpoint(self, signal: str) -> str | None:
        """The URL (http/protobuf: base + ``/v1/<signal>``) or target (grpc) one exporter sends to."""
        if self.endpoint is None:
            return None
        if self.protocol == "grpc":
            return self.endpoint
        return self.endpoint.rstrip("/") + "/" + HTTP_PATHS[signal]


def otlp_enabled(settings: Settings, env: Mapping[str, str] | None = None) -> bool:
    """OTLP export is on when an endpoint is configured, in the settings or the standard variables."""
    env = os.environ if env is None else env
    return bool(settings.otlp_endpoint) or any(env.get(name) for name in _ENDPOINT_VARIABLES)


def resolve(settings: Settings, env: Mapping[str, str] | None = None) -> OtlpConfig:
    """Combine the settings with ``OTEL_EXPORTER_OTLP_PROTOCOL`` and ``OTEL_METRIC_EXPORT_INTERVAL``."""
    env = os.environ if env is None else env
    protocol = settings.otlp_protocol or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or "http/protobuf"
    if protocol not in PROTOCOLS:
        raise SettingsError(f"OTLP protocol {protocol!r} is not supported; use one of {', '.join(PROTOCOLS)}")
    interval = settings.otlp_interval_seconds or None
    if interval is None and env.get("OTEL_METRIC_EXPORT_INTERVAL"):
        try:
            interval = float(env["OTEL_METRIC_EXPORT_INTERVAL"]) / 1000.0
        except ValueError:
            raise SettingsError(
                f"OTEL_METRIC_EXPORT_INTERVAL: cannot read {env['OTEL_METRIC_EXPORT_INTERVAL']!r} as milliseconds"
            ) from None
    return OtlpConfig(
        endpoint=settings.otlp_endpoint or None,
        protocol=protocol,
        interval_seconds=interval,
        timeout_seconds=settings.otlp_timeout_seconds or None,
        traces=settings.otlp_traces,
        queue_size=settings.otlp_queue_size,
    )
