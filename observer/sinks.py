"""The interface for consumers of the pipeline beyond the Prometheus collector.

The history store and the OpenTelemetry exporter are sinks: the worker hands each of them every parsed
event and every derived signal, in order, on its own thread. A sink must not block for long (buffer and
write in batches) and may raise: the observer counts the failure under
``spark_state_observer_export_failures_total{exporter=<name>}`` and goes on.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from observer.model import Event
from observer.signals.engine import SignalEvent


@runtime_checkable
class Sink(Protocol):
    name: str

    def on_event(self, event: Event, received_at: float) -> None:
        """One parsed listener event (started, progress, idle, terminated)."""

    def on_signal(self, signal: SignalEvent) -> None:
        """One derived signal (restart, restore, stall, ...)."""

    def flush(self) -> None:
        """Write out what is buffered now (``Observer.flush`` asks for it; tests, replay, shutdown)."""

    def close(self) -> None:
        """Flush and release resources; called once when the observer stops."""
