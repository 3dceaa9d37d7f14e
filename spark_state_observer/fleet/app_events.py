"""What the event-log watcher hands over: per application its identity, raw events, status changes and problems
(``AppEvents``), the running totals the self-metrics read (``WatchCounts``), the event types it wants and the
problem kinds it counts.

Kept apart from the watcher so that its consumers (``spark_state_observer.fleet.runtime``, benches, tests) name the data
without the machinery that finds it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from spark_state_observer.model.bounded import loads
from spark_state_observer.model.spark_events import (
    APP_END,
    APP_START,
    EXECUTOR_ADDED,
    EXECUTOR_REMOVED,
    STREAMING_EVENTS,
)
from spark_state_observer.placement.task_lines import TASK_EVENT_TYPES

# what the pipeline uses today
PIPELINE_EVENTS = STREAMING_EVENTS | {APP_START, APP_END, EXECUTOR_ADDED, EXECUTOR_REMOVED}
# what a per-partition placement view needs in addition: declared once, by the task reader (replay's tap reads the
# same list), so a consumer of more task-level events adds its types there and the watcher's filter follows
PLACEMENT_EVENTS = frozenset(TASK_EVENT_TYPES) - PIPELINE_EVENTS
# never parsed before the application has shown a streaming query
STREAMING_ONLY_EVENTS = PLACEMENT_EVENTS
DEFAULT_WANTED_EVENTS = PIPELINE_EVENTS | PLACEMENT_EVENTS

# problem kinds (the label values of spark_state_observer_watch_problems_total)
PROBLEM_KINDS = (
    "unreadable",
    "not_regular",
    "vanished",
    "corrupt",
    "truncated",
    "line_too_long",
    "bad_json",
    "duplicate_name",
    "duplicate_log",
    "no_app_start",
    "clock_skew",
    "replaced",
    "symlink",
    "inflated",
    "too_many_apps",
    "state_file",
    "callback",
)


class RawEvent(NamedTuple):
    """One event as Spark logged it: its type (the ``Event`` field), the parsed object and where it was.

    An event of a type the watcher was asked to hand over unparsed (``raw_events``) has ``line``, the bytes as
    logged, and an empty ``data``: its consumer reads only a few fields of it and decodes those itself. So has
    a progress event with ``progress_as_bytes``, plus ``progress`` and ``logged_at``."""

    event_type: str
    data: dict[str, Any]
    source: str  # file:line
    replayed: bool = False  # delivered before a restart (``replay_on_resume``)
    line: bytes | None = None  # the logged line, for the types delivered unparsed
    # a termination's time, which Spark does not log: the latest of the lines before it (``spark_state_observer.model.log_time``);
    # a progress delivered as bytes: its time as ``event_time`` reads it (``spark_state_observer.fleet.clock_skew``)
    logged_at: float | None = None
    # a progress delivered unparsed (the watcher's ``progress_as_bytes``): its ``progress`` object's JSON as logged
    progress: bytes | None = None

    def progress_object(self) -> Any:
        """A progress event's ``progress`` object, parsed from ``progress`` if it came as bytes: for readers off
        the pipeline's path (tests, benches, tools), which want the object however the watcher delivered it."""
        if self.progress is not None:
            return loads(self.progress)
        return self.data.get("progress")


@dataclass(frozen=True)
class LoggedApp:
    """An application as its event log tells it (start event, environment, or the watcher's saved state).

    Not the pipeline's identity (``spark_state_observer.model.identity.AppContext``, which ``spark_state_observer.fleet.app_pipeline.app_context``
    derives from this): it also holds what only the watcher reads, to admit and configure the application (its Spark
    version, start time, properties and the conf the RocksDB estimate reads), and none of it labels a series or a row.
    ``name`` is the stable identity, ``app_id`` and ``attempt_id`` change per run.
    """

    log_name: str  # application id and attempt, as the log is named (stable for this log)
    name: str
    app_id: str
    attempt_id: str | None = None
    spark_version: str | None = None
    start_time_ms: int | None = None
    properties: tuple[tuple[str, str], ...] = ()
    spark_conf: tuple[tuple[str, str], ...] = ()  # the entries the RocksDB capacity estimate reads (spark_state_observer.model.capacity)


@dataclass(frozen=True)
class StatusChange:
    """running (first seen, or growing again after lost), finished, lost, forgotten."""

    status: str
    message: str
    at: float  # wall time the watcher noticed it


@dataclass
class AppEvents:
    """What one poll found for one application."""

    log_name: str
    identity: LoggedApp | None  # None until the application-start event has been read
    events: list[RawEvent] = field(default_factory=list)
    status_changes: list[StatusChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # messages of the problems found in this poll
    clock_skew: float = 0.0  # seconds the application's clock is behind the watcher's (0 unless measured beyond tolerance)
    clock_known: bool = False  # whether ``clock_skew`` is settled (see the module's docstring): ages may be judged


@dataclass
class WatchCounts:
    """Running totals for the self-metrics (``spark_state_observer.metrics.catalog.WATCH_METRICS``)."""

    apps_discovered: int = 0
    apps_forgotten: int = 0
    apps_running: int = 0
    apps_finished: int = 0
    apps_lost: int = 0
    apps_other_shards: int = 0
    read_bytes: int = 0
    decoded_bytes: int = 0
    lines: int = 0
    events_parsed: int = 0
    events_delivered: int = 0
    events_duplicate: int = 0
    clock_skew_seconds: float = 0.0  # the followed application's skew farthest from 0 (positive: its clock behind)
    problems: Counter[str] = field(default_factory=Counter)
