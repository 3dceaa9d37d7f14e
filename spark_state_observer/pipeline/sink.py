"""The one interface every consumer of the pipeline implements: Prometheus, OpenTelemetry, the history.

The worker calls a sink on its own thread only, in this order: for each event, ``on_event(event,
signals)`` with the signals that event caused (after the tracker has applied both, so metric state
read during the call includes them); ``on_event(None, signals)`` for signals of the clock (stalls);
``tick(processed)`` after each round of the worker (about every second); ``flush()`` when
``Observer.flush`` asks (tests, replay, shutdown); ``close()`` once, when the observer stops.

A sink must not block for long (buffer and write in batches) and may raise: the observer counts the
failure under ``spark_state_observer_export_failures_total{exporter=<name>}`` and goes on. Metric
exporters read the metric state through a ``spark_state_observer.metrics.view.MetricsView`` they are given when
built, never through the observer.

Which application an event belongs to: a sink that also has ``on_app_event`` (``AppAwareSink``) is
called through it instead, with the application's ``spark_state_observer.model.identity.AppContext`` (name, static
labels, application id). Signals carry the stable part themselves (``SignalEvent.app``). The watcher
feeds one shared sink from every application it follows, so a sink that stores or exports events
per application (the history) takes the identity from there.

Where state partitions ran: a sink that also has ``follow_placement`` (``PlacementAwareSink``) is handed the
observer's ``spark_state_observer.placement.feed.PlacementFeed`` when the observer follows placement (or when the sink is
added to one that does), and reads the batches' partition runs from it at each progress event.

How a sink is built: the observer calls each ``SinkFactory`` it is given once, in its constructor, with a
``SinkContext`` (its metric view, settings, own figures and application). Which factories an observer gets is
decided in one place, ``spark_state_observer.assembly``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, runtime_checkable

from spark_state_observer.metrics.selfmetrics import SelfMetrics
from spark_state_observer.metrics.view import MetricsView
from spark_state_observer.model.events import Event
from spark_state_observer.model.identity import AppContext
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.placement.feed import PlacementFeed
from spark_state_observer.settings import Settings


@runtime_checkable
class Sink(Protocol):
    name: str  # the ``exporter`` label its failures are counted under

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        """One parsed listener event, then the signals it caused; ``event`` is None for signals of the clock."""

    def tick(self, processed: int) -> None:
        """The worker finished a round in which it processed ``processed`` events (0: a round of the clock)."""

    def flush(self) -> None:
        """Write out what is buffered now."""

    def close(self) -> None:
        """Flush and release resources; called once when the observer stops."""


@runtime_checkable
class AppAwareSink(Sink, Protocol):
    """A sink that wants to know which application each event came from (see the module docstring)."""

    def on_app_event(self, app: AppContext, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        """``on_event`` with the application the event (or clock signal) belongs to."""


@runtime_checkable
class PlacementAwareSink(Sink, Protocol):
    """A sink that wants where each state partition ran (the history's ``placements`` rows); see the module docstring."""

    def follow_placement(self, feed: PlacementFeed) -> None:
        """Read the partition runs from ``feed`` from now on (called before the feed's first progress event; the
        watcher's one history, fed by every application, is handed each application's feed with its events)."""


@dataclass(frozen=True)
class SinkContext:
    """What a sink may be built over: the observer's metric view, its settings, its own figures and its application.

    ``view`` is None for a sink one watcher shares among its applications (its history): it has no one view.
    """

    view: MetricsView | None
    settings: Settings
    self_metrics: SelfMetrics
    identity: AppContext


SinkFactory = Callable[[SinkContext], Sink]
"""Builds one sink; an observer calls it once, in its constructor."""
