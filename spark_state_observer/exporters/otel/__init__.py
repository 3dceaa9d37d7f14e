"""OpenTelemetry export (OTLP): the same metrics as Prometheus, signals as log records, batches as spans.

Nothing here is imported unless OTLP export is configured, and only ``sink`` imports the OpenTelemetry
SDK (the ``otel`` extra), so the observer works without it. ``naming`` is plain Python: the README and
the tests read it without the SDK installed.
"""
