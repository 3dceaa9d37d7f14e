"""One application the watcher follows: its identity, what the watcher tells its observer, and its events fed in.

The watcher's runtime (``spark_state_observer.fleet.runtime``) admits an application and keeps one ``AppPipeline``
for it. ``AppSide`` is what the watcher tells that application's observer (its clock, its executors, whether the
events are read again after a restart). ``Replayable`` wraps the sinks that write durably, so events read again
are not written twice. ``AppPipeline.apply`` feeds one raw event to its placement and its observer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from spark_state_observer.capture.queue import CapturedEvent
from spark_state_observer.exporters.prometheus import StateCollector
from spark_state_observer.fleet.app_events import AppEvents, LoggedApp, RawEvent
from spark_state_observer.fleet.clock_skew import event_time
from spark_state_observer.model import kinds
from spark_state_observer.model.bounded import clean_identity
from spark_state_observer.model.events import Event
from spark_state_observer.model.identity import AppContext, Pairs
from spark_state_observer.model.plan_checkpoint import PlanCheckpoints
from spark_state_observer.model.plan_eviction import PlanEviction
from spark_state_observer.model.signal_kinds import SignalEvent
from spark_state_observer.model.spark_events import (
    APP_END,
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    QUERY_IDLE,
    QUERY_PROGRESS,
    QUERY_STARTED,
    QUERY_TERMINATED,
    executor_change,
)
from spark_state_observer.pipeline.runtime import Observer
from spark_state_observer.pipeline.sink import AppAwareSink, PlacementAwareSink, Sink, SinkFactory
from spark_state_observer.placement.feed import PlacementFeed
from spark_state_observer.placement.task_log import EventLogSource
from spark_state_observer.signals.executors import ExecutorSet, LoggedExecutors

# the raw events an application's observer is given, as the listener's event kinds
KIND_OF = {
    QUERY_STARTED: kinds.STARTED,
    QUERY_PROGRESS: kinds.PROGRESS,
    QUERY_IDLE: kinds.IDLE,
    QUERY_TERMINATED: kinds.TERMINATED,
    APP_END: kinds.APPLICATION_END,  # the runs it still had end with it, as in replay
}


def app_context(identity: LoggedApp, static: Pairs) -> AppContext:
    """The pipeline's identity of an application the watcher found."""
    # the log name is the file's name (surrogate escapes where it is not UTF-8): cleaned as the other identity strings were
    return AppContext(identity.name, static, identity.app_id, identity.attempt_id or "", clean_identity(identity.log_name))


class Replayable:
    """Wraps a per-application sink that writes durably (history, OTLP logs): skips events delivered before a restart.

    It is also where a shared sink that records placement (the history: ``PlacementAwareSink``) is handed the
    feed of the application whose event it is given: one history follows every application's placement, as
    a listener's follows its own (the Placement page reads it)."""

    def __init__(self, inner: Sink, side: AppSide, identity: AppContext, owned: bool) -> None:
        self.inner, self.name, self._side, self._identity, self._owned = inner, inner.name, side, identity, owned
        self._placement: PlacementFeed | None = None
        self._app_aware = isinstance(inner, AppAwareSink)  # asked once: a runtime-checkable protocol's isinstance is slow

    def follow_placement(self, feed: PlacementFeed) -> None:
        """This application's placement feed, handed to the inner sink with each of its events when it records placement."""
        self._placement = feed if isinstance(self.inner, PlacementAwareSink) else None

    def on_app_event(self, app: AppContext, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        if self._side.replaying:
            return
        if self._placement is not None:
            cast(PlacementAwareSink, self.inner).follow_placement(self._placement)
        if self._app_aware:
            cast(AppAwareSink, self.inner).on_app_event(app, event, signals, received_at)
        else:
            self.inner.on_event(event, signals, received_at)

    def on_event(self, event: Event | None, signals: Sequence[SignalEvent], received_at: float) -> None:
        self.on_app_event(self._identity, event, signals, received_at)

    # a shared sink is ticked, flushed and closed once by the runtime, an owned one with its application
    def tick(self, processed: int) -> None:
        if self._owned:
            self.inner.tick(processed)

    def flush(self) -> None:
        if self._owned:
            self.inner.flush()

    def close(self) -> None:
        if self._owned:
            self.inner.close()


@dataclass
class AppSide:
    """What the watcher tells one application's observer, made before it: the application's clock, its executors
    as its log tells them, and whether the events now given are ones read again after a restart."""

    executors: LoggedExecutors = field(default_factory=LoggedExecutors)
    wall: Callable[[], float] = time.time  # the watcher's wall clock (a test's simulated one)
    clock_skew: float = 0.0  # seconds the application's clock is behind the watcher's (``AppEvents.clock_skew``)
    clock_known: bool = False  # the skew is settled (``AppEvents.clock_known``): only then are ages and stalls judged
    replaying: bool = False

    def clock(self) -> float:
        """Now on the application's clock: its ages and stalls compare its own event times with this."""
        return self.wall() - self.clock_skew

    def executor_ids(self) -> ExecutorSet:
        return self.executors.current()


@dataclass
class AppPipeline:
    """One followed application: its observer, what the watcher tells it, and what its log's plans and tasks say."""

    observer: Observer
    side: AppSide
    placement: EventLogSource | None = None  # the application's task events, when placement is followed
    checkpoints: PlanCheckpoints = field(default_factory=PlanCheckpoints)  # run id -> checkpoint root, from its plans
    eviction: PlanEviction = field(default_factory=PlanEviction)  # which states the watermark evicts by key, from its plans
    log_name: str = ""
    last_time: float = 0.0  # latest event time seen, for events that carry none (terminated)
    # the application's Prometheus lines over its observer's view (built here: the pipeline builds no exporter);
    # the watcher's one endpoint joins those of every application
    collector: StateCollector = field(init=False)

    def __post_init__(self) -> None:
        self.collector = StateCollector(self.observer.view)

    def apply(self, event: RawEvent) -> int:
        """Feed one raw event to this application's placement and observer; returns 1 when the observer processed it."""
        if self.placement is not None:  # every event, in the log's order, before a progress event is processed
            if event.progress is not None:  # a progress as bytes: placement reads its ids from the line, as in replay
                self.placement.feed_line(event.line or b"", app=self.log_name)
            elif event.line is not None:  # task, job and SQL events come unparsed: placement decodes what it reads
                self.checkpoints.feed_line(event.line)
                self.eviction.feed_line(event.line)
                self.placement.feed_line(event.line, app=self.log_name, wanted=True)  # the watcher's raw_keep kept it
                return 0
            else:
                self.placement.feed(event.data, app=self.log_name)
        if event.event_type in (EXECUTOR_ADDED, EXECUTOR_REMOVED):
            apply_executor_change(self.side.executors, event)
            return 0
        kind = KIND_OF.get(event.event_type)
        if kind is None:  # application start: the identity comes from the watcher
            return 0
        at = event_time(event.event_type, event.data) or event.logged_at  # a termination: the lines before it, as in replay
        if at is None:
            at = self.last_time if event.replayed and self.last_time else self.side.clock()
        self.last_time = max(self.last_time, at)
        payload: Any = (
            event.data if kind != kinds.PROGRESS else event.progress if event.progress is not None else event.data.get("progress")
        )
        self.side.replaying = event.replayed
        try:
            self.observer.process(CapturedEvent(kind, payload, at, 0.0))
        finally:
            self.side.replaying = False
        return 1


def shared_sink(sink: Sink, side: AppSide, identity: AppContext) -> SinkFactory:
    """A sink every application shares (the history), as one application's observer is handed it."""
    return lambda context: Replayable(sink, side, identity, owned=False)


def streaming(found: AppEvents) -> bool:
    """Whether what a poll found of an application holds a query event: only then does it get a pipeline."""
    return any(e.event_type in KIND_OF for e in found.events)


def apply_executor_change(executors: LoggedExecutors, event: RawEvent) -> None:
    """Apply an executor added or removed event, at the time Spark recorded it (as replay does)."""
    executor, at = executor_change(event.data)
    info = event.data.get("Executor Info")
    cores = info.get("Total Cores") if isinstance(info, dict) else None
    executors.change(executor, event.event_type == EXECUTOR_ADDED, at, cores if type(cores) is int else None)
